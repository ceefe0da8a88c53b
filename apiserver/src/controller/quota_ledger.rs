//! The ledger reconciler (leader only): keeps every tree's quota ledger in step with the forest
//! ([`ledger::membership`]), fills the grants of namespaces whose usage it does not know yet, and
//! takes back grants held far beyond the usage ([`ledger::reclaims`], carried out by
//! `store::quota_allocations`).
//!
//! A pass is an idempotent function of the forest, a consistent list of the ResourceQuotas
//! labelled `hnc.x-k8s.io/hrq` and the ledgers; it runs when a namespace or one of those
//! ResourceQuotas changes, and every [`RESYNC`]. Everything it knows is on the cluster, so a
//! restart or a new leader starts over with nothing lost. A grant raised by an approval whose
//! update never committed (another webhook refused the object) is just more than the usage, and
//! is taken back like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use hns_api::keys::HRQ_LABEL;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::ListParams;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use crate::hierarchy::quotas::ledger::{self, Ledger, Observed};
use crate::resource_version;
use crate::store::cache::{Cache, Change as CacheChange};
use crate::store::quota_allocations;
use crate::store::quota_ledgers::{Change, LedgerStore, StoreError};

/// How often a pass runs without a change to prompt it, as a resync: every change that matters
/// (a namespace, one of hns's ResourceQuotas, leadership) prompts one at once, so at idle the
/// ledgers cost kube-apiserver one LIST per this period, where some tree has a quota or a ledger
/// is left (and nothing otherwise).
const RESYNC: Duration = Duration::from_secs(30 * 60);

/// How soon a pass runs again after one that found grants in flight.
const IN_FLIGHT_RECHECK: Duration = Duration::from_secs(1);

/// How long a pass waits for a burst of changes to settle.
const SETTLE: Duration = Duration::from_millis(200);

/// Why a pass failed (it is retried on the next prompt).
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The ResourceQuotas could not be listed.
    #[error("cannot list ResourceQuotas labelled {HRQ_LABEL}: {0}; hns-apiserver needs list and watch on resourcequotas")]
    List(kube::Error),
    /// A ledger could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The reconciler.
pub struct LedgerReconciler {
    /// The forest.
    pub cache: Arc<Cache>,
    /// The ledgers.
    pub store: Arc<LedgerStore>,
    /// hns's client.
    pub client: Client,
}

impl LedgerReconciler {
    /// Runs passes while leading, until shutdown.
    pub async fn run(self: Arc<Self>, mut leader: watch::Receiver<bool>) {
        let mut changes = self.cache.changes.subscribe();
        let api: Api<ResourceQuota> = Api::all(self.client.clone());
        let mut quotas = watcher(api, crate::watching::config().labels(HRQ_LABEL)).default_backoff().boxed();
        let mut in_flight = BTreeSet::new();
        loop {
            if *leader.borrow() && self.cache.is_synced() {
                match self.pass(&in_flight).await {
                    Ok(now) => in_flight = now,
                    Err(error) => tracing::warn!(%error, "quota ledger pass failed; retrying"),
                }
            }
            // Wait for a namespace change (propagated objects say nothing about quotas), a
            // change of one of hns's ResourceQuotas, leadership, or the resync.
            // Grants found in flight are looked at again soon: abandoned, they are taken back then.
            let deadline = tokio::time::sleep(if in_flight.is_empty() { RESYNC } else { IN_FLIGHT_RECHECK });
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(CacheChange::Objects { .. }) => continue,
                        Err(RecvError::Closed) => return,
                        Ok(_) | Err(RecvError::Lagged(_)) => break,
                    },
                    event = quotas.next() => if event.is_none() { return } else { break },
                    res = leader.changed() => if res.is_err() { return } else { break },
                    _ = &mut deadline => break,
                }
            }
            tokio::time::sleep(SETTLE).await;
            while changes.try_recv().is_ok() {}
        }
    }

    /// One pass over every tree; returns the grants found in flight ([`ledger::in_flight`]),
    /// taken back at the next pass if still so. The ResourceQuotas are listed before a ledger is
    /// read, so a reclaim is planned from a ledger no older than the usage it lowers to
    /// (`store::quota_allocations` checks that nothing was approved since).
    async fn pass(
        &self,
        in_flight_before: &BTreeSet<(String, u64)>,
    ) -> Result<BTreeSet<(String, u64)>, PassError> {
        let mut in_flight = BTreeSet::new();
        // No tree with a quota and no ledger left: nothing to keep, and no list to pay for. Every
        // namespace created anywhere prompts a pass; on a cluster without hierarchical quotas
        // each would otherwise cost kube-apiserver a consistent list (issue 37).
        if self.store.roots().is_empty() && !ledger::any_quota(&self.cache.read()) {
            return Ok(in_flight);
        }
        let observed = self.observe().await?;
        let skeletons: BTreeMap<String, Ledger> = {
            let forest = self.cache.read();
            let mut roots = ledger::trees(&forest);
            roots.extend(self.store.roots());
            roots.into_iter().map(|root| (root.clone(), ledger::skeleton(&forest, &root))).collect()
        };
        for (root, skeleton) in skeletons {
            let written = self
                .store
                .modify(&root, |current| {
                    let (next, left_out) =
                        ledger::fit(ledger::keep_grants(skeleton.clone(), current), current);
                    let change = if next == *current { Change::Keep } else { Change::Write(next.clone()) };
                    Ok::<_, std::convert::Infallible>((change, (next, left_out)))
                })
                .await?;
            let Ok((written, left_out)) = written;
            if !left_out.is_empty() {
                tracing::warn!(
                    root,
                    namespaces = ?left_out,
                    "the quota ledger of this tree is full: these namespaces stay pending (nothing can be created in them) until quotas or namespaces under them are removed"
                );
            }
            if written == Ledger::default() {
                self.store.remove_if_empty(&root).await?;
                continue;
            }
            in_flight.extend(ledger::in_flight(&written, &observed));
            let plan = ledger::reclaims(&written, &observed, in_flight_before);
            if !plan.is_empty() {
                let (planned, started) = (plan.len(), std::time::Instant::now());
                let lowered = quota_allocations::lower(&self.client, &self.store, &root, plan).await?;
                let ms = started.elapsed().as_millis() as u64;
                tracing::debug!(root, planned, lowered, ms, "quota grants filled or taken back");
            }
        }
        Ok(in_flight)
    }

    /// The ResourceQuotas hns keeps, as kube-apiserver has them now (a consistent list).
    async fn observe(&self) -> Result<BTreeMap<String, Observed>, PassError> {
        let api: Api<ResourceQuota> = Api::all(self.client.clone());
        let list = api.list(&ListParams::default().labels(HRQ_LABEL)).await.map_err(PassError::List)?;
        Ok(list
            .items
            .into_iter()
            .filter(|rq| rq.metadata.name.as_deref() == Some(RESOURCE_QUOTA_NAME))
            .filter_map(|rq| {
                let ns = rq.metadata.namespace.clone()?;
                let status = rq.status.as_ref();
                let used = ledger::counted_usage(
                    status.and_then(|s| s.hard.as_ref()),
                    status.and_then(|s| s.used.as_ref()),
                );
                let allocation = crate::store::quota_usage::allocation_of(&rq);
                Some((ns, Observed { version: resource_version::number(&rq.metadata), used, allocation }))
            })
            .collect())
    }
}
