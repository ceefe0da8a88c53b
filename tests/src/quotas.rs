//! Hierarchical quotas in the e2e tests, the benchmarks and the reliability suites: quotas,
//! trees under a budget, pods that count against them (no scheduler runs, so they stay Pending,
//! and quota counts them all the same), creations raced against a budget, and waiting until hns
//! has granted what its ledgers hold.

use std::time::{Duration, Instant};

use futures::future::join_all;
use hns_api::keys::HRQ_PENDING_LABEL;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use hns_api::{HierarchicalResourceQuota, HierarchicalResourceQuotaStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ResourceQuota};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

use crate::{create_namespace, create_subns, eventually, unique};

/// The field manager the tests apply quotas with.
const MANAGER: &str = "hns-e2e";
/// Subnamespaces under the root of a [`budget_tree`].
pub const SIBLINGS: usize = 8;
/// How long [`until_granted`] waits.
const GRANT_WAIT: Duration = Duration::from_secs(90);

/// Creates or changes quota `name` in `ns` to `hard` (server-side apply).
pub async fn set_quota(client: &Client, ns: &str, name: &str, hard: &[(&str, &str)]) -> anyhow::Result<()> {
    let hard: serde_json::Map<String, serde_json::Value> =
        hard.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let quota = json!({
        "apiVersion": hns_api::API_VERSION,
        "kind": "HierarchicalResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hard": hard},
    });
    let api: Api<HierarchicalResourceQuota> = Api::namespaced(client.clone(), ns);
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(quota)).await?;
    Ok(())
}

/// The status of quota `name` in `ns`, if it can be read.
pub async fn quota_status(client: &Client, ns: &str, name: &str) -> Option<HierarchicalResourceQuotaStatus> {
    let api: Api<HierarchicalResourceQuota> = Api::namespaced(client.clone(), ns);
    api.get(name).await.ok()?.status
}

/// Waits until quota `name` in `ns` reports `used[resource] == value`; how long that took, or
/// `None` after `timeout`.
pub async fn until_used(
    client: &Client,
    ns: &str,
    name: &str,
    resource: &str,
    value: &str,
    timeout: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        let status = quota_status(client, ns, name).await.unwrap_or_default();
        if status.used.get(resource).map(|q| q.0.as_str()) == Some(value) {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// A pod requesting `cpu`, which no kubelet will ever run.
pub fn pod(name: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
        }]},
    }))
    .expect("a valid Pod")
}

/// What came of creating an object under a quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Created.
    Admitted,
    /// Refused by a quota: the message.
    OverQuota(String),
    /// Any other failure: the message.
    Failed(String),
}

impl Admission {
    /// Whether it was created.
    pub fn admitted(&self) -> bool {
        *self == Admission::Admitted
    }

    /// In a word for a report: `admitted`, `over quota` or `refused`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Admission::Admitted => "admitted",
            Admission::OverQuota(_) => "over quota",
            Admission::Failed(_) => "refused",
        }
    }
}

/// Creates pod `name` in `ns`.
pub async fn create_pod(client: &Client, ns: &str, name: &str, cpu: &str) -> Admission {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    match api.create(&PostParams::default(), &pod(name, cpu)).await {
        Ok(_) => Admission::Admitted,
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("exceeded") => {
            Admission::OverQuota(s.message)
        }
        Err(kube::Error::Api(s)) => Admission::Failed(s.message),
        Err(e) => Admission::Failed(e.to_string()),
    }
}

/// Creates one pod per `(namespace, name)` at the same moment: every request is built first,
/// then all are sent together.
pub async fn race_pods(client: &Client, targets: &[(String, String)], cpu: &str) -> Vec<Admission> {
    join_all(targets.iter().map(|(ns, name)| create_pod(client, ns, name, cpu))).await
}

/// How many pods exist in `namespaces` together.
pub async fn count_pods(client: &Client, namespaces: &[String]) -> usize {
    let mut n = 0;
    for ns in namespaces {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        n += api.list_metadata(&ListParams::default()).await.map_or(0, |l| l.items.len());
    }
    n
}

/// Deletes every pod in `namespaces` at once (no grace: nothing runs them).
pub async fn delete_pods(client: &Client, namespaces: &[String]) {
    for ns in namespaces {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let params = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        let _ = api.delete_collection(&params, &ListParams::default()).await;
    }
}

/// Waits until every namespace in `namespaces` has its ResourceQuota `hrq.hnc.x-k8s.io` with a
/// computed status, so that pods are counted there, and a grant in its tree's ledger, so that hns
/// decides on them (rather than answering "try again" while it fills the grant).
pub async fn until_counted(client: &Client, namespaces: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    for ns in namespaces {
        let api: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
        loop {
            let ready = api.get_opt(RESOURCE_QUOTA_NAME).await?.and_then(|q| q.status?.hard);
            if ready.is_some() && granted(client, ns).await? {
                break;
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(300),
                "no counting ResourceQuota in {ns}, or no grant for it in its tree's ledger"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Whether a tree's quota ledger (`hns-system/hrq-ledger-<root>`) knows `ns`'s usage: until
/// then hns answers an increase there "try again".
async fn granted(client: &Client, ns: &str) -> anyhow::Result<bool> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "hns-system");
    let ledgers = cms.list(&ListParams::default().labels("hnc.x-k8s.io/hrq-ledger")).await?;
    Ok(ledgers
        .items
        .iter()
        .any(|cm| ledger_in(cm).is_some_and(|l| l["namespaces"][ns]["granted"].is_object())))
}

/// The ledger of the tree rooted at `root` (`hns-system/hrq-ledger-<root>`), as stored.
pub async fn stored_ledger(client: &Client, root: &str) -> Option<Value> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "hns-system");
    ledger_in(&cms.get_opt(&format!("hrq-ledger-{root}")).await.ok()??)
}

/// The ledger a ledger ConfigMap holds, parsed.
fn ledger_in(cm: &ConfigMap) -> Option<Value> {
    serde_json::from_str(cm.data.as_ref()?.get("ledger.json")?).ok()
}

/// Waits until every namespace of `members` is ready for usage: its ResourceQuota counted by
/// Kubernetes, no longer pending, and its grant in the ledger of `root`'s tree down to `pods`
/// pods (its usage: near a limit no headroom is kept).
pub async fn until_granted(client: &Client, root: &str, members: &[String], pods: &str) {
    eventually(&format!("namespaces under {root} counted at {pods} pods"), GRANT_WAIT, || async {
        let ledger = stored_ledger(client, root).await?;
        for ns in members {
            let rq = Api::<ResourceQuota>::namespaced(client.clone(), ns)
                .get_opt(RESOURCE_QUOTA_NAME)
                .await
                .ok()??;
            rq.status?.used?.get("pods")?;
            let labels =
                Api::<Namespace>::all(client.clone()).get(ns).await.ok()?.metadata.labels.unwrap_or_default();
            if labels.contains_key(HRQ_PENDING_LABEL) {
                return None;
            }
            (ledger["namespaces"][ns]["granted"]["pods"] == pods).then_some(())?;
        }
        Some(())
    })
    .await;
}

/// A tree `unique(prefix)` with a quota `budget` of `pods` pods and [`SIBLINGS`] subnamespaces,
/// every namespace granted (at 0 pods); the root and the subnamespaces.
pub async fn budget_tree(client: &Client, prefix: &str, pods: usize) -> (String, Vec<String>) {
    let root = create_namespace(client, &unique(prefix), &[]).await;
    set_quota(client, &root, "budget", &[("pods", &pods.to_string())]).await.expect("set the budget");
    let mut siblings = Vec::new();
    for i in 0..SIBLINGS {
        let name = format!("{root}-{i}");
        create_subns(client, &root, &name).await.expect("create a sibling");
        siblings.push(name);
    }
    let mut all = siblings.clone();
    all.push(root.clone());
    until_granted(client, &root, &all, "0").await;
    (root, siblings)
}
