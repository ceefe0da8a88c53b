//! Policy propagation: copies of objects flow from each namespace to its descendants.
//!
//! One [`Syncer`] per propagated kind (Roles and RoleBindings always, plus what the
//! HNCConfiguration lists) watches every object of that kind into memory. The controller asks
//! [`actions::actions`] what one namespace needs and writes it; the syncers tell it which
//! namespaces to look at when objects change. A kind whose first list has not finished is never
//! acted on, so a restart never deletes copies for want of having seen their sources.

pub mod actions;
pub mod copies;
pub mod exceptions;
pub mod overwrites;
pub mod rights;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use futures::{StreamExt, TryStreamExt};
use hns_api::{HNCConfigurationSpec, ResourceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList, Condition, Time};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::task::JoinHandle;

use crate::hierarchy::forest::Forest;
use crate::hierarchy::policy::Policy;
use crate::hierarchy::rules::Refusal;
use crate::resource_version;
use crate::store::cache::Change;
pub use actions::{Action, Objects};
use hns_api::config::Mode;

/// A propagated kind: API group and plural resource name.
pub type Kind = (String, String);

/// Kinds that always propagate (HNC's enforced types).
pub const ENFORCED: &[(&str, &str)] =
    &[("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings")];

/// Every object of one kind, kept current by a watch.
pub struct Syncer {
    /// The kind's API resource (group, version, kind, plural).
    pub resource: ApiResource,
    mode: AtomicU8,
    objects: RwLock<Objects>,
    synced: AtomicBool,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Syncer {
    /// The kind's current mode.
    pub fn mode(&self) -> Mode {
        Mode::ALL[usize::from(self.mode.load(Ordering::Relaxed))]
    }

    fn set_mode(&self, m: Mode) {
        let index = Mode::ALL.iter().position(|x| *x == m).expect("every mode is in Mode::ALL");
        self.mode.store(index as u8, Ordering::Relaxed);
    }

    /// Whether the first full list has arrived.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Read access to the objects. Hold briefly, never across an `.await`.
    pub fn objects(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A syncer for `resource` in `mode`, not synced and not watching yet.
    fn new(resource: ApiResource, mode: Mode) -> Self {
        let syncer = Syncer {
            resource,
            mode: AtomicU8::new(0),
            objects: RwLock::default(),
            synced: AtomicBool::new(false),
            task: std::sync::Mutex::new(None),
        };
        syncer.set_mode(mode);
        syncer
    }

    /// Records a write's result before the watch brings it, unless the watch has already brought
    /// a newer version (someone changed the object right after our write).
    pub fn observe(&self, obj: DynamicObject) {
        insert_if_newer(&mut self.objects.write().unwrap_or_else(|e| e.into_inner()), obj);
    }

    /// Applies one watch event to the objects and returns what the controller must look at.
    ///
    /// The objects are updated *before* the change is returned: the controller may plan the
    /// moment it hears of a change, and a plan made from objects that do not hold the change yet
    /// would miss it for good (a new source's first descendants never getting their copy).
    fn record(&self, event: Event<DynamicObject>, relist: &mut Vec<DynamicObject>) -> Option<Change> {
        let mut objects = self.objects.write().unwrap_or_else(|e| e.into_inner());
        match event {
            Event::Init => {
                relist.clear();
                None
            }
            Event::InitApply(o) => {
                relist.push(copies::held(o));
                None
            }
            Event::InitDone => {
                *objects = std::mem::take(relist).into_iter().map(|o| (key(&o), Arc::new(o))).collect();
                self.synced.store(true, Ordering::Release);
                tracing::info!(kind = %self.resource.kind, objects = objects.len(), "objects synced");
                Some(Change::All)
            }
            Event::Apply(o) => {
                // A version we already hold (our own write, recorded from its response) or an
                // older one needs no second look; anything else does.
                let change = Change::Objects { namespace: key(&o).0, source: !copies::is_copy(&o) };
                insert_if_newer(&mut objects, o).then_some(change)
            }
            Event::Delete(o) => {
                objects.remove(&key(&o));
                Some(Change::Objects { namespace: key(&o).0, source: !copies::is_copy(&o) })
            }
        }
    }

    /// Counts of sources and copies (for the configuration's status).
    pub fn counts(&self) -> (usize, usize) {
        let objects = self.objects();
        let copies = objects.values().filter(|o| copies::is_copy(o)).count();
        (objects.len() - copies, copies)
    }

    /// The API for writing objects of this kind in `ns`.
    pub fn api(&self, client: &Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &self.resource)
    }
}

/// The object's key in [`Objects`].
fn key(o: &DynamicObject) -> (String, String) {
    (o.metadata.namespace.clone().unwrap_or_default(), o.metadata.name.clone().unwrap_or_default())
}

/// Puts `obj` in `objects` unless they hold that version of it or a newer one; whether it did.
/// (An object without a resourceVersion always goes in.)
fn insert_if_newer(objects: &mut Objects, obj: DynamicObject) -> bool {
    let rv = resource_version::number(&obj.metadata);
    if rv != 0 && objects.get(&key(&obj)).is_some_and(|held| resource_version::number(&held.metadata) >= rv) {
        return false;
    }
    objects.insert(key(&obj), Arc::new(copies::held(obj)));
    true
}

async fn watch(
    client: Client,
    syncer: Arc<Syncer>,
    changes: tokio::sync::broadcast::Sender<Change>,
    relook: Arc<tokio::sync::Notify>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &syncer.resource);
    let mut stream = watcher::watcher(api, crate::watching::config()).default_backoff().boxed();
    let mut relist: Vec<DynamicObject> = Vec::new();
    loop {
        match stream.try_next().await {
            Ok(Some(event)) => {
                if let Some(change) = syncer.record(event, &mut relist) {
                    let _ = changes.send(change);
                }
            }
            Ok(None) => return,
            Err(error) => {
                // A kind whose CustomResourceDefinition went away fails here first.
                relook.notify_one();
                tracing::warn!(%error, kind = %syncer.resource.kind, "object watch failed; retrying")
            }
        }
    }
}

/// The largest moving subtree whose objects a move's check lists afresh
/// ([`Propagation::overwrites_of_move`]); a larger one is judged from the watches alone.
const FRESH_NAMESPACES: usize = 32;

/// How often configured kinds the cluster does not serve are looked up again: a CRD can come
/// back with no change to the configuration. (One that goes away makes its watch fail, which
/// prompts a look at once: [`Propagation::relook`].)
pub const REFRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// A configured kind hns cannot propagate: one of HNC's `BadConfiguration` conditions.
#[derive(Debug)]
struct Problem {
    reason: &'static str,
    message: String,
    since: jiff::Timestamp,
}

/// The propagated kinds and their syncers.
pub struct Propagation {
    client: Client,
    syncers: RwLock<BTreeMap<Kind, Arc<Syncer>>>,
    /// Configured kinds the cluster does not serve as namespaced kinds.
    problems: RwLock<BTreeMap<Kind, Problem>>,
    changes: tokio::sync::broadcast::Sender<Change>,
    /// Told when a kind's watch fails: the kinds are to be looked up again.
    relook: Arc<tokio::sync::Notify>,
}

impl Propagation {
    /// No kinds yet; [`Propagation::configure`] starts them.
    pub fn new(client: Client, changes: tokio::sync::broadcast::Sender<Change>) -> Self {
        let relook = Arc::default();
        Propagation { client, syncers: RwLock::default(), problems: RwLock::default(), changes, relook }
    }

    /// Waits until the kinds need looking up again: a kind's watch failed or, while a configured
    /// kind is not served, [`REFRESH`] has passed. Nothing to wait for otherwise.
    pub async fn relook(&self) {
        let problems = !self.problems.read().unwrap_or_else(|e| e.into_inner()).is_empty();
        tokio::select! {
            _ = self.relook.notified() => {}
            _ = tokio::time::sleep(REFRESH), if problems => {}
        }
    }

    /// The syncers, in kind order.
    pub fn syncers(&self) -> Vec<Arc<Syncer>> {
        self.syncers.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// The syncer of `resource` in `group` when its objects propagate (in `Propagate` or
    /// `AllowPropagate` mode).
    pub fn propagating(&self, group: &str, resource: &str) -> Option<Arc<Syncer>> {
        self.syncers().into_iter().find(|s| {
            s.resource.group == group
                && s.resource.plural == resource
                && matches!(s.mode(), Mode::Propagate | Mode::AllowPropagate)
        })
    }

    /// The kinds, modes and counts, for the configuration's status.
    pub fn status(&self) -> Vec<ResourceStatus> {
        self.syncers()
            .iter()
            .map(|s| {
                let (sources, copies) = s.counts();
                ResourceStatus {
                    group: s.resource.group.clone(),
                    version: s.resource.version.clone(),
                    resource: s.resource.plural.clone(),
                    mode: s.mode().as_str().to_string(),
                    num_propagated_objects: Some(copies as i32),
                    num_source_objects: Some(sources as i32),
                }
            })
            .collect()
    }

    /// HNC's `BadConfiguration` conditions: configured kinds that are not propagated because the
    /// cluster does not serve them (`ResourceNotFound`) or serves them cluster-wide
    /// (`ResourceNotNamespaced`).
    pub fn conditions(&self) -> Vec<Condition> {
        let problems = self.problems.read().unwrap_or_else(|e| e.into_inner());
        problems
            .values()
            .map(|p| Condition {
                type_: "BadConfiguration".into(),
                status: "True".into(),
                reason: p.reason.into(),
                message: p.message.clone(),
                last_transition_time: Time(p.since),
                observed_generation: None,
            })
            .collect()
    }

    /// Follows `spec`: starts syncers for listed kinds the cluster serves, stops those no longer
    /// listed or no longer served (their copies stay, as with HNC's `Ignore`), sets modes, and
    /// records why a listed kind is not propagated. Called on every change of the configuration
    /// and every [`REFRESH`].
    pub async fn configure(&self, spec: &HNCConfigurationSpec) {
        let mut wanted: BTreeMap<Kind, Mode> =
            ENFORCED.iter().map(|(g, r)| ((g.to_string(), r.to_string()), Mode::Propagate)).collect();
        for r in &spec.resources {
            wanted.entry((r.group.clone(), r.resource.clone())).or_insert(Mode::effective(r.mode.as_deref()));
        }
        let current: Vec<Kind> =
            self.syncers.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        for kind in current.iter().filter(|k| !wanted.contains_key(*k)) {
            self.stop(kind, "stopped propagating: no longer configured");
        }
        self.problems.write().unwrap_or_else(|e| e.into_inner()).retain(|k, _| wanted.contains_key(k));
        let mut discovery = Discovery::new(&self.client);
        for (kind, mode) in wanted {
            let existing = self.syncers.read().unwrap_or_else(|e| e.into_inner()).get(&kind).cloned();
            let enforced = ENFORCED.iter().any(|(g, r)| (*g, *r) == (kind.0.as_str(), kind.1.as_str()));
            if let Some(s) = existing.as_ref().filter(|_| enforced) {
                s.set_mode(mode); // always served: no need to look it up again
                continue;
            }
            match discovery.find(&kind.0, &kind.1).await {
                Ok(Some((resource, true))) => {
                    self.problems.write().unwrap_or_else(|e| e.into_inner()).remove(&kind);
                    match existing {
                        Some(s) if s.mode() != mode => {
                            s.set_mode(mode);
                            let _ = self.changes.send(Change::All);
                        }
                        Some(_) => {}
                        None => self.start(kind, resource, mode),
                    }
                }
                Ok(found) => {
                    let (g, r) = (&kind.0, &kind.1);
                    let (reason, message) = match found {
                        Some(_) => (
                            "ResourceNotNamespaced",
                            format!("Resource \"{r}\" in group \"{g}\" is cluster-scoped; only namespaced kinds can propagate"),
                        ),
                        None => (
                            "ResourceNotFound",
                            format!("Resource \"{r}\" in group \"{g}\" is not served by the cluster (is its CustomResourceDefinition installed?); its objects are not propagated until it is"),
                        ),
                    };
                    self.stop(
                        &kind,
                        "stopped propagating: the cluster does not serve it as a namespaced kind",
                    );
                    self.record(kind, reason, message);
                }
                Err(error) => {
                    tracing::warn!(%error, group = %kind.0, resource = %kind.1, "cannot look the kind up; keeping it as it is")
                }
            }
        }
    }

    fn start(&self, kind: Kind, resource: ApiResource, mode: Mode) {
        let syncer = Arc::new(Syncer::new(resource, mode));
        let task = tokio::spawn(watch(
            self.client.clone(),
            syncer.clone(),
            self.changes.clone(),
            self.relook.clone(),
        ));
        *syncer.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        tracing::info!(kind = %syncer.resource.kind, mode = mode.as_str(), "propagating");
        self.syncers.write().unwrap_or_else(|e| e.into_inner()).insert(kind, syncer);
    }

    fn stop(&self, kind: &Kind, why: &str) {
        if let Some(s) = self.syncers.write().unwrap_or_else(|e| e.into_inner()).remove(kind) {
            if let Some(t) = s.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.abort();
            }
            tracing::info!(kind = %s.resource.kind, "{why}");
        }
    }

    /// What making `parent` the parent of `ns` would have propagation overwrite, of every kind
    /// that propagates, with the kind as HNC names it; `before` is the forest now and `after` the
    /// forest after the move. Refused as not synced while a kind that may propagate has not been
    /// listed yet: nothing would be found in it.
    ///
    /// The objects of the moving subtree are listed afresh when it is small
    /// ([`FRESH_NAMESPACES`]): an object created there a moment ago must be in the way, even if
    /// another replica took its create and this one's watch has not brought it yet. (Were one
    /// missed, the move would go through and the copy would not overwrite it: the controller
    /// reports the conflict instead.)
    pub async fn overwrites_of_move(
        &self,
        before: &Forest,
        after: &Forest,
        policy: &Policy,
        ns: &str,
    ) -> Result<Vec<(String, overwrites::Overwrite)>, Refusal> {
        let subtree: Vec<String> =
            std::iter::once(ns.to_string()).chain(before.descendant_names(ns)).collect();
        let mut found = Vec::new();
        for syncer in self.syncers() {
            let mode = syncer.mode();
            if !matches!(mode, Mode::Propagate | Mode::AllowPropagate) {
                continue;
            }
            if !syncer.is_synced() {
                return Err(Refusal::NotSynced(format!(
                    "hns has not listed the {} objects yet, so it cannot tell whether this change would overwrite any - please try again in a few moments.",
                    syncer.resource.kind
                )));
            }
            let kind = format!("{}, Kind={}", syncer.resource.api_version, syncer.resource.kind);
            let mut objects = syncer.objects().clone();
            if subtree.len() <= FRESH_NAMESPACES {
                self.list_afresh(&syncer, &subtree, &mut objects).await;
            }
            for o in overwrites::after_move(before, after, policy, &objects, &syncer.resource.kind, mode, ns)
            {
                found.push((kind.clone(), o));
            }
        }
        Ok(found)
    }

    /// The objects in descendants of `source`'s namespace that its copies would newly overwrite
    /// once it is written, for the sources webhook. Only objects of its name can be in the way,
    /// so only those are looked at (in its ancestry and subtree), from this replica's watch of
    /// the kind: a kind not propagated, or not listed yet, finds nothing (the webhook fails open,
    /// and the controller reports a conflict it finds later as an event).
    pub fn overwrites_of_source(
        &self,
        forest: &Forest,
        policy: &Policy,
        (group, resource): (&str, &str),
        source: &DynamicObject,
        old: Option<&DynamicObject>,
    ) -> Vec<overwrites::Overwrite> {
        let (Some(ns), Some(name)) = (source.metadata.namespace.as_deref(), source.metadata.name.as_deref())
        else {
            return Vec::new();
        };
        let Some(syncer) = self.propagating(group, resource).filter(|s| s.is_synced()) else {
            return Vec::new();
        };
        let related: Vec<String> =
            forest.ancestry_names(ns).into_iter().chain(forest.descendant_names(ns)).collect();
        let mut before: Objects = {
            let objects = syncer.objects();
            related
                .iter()
                .filter_map(|n| {
                    let key = (n.clone(), name.to_string());
                    objects.get(&key).map(|o| (key, o.clone()))
                })
                .collect()
        };
        let here = (ns.to_string(), name.to_string());
        // What the update replaces is the request's old object, whatever this replica's watch
        // has brought so far; a create replaces nothing.
        match old {
            Some(old) => before.insert(here.clone(), Arc::new(old.clone())),
            None => before.remove(&here),
        };
        let mut after = before.clone();
        after.insert(here, Arc::new(source.clone()));
        overwrites::after_source_change(
            forest,
            policy,
            &before,
            &after,
            &syncer.resource.kind,
            syncer.mode(),
            ns,
        )
    }

    /// Replaces `objects`' view of `namespaces` by what kube-apiserver lists there now; a
    /// namespace whose list fails keeps the watch's view.
    async fn list_afresh(&self, syncer: &Syncer, namespaces: &[String], objects: &mut Objects) {
        for ns in namespaces {
            match syncer.api(&self.client, ns).list(&kube::api::ListParams::default()).await {
                Ok(list) => {
                    objects.retain(|(n, _), _| n != ns);
                    for obj in list.items {
                        objects.insert(key(&obj), Arc::new(copies::held(obj)));
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, namespace = %ns, kind = %syncer.resource.kind, "cannot list afresh; judging from the watch")
                }
            }
        }
    }

    /// Records a problem with `kind`, keeping the time it first appeared.
    fn record(&self, kind: Kind, reason: &'static str, message: String) {
        let mut problems = self.problems.write().unwrap_or_else(|e| e.into_inner());
        if problems.get(&kind).is_some_and(|p| p.reason == reason) {
            return;
        }
        tracing::warn!(group = %kind.0, resource = %kind.1, reason, "{message}");
        problems.insert(kind, Problem { reason, message, since: jiff::Timestamp::now() });
    }
}

/// The API resource of namespaced `resource` in `group` at the group's preferred version.
pub async fn resolve(
    client: &Client,
    group: &str,
    resource: &str,
) -> Result<Option<ApiResource>, kube::Error> {
    Ok(discover(client, group, resource).await?.filter(|(_, namespaced)| *namespaced).map(|(r, _)| r))
}

/// `resource` in `group` as the cluster serves it (preferred version), and whether it is
/// namespaced; `None` when the cluster does not serve it.
pub async fn discover(
    client: &Client,
    group: &str,
    resource: &str,
) -> Result<Option<(ApiResource, bool)>, kube::Error> {
    Discovery::new(client).find(group, resource).await
}

/// Lookups of served kinds that read the cluster's list of API groups once for all of them.
pub struct Discovery<'a> {
    client: &'a Client,
    groups: Option<APIGroupList>,
}

impl<'a> Discovery<'a> {
    /// Nothing read yet.
    pub fn new(client: &'a Client) -> Self {
        Discovery { client, groups: None }
    }

    /// `resource` in `group`, as [`discover`] describes.
    pub async fn find(
        &mut self,
        group: &str,
        resource: &str,
    ) -> Result<Option<(ApiResource, bool)>, kube::Error> {
        let Some((group_version, list)) = self.resources(group).await? else { return Ok(None) };
        let Some(r) = list.resources.iter().find(|r| r.name == resource) else { return Ok(None) };
        let version = group_version.rsplit('/').next().unwrap_or("v1").to_string();
        let found = ApiResource {
            group: group.to_string(),
            version,
            api_version: group_version.clone(),
            kind: r.kind.clone(),
            plural: r.name.clone(),
        };
        Ok(Some((found, r.namespaced)))
    }

    /// The resource of `group` that `name` means as kubectl reads it (a kind, a singular or a
    /// short name: `secret`, `Secret`, `cm`), where `name` is not a resource itself: what to
    /// suggest instead.
    pub async fn meant(&mut self, group: &str, name: &str) -> Result<Option<String>, kube::Error> {
        let Some((_, list)) = self.resources(group).await? else { return Ok(None) };
        let lower = name.to_ascii_lowercase();
        let meant = list.resources.iter().filter(|r| !r.name.contains('/')).find(|r| {
            r.singular_name == lower
                || r.kind.to_ascii_lowercase() == lower
                || r.short_names.iter().flatten().any(|s| *s == lower)
        });
        Ok(meant.map(|r| r.name.clone()))
    }

    /// The group's preferred version and its resources; `None` if the cluster does not serve it.
    async fn resources(&mut self, group: &str) -> Result<Option<(String, APIResourceList)>, kube::Error> {
        if group.is_empty() {
            return Ok(Some(("v1".to_string(), self.client.list_core_api_resources("v1").await?)));
        }
        if self.groups.is_none() {
            self.groups = Some(self.client.list_api_groups().await?);
        }
        let Some(gv) = self
            .groups
            .iter()
            .flat_map(|g| &g.groups)
            .find(|g| g.name == group)
            .and_then(|g| g.preferred_version.clone().or_else(|| g.versions.first().cloned()))
        else {
            return Ok(None);
        };
        let list = self.client.list_api_group_resources(&gv.group_version).await?;
        Ok(Some((gv.group_version, list)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagation::copies::testing::obj;
    use crate::propagation::copies::INHERITED_FROM;
    use serde_json::json;

    fn syncer() -> Syncer {
        let resource = ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "RoleBinding".into(),
            plural: "rolebindings".into(),
        };
        Syncer::new(resource, Mode::Propagate)
    }

    fn at(mut o: DynamicObject, rv: &str) -> DynamicObject {
        o.metadata.resource_version = Some(rv.into());
        o
    }

    fn source(rv: &str) -> DynamicObject {
        at(obj("root", "rb", &[], &[], json!({"subjects": []})), rv)
    }

    fn copy(rv: &str) -> DynamicObject {
        at(obj("child", "rb", &[(INHERITED_FROM, "root")], &[], json!({"subjects": []})), rv)
    }

    fn synced() -> (Syncer, Vec<DynamicObject>) {
        let (s, mut relist) = (syncer(), Vec::new());
        assert!(s.record(Event::Init, &mut relist).is_none());
        assert!(matches!(s.record(Event::InitDone, &mut relist), Some(Change::All)));
        assert!(s.is_synced());
        (s, relist)
    }

    fn held_rv(s: &Syncer, ns: &str) -> Option<String> {
        s.objects().get(&(ns.to_string(), "rb".to_string())).and_then(|o| o.metadata.resource_version.clone())
    }

    /// The regression behind a CI failure: the controller heard of a new source, planned the
    /// source's first children before the syncer held the source, and they never got a copy.
    #[test]
    fn a_change_is_announced_only_once_the_objects_hold_it() {
        let (s, mut relist) = synced();
        let change = s.record(Event::Apply(source("10")), &mut relist);
        assert!(
            matches!(change, Some(Change::Objects { ref namespace, source: true }) if namespace == "root")
        );
        assert_eq!(held_rv(&s, "root").as_deref(), Some("10"));
        let change = s.record(Event::Delete(source("11")), &mut relist);
        assert!(
            matches!(change, Some(Change::Objects { ref namespace, source: true }) if namespace == "root")
        );
        assert_eq!(held_rv(&s, "root"), None);
    }

    #[test]
    fn our_own_writes_and_older_versions_need_no_second_look() {
        let (s, mut relist) = synced();
        s.observe(copy("20"));
        assert!(s.record(Event::Apply(copy("20")), &mut relist).is_none(), "our own write");
        assert!(s.record(Event::Apply(copy("19")), &mut relist).is_none(), "older than held");
        assert_eq!(held_rv(&s, "child").as_deref(), Some("20"));
        let change = s.record(Event::Apply(copy("21")), &mut relist);
        assert!(
            matches!(change, Some(Change::Objects { ref namespace, source: false }) if namespace == "child")
        );
    }

    #[test]
    fn a_write_response_never_replaces_a_newer_version_from_the_watch() {
        let (s, mut relist) = synced();
        s.record(Event::Apply(copy("31")), &mut relist);
        s.observe(copy("30"));
        assert_eq!(held_rv(&s, "child").as_deref(), Some("31"));
    }

    #[test]
    fn a_partial_relist_is_not_used() {
        let (s, mut relist) = synced();
        s.record(Event::Apply(source("40")), &mut relist);
        s.record(Event::Init, &mut relist);
        s.record(Event::InitApply(copy("41")), &mut relist);
        assert_eq!(held_rv(&s, "root").as_deref(), Some("40"), "the old objects until the list ends");
        s.record(Event::InitDone, &mut relist);
        assert_eq!(held_rv(&s, "root"), None);
        assert_eq!(held_rv(&s, "child").as_deref(), Some("41"));
    }
}
