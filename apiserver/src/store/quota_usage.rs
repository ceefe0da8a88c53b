//! The watch on hns's ResourceQuotas (`hrq.hnc.x-k8s.io`, labelled `hnc.x-k8s.io/hrq`) in every
//! namespace: the usage Kubernetes counts there is what a hierarchical quota's `status.used`
//! sums, and whether one exists is what ends a namespace's pending state.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::hierarchy::forest::ObservedQuota;
use crate::hierarchy::quotas::ledger;
use crate::hierarchy::quotas::quantity::{Amount, Amounts};
use crate::store::cache::Cache;

/// What hns keeps of a ResourceQuota: its limits, its usage read exactly, its identity.
pub fn observed(rq: &ResourceQuota) -> ObservedQuota {
    let used = rq
        .status
        .as_ref()
        .and_then(|s| s.used.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(n, q)| Amount::parse(&q.0).ok().map(|a| (n.clone(), a)))
        .collect();
    ObservedQuota {
        hard: rq.spec.as_ref().and_then(|s| s.hard.clone()).unwrap_or_default(),
        used,
        uid: rq.metadata.uid.clone(),
        resource_version: rq.metadata.resource_version.clone(),
        allocation: allocation_of(rq),
        required_by: required_by_of(rq),
        increased_at: None,
    }
}

/// A ResourceQuota as the quota ledger reads it: its version, usage and allocation.
pub fn ledger_observed(rq: &ResourceQuota) -> ledger::Observed {
    let status = rq.status.as_ref();
    ledger::Observed {
        version: crate::resource_version::number(&rq.metadata),
        used: ledger::counted_usage(
            status.and_then(|s| s.hard.as_ref()),
            status.and_then(|s| s.used.as_ref()),
        ),
        allocation: allocation_of(rq),
    }
}

/// The allocation annotated on a ResourceQuota, as written.
pub fn allocation_annotation(rq: &ResourceQuota) -> Option<&String> {
    rq.metadata.annotations.as_ref()?.get(ledger::ALLOCATION_ANNOTATION)
}

/// The allocation annotated on a ResourceQuota, read.
pub fn allocation_of(rq: &ResourceQuota) -> Option<Amounts> {
    ledger::parse_allocation(allocation_annotation(rq)?)
}

/// The quotas a ResourceQuota's annotations name as requiring each resource.
fn required_by_of(rq: &ResourceQuota) -> BTreeMap<String, String> {
    let annotations = rq.metadata.annotations.iter().flatten();
    annotations
        .filter_map(|(k, v)| {
            Some((k.strip_prefix(hns_api::keys::REQUIRED_BY_PREFIX)?.to_string(), v.clone()))
        })
        .collect()
}

fn namespace_of(rq: &ResourceQuota) -> String {
    rq.metadata.namespace.clone().unwrap_or_default()
}

/// The label and field selectors of hns's ResourceQuotas: its label, and its name. The cache's
/// watch and the quota ledger's consistent list both use them, so a ResourceQuota that wakes a
/// ledger pass is also in the pass's list.
pub fn selectors() -> (String, String) {
    let labels = format!("{}=true", hns_api::keys::HRQ_LABEL);
    (labels, format!("metadata.name={}", hns_api::quota::RESOURCE_QUOTA_NAME))
}

/// Watches hns's ResourceQuotas into `cache` until shutdown; errors are retried with backoff.
pub async fn run(client: Client, cache: Arc<Cache>) {
    let api: Api<ResourceQuota> = Api::all(client);
    let (labels, fields) = selectors();
    let config = crate::watching::config().labels(&labels).fields(&fields);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut relist = BTreeMap::new();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist.clear(),
            Ok(Some(Event::InitApply(rq))) => {
                // Listed again: what came before is unknown, so its usage counts as just risen.
                let seen = ObservedQuota { increased_at: Some(std::time::Instant::now()), ..observed(&rq) };
                relist.insert(namespace_of(&rq), seen);
            }
            Ok(Some(Event::InitDone)) => cache.replace_quotas(std::mem::take(&mut relist)),
            Ok(Some(Event::Apply(rq))) => cache.observe_quota(&namespace_of(&rq), Some(observed(&rq))),
            Ok(Some(Event::Delete(rq))) => cache.observe_quota(&namespace_of(&rq), None),
            Ok(None) => return,
            Err(error) => tracing::warn!(%error, "ResourceQuota watch failed; retrying"),
        }
    }
}
