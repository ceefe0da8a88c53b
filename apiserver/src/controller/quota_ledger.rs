//! The ledger reconciler (leader only): keeps every tree's quota ledger in step with the forest
//! ([`ledger::membership`]) and with the ResourceQuotas hns keeps ([`ledger::observe`]), and
//! releases usage an abandoned approval holds ([`ledger::held`]).
//!
//! A pass is an idempotent function of the forest, a consistent list of the ResourceQuotas
//! labelled `hnc.x-k8s.io/hrq` and the ledgers; it runs when a namespace or one of those
//! ResourceQuotas changes, and every [`PERIOD`]. Everything it knows is on the cluster, so a
//! restart or a new leader starts over with nothing lost.
//!
//! An approval refused later in admission (by another webhook, say) leaves its ledger entry
//! above the ResourceQuota at the same resourceVersion, where nothing may lower it: another
//! approval from that version could still commit. When a pass finds an entry held like this
//! twice in a row, it moves the ResourceQuota to a new resourceVersion (an annotation), so that
//! any update from the old one fails and the next pass lowers the entry to the truth.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use hns_api::keys::HRQ_LABEL;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use crate::hierarchy::ledger::{self, Ledger, Observed};
use crate::hierarchy::quantity;
use crate::resource_version;
use crate::store::cache::{Cache, Change as CacheChange};
use crate::store::ledger::{Change, LedgerStore, StoreError};

/// How often a pass runs without a change to prompt it.
const PERIOD: Duration = Duration::from_secs(10);

/// How long a pass waits for a burst of changes to settle.
const SETTLE: Duration = Duration::from_millis(200);

/// The annotation hns sets on a ResourceQuota to move it past a held entry's resourceVersion.
pub const RELEASE_ANNOTATION: &str = "hnc.x-k8s.io/hrq-ledger-release";

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
        let mut quotas = watcher(api, watcher::Config::default().labels(HRQ_LABEL)).default_backoff().boxed();
        let mut held_before = BTreeSet::new();
        loop {
            if *leader.borrow() && self.cache.is_synced() {
                match self.pass(&held_before).await {
                    Ok(held) => held_before = held,
                    Err(error) => tracing::warn!(%error, "quota ledger pass failed; retrying"),
                }
            }
            // Wait for a namespace change (propagated objects say nothing about quotas), a
            // change of one of hns's ResourceQuotas, leadership, or the period.
            let deadline = tokio::time::sleep(PERIOD);
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

    /// One pass over every tree; returns the entries found held (namespace, resourceVersion).
    async fn pass(
        &self,
        held_before: &BTreeSet<(String, u64)>,
    ) -> Result<BTreeSet<(String, u64)>, PassError> {
        let observed = self.observe().await?;
        let skeletons: BTreeMap<String, Ledger> = {
            let forest = self.cache.read();
            let mut roots = ledger::trees(&forest);
            roots.extend(self.store.roots());
            roots
                .into_iter()
                .map(|root| (ledger::skeleton(&forest, &root), root))
                .map(|(s, r)| (r, s))
                .collect()
        };
        let mut held = BTreeSet::new();
        for (root, skeleton) in skeletons {
            let written = self
                .store
                .modify(&root, |current| {
                    let next = ledger::observe(&ledger::keep_usage(skeleton.clone(), current), &observed);
                    let change = if next == *current { Change::Keep } else { Change::Write(next.clone()) };
                    Ok::<_, std::convert::Infallible>((change, next))
                })
                .await?;
            let Ok(written) = written;
            if written == Ledger::default() {
                self.store.remove_if_empty(&root).await?;
                continue;
            }
            for ns in ledger::held(&written, &observed) {
                held.insert((ns.clone(), observed[&ns].version));
            }
        }
        for (ns, version) in held.intersection(held_before) {
            self.release(ns, *version).await;
        }
        Ok(held)
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
                let used = rq
                    .status
                    .as_ref()
                    .and_then(|s| s.used.as_ref())
                    .and_then(|u| quantity::parse_list(u).ok());
                Some((ns, Observed { version: resource_version::number(&rq.metadata), used }))
            })
            .collect())
    }

    /// Moves `ns`'s ResourceQuota past `version`, if it is still there.
    async fn release(&self, ns: &str, version: u64) {
        let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), ns);
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": version.to_string(),
            "annotations": {RELEASE_ANNOTATION: version.to_string()},
        }});
        let pp = PatchParams {
            field_manager: Some(crate::store::writer::FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api.patch(RESOURCE_QUOTA_NAME, &pp, &Patch::Merge(&patch)).await {
            Ok(_) => tracing::info!(
                namespace = ns,
                version,
                "released usage held by an approval that never committed"
            ),
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {} // it moved on by itself
            Err(error) => {
                tracing::warn!(%error, namespace = ns, "cannot move the ResourceQuota past a held ledger entry")
            }
        }
    }
}
