//! Lowering grants ([`ledger::Reclaim`]): the one write hns makes to a namespace's allocation
//! outside an admission. The webhook raises an allocation inside the status update it approves;
//! lowering one takes two writes, in this order:
//!
//! 1. the ResourceQuota's allocation annotation is set to the target by a compare-and-swap on
//!    the resourceVersion the reclaim was planned from, or a later one where it still holds
//!    ([`Reclaim::still_holds`]), with [`ledger::RECLAIM_ANNOTATION`] so that the version always
//!    moves: no update from that version or an older one can commit after it, and from the new
//!    one on kube-apiserver admits without hns only up to the target;
//! 2. the ledger lowers the grant, by [`ledger::apply`], unless an approval happened in that
//!    namespace since the reclaim was planned (it may stand on the old grant; the next pass
//!    plans again).
//!
//! Why this never lets usage above a grant is in `docs/quotas.md`.

use futures::StreamExt;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::hierarchy::quotas::ledger::{self, Ledger, Reclaim};
use crate::store::quota_ledgers::{Change, LedgerStore, StoreError};
use crate::store::quota_usage;

/// How many ResourceQuotas a plan writes at once.
const CONCURRENT_WRITES: usize = 8;

/// Carries out `plan` in the tree rooted at `root`; returns how many grants were lowered. A
/// reclaim whose ResourceQuota moved on since the plan is written again at the newer version,
/// where it still holds, up to `rewrites` times ([`REWRITES`] for the controller; none for the
/// webhook, whose admission waits within its deadline).
pub async fn lower(
    client: &Client,
    ledgers: &LedgerStore,
    root: &str,
    plan: Vec<Reclaim>,
    rewrites: usize,
) -> Result<usize, StoreError> {
    // Each write is a compare-and-swap on the version the plan was made from, so the longer
    // the writes take in all, the likelier the ResourceQuotas moved on meanwhile (a busy
    // subtree's are rewritten by Kubernetes' quota controller every few seconds): they go out
    // together, a few at a time, not one after another.
    let done: Vec<Reclaim> = futures::stream::iter(plan)
        .map(|reclaim| async move { set_allocation(client, &reclaim, rewrites).await.then_some(reclaim) })
        .buffer_unordered(CONCURRENT_WRITES)
        .filter_map(std::future::ready)
        .collect()
        .await;
    if done.is_empty() {
        return Ok(0);
    }
    let lowered = ledgers
        .modify(root, |current| {
            let next = ledger::apply(current, &done);
            let count = lowered_count(current, &next);
            let change = if next == *current { Change::Keep } else { Change::Write(next) };
            Ok::<_, std::convert::Infallible>((change, count))
        })
        .await?;
    let Ok(count) = lowered;
    Ok(count)
}

fn lowered_count(before: &Ledger, after: &Ledger) -> usize {
    after
        .namespaces
        .iter()
        .filter(|(ns, e)| before.namespaces.get(*ns).is_some_and(|b| b.granted != e.granted))
        .count()
}

/// How many times the controller writes a reclaim again at a newer version of its
/// ResourceQuota, where it still holds ([`Reclaim::still_holds`]).
pub const REWRITES: usize = 3;

/// Step 1: the ResourceQuota's allocation, by compare-and-swap on the planned version, or on a
/// newer one where the reclaim still holds (up to `rewrites` times). False if the
/// ResourceQuota moved on otherwise or is gone (the next plan starts from its new state).
async fn set_allocation(client: &Client, reclaim: &Reclaim, rewrites: usize) -> bool {
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), &reclaim.namespace);
    let mut version = reclaim.version;
    for rewrite in 0..=rewrites {
        match write_allocation(&api, reclaim, version).await {
            Ok(()) => return true,
            Err(kube::Error::Api(s)) if s.code == 409 && rewrite < rewrites => {}
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => return false,
            Err(error) => {
                tracing::warn!(%error, namespace = %reclaim.namespace, "cannot lower the allocation on hns's ResourceQuota");
                return false;
            }
        }
        let later = match api.get_opt(RESOURCE_QUOTA_NAME).await {
            Ok(Some(rq)) => quota_usage::ledger_observed(&rq),
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(%error, namespace = %reclaim.namespace, "cannot read hns's ResourceQuota again after a conflict");
                return false;
            }
        };
        if !reclaim.still_holds(&later) {
            return false;
        }
        version = later.version;
    }
    false
}

/// Sets the reclaim's target as the allocation of the ResourceQuota at `version`.
async fn write_allocation(
    api: &Api<ResourceQuota>,
    reclaim: &Reclaim,
    version: u64,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": version.to_string(),
        "annotations": {
            ledger::ALLOCATION_ANNOTATION: ledger::allocation_text(&reclaim.target),
            ledger::RECLAIM_ANNOTATION: version.to_string(),
        },
    }});
    let pp =
        PatchParams { field_manager: Some(crate::store::writer::FIELD_MANAGER.into()), ..Default::default() };
    api.patch(RESOURCE_QUOTA_NAME, &pp, &Patch::Merge(&patch)).await.map(drop)
}
