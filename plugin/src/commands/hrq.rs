//! `kubectl hns hrq [NAME…] [-n NS | -A] [-o json|yaml] [--show-labels]`: hierarchical resource
//! quotas with what their subtrees use, as HNC's plugin prints them.

use std::process::ExitCode;

use hns_api::duration::human_duration;
use hns_api::quota::summary;
use hns_api::HierarchicalResourceQuota;
use k8s_openapi::jiff::Timestamp;

use crate::client::KubeFlags;
use crate::hns::Hns;
use crate::out;
use crate::output::{self, DataFormat};

/// Display hierarchical resource quotas: each limit with what its whole subtree uses.
///
/// REQUEST lists `used/limit` for every resource but the `limits.*` ones, which LIMIT lists.
/// Without names, every quota of the namespace (-n, or the context's) is shown; with -A, every
/// quota in the cluster. As with kubectl get, finding none says "No resources found" and exits 0;
/// a name or a namespace that does not exist exits 1.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  # The quotas of namespace \"team-a\" and what its subtree uses
  kubectl hns hrq -n team-a

  # One quota, as YAML
  kubectl hns hrq team-budget -n team-a -o yaml

  # Every quota in the cluster
  kubectl hns hrq -A")]
pub struct HrqArgs {
    /// The quotas to display (default: all of the namespace, or of every namespace with -A).
    names: Vec<String>,
    /// Display the quotas of every namespace (those of the names given, if any).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Add a column with the quotas' labels.
    #[arg(long)]
    show_labels: bool,
    /// Print the quotas as data.
    #[arg(short = 'o', long, value_enum)]
    output: Option<DataFormat>,
}

/// Runs `hrq`.
pub async fn run(kube: &KubeFlags, args: HrqArgs) -> anyhow::Result<ExitCode> {
    let connection = kube.connect().await?;
    let namespace = kube.namespace.clone().unwrap_or(connection.namespace);
    let hns = Hns::new(connection.client);
    let mut quotas = if args.all_namespaces {
        let mut all = hns.all_quotas().await?;
        all.retain(|q| {
            args.names.is_empty() || q.metadata.name.as_ref().is_some_and(|n| args.names.contains(n))
        });
        all
    } else if args.names.is_empty() {
        hns.quotas(&namespace).await?
    } else {
        let mut found = Vec::new();
        for name in &args.names {
            found.push(hns.quota(&namespace, name).await?);
        }
        found
    };
    if quotas.is_empty() {
        // kubectl get's words, place and exit code: nothing to list is no failure (HNC's plugin
        // exited 1). A namespace that does not exist is one, as with kubectl get.
        if !args.all_namespaces {
            hns.hierarchy(&namespace).await?;
        }
        match args.all_namespaces {
            true => eprintln!("No resources found"),
            false => eprintln!("No resources found in {namespace} namespace."),
        }
        return Ok(ExitCode::SUCCESS);
    }
    for q in &mut quotas {
        // kubectl leaves them out unless asked (--show-managed-fields).
        q.metadata.managed_fields = None;
    }
    quotas.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    match args.output {
        // One quota asked for by name is printed as the object, as kubectl get prints it.
        Some(format) if args.names.len() == 1 && !args.all_namespaces => {
            out!("{}", output::data(&quotas[0], format)?)?
        }
        Some(format) => out!("{}", output::data(&list(quotas), format)?)?,
        None => out!("{}", table(&quotas, args.all_namespaces, args.show_labels, Timestamp::now()))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The quotas as a Kubernetes List, as `kubectl get -o yaml` prints several objects.
fn list(quotas: Vec<HierarchicalResourceQuota>) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": quotas, "metadata": {"resourceVersion": ""}})
}

/// HNC's table: NAME, AGE, REQUEST, LIMIT (NAMESPACE first with -A, LABELS last if asked).
fn table(
    quotas: &[HierarchicalResourceQuota],
    with_namespace: bool,
    with_labels: bool,
    now: Timestamp,
) -> String {
    let mut header = vec!["NAME", "AGE", "REQUEST", "LIMIT"];
    if with_namespace {
        header.insert(0, "NAMESPACE");
    }
    if with_labels {
        header.push("LABELS");
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for q in quotas {
        let (requests, limits) = summary(&q.status.clone().unwrap_or_default());
        let age = q
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or("<unknown>".to_string(), |t| human_duration(now.duration_since(t.0).as_secs()));
        let mut row = vec![q.metadata.name.clone().unwrap_or_default(), age, requests, limits];
        if with_namespace {
            row.insert(0, q.metadata.namespace.clone().unwrap_or_default());
        }
        if with_labels {
            row.push(labels(q));
        }
        rows.push(row);
    }
    output::columns(&rows)
}

/// `k=v,k2=v2`, or `<none>`, as kubectl's --show-labels prints them.
fn labels(q: &HierarchicalResourceQuota) -> String {
    match q.metadata.labels.as_ref().filter(|l| !l.is_empty()) {
        None => "<none>".into(),
        Some(l) => l.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hns_api::{HierarchicalResourceQuotaSpec, HierarchicalResourceQuotaStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn quota(
        ns: &str,
        name: &str,
        hard: &[(&str, &str)],
        used: &[(&str, &str)],
    ) -> HierarchicalResourceQuota {
        let list = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(n, v)| (n.to_string(), Quantity(v.to_string()))).collect()
        };
        let mut q = HierarchicalResourceQuota::new(name, HierarchicalResourceQuotaSpec { hard: list(hard) });
        q.metadata.namespace = Some(ns.into());
        q.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1_000).unwrap()));
        q.status = Some(HierarchicalResourceQuotaStatus {
            hard: list(hard),
            used: list(used),
            conditions: vec![],
            observed_generation: None,
        });
        q
    }

    #[test]
    fn prints_hnc_columns() {
        let quotas = [
            quota("team-a", "budget", &[("pods", "10"), ("limits.cpu", "8")], &[("pods", "3")]),
            quota("team-b", "small", &[("services", "1")], &[("services", "1")]),
        ];
        let now = Timestamp::from_second(1_000 + 3 * 3600).unwrap();
        assert_eq!(
            table(&quotas, false, false, now),
            "NAME    AGE  REQUEST        LIMIT\n\
             budget  3h   pods: 3/10     limits.cpu: 0/8\n\
             small   3h   services: 1/1  \n"
        );
        let wide = table(&quotas[..1], true, true, now);
        assert!(wide.starts_with("NAMESPACE  NAME    AGE  REQUEST     LIMIT            LABELS\nteam-a     budget  3h   pods: 3/10  limits.cpu: 0/8  <none>\n"), "{wide}");
    }
}
