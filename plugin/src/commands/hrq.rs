//! `kubectl hns hrq [NAME] [-n NS | -A]`: hierarchical resource quotas as HNC's plugin lists
//! them, with the usage of each quota's subtree.

use std::process::ExitCode;

use hns_api::HierarchicalResourceQuota;
use kube::api::{Api, ListParams};

use crate::client::KubeFlags;
use crate::hns::classify;
use crate::output;

/// List hierarchical resource quotas and the usage of their subtrees.
///
/// REQUEST and LIMIT show `resource: used/limit` for each limit of a quota (those named
/// limits.* under LIMIT), the usage being that of the quota's namespace and every namespace
/// below it. `kubectl get hrq` shows the same cells.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # The quotas of namespace \"team\"
  kubectl hns hrq -n team

  # One quota
  kubectl hns hrq team-budget -n team

  # Every quota in the cluster
  kubectl hns hrq -A")]
pub struct HrqArgs {
    /// Only the quota of this name.
    name: Option<String>,
    /// List the quotas of every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
}

/// Runs `hrq`: exit code 1 when there is no quota to show, as HNC's plugin.
pub async fn run(kube: &KubeFlags, args: HrqArgs) -> anyhow::Result<ExitCode> {
    let conn = kube.connect().await?;
    let api: Api<HierarchicalResourceQuota> = if args.all_namespaces {
        Api::all(conn.client)
    } else {
        Api::namespaced(conn.client, &conn.namespace)
    };
    let mut quotas = api.list(&ListParams::default()).await.map_err(classify)?.items;
    if let Some(name) = &args.name {
        quotas.retain(|q| q.metadata.name.as_ref() == Some(name));
    }
    if quotas.is_empty() {
        match args.all_namespaces {
            true => println!("No resources found"),
            false => println!("No resources found in {} namespace.", conn.namespace),
        }
        return Ok(ExitCode::from(1));
    }
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    print!("{}", output::columns(&rows(&quotas, args.all_namespaces, now)));
    Ok(ExitCode::SUCCESS)
}

/// The table: HNC's columns NAME, AGE, REQUEST, LIMIT, after NAMESPACE with -A.
/// `now` is in seconds since the epoch.
fn rows(quotas: &[HierarchicalResourceQuota], all: bool, now: i64) -> Vec<Vec<String>> {
    let mut header = vec!["NAME", "AGE", "REQUEST", "LIMIT"];
    if all {
        header.insert(0, "NAMESPACE");
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for q in quotas {
        let (request, limit) = hns_api::quota::summary(&q.status.clone().unwrap_or_default());
        let age = q.metadata.creation_timestamp.as_ref().map_or_else(
            || "<unknown>".to_string(),
            |t| hns_api::duration::human_duration(now - t.0.as_second()),
        );
        let mut row = vec![q.metadata.name.clone().unwrap_or_default(), age, request, limit];
        if all {
            row.insert(0, q.metadata.namespace.clone().unwrap_or_default());
        }
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_hncs_columns() {
        let q: HierarchicalResourceQuota = serde_json::from_value(serde_json::json!({
            "apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchicalResourceQuota",
            "metadata": {"name": "budget", "namespace": "team", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"hard": {"pods": "10"}},
            "status": {"hard": {"pods": "10", "limits.cpu": "2"}, "used": {"pods": "3"}},
        }))
        .unwrap();
        let now = q.metadata.creation_timestamp.as_ref().unwrap().0.as_second() + 300;
        assert_eq!(
            rows(std::slice::from_ref(&q), false, now)[1],
            ["budget", "5m", "pods: 3/10", "limits.cpu: 0/2"]
        );
        let all = rows(&[q], true, now);
        assert_eq!(all[0], ["NAMESPACE", "NAME", "AGE", "REQUEST", "LIMIT"]);
        assert_eq!(all[1][0], "team");
    }
}
