//! Lowering grants ([`ledger::Reclaim`]): the one write hns makes to a namespace's allocation
//! outside an admission. The webhook raises an allocation inside the status update it approves;
//! lowering one takes two writes, in this order:
//!
//! 1. the ResourceQuota's allocation annotation is set to the target by a compare-and-swap on
//!    the resourceVersion the reclaim was planned from (with [`ledger::RECLAIM_ANNOTATION`], so
//!    the version always moves): no update from that version or an older one can commit after
//!    it, and from the new one on kube-apiserver admits without hns only up to the target;
//! 2. the ledger lowers the grant, by [`ledger::apply`], unless an approval happened in that
//!    namespace since the reclaim was planned (it may stand on the old grant; the next pass
//!    plans again).
//!
//! Why this never lets usage above a grant is in `docs/quotas.md`.

use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::hierarchy::quotas::ledger::{self, Ledger, Reclaim};
use crate::store::quota_ledgers::{Change, LedgerStore, StoreError};

/// Carries out `plan` in the tree rooted at `root`; returns how many grants were lowered.
pub async fn lower(
    client: &Client,
    ledgers: &LedgerStore,
    root: &str,
    plan: Vec<Reclaim>,
) -> Result<usize, StoreError> {
    let mut done = Vec::new();
    for reclaim in plan {
        if set_allocation(client, &reclaim).await {
            done.push(reclaim);
        }
    }
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

/// Step 1: the ResourceQuota's allocation, by compare-and-swap on the planned version. False
/// if the ResourceQuota moved on or is gone (the next plan starts from its new state).
async fn set_allocation(client: &Client, reclaim: &Reclaim) -> bool {
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), &reclaim.namespace);
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": reclaim.version.to_string(),
        "annotations": {
            ledger::ALLOCATION_ANNOTATION: ledger::allocation_text(&reclaim.target),
            ledger::RECLAIM_ANNOTATION: reclaim.version.to_string(),
        },
    }});
    let pp =
        PatchParams { field_manager: Some(crate::store::writer::FIELD_MANAGER.into()), ..Default::default() };
    match api.patch(RESOURCE_QUOTA_NAME, &pp, &Patch::Merge(&patch)).await {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => false,
        Err(error) => {
            tracing::warn!(%error, namespace = %reclaim.namespace, "cannot lower the allocation on hns's ResourceQuota");
            false
        }
    }
}
