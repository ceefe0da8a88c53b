//! The hierarchy controller: makes every namespace's metadata match the hierarchy (tree labels,
//! membership, managed labels and annotations, recorded conditions).
//!
//! Reconciling is an idempotent function of the forest ([`upkeep::due`]): the controller
//! only decides *which* namespaces to look at. Every namespace change enqueues the namespace,
//! its old and new parents and its descendants, except one of only its resourceVersion or
//! finalizers, which enqueues the namespace alone; a re-list enqueues everything. Only the leader writes; the
//! other replicas keep their queues empty and take over from scratch if they become leader, so
//! a restart or a leader change converges without any state carried across.

pub mod error;
pub mod events;
pub mod quota_ledger;
pub mod quota_limits;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch, Notify};

use kube::api::{DeleteParams, PostParams, Preconditions};

use crate::hierarchy::plan::upkeep;
use crate::hierarchy::policy::Policy;
use crate::propagation::{Action, Propagation, Syncer};
use crate::store::cache::{Cache, Change};
use crate::store::writer::Writer;
use error::Error;

/// Namespaces reconciled at once. A reconcile mostly waits on kube-apiserver, so many run
/// together (HNC ran 20); a move or a new source touches a whole subtree.
const WORKERS: usize = 64;

/// Namespace deletions a cascading deletion sends at once.
const CASCADE_DELETES: usize = 16;

/// A set-like FIFO of namespace names: a name queued twice is reconciled once, and never by two
/// workers at once. A name queued while a worker has it waits until that worker is
/// [`done`](Queue::done), then goes to the back: both reconciles would read the same forest and
/// send the same write, and the second, made with the resourceVersion the first just spent, fails
/// with a conflict and is retried (a parent gaining 5 subnamespaces at once was patched up to 7
/// times for one finalizer). A name is held once for all uses (shared: when every namespace is
/// queued, they are the forest's own names).
#[derive(Default)]
pub struct Queue {
    items: Mutex<Waiting>,
    ready: Notify,
}

/// The names a [`Queue`] holds.
#[derive(Default)]
struct Waiting {
    /// The names a worker may take, in order.
    order: VecDeque<Arc<str>>,
    /// Every name waiting: those in `order`, and those held back until their worker is done.
    queued: HashSet<Arc<str>>,
    /// The names workers have now.
    working: HashSet<Arc<str>>,
}

/// Beyond this many names' room, a queue that empties gives its room back: queuing every
/// namespace of a large cluster (at start, or on becoming leader) would keep it for good.
const QUEUE_ROOM_KEPT: usize = 1024;

impl Queue {
    /// Queues `names` not queued already.
    pub fn push<N: Into<Arc<str>>>(&self, names: impl IntoIterator<Item = N>) {
        let mut q = self.lock();
        for n in names {
            let n = n.into();
            if q.queued.insert(n.clone()) && !q.working.contains(&n) {
                q.order.push_back(n);
            }
        }
        drop(q);
        self.ready.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_pop(&self) -> Option<Arc<str>> {
        let mut q = self.lock();
        let n = q.order.pop_front()?;
        q.queued.remove(&n);
        q.working.insert(n.clone());
        if q.order.is_empty() && q.order.capacity() > QUEUE_ROOM_KEPT {
            q.order = VecDeque::new();
            q.queued.shrink_to_fit();
        }
        Some(n)
    }

    /// The next name, waiting for one: the caller's until the [`Claim`] is dropped.
    pub async fn pop(&self) -> Claim<'_> {
        loop {
            let notified = self.ready.notified();
            if let Some(name) = self.try_pop() {
                return Claim { queue: self, name };
            }
            notified.await;
        }
    }

    /// A worker is done with `name`: queued meanwhile, it goes to the back now.
    fn done(&self, name: &Arc<str>) {
        let mut q = self.lock();
        q.working.remove(name);
        if q.queued.contains(name) {
            q.order.push_back(name.clone());
            drop(q);
            self.ready.notify_waiters();
        }
    }

    /// How many names wait.
    pub fn len(&self) -> usize {
        self.lock().queued.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A name a worker has taken from a [`Queue`]. Dropping it, whether the reconcile succeeded,
/// failed or panicked, lets the name be taken again.
pub struct Claim<'q> {
    queue: &'q Queue,
    name: Arc<str>,
}

impl std::ops::Deref for Claim<'_> {
    type Target = Arc<str>;
    fn deref(&self) -> &Arc<str> {
        &self.name
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.queue.done(&self.name);
    }
}

/// The controller's parts.
pub struct Controller {
    /// The forest.
    pub cache: Arc<Cache>,
    /// The administrator's settings.
    pub policy: Policy,
    /// Namespace writes.
    pub writer: Writer,
    /// Work.
    pub queue: Arc<Queue>,
    /// The propagated kinds.
    pub propagation: Arc<Propagation>,
    /// For writing propagated objects.
    pub client: kube::Client,
    /// Counters.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Kubernetes Events.
    pub events: events::Events,
}

impl Controller {
    /// Runs until shutdown, writing only while `leader` says so.
    pub async fn run(self: Arc<Self>, mut leader: watch::Receiver<bool>) {
        let mut changes = self.cache.changes.subscribe();
        for _ in 0..WORKERS {
            let me = self.clone();
            let leader = leader.clone();
            tokio::spawn(async move { me.work(leader).await });
        }
        loop {
            tokio::select! {
                change = changes.recv() => match change {
                    Ok(Change::Namespace { name, parents, relatives: true }) => {
                        self.enqueue_subtree(&name);
                        self.queue.push(parents);
                    }
                    Ok(Change::Namespace { name, relatives: false, .. }) => self.queue.push([name]),
                    Ok(Change::Objects { namespace, source: true }) => self.enqueue_subtree(&namespace),
                    Ok(Change::Objects { namespace, source: false }) => self.queue.push([namespace]),
                    Ok(Change::All) | Err(broadcast::error::RecvError::Lagged(_)) => self.enqueue_all(),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                res = leader.changed() => {
                    if res.is_err() { return; }
                    let leading = *leader.borrow();
                    self.metrics.leader.set(i64::from(leading));
                    if leading {
                        tracing::info!("became leader; reconciling every namespace");
                        self.enqueue_all();
                    }
                }
            }
        }
    }

    fn enqueue_all(&self) {
        let names: Vec<Arc<str>> = self.cache.read().shared_names().cloned().collect();
        self.queue.push(names);
    }

    /// A namespace and all its descendants: a move changes the tree labels of a whole subtree,
    /// and a source object reaches every namespace below its own. (Its parent's membership
    /// depends on it too, but not its siblings: the cache names the parents apart.)
    fn enqueue_subtree(&self, name: &str) {
        let mut all = vec![name.to_string()];
        all.extend(self.cache.read().descendant_names(name));
        self.queue.push(all);
    }

    async fn work(&self, leader: watch::Receiver<bool>) {
        loop {
            let ns = self.queue.pop().await;
            // A follower drops work; it re-lists everything when it leads.
            if *leader.borrow() {
                self.work_on(&ns).await;
            }
        }
    }

    /// Reconciles `ns`, and queues it again after a while if that failed.
    async fn work_on(&self, ns: &Arc<str>) {
        self.metrics.reconciles.inc();
        if let Err(error) = self.reconcile(ns).await {
            // A write race (409) settles itself once the watch brings the newer object, and a
            // failed copy is counted and told where it happens (object_write_errors, Events):
            // only the rest says that this namespace itself cannot be kept.
            if error.is_conflict() || matches!(error, Error::Propagation { .. }) {
                tracing::debug!(namespace = %ns, %error, "reconcile failed; retrying");
            } else {
                self.metrics.reconcile_errors.inc();
                tracing::warn!(namespace = %ns, %error, "reconcile failed; retrying");
            }
            let (queue, after, ns) = (self.queue.clone(), error.requeue_after(), ns.clone());
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                queue.push([ns]);
            });
        }
    }

    /// A terminating namespace where cascading deletion is allowed takes every subnamespace
    /// below it at once ([`crate::hierarchy::forest::Forest::cascade`]) rather than one level per pass of
    /// the namespace controller. Each deletion is conditional on the uid the forest saw, so a
    /// namespace made again under the same name is left alone; one that is itself a parent is
    /// held for its subnamespaces first, as the webhook holds one a user deletes.
    async fn cascade(&self, ns: &str) -> Result<(), Error> {
        use futures::StreamExt;
        let doomed: Vec<_> = {
            let forest = self.cache.read();
            let now = jiff::Timestamp::now();
            forest
                .cascade(ns)
                .into_iter()
                .map(|(name, uid)| (forest.needs_hold(&name, now), name, uid))
                .collect()
        };
        let outcomes: Vec<Result<(), Error>> = futures::stream::iter(doomed)
            .map(|(hold, name, uid)| self.delete_below(ns, hold, name, uid))
            .buffer_unordered(CASCADE_DELETES)
            .collect()
            .await;
        outcomes.into_iter().collect()
    }

    /// Deletes subnamespace `name` (if its uid is still `uid`) because `terminating`, above it,
    /// terminates; holds it for its own subnamespaces first when `hold`.
    async fn delete_below(
        &self,
        terminating: &str,
        hold: bool,
        name: String,
        uid: Option<String>,
    ) -> Result<(), Error> {
        tracing::info!(namespace = %name, %terminating, "deleting a subnamespace with its terminating ancestor");
        match self.writer.delete(&name, uid, hold, false).await {
            // Gone already, already terminating, or another namespace of that name now.
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 || e.code == 409 => Ok(()),
            Err(source) => {
                let error = Error::Cascade { namespace: name, source };
                tracing::warn!(%error, "cascading deletion failed; retrying");
                Err(error)
            }
        }
    }

    /// Queues `ns` again when a hold or a membership mark on it outlives its grace: nothing
    /// else changes then to prompt a look.
    fn look_again_later(&self, ns: &str) {
        let left = self.cache.read().get(ns).and_then(|node| node.look_again_in(jiff::Timestamp::now()));
        if let Some(left) = left {
            let (queue, ns) = (self.queue.clone(), ns.to_string());
            tokio::spawn(async move {
                tokio::time::sleep(left + std::time::Duration::from_secs(1)).await;
                queue.push([ns]);
            });
        }
    }

    /// Brings one namespace's metadata and propagated objects to what the hierarchy wants.
    async fn reconcile(&self, ns: &str) -> Result<(), Error> {
        self.cascade(ns).await?;
        let due = {
            let forest = self.cache.read();
            upkeep::due(&forest, &self.policy, ns, jiff::Timestamp::now())
        };
        if let Some(due) = due {
            self.metrics.namespace_writes.inc();
            match self.writer.patch(ns, &due.patch, false).await {
                Ok(updated) => {
                    // The next look at this namespace must see this write, not the old labels.
                    self.cache.caught_up_with(&updated).await;
                    if due.reverts_forgery {
                        // The condition lasts only until this revert is seen; the count stays.
                        self.metrics.forgeries_reverted.inc();
                    }
                    for c in &due.new_conditions {
                        self.events.condition(ns, due.uid.clone(), c).await;
                    }
                }
                Err(e) if e.code == 404 => return Ok(()),
                Err(source) => return Err(Error::Namespace { namespace: ns.to_string(), source }),
            }
        }
        self.look_again_later(ns);
        let mut result = self.resource_quota(ns).await;
        for syncer in self.propagation.syncers().iter().filter(|s| s.is_synced()) {
            let (actions, unreadable) = {
                let forest = self.cache.read();
                let objects = syncer.objects();
                let actions = crate::propagation::actions::actions(
                    &forest,
                    &self.policy,
                    &objects,
                    &syncer.resource.kind,
                    syncer.mode(),
                    ns,
                );
                (actions, crate::propagation::actions::unreadable(&self.policy, &objects, syncer.mode(), ns))
            };
            for (source, error) in unreadable {
                tracing::warn!(kind = %syncer.resource.kind, namespace = %ns, name = ?source.metadata.name, %error,
                    "CannotParseSelector: not propagated");
                let (api_version, kind) = (&syncer.resource.api_version, &syncer.resource.kind);
                self.events
                    .cannot_parse_selector(api_version, kind, &source.metadata, &error.to_string())
                    .await;
            }
            for action in actions {
                if let Err(error) = self.apply(syncer, ns, action).await {
                    result = Err(error);
                }
            }
        }
        result
    }

    /// Brings the namespace's ResourceQuota to the limits of the quotas above it. A failed
    /// write is told on each of those quotas, as HNC does (`CannotWriteResourceQuota`).
    async fn resource_quota(&self, ns: &str) -> Result<(), Error> {
        let (action, covering) = {
            let forest = self.cache.read();
            let covering = forest.quotas_covering(ns);
            let action = quota_limits::plan(&forest, ns, &covering);
            let covering: Vec<(String, String, String)> = covering
                .into_iter()
                .map(|(n, q, stored)| (n.to_string(), q.to_string(), stored.uid.clone()))
                .collect();
            (action, covering)
        };
        let Err(source) = quota_limits::apply(&self.client, ns, action).await else { return Ok(()) };
        if source.code != 409 {
            for (quota_ns, name, uid) in &covering {
                self.events.cannot_write_resource_quota(quota_ns, name, uid, ns, &source.message).await;
            }
        }
        let error = Error::ResourceQuota { namespace: ns.to_string(), source };
        tracing::warn!(%error, "ResourceQuota write failed");
        Err(error)
    }

    /// Makes one propagation write.
    async fn apply(&self, syncer: &Syncer, ns: &str, action: Action) -> Result<(), Error> {
        let api = syncer.api(&self.client, ns);
        let (name, source_namespace) = action.target();
        let (name, source_namespace) = (name.to_string(), source_namespace.to_string());
        let copy = events::CopyRef {
            api_version: &syncer.resource.api_version,
            kind: &syncer.resource.kind,
            name: &name,
            source_namespace: &source_namespace,
            destination: ns,
        };
        let (action_name, act) = match &action {
            Action::Create(_) => ("create", "write"),
            Action::Update(_) => ("update", "write"),
            Action::Delete { .. } => ("delete", "remove"),
            Action::Conflict { .. } => ("conflict", ""),
        };
        self.metrics
            .object_writes
            .get_or_create(&crate::metrics::WriteLabels {
                kind: copy.kind.to_string(),
                action: action_name.into(),
            })
            .inc();
        let outcome = match action {
            Action::Create(obj) => api.create(&PostParams::default(), &obj).await.map(|o| syncer.observe(o)),
            Action::Update(obj) => {
                api.replace(&name, &PostParams::default(), &obj).await.map(|o| syncer.observe(o))
            }
            Action::Delete { uid, .. } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions { uid, resource_version: None }),
                    ..Default::default()
                };
                api.delete(&name, &dp).await.map(|_| ())
            }
            Action::Conflict { .. } => {
                tracing::warn!(kind = copy.kind, namespace = %ns, %name, source = %source_namespace,
                    "CannotPropagateObject: the namespace has its own object of that name; not overwritten");
                self.events.conflict(&copy).await;
                return Ok(());
            }
        };
        let source = match outcome {
            Ok(()) => return Ok(()),
            // Gone already, or made already: the watch tells us what is there.
            Err(kube::Error::Api(s)) if s.code == 404 || (s.code == 409 && s.reason == "AlreadyExists") => {
                return Ok(())
            }
            Err(source) => source,
        };
        // A conflict only means our copy of the object was stale, and the watch brings the new
        // one; anything else (a quota, a webhook, a missing permission) people must see.
        let race = matches!(&source, kube::Error::Api(s) if s.code == 409);
        if !race {
            let labels =
                crate::metrics::WriteLabels { kind: copy.kind.to_string(), action: action_name.into() };
            self.metrics.object_write_errors.get_or_create(&labels).inc();
        }
        if let kube::Error::Api(s) = &source {
            if s.code != 409 {
                self.events.write_failed(&copy, act, &s.message).await;
            }
        }
        let error =
            Error::Propagation { kind: copy.kind.to_string(), name, namespace: ns.to_string(), source };
        tracing::warn!(%error, "propagation write failed");
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue's next name; a test fails rather than hangs when none comes.
    async fn next(q: &Queue) -> Claim<'_> {
        tokio::time::timeout(std::time::Duration::from_secs(5), q.pop()).await.expect("a name within 5 s")
    }

    #[tokio::test]
    async fn the_queue_deduplicates_and_keeps_order() {
        let q = Queue::default();
        q.push(["a", "b", "a"]);
        assert_eq!(q.len(), 2);
        drop(next(&q).await);
        q.push(["a"]);
        assert_eq!(&**next(&q).await, "b");
        assert_eq!(&**next(&q).await, "a");
        assert!(q.is_empty());
        q.push((0..5_000).map(|i| i.to_string()));
        while !q.is_empty() {
            drop(next(&q).await);
        }
        assert!(q.items.lock().unwrap().order.capacity() <= QUEUE_ROOM_KEPT, "its room given back");
    }

    #[tokio::test]
    async fn a_name_queued_while_a_worker_has_it_waits_for_that_worker() {
        let q = Queue::default();
        q.push(["a", "b"]);
        let a = next(&q).await;
        q.push(["a"]);
        assert_eq!(q.len(), 2, "a waits, though no worker may take it yet");
        assert_eq!(&**next(&q).await, "b");
        assert!(q.try_pop().is_none(), "a is not handed to a second worker");
        drop(a);
        assert_eq!(&**next(&q).await, "a", "a goes on once its worker is done");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_name_not_queued_again_is_done_for_good() {
        let q = Queue::default();
        q.push(["a"]);
        drop(next(&q).await);
        assert!(q.is_empty());
        assert!(q.try_pop().is_none());
    }

    #[tokio::test]
    async fn a_worker_that_panics_gives_its_name_back() {
        let q = Arc::new(Queue::default());
        q.push(["a"]);
        let worker = q.clone();
        let panicked = tokio::spawn(async move {
            let _a = next(&worker).await;
            panic!("a bug in a reconcile");
        });
        assert!(panicked.await.is_err());
        q.push(["a"]);
        assert_eq!(&**next(&q).await, "a", "queued again, it is handed out again");
    }
}
