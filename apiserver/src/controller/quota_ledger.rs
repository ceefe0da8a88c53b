//! The ledger reconciler (leader only): keeps every tree's quota ledger in step with the forest
//! ([`ledger::membership`]), fills the grants of namespaces whose usage it does not know yet, and
//! takes back grants held far beyond the usage ([`ledger::reclaims`], carried out by
//! `store::quota_allocations`).
//!
//! A pass is an idempotent function of the forest, a consistent list of the ResourceQuotas
//! labelled `hnc.x-k8s.io/hrq` and the ledgers; it runs when a namespace or one of those
//! ResourceQuotas changes, and every [`RESYNC`]. A tree whose inputs are as its last share of
//! a pass left them, when that share found nothing to do, is skipped ([`TreeInputs`]) until the
//! resync. Everything it knows is on the cluster, so a restart or a new leader starts over with
//! nothing lost. A grant raised by an approval whose update never committed (another webhook
//! refused the object) is just more than the usage, and is taken back like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use hns_api::keys::HRQ_LABEL;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use crate::hierarchy::quotas::ledger::{self, Ledger, Observed};
use crate::store::cache::{Cache, Change as CacheChange};
use crate::store::quota_ledgers::{Change, LedgerStore, StoreError};
use crate::store::{quota_allocations, quota_usage};

/// How often a pass works every tree, as a resync, at rest or not ([`TreeInputs`]), and runs
/// without a change to prompt it: every change that matters (a namespace, one of hns's
/// ResourceQuotas, leadership) prompts a pass at once, so at idle the ledgers cost
/// kube-apiserver one LIST per this period, where some tree has a quota or a ledger is left
/// (and nothing otherwise).
const RESYNC: Duration = Duration::from_secs(30 * 60);

/// How soon a pass runs again after one that found grants in flight.
const IN_FLIGHT_RECHECK: Duration = Duration::from_secs(1);

/// How long a pass waits for a burst of changes to settle.
const SETTLE: Duration = Duration::from_millis(200);

/// What a tree's share of a pass is made from: the tree's skeleton (its quotas and chains, from
/// the forest), the version of its ledger, and the version of each covered namespace's
/// ResourceQuota. That share is a function of these alone (and of the grants found in flight,
/// which count only where a grant is in flight now), so a tree whose share found nothing to do
/// would find nothing again from the same inputs: it is skipped ([`AtRest`]) until one changes.
/// A tenant whose quotas fill its tree's ledger then costs the passes that follow only while the
/// tree changes, not on every pass prompted by any tree.
#[derive(Debug, PartialEq)]
struct TreeInputs {
    skeleton: Ledger,
    ledger_version: Option<u64>,
    members: Vec<(String, Option<u64>)>,
}

impl TreeInputs {
    /// Read before the tree's ledger is: a ledger that moves on meanwhile makes these inputs stale
    /// (the next pass works the tree again), never newer than the ledger the work saw.
    fn of(skeleton: &Ledger, store: &LedgerStore, root: &str, observed: &BTreeMap<String, Observed>) -> Self {
        let members =
            skeleton.namespaces.keys().map(|ns| (ns.clone(), observed.get(ns).map(|o| o.version))).collect();
        TreeInputs { skeleton: skeleton.clone(), ledger_version: store.version(root), members }
    }
}

/// The trees whose last share of a pass found nothing to do (nothing written to the ledger,
/// nobody left out, no grant in flight, nothing to fill or take back), with the inputs it had.
/// Forgotten at every resync, so the resync works every tree whatever this holds.
type AtRest = BTreeMap<String, TreeInputs>;

/// Why a pass failed (it is retried on the next prompt).
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The ResourceQuotas could not be listed.
    #[error("cannot list ResourceQuotas labelled {HRQ_LABEL}=true named {RESOURCE_QUOTA_NAME}: {0}; hns-apiserver needs list and watch on resourcequotas")]
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
        let mut in_flight = BTreeSet::new();
        let mut at_rest = AtRest::new();
        let mut resync_at = tokio::time::Instant::now() + RESYNC;
        loop {
            // The resync keeps its period however often changes prompt passes in between.
            if tokio::time::Instant::now() >= resync_at {
                at_rest.clear();
                resync_at = tokio::time::Instant::now() + RESYNC;
            }
            if *leader.borrow() && self.cache.is_synced() {
                let started = std::time::Instant::now();
                match self.pass(&in_flight, &mut at_rest).await {
                    Ok(now) => {
                        in_flight = now;
                        let ms = started.elapsed().as_millis() as u64;
                        let at_rest = at_rest.len();
                        tracing::debug!(ms, in_flight = in_flight.len(), at_rest, "quota ledger pass");
                    }
                    Err(error) => tracing::warn!(%error, "quota ledger pass failed; retrying"),
                }
            }
            // Wait for a namespace change (propagated objects say nothing about quotas), a
            // change of one of hns's ResourceQuotas, leadership, or the resync. Changes are
            // coalesced, not queued: one pass answers every change that came before it, so a
            // burst of ResourceQuota writes (a tenant's quotas rewriting every ResourceQuota of
            // a subtree) costs a pass or two, not a pass per write long after the burst, while
            // approvals wait on the CPU.
            // Grants found in flight are looked at again soon: abandoned, they are taken back then.
            let deadline = if in_flight.is_empty() {
                tokio::time::sleep_until(resync_at)
            } else {
                tokio::time::sleep(IN_FLIGHT_RECHECK)
            };
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(CacheChange::Objects { .. }) => continue,
                        Err(RecvError::Closed) => return,
                        Ok(_) | Err(RecvError::Lagged(_)) => break,
                    },
                    _ = self.cache.quota_changed.notified() => break,
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
    /// read, so a reclaim is planned from a ledger no older than the usage it lowers to; one
    /// written at a later version of its ResourceQuota ([`ledger::Reclaim::still_holds`]) rests
    /// on `store::quota_allocations` checking that nothing was approved since the plan.
    async fn pass(
        &self,
        in_flight_before: &BTreeSet<(String, u64)>,
        at_rest: &mut AtRest,
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
        at_rest.retain(|root, _| skeletons.contains_key(root));
        for (root, skeleton) in skeletons {
            let inputs = TreeInputs::of(&skeleton, &self.store, &root, &observed);
            if at_rest.get(&root) == Some(&inputs) {
                continue;
            }
            at_rest.remove(&root);
            let written = self
                .store
                .modify(&root, |current| {
                    let (next, left_out) =
                        ledger::fit(ledger::keep_grants(skeleton.clone(), current), current);
                    let kept = next == *current;
                    let change = if kept { Change::Keep } else { Change::Write(next.clone()) };
                    Ok::<_, std::convert::Infallible>((change, (next, left_out, kept)))
                })
                .await?;
            let Ok((written, left_out, kept)) = written;
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
            let tree_in_flight = ledger::in_flight(&written, &observed);
            let plan = ledger::reclaims(&written, &observed, in_flight_before);
            // A ledger that was not cached when the inputs were read may have been found since
            // (by the watch, or by a create that met it): only a version read is a version known.
            let known = inputs.ledger_version.is_some();
            if known && kept && left_out.is_empty() && tree_in_flight.is_empty() && plan.is_empty() {
                at_rest.insert(root.clone(), inputs);
            }
            in_flight.extend(tree_in_flight);
            if !plan.is_empty() {
                let (planned, started) = (plan.len(), std::time::Instant::now());
                let lowered = quota_allocations::lower(
                    &self.client,
                    &self.store,
                    &root,
                    plan,
                    quota_allocations::REWRITES,
                )
                .await?;
                let ms = started.elapsed().as_millis() as u64;
                tracing::debug!(root, planned, lowered, ms, "quota grants filled or taken back");
            }
        }
        Ok(in_flight)
    }

    /// The ResourceQuotas hns keeps, as kube-apiserver has them now (a consistent list).
    async fn observe(&self) -> Result<BTreeMap<String, Observed>, PassError> {
        let api: Api<ResourceQuota> = Api::all(self.client.clone());
        let (labels, fields) = quota_usage::selectors();
        let params = ListParams::default().labels(&labels).fields(&fields);
        let list = api.list(&params).await.map_err(PassError::List)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|rq| Some((rq.metadata.namespace.clone()?, quota_usage::ledger_observed(&rq))))
            .collect())
    }
}
