//! The namespace cache: one watch on Namespaces feeding the [`Forest`].
//!
//! Reads never call the API server; they read the forest, which this watch keeps current. Until
//! the first full list has been applied the cache is not synced and `/readyz` says so, so no
//! replica answers from a partial picture.
//!
//! Only the watch changes the forest, in resourceVersion order, so watchers of the derived
//! objects get their events in order and a resume from any resourceVersion misses nothing. A
//! writer that wants to read its own write waits for the watch to bring it ([`Cache::caught_up`])
//! rather than putting the object in itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::hierarchy::forest::{Forest, Node, ObservedQuota, Relist};
use crate::hierarchy::policy::Policy;
use crate::store::changes;
use crate::store::hub::Hub;
use crate::store::reached::Reached;

/// Which namespaces changed, for the controller.
#[derive(Debug, Clone)]
pub enum Change {
    /// A namespace changed (or was deleted); `parents` are its parents before and after, whose
    /// membership may depend on it.
    Namespace {
        /// The namespace.
        name: String,
        /// Its old and new parents.
        parents: Vec<String>,
        /// Whether its relatives may need a look too: false when only its resourceVersion or
        /// finalizers changed ([`Node::differs_only_in_bookkeeping`]).
        relatives: bool,
    },
    /// Everything may have changed (a re-list).
    All,
    /// A propagated object changed in `namespace`: a source (its descendants need a look) or a
    /// copy (its own namespace does).
    Objects {
        /// Where.
        namespace: String,
        /// Whether it is a source rather than a copy.
        source: bool,
    },
}

/// The forest, whether it has been filled, and the events it produces.
pub struct Cache {
    /// Shared, copy-on-write, with the snapshots lists are streamed from ([`Cache::snapshot`]).
    forest: RwLock<Arc<Forest>>,
    synced: AtomicBool,
    policy: Policy,
    /// Change events of the derived objects, for watchers.
    pub hub: Hub,
    /// Names of changed namespaces, for the controller.
    pub changes: tokio::sync::broadcast::Sender<Change>,
    /// Seconds a caller waited for the watch to bring a namespace version it already knew of
    /// (its own write, or one it read from kube-apiserver): the watch's lag, measured exactly
    /// where it matters. (Managed-fields times would cover every write, but they are whole
    /// seconds and are not renewed by every change, e.g. not by a deletion.)
    pub watch_lag: prometheus_client::metrics::histogram::Histogram,
    /// The resourceVersion the forest has reached, for writers waiting on their own writes.
    reached: Reached,
    /// The names external hierarchies reserve ([`Forest::reserved_names`]), as they change.
    reserved: tokio::sync::watch::Sender<Vec<String>>,
    /// [`Forest::reserved_changes`] when the reserved names were last published.
    reserved_published: std::sync::atomic::AtomicU64,
    /// Told whenever one of hns's ResourceQuotas changes in any way (usage, allocation,
    /// limits), for the quota ledger reconciler. A `Notify` holds one permit, so a burst of
    /// changes wakes it once, however long its pass takes.
    pub quota_changed: tokio::sync::Notify,
}

/// Write access to the forest. Snapshots share it ([`Cache::snapshot`]): the first change made
/// while one is held copies the forest's maps (not its nodes, which are shared) and leaves the
/// snapshot as it was; with none held, changes are made in place. So a list pays nothing to
/// take its snapshot, and the copy it used to make for every list is made only when the forest
/// changes while one is being sent.
struct ForestMut<'a>(RwLockWriteGuard<'a, Arc<Forest>>);

impl ForestMut<'_> {
    /// Replaces the forest with what `f` makes of the current one, which it reads (no copy).
    fn replace(&mut self, f: impl FnOnce(&Forest) -> Forest) {
        *self.0 = Arc::new(f(&self.0));
    }
}

impl std::ops::Deref for ForestMut<'_> {
    type Target = Forest;

    fn deref(&self) -> &Forest {
        &self.0
    }
}

impl std::ops::DerefMut for ForestMut<'_> {
    fn deref_mut(&mut self) -> &mut Forest {
        Arc::make_mut(&mut self.0)
    }
}

/// How long a writer waits for the watch to bring its own write. The watch normally takes
/// milliseconds; past this, kube-apiserver or the watch is in trouble and the caller says so.
const CATCH_UP: Duration = Duration::from_secs(10);

impl Cache {
    /// An empty cache; `policy` decides how derived objects look (e.g. Forbidden subnamespaces),
    /// `sealer` which hierarchy state is hns's own.
    pub fn new(policy: Policy, sealer: crate::hierarchy::seal::Sealer) -> Self {
        let (changes, _) = tokio::sync::broadcast::channel(4_096);
        Cache {
            forest: RwLock::new(Arc::new(Forest::new(sealer))),
            synced: AtomicBool::new(false),
            policy,
            hub: Hub::default(),
            changes,
            watch_lag: prometheus_client::metrics::histogram::Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 15),
            ),
            reached: Reached::default(),
            reserved: tokio::sync::watch::Sender::new(Vec::new()),
            reserved_published: std::sync::atomic::AtomicU64::new(0),
            quota_changed: tokio::sync::Notify::new(),
        }
    }

    /// The names external hierarchies reserve, kept current: kube-apiserver's namespace-labels
    /// policy must leave their creation to hns's webhook, which refuses it
    /// ([`crate::admission::namespace_labels`]).
    pub fn reserved_names(&self) -> tokio::sync::watch::Receiver<Vec<String>> {
        self.reserved.subscribe()
    }

    /// Publishes the reserved names when they changed (a rare event: a tool's namespaces).
    fn publish_reserved(&self, forest: &Forest) {
        if self.reserved_published.swap(forest.reserved_changes(), Ordering::AcqRel)
            == forest.reserved_changes()
        {
            return;
        }
        let names = forest.reserved_names();
        self.reserved.send_if_modified(|held| {
            let changed = *held != names;
            if changed {
                *held = names;
            }
            changed
        });
    }

    /// Read access to the forest. Hold it briefly and never across an `.await`.
    pub fn read(&self) -> RwLockReadGuard<'_, Arc<Forest>> {
        self.forest.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The forest as it is now, to read at leisure (across `.await`s, e.g. while a list of every
    /// namespace is sent): taking it costs a reference count, and the next change of the
    /// forest while it is held copies the forest's maps once (see [`ForestMut`]).
    pub fn snapshot(&self) -> Arc<Forest> {
        Arc::clone(&self.read())
    }

    fn write(&self) -> ForestMut<'_> {
        ForestMut(self.forest.write().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether the first full list has been applied (a readiness check).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Waits until the forest reflects resourceVersion `rv` (e.g. a namespace as one of hns's
    /// writes returned it), so what the caller reads next includes that write. False if the
    /// watch did not get there in time.
    pub async fn caught_up(&self, rv: u64) -> bool {
        let started = Instant::now();
        let reached = self.reaches(rv, CATCH_UP).await;
        self.watch_lag.observe(started.elapsed().as_secs_f64());
        reached
    }

    /// Waits up to `within` for the forest to reach resourceVersion `rv`.
    pub async fn reaches(&self, rv: u64, within: Duration) -> bool {
        self.reached.wait(rv, within).await
    }

    /// Waits until the forest holds namespace `ns` at least as it was returned by kube-apiserver.
    pub async fn caught_up_with(&self, ns: &Namespace) -> bool {
        self.caught_up(crate::resource_version::number(&ns.metadata)).await
    }

    /// Tells waiting writers how far the forest has got.
    fn reached(&self, forest: &Forest) {
        self.reached.set(forest.resource_version_number());
    }

    /// Applies a change of one namespace and publishes the events of the derived objects it
    /// touched, all under the write lock so watchers see changes in order.
    fn change(&self, ns: Namespace, delete: bool) {
        let mut forest = self.write();
        let node = forest.node_of(ns.clone());
        let known = forest.get(node.name()).map(Node::resource_version);
        if known.is_some_and(|rv| rv > node.resource_version())
            || (!delete && known == Some(node.resource_version()))
        {
            return; // older than what the forest holds
        }
        let keys = changes::keys_for(&forest, &node, delete);
        let before = changes::snapshot(&forest, &self.policy, &keys);
        let held = forest.get(node.name());
        let relatives = delete || !held.is_some_and(|h| h.differs_only_in_bookkeeping(&node));
        let old_parent = held.and_then(|n| n.parent.clone());
        let (name, parent, rv) = (node.name().to_string(), node.parent.clone(), node.resource_version());
        if delete {
            forest.remove(&ns);
        } else {
            forest.upsert_node(node);
        }
        let after = changes::snapshot(&forest, &self.policy, &keys);
        self.hub.publish(changes::diff(&before, &after, rv));
        self.reached(&forest);
        self.publish_reserved(&forest);
        let parents = old_parent.into_iter().chain(parent).collect();
        let _ = self.changes.send(Change::Namespace { name, parents, relatives });
    }

    /// Records hns's ResourceQuota in `ns` as observed (`None`: gone) and publishes the changes
    /// of the quotas above it, whose usage it is part of. The controller is told (on `changes`)
    /// when the ResourceQuota appears, goes or changes its limits, not when only its usage
    /// moves; the ledger reconciler (on `quota_changed`) of every change.
    pub fn observe_quota(&self, ns: &str, mut observed: Option<ObservedQuota>) {
        let mut forest = self.write();
        let old = forest.observed_quota(ns).cloned();
        if let Some(new) = &mut observed {
            new.increased_at = match &old {
                Some(o) if !crate::hierarchy::quotas::quantity::grew(&o.used, &new.used) => o.increased_at,
                _ => Some(Instant::now()),
            };
        }
        if old == observed {
            return;
        }
        self.quota_changed.notify_one();
        // What hns writes on it (limits, the quotas named as requiring resources), so that a
        // hand edit is put back; usage alone is no business of the controller's.
        let controller_cares = old.as_ref().map(|o| (&o.hard, &o.required_by))
            != observed.as_ref().map(|o| (&o.hard, &o.required_by));
        let keys = changes::quotas_above([ns], &forest);
        let before = changes::snapshot(&forest, &self.policy, &keys);
        forest.observe_quota(ns, observed);
        let after = changes::snapshot(&forest, &self.policy, &keys);
        // Usage has no resourceVersion of the namespaces' sequence: the change is stamped with
        // the forest's, so watchers keep seeing resourceVersions that never go back.
        self.hub.publish(changes::diff(&before, &after, forest.resource_version_number()));
        if controller_cares {
            let _ = self.changes.send(Change::Objects { namespace: ns.to_string(), source: false });
        }
    }

    /// Replaces every observed ResourceQuota after their watch re-listed, publishing the changes
    /// of every quota and telling the controller to look at everything.
    pub fn replace_quotas(&self, all: std::collections::BTreeMap<String, ObservedQuota>) {
        let mut forest = self.write();
        let names: Vec<String> =
            forest.iter().filter(|n| !n.quotas().is_empty()).map(|n| n.name().to_string()).collect();
        let keys = changes::quotas_above(names.iter().map(String::as_str), &forest);
        let before = changes::snapshot(&forest, &self.policy, &keys);
        forest.replace_observed_quotas(all);
        let after = changes::snapshot(&forest, &self.policy, &keys);
        self.hub.publish(changes::diff(&before, &after, forest.resource_version_number()));
        let _ = self.changes.send(Change::All);
        self.quota_changed.notify_one();
    }

    /// Applies one watch event.
    /// A re-list is rebuilt beside the forest served (in `relist`) and replaces it at its end.
    fn apply(&self, event: Event<Namespace>, relist: &mut Option<Relist>) {
        match event {
            Event::Init => *relist = Some(self.read().relist()),
            Event::InitApply(ns) => {
                let served = self.read();
                relist.get_or_insert_with(|| served.relist()).add(ns, &served);
            }
            Event::InitDone => {
                let mut forest = self.write();
                let rebuilt = relist.take().unwrap_or_else(|| forest.relist());
                forest.replace(|old| old.rebuilt_from(rebuilt));
                // Changes during the outage are unknown: watchers must start over.
                self.hub.reset(forest.resource_version_number());
                self.reached(&forest);
                // A rebuilt forest counts its changes afresh: publish whatever the count.
                self.reserved_published.store(u64::MAX, Ordering::Release);
                self.publish_reserved(&forest);
                let _ = self.changes.send(Change::All);
                self.synced.store(true, Ordering::Release);
                tracing::info!(namespaces = forest.len(), "namespace cache synced");
            }
            Event::Apply(ns) => self.change(ns, false),
            Event::Delete(ns) => self.change(ns, true),
        }
    }
}

/// Watches Namespaces into `cache` until shutdown. Errors are retried with backoff; a re-list
/// replaces the forest whole, so nothing missed during an outage lingers.
pub async fn run(client: Client, cache: Arc<Cache>) {
    let api: Api<Namespace> = Api::all(client);
    let mut stream = watcher::watcher(api, crate::watching::config()).default_backoff().boxed();
    let mut relist = None;
    loop {
        match stream.try_next().await {
            Ok(Some(event)) => cache.apply(event, &mut relist),
            Ok(None) => return,
            Err(error) => tracing::warn!(%error, "namespace watch failed; retrying"),
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A cache as a replica holds it after its first list, for handlers' unit tests.
    use super::*;

    /// A synced cache of the namespaces of `spec` (as in the forest's `testing::forest`).
    pub fn cache(spec: &str) -> Cache {
        let cache = Cache::new(
            crate::hierarchy::policy::testing::policy(),
            crate::hierarchy::seal::testing::sealer(),
        );
        let forest = crate::hierarchy::forest::testing::forest(spec);
        let mut buf = None;
        cache.apply(Event::Init, &mut buf);
        for node in forest.iter() {
            cache.apply(Event::InitApply(node.namespace()), &mut buf);
        }
        cache.apply(Event::InitDone, &mut buf);
        cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::namespace;

    fn cache() -> Cache {
        Cache::new(crate::hierarchy::policy::testing::policy(), crate::hierarchy::seal::testing::sealer())
    }

    #[test]
    fn synced_only_after_the_first_full_list() {
        let cache = cache();
        let mut buf = None;
        cache.apply(Event::Init, &mut buf);
        cache.apply(Event::InitApply(namespace("a", None, false)), &mut buf);
        assert!(!cache.is_synced());
        assert!(cache.read().is_empty(), "a partial list is not served");
        cache.apply(Event::InitDone, &mut buf);
        assert!(cache.is_synced());
        cache.apply(Event::Apply(namespace("b", Some("a"), true)), &mut buf);
        assert_eq!(cache.read().children("a").collect::<Vec<_>>(), ["b"]);
        cache.apply(Event::Delete(namespace("b", Some("a"), true)), &mut buf);
        assert_eq!(cache.read().len(), 1);
    }

    #[test]
    fn a_snapshot_stays_as_it_was_taken_while_the_forest_moves_on() {
        let cache = cache();
        let mut buf = None;
        for e in [Event::Init, Event::InitApply(namespace("a", None, false)), Event::InitDone] {
            cache.apply(e, &mut buf);
        }
        let snapshot = cache.snapshot();
        assert!(Arc::ptr_eq(&snapshot, &cache.read()), "taking a snapshot copies nothing");
        cache.apply(Event::Apply(namespace("b", Some("a"), true)), &mut buf);
        assert_eq!(snapshot.len(), 1, "the snapshot does not see the later change");
        assert_eq!(cache.read().children("a").collect::<Vec<_>>(), ["b"]);
        drop(snapshot);
        // With no snapshot held, a change is made in place.
        let before = Arc::as_ptr(&cache.read());
        cache.apply(Event::Delete(namespace("b", Some("a"), true)), &mut buf);
        assert_eq!(Arc::as_ptr(&cache.read()), before);
        assert_eq!(cache.read().len(), 1);
        // A re-list replaces the forest, and a snapshot held meanwhile keeps the old one.
        let held = cache.snapshot();
        for e in [Event::Init, Event::InitApply(namespace("c", None, false)), Event::InitDone] {
            cache.apply(e, &mut buf);
        }
        assert_eq!(held.iter().map(|n| n.name()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(cache.read().iter().map(|n| n.name()).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn a_usage_change_is_an_event_of_every_quota_above() {
        let cache = cache();
        let mut buf = None;
        let mut acme = namespace("acme", None, false);
        acme.metadata.annotations.get_or_insert_default().insert(
            hns_api::keys::RESOURCE_QUOTAS.into(),
            r#"{"org":{"uid":"u","creationTimestamp":"2026-01-01T00:00:00Z","hard":{"pods":"10"}}}"#.into(),
        );
        let acme = crate::hierarchy::forest::testing::sealed(acme);
        for e in [
            Event::Init,
            Event::InitApply(acme),
            Event::InitApply(namespace("dev", Some("acme"), true)),
            Event::InitDone,
        ] {
            cache.apply(e, &mut buf);
        }
        let mut rx = cache.hub.subscribe();
        let mut changes = cache.changes.subscribe();
        let used = [("pods".to_string(), crate::hierarchy::quotas::quantity::Amount::parse("3").unwrap())];
        let observed = ObservedQuota { used: used.into(), ..Default::default() };
        cache.observe_quota("dev", Some(observed.clone()));
        match rx.try_recv() {
            Ok(crate::store::hub::Message::Events(batch)) => {
                assert_eq!(batch.len(), 1);
                assert_eq!(batch[0].1.object["metadata"]["name"], "org");
                assert_eq!(batch[0].1.object["status"]["used"]["pods"], "3");
            }
            other => panic!("expected the quota's change, got {other:?}"),
        }
        assert!(
            matches!(changes.try_recv(), Ok(Change::Objects { .. })),
            "a new ResourceQuota is the controller's business"
        );
        cache.observe_quota("dev", Some(observed));
        assert!(rx.try_recv().is_err(), "nothing changed, nothing sent");
    }

    #[test]
    fn a_relist_replaces_everything() {
        let cache = cache();
        let mut buf = None;
        for e in [Event::Init, Event::InitApply(namespace("old", None, false)), Event::InitDone] {
            cache.apply(e, &mut buf);
        }
        for e in [Event::Init, Event::InitApply(namespace("new", None, false)), Event::InitDone] {
            cache.apply(e, &mut buf);
        }
        assert!(cache.read().get("old").is_none());
        assert!(cache.read().get("new").is_some());
    }
}
