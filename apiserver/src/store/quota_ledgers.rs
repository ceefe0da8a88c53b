//! The quota ledgers' storage: one ConfigMap per tree in hns's namespace
//! (`hrq-ledger-<root>`, labelled [`ledger::CONFIGMAP_LABEL`]), cached by a watch and written
//! only by compare-and-swap on the ConfigMap's resourceVersion. The format is in
//! [`crate::hierarchy::quotas::ledger`].
//!
//! A write starts from the cache; a conflict (someone wrote first) or a create that finds the
//! ConfigMap already made is retried from a fresh read, a bounded number of times.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use crate::hierarchy::quotas::ledger::{self, Ledger};
use crate::resource_version;

/// How many times a write is tried before giving up (each failure means another writer won:
/// with N admissions racing in one tree, the last one waits N - 1 rounds).
const ATTEMPTS: usize = 24;

/// What a decision does to the ledger.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Nothing to write, and the decision holds whatever the current ledger is.
    Keep,
    /// Write this ledger.
    Write(Ledger),
}

/// Why the ledger could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Other writers kept winning.
    #[error(
        "the quota ledger {name} changed {ATTEMPTS} times while hns was writing it: try again in a moment"
    )]
    Contended {
        /// The ConfigMap.
        name: String,
    },
    /// kube-apiserver refused or could not be reached.
    #[error("cannot write the quota ledger ConfigMap {name} in hns's namespace: {source}; hns-apiserver needs get, list, watch, create and update on configmaps there")]
    Api {
        /// The ConfigMap.
        name: String,
        /// kube-apiserver's answer.
        source: kube::Error,
    },
}

/// The cached ledgers, by tree root.
pub struct LedgerStore {
    api: Api<ConfigMap>,
    cached: RwLock<BTreeMap<String, ConfigMap>>,
}

impl LedgerStore {
    /// A store of the ledgers in `namespace` (hns's).
    pub fn new(client: Client, namespace: &str) -> Self {
        LedgerStore { api: Api::namespaced(client, namespace), cached: RwLock::default() }
    }

    /// The roots of every tree with a ledger.
    pub fn roots(&self) -> Vec<String> {
        self.cached.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }

    /// Covered namespaces whose usage no cached ledger knows yet, over every tree
    /// ([`Ledger::unknown_usage`]).
    pub fn unknown_usage(&self) -> usize {
        let cached = self.cached.read().unwrap_or_else(|e| e.into_inner());
        cached.values().map(|cm| read_ledger(Some(cm)).unknown_usage()).sum()
    }

    /// The cached ledger of the tree rooted at `root` (empty when there is none).
    pub fn get(&self, root: &str) -> Ledger {
        read_ledger(self.cached(root).as_ref())
    }

    /// The resourceVersion of the cached ledger of the tree rooted at `root` (`None` when there
    /// is none): a ledger read after this call is this version or a newer one.
    pub fn version(&self, root: &str) -> Option<u64> {
        let cached = self.cached.read().unwrap_or_else(|e| e.into_inner());
        cached.get(root).map(|cm| resource_version::number(&cm.metadata))
    }

    fn cached(&self, root: &str) -> Option<ConfigMap> {
        self.cached.read().unwrap_or_else(|e| e.into_inner()).get(root).cloned()
    }

    /// Keeps `cm` unless the cache holds a newer version.
    fn remember(&self, root: &str, cm: ConfigMap) {
        let mut cached = self.cached.write().unwrap_or_else(|e| e.into_inner());
        let newer = cached.get(root).is_none_or(|old| {
            resource_version::number(&old.metadata) <= resource_version::number(&cm.metadata)
        });
        if newer {
            cached.insert(root.to_string(), cm);
        }
    }

    fn forget(&self, root: &str) {
        self.cached.write().unwrap_or_else(|e| e.into_inner()).remove(root);
    }

    /// Reads the ledger of the tree rooted at `root` from kube-apiserver into the cache (a
    /// decision about to refuse is made against the stored ledger, not a watch a moment behind).
    /// A failed read leaves the cache as it is.
    pub async fn refresh(&self, root: &str) {
        match self.api.get_opt(&ledger::configmap_name(root)).await {
            Ok(Some(cm)) => self.remember(root, cm),
            Ok(None) => self.forget(root),
            Err(error) => {
                tracing::debug!(%error, root, "cannot read the quota ledger; deciding from the cache")
            }
        }
    }

    /// Decides with `decide` against the ledger of the tree rooted at `root` and makes its
    /// change stick (compare-and-swap, retried from a fresh read on conflict). Returns the
    /// decision, or the store's failure.
    pub async fn modify<T, E>(
        &self,
        root: &str,
        decide: impl Fn(&Ledger) -> Result<(Change, T), E>,
    ) -> Result<Result<T, E>, StoreError> {
        let name = ledger::configmap_name(root);
        let api_error = |source| StoreError::Api { name: name.clone(), source };
        let mut current = self.cached(root);
        for _ in 0..ATTEMPTS {
            let (change, answer) = match decide(&read_ledger(current.as_ref())) {
                Ok(decided) => decided,
                Err(refusal) => return Ok(Err(refusal)),
            };
            let next = match change {
                Change::Keep => return Ok(Ok(answer)),
                Change::Write(next) => next,
            };
            match self.write(root, current.as_ref(), &next).await {
                Ok(written) => {
                    self.remember(root, written);
                    return Ok(Ok(answer));
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    current = self.api.get_opt(&name).await.map_err(api_error)?;
                    match &current {
                        Some(cm) => self.remember(root, cm.clone()),
                        None => self.forget(root),
                    }
                }
                Err(error) => return Err(api_error(error)),
            }
        }
        Err(StoreError::Contended { name })
    }

    /// Replaces `current` (guarded by its resourceVersion) with `next`, or creates the ConfigMap.
    async fn write(
        &self,
        root: &str,
        current: Option<&ConfigMap>,
        next: &Ledger,
    ) -> Result<ConfigMap, kube::Error> {
        let pp =
            PostParams { dry_run: false, field_manager: Some(crate::store::writer::FIELD_MANAGER.into()) };
        let mut cm = configmap(root, next);
        match current {
            None => self.api.create(&pp, &cm).await,
            Some(old) => {
                cm.metadata.resource_version = old.metadata.resource_version.clone();
                self.api.replace(&ledger::configmap_name(root), &pp, &cm).await
            }
        }
    }

    /// Deletes the ledger of the tree rooted at `root` if it is empty (its tree has no quota
    /// left, or the root is gone), guarded by the cached resourceVersion: a ledger written
    /// since stays. Nothing else ever makes an empty ledger: the webhook writes only entries.
    pub async fn remove_if_empty(&self, root: &str) -> Result<(), StoreError> {
        let name = ledger::configmap_name(root);
        let Some(cm) = self.cached(root).filter(|cm| read_ledger(Some(cm)) == Ledger::default()) else {
            return Ok(());
        };
        let preconditions =
            Preconditions { resource_version: cm.metadata.resource_version.clone(), uid: None };
        let dp = DeleteParams { preconditions: Some(preconditions), ..Default::default() };
        match self.api.delete(&name, &dp).await {
            Ok(_) => {
                self.forget(root);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
            Err(source) => Err(StoreError::Api { name, source }),
        }
    }

    /// Follows the ledger ConfigMaps into the cache until shutdown.
    pub async fn run(self: Arc<Self>) {
        let cfg = crate::watching::config().labels(ledger::CONFIGMAP_LABEL);
        let mut stream = watcher(self.api.clone(), cfg).default_backoff().boxed();
        let mut seen = Vec::new();
        loop {
            match stream.try_next().await {
                Ok(Some(watcher::Event::Init)) => seen.clear(),
                Ok(Some(watcher::Event::InitApply(cm))) => {
                    if let Some(root) = root_of(&cm) {
                        seen.push(root.clone());
                        self.remember(&root, cm);
                    }
                }
                Ok(Some(watcher::Event::InitDone)) => {
                    for root in self.roots().into_iter().filter(|r| !seen.contains(r)) {
                        self.forget(&root);
                    }
                }
                Ok(Some(watcher::Event::Apply(cm))) => {
                    if let Some(root) = root_of(&cm) {
                        self.remember(&root, cm);
                    }
                }
                Ok(Some(watcher::Event::Delete(cm))) => {
                    if let Some(root) = root_of(&cm) {
                        self.forget(&root);
                    }
                }
                Ok(None) => return,
                Err(error) => tracing::warn!(%error, "quota ledger watch failed; retrying"),
            }
        }
    }
}

/// The tree a ledger ConfigMap belongs to, from its label.
fn root_of(cm: &ConfigMap) -> Option<String> {
    cm.metadata.labels.as_ref()?.get(ledger::CONFIGMAP_LABEL).cloned()
}

/// The ledger a ConfigMap holds. A missing ConfigMap is an empty ledger, and so is an unreadable
/// one: every namespace's usage is then unknown, increases are refused with "try again", and
/// the reconciler fills it from the ResourceQuotas as after a first start.
fn read_ledger(cm: Option<&ConfigMap>) -> Ledger {
    cm.and_then(|c| c.data.as_ref())
        .and_then(|d| d.get(ledger::DATA_KEY))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The ConfigMap holding `ledger` for the tree rooted at `root`.
fn configmap(root: &str, ledger: &Ledger) -> ConfigMap {
    let json = serde_json::to_string(ledger).unwrap_or_default();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ledger::configmap_name(root)),
            labels: Some(BTreeMap::from([(ledger::CONFIGMAP_LABEL.to_string(), root.to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(ledger::DATA_KEY.to_string(), json)])),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_reads_back_from_its_configmap() {
        let mut l = Ledger::default();
        l.namespaces.insert(
            "a".into(),
            ledger::Entry { chain: vec!["a/q".into()], approvals: 3, ..Default::default() },
        );
        let cm = configmap("acme", &l);
        assert_eq!(cm.metadata.name.as_deref(), Some("hrq-ledger-acme"));
        assert_eq!(root_of(&cm).as_deref(), Some("acme"));
        assert_eq!(read_ledger(Some(&cm)), l);
        assert_eq!(read_ledger(None), Ledger::default());
        let mut broken = cm;
        broken.data = Some(BTreeMap::from([(ledger::DATA_KEY.to_string(), "{".to_string())]));
        assert_eq!(read_ledger(Some(&broken)), Ledger::default(), "unreadable: filled again from scratch");
    }
}
