//! Shared by the hierarchical quota e2e tests: a tree under a quota, set up through the API, and
//! waiting until hns counts it.

use std::time::Duration;

use hns_api::quota::{HierarchicalResourceQuota, HierarchicalResourceQuotaSpec, RESOURCE_QUOTA_NAME};
use hns_apiserver::hierarchy::ledger::{self, Ledger};
use hns_e2e::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

pub const WAIT: Duration = Duration::from_secs(90);
pub const SIBLINGS: usize = 8;

pub fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }))
    .unwrap()
}

/// Puts HierarchicalResourceQuota `name` limiting `pods` in namespace `ns`.
pub async fn hrq(client: &Client, ns: &str, name: &str, pods: u32) {
    let api: Api<HierarchicalResourceQuota> = Api::namespaced(client.clone(), ns);
    let spec =
        HierarchicalResourceQuotaSpec { hard: [("pods".to_string(), Quantity(pods.to_string()))].into() };
    api.create(&PostParams::default(), &HierarchicalResourceQuota::new(name, spec)).await.unwrap();
}

/// The ledger of the tree rooted at `root`, as stored.
pub async fn stored_ledger(client: &Client, root: &str) -> Option<Ledger> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "hns-system");
    let cm = cms.get_opt(&ledger::configmap_name(root)).await.ok()??;
    serde_json::from_str(cm.data?.get(ledger::DATA_KEY)?).ok()
}

/// Waits until every namespace of `members` is ready for usage: its ResourceQuota counted by
/// Kubernetes, no longer pending, and its grant in the ledger down to `pods` pods (its
/// usage: near a limit no headroom is kept).
pub async fn ready(client: &Client, root: &str, members: &[String], pods: &str) {
    eventually(&format!("namespaces under {root} counted at {pods} pods"), WAIT, || async {
        let l = stored_ledger(client, root).await?;
        for ns in members {
            let rq = Api::<ResourceQuota>::namespaced(client.clone(), ns)
                .get_opt(RESOURCE_QUOTA_NAME)
                .await
                .ok()??;
            rq.status?.used?.get("pods")?;
            let labels =
                Api::<Namespace>::all(client.clone()).get(ns).await.ok()?.metadata.labels.unwrap_or_default();
            if labels.contains_key(hns_api::keys::HRQ_PENDING_LABEL) {
                return None;
            }
            let entry = l.namespaces.get(ns)?;
            let granted = entry.granted.as_ref()?.get("pods")?;
            (granted.0 == pods).then_some(())?;
        }
        Some(())
    })
    .await;
}

/// A tree `root` with a quota of `limit` pods and [`SIBLINGS`] subnamespaces, ready.
pub async fn budget_tree(client: &Client, prefix: &str, limit: u32) -> (String, Vec<String>) {
    let root = create_namespace(client, &unique(prefix), &[]).await;
    hrq(client, &root, "budget", limit).await;
    let mut siblings = Vec::new();
    for i in 0..SIBLINGS {
        let name = format!("{root}-{i}");
        create_subns(client, &root, &name).await.unwrap();
        siblings.push(name);
    }
    let mut all = siblings.clone();
    all.push(root.clone());
    ready(client, &root, &all, "0").await;
    (root, siblings)
}
