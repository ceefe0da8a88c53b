//! The forest: the whole hierarchy in memory.
//!
//! Every component (the API handlers, the admission webhook, the controller) asks the forest
//! instead of re-deriving the hierarchy from the API. The forest is a cache of the cluster's
//! Namespace objects and nothing else: it is fed only by the namespace watch (see
//! [`crate::store::cache`]) and it does no I/O, so every query is a pure function that unit tests can
//! check without a cluster.
//!
//! ```text
//!   Namespace objects ──watch──► Forest { nodes: name → Node, children: parent → {child} }
//!                                   ▲ queries: parent, children, ancestry, cycles
//!                     API handlers ─┘ webhook, controller
//! ```
//!
//! A namespace may name a parent that does not exist (yet), and a cycle may be restored from a
//! backup; every traversal here stops on a repeat, so both are safe to query.
//!
//! Only sealed hierarchy state is honoured (see [`crate::hierarchy::seal`]): a namespace whose hierarchy
//! annotations hns did not write keeps the last sealed state the forest saw of it (or none), and
//! says so in [`Node::forgery`] for the controller to report and revert.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use hns_api::{keys, MetaKvp};

use crate::hierarchy::children::Children;
use crate::hierarchy::namespace_meta::{NamespaceMeta, Pairs};
use crate::hierarchy::seal::{Sealer, Verdict};
use crate::hierarchy::tree_labels::TreeLabels;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// Namespaces [`Forest::reaches_root`] walks up before it leaves the question to the walks that
/// remember what they saw: hierarchies are seldom more than a few levels deep, so a longer chain
/// is a cycle, or rare enough to pay for the careful walk.
const SHORT_WALK: usize = 128;

/// A Namespace object without its managed fields, spec and status: nothing in the forest reads
/// them, and managed fields (and, while a namespace terminates, its status conditions) are most
/// of a namespace's bytes; nor `kubectl apply`'s copy of it. What a [`Node`] keeps of a namespace.
fn trimmed(mut ns: Namespace) -> Namespace {
    ns.metadata.managed_fields = None;
    ns.spec = None;
    ns.status = None;
    // `kubectl apply`'s copy of the whole object (namespaces kept in Git carry one): hns only
    // ever merge-patches namespaces, and reads no annotation it does not own.
    if let Some(annotations) = ns.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    ns
}

/// The annotation `kubectl apply` keeps its last applied configuration in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One namespace as the forest sees it.
#[derive(Debug, Clone)]
pub struct Node {
    /// The last observed Namespace object's metadata (uid, resourceVersion, timestamps, …),
    /// without its tree labels: its spec and status hns does not read.
    pub meta: NamespaceMeta,
    /// The parent named by the namespace's annotations, whether or not it exists.
    pub parent: Option<String>,
    /// Whether the namespace is a subnamespace (annotation `hnc.x-k8s.io/subnamespace-of`).
    pub is_subnamespace: bool,
    /// `spec.allowCascadingDeletion` of its hierarchy configuration.
    pub allow_cascading_deletion: bool,
    /// The facts few namespaces have, if this one has any (see [`Node::managed_labels`] and
    /// the other accessors).
    extras: Option<Box<Extras>>,
    /// The resourceVersion of the last change to this namespace's set of children.
    pub children_rv: u64,
    /// The namespace's tree labels, kept apart from [`Node::meta`]'s labels.
    pub tree_labels: Arc<TreeLabels>,
}

/// The hierarchy facts most namespaces do not have, boxed together: a namespace without any
/// pays one pointer for them instead of the room of every map and list.
#[derive(Debug, Clone, Default, PartialEq)]
struct Extras {
    /// `spec.labels`: labels managed through the hierarchy.
    managed_labels: Vec<MetaKvp>,
    /// `spec.annotations`: annotations managed through the hierarchy.
    managed_annotations: Vec<MetaKvp>,
    /// Labels and annotations of the HierarchyConfiguration object itself.
    hierarchy_meta: ObjectLabels,
    /// Labels and annotations of the Subnamespace object of this namespace.
    subnamespace_meta: ObjectLabels,
    /// The HierarchicalResourceQuotas in this namespace, by name.
    quotas: BTreeMap<String, StoredQuota>,
    /// Hierarchy annotations on the namespace that hns did not write (their keys): the facts
    /// are then the last sealed ones, not what the annotations say.
    forgery: Option<Vec<String>>,
}

/// How long a hold may stand on a namespace that is not being deleted. hns holds a namespace
/// just before it is deleted, and the deletion commits within kube-apiserver's request timeout
/// (60 s by default) or not at all: a hold older than this on a live namespace was made for a
/// deletion that never came (refused by a later webhook, or a forged admission review), and the
/// controller takes it back.
pub const HOLD_GRACE: std::time::Duration = std::time::Duration::from_secs(90);

/// How long the controller keeps the membership hns marks on a parent before it gains its first
/// child ([`keys::MARKED_AT`]) while the child is not there yet: the create or move that follows
/// the mark commits within kube-apiserver's request timeout (60 s by default) or not at all.
pub const MARK_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// How far ahead of a replica's clock a time hns wrote may be (another replica's clock running
/// ahead); one further ahead was not written by hns, and counts as none.
const CLOCKS_APART: std::time::Duration = std::time::Duration::from_secs(300);

/// What a namespace without extras has.
static NO_EXTRAS: Extras = Extras {
    managed_labels: Vec::new(),
    managed_annotations: Vec::new(),
    hierarchy_meta: ObjectLabels::NONE,
    subnamespace_meta: ObjectLabels::NONE,
    quotas: BTreeMap::new(),
    forgery: None,
};

impl Extras {
    /// `self` boxed, or nothing when it holds nothing.
    fn boxed(self) -> Option<Box<Extras>> {
        (self != NO_EXTRAS).then(|| Box::new(self))
    }
}

/// Labels, annotations and managed fields of a derived object (a HierarchyConfiguration or a
/// Subnamespace), kept on the namespace because hns stores nothing else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLabels {
    /// `metadata.labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.managedFields`, in hns's compact form.
    #[serde(default, rename = "managedFields", skip_serializing_if = "Vec::is_empty")]
    pub managed_fields: Vec<crate::ssa::Entry>,
}

impl ObjectLabels {
    /// No labels, annotations or managed fields.
    pub const NONE: ObjectLabels =
        ObjectLabels { labels: BTreeMap::new(), annotations: BTreeMap::new(), managed_fields: Vec::new() };

    /// What a written object's metadata asks to keep. Its managedFields were computed by hns
    /// (see [`crate::resources::managed`]), so they read back; unreadable ones are dropped.
    pub fn of(meta: &ObjectMeta) -> Self {
        ObjectLabels {
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            managed_fields: crate::ssa::from_k8s(meta.managed_fields.as_deref().unwrap_or_default())
                .unwrap_or_default(),
        }
    }

    /// Sets the labels, annotations and managedFields of `meta`, omitting empty ones.
    pub fn fill(&self, meta: &mut ObjectMeta) {
        let nonempty = |m: &BTreeMap<String, String>| (!m.is_empty()).then(|| m.clone());
        meta.labels = nonempty(&self.labels);
        meta.annotations = nonempty(&self.annotations);
        meta.managed_fields = (!self.managed_fields.is_empty())
            .then(|| self.managed_fields.iter().map(crate::ssa::Entry::to_k8s).collect());
    }

    /// The JSON kept in the namespace annotation, or `None` when there is nothing to keep.
    pub fn to_annotation(&self) -> Option<String> {
        (self != &ObjectLabels::default()).then(|| serde_json::to_string(self).unwrap_or_default())
    }
}

/// A HierarchicalResourceQuota as kept in its namespace's annotation
/// [`keys::RESOURCE_QUOTAS`]: everything about it but its status, which is derived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredQuota {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.creationTimestamp` (RFC 3339).
    pub creation_timestamp: String,
    /// `spec.hard`, as written.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hard: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Its labels, annotations and managed fields.
    #[serde(default, flatten)]
    pub meta: ObjectLabels,
}

/// Parses a JSON annotation, treating a missing or unreadable value as empty.
fn json_annotation<T: serde::de::DeserializeOwned + Default>(value: Option<&String>) -> T {
    value.and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default()
}

impl Node {
    /// Reads the hierarchy facts out of a Namespace object, if `sealer` finds them sealed; a
    /// namespace with forged ones gets none. The object is kept [`trimmed`].
    pub fn from_namespace(ns: Namespace, sealer: &Sealer) -> Self {
        let mut ns = trimmed(ns);
        let own_name = ns.metadata.name.clone().unwrap_or_default();
        let tree_labels = ns
            .metadata
            .labels
            .as_mut()
            .map(|l| TreeLabels::take_from(l, &own_name))
            .unwrap_or_default()
            .into();
        let empty = BTreeMap::new();
        let all = ns.metadata.annotations.as_ref().unwrap_or(&empty);
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        let forgery = match sealer.verify(name, all) {
            Verdict::Sealed => None,
            Verdict::Forged(keys) => Some(keys),
        };
        let annotations = ns.metadata.annotations.as_ref().filter(|_| forgery.is_none());
        let get = |k: &str| annotations.and_then(|a| a.get(k)).filter(|v| !v.is_empty()).cloned();
        let raw = |k: &str| annotations.and_then(|a| a.get(k));
        let subnamespace_of = get(keys::SUBNAMESPACE_OF);
        Node {
            is_subnamespace: subnamespace_of.is_some(),
            // A subnamespace's parent is fixed at creation; its own annotation wins.
            parent: subnamespace_of.or_else(|| get(keys::PARENT)),
            allow_cascading_deletion: get(keys::ALLOW_CASCADING_DELETION).as_deref() == Some("true"),
            extras: Extras {
                managed_labels: json_annotation(raw(keys::MANAGED_LABELS)),
                managed_annotations: json_annotation(raw(keys::MANAGED_ANNOTATIONS)),
                hierarchy_meta: json_annotation(raw(keys::HIERARCHY_OBJECT_META)),
                subnamespace_meta: json_annotation(raw(keys::SUBNAMESPACE_OBJECT_META)),
                quotas: json_annotation(raw(keys::RESOURCE_QUOTAS)),
                forgery,
            }
            .boxed(),
            children_rv: 0,
            tree_labels,
            meta: NamespaceMeta::new(ns.metadata),
        }
    }

    /// Whether `other`, another version of the same namespace, differs from this one only in
    /// its resourceVersion and finalizers: what only the namespace's own reconcile reads (a
    /// parent gaining HNC's `hasSubnamespace` finalizer tells its relatives nothing).
    pub fn differs_only_in_bookkeeping(&self, other: &Node) -> bool {
        self.meta.same_apart_from_bookkeeping(&other.meta)
            && self.parent == other.parent
            && self.is_subnamespace == other.is_subnamespace
            && self.allow_cascading_deletion == other.allow_cascading_deletion
            && self.extras == other.extras
            && *self.tree_labels == *other.tree_labels
    }

    /// Takes the hierarchy facts of `held`, an earlier version of the same namespace, in place of
    /// forged ones: a forgery changes nothing hns does.
    fn keep_facts_of(&mut self, held: &Node) {
        self.parent = held.parent.clone();
        self.is_subnamespace = held.is_subnamespace;
        self.allow_cascading_deletion = held.allow_cascading_deletion;
        let forgery = self.extras().forgery.clone();
        self.extras = Extras { forgery, ..held.extras().clone() }.boxed();
    }

    fn extras(&self) -> &Extras {
        self.extras.as_deref().unwrap_or(&NO_EXTRAS)
    }

    /// `spec.labels` of its hierarchy configuration: labels managed through the hierarchy.
    pub fn managed_labels(&self) -> &[MetaKvp] {
        &self.extras().managed_labels
    }

    /// `spec.annotations` of its hierarchy configuration: annotations managed through the
    /// hierarchy.
    pub fn managed_annotations(&self) -> &[MetaKvp] {
        &self.extras().managed_annotations
    }

    /// Labels and annotations of the namespace's HierarchyConfiguration object.
    pub fn hierarchy_meta(&self) -> &ObjectLabels {
        &self.extras().hierarchy_meta
    }

    /// Labels and annotations of the namespace's Subnamespace object.
    pub fn subnamespace_meta(&self) -> &ObjectLabels {
        &self.extras().subnamespace_meta
    }

    /// The HierarchicalResourceQuotas in this namespace, by name.
    pub fn quotas(&self) -> &BTreeMap<String, StoredQuota> {
        &self.extras().quotas
    }

    /// The tool outside hns that manages this namespace's place in a hierarchy of its own
    /// ([`keys::MANAGED_BY`]), if it is such an external namespace: a root in hns whose tree
    /// labels (beyond its own) that tool gives and hns keeps. A parent in hns wins, as in HNC:
    /// hns's webhook refuses the annotation on a namespace with a parent, and one that got past
    /// it while the webhook was skipped is ignored.
    pub fn external_manager(&self) -> Option<&str> {
        if self.parent.is_some() {
            return None;
        }
        keys::external_manager(self.meta.annotation(keys::MANAGED_BY))
    }

    /// Whether it carries HNC's `hasSubnamespace` finalizer: held for its subnamespaces.
    pub fn is_held(&self) -> bool {
        self.meta.finalizers().any(|f| f == keys::HAS_SUBNAMESPACE_FINALIZER)
    }

    /// How long the hold on it may still stand while it is not deleted ([`HOLD_GRACE`] from
    /// [`keys::HELD_AT`]); `None` if it is not held, is terminating, or its hold is older (or
    /// carries no time: made before holds had one).
    pub fn hold_left(&self, now: jiff::Timestamp) -> Option<std::time::Duration> {
        if !self.is_held() || self.is_terminating() {
            return None;
        }
        self.grace_left(keys::HELD_AT, HOLD_GRACE, now)
    }

    /// How long the membership marked on it before its first child ([`keys::MARKED_AT`]) still
    /// stands without the child ([`MARK_GRACE`]); `None` if it carries no mark, or an older one.
    pub fn mark_left(&self, now: jiff::Timestamp) -> Option<std::time::Duration> {
        self.grace_left(keys::MARKED_AT, MARK_GRACE, now)
    }

    /// When the controller should look at it again, with nothing else changing meanwhile: when
    /// a hold ([`Node::hold_left`]) or a mark ([`Node::mark_left`]) outlives its grace.
    pub fn look_again_in(&self, now: jiff::Timestamp) -> Option<std::time::Duration> {
        self.hold_left(now).into_iter().chain(self.mark_left(now)).min()
    }

    /// What is left of `grace` from the time annotation `key` gives. A time ahead of `now` (the
    /// clock of the replica that wrote it may be ahead) counts as now, unless it is further
    /// ahead than [`CLOCKS_APART`]: then it was not written by hns.
    fn grace_left(
        &self,
        key: &str,
        grace: std::time::Duration,
        now: jiff::Timestamp,
    ) -> Option<std::time::Duration> {
        let at: jiff::Timestamp = self.meta.annotation(key)?.parse().ok()?;
        let age = now.duration_since(at);
        if age.is_negative() && age.unsigned_abs() > CLOCKS_APART {
            return None;
        }
        let age = std::time::Duration::try_from(age).unwrap_or_default();
        grace.checked_sub(age).filter(|left| !left.is_zero())
    }

    /// Hierarchy annotations on the namespace that hns did not write (their keys), if any:
    /// the facts this node gives are then the last sealed ones, not what the annotations say.
    pub fn forgery(&self) -> Option<&[String]> {
        self.extras().forgery.as_deref()
    }

    /// The namespace's labels, tree labels included.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.meta.labels().map(Pairs::to_map).unwrap_or_default();
        labels.extend(self.tree_labels.iter(self.name()));
        labels
    }

    /// The Namespace object as last observed (trimmed: no managed fields, spec or status).
    pub fn namespace(&self) -> Namespace {
        let mut metadata = self.meta.to_object_meta();
        let labels = self.labels();
        metadata.labels = (!labels.is_empty()).then_some(labels);
        Namespace { metadata, ..Default::default() }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        self.meta.name()
    }

    /// The resourceVersion of the namespace object.
    pub fn resource_version(&self) -> u64 {
        self.meta.resource_version().and_then(|rv| rv.parse().ok()).unwrap_or(0)
    }

    /// Whether the namespace is being deleted.
    pub fn is_terminating(&self) -> bool {
        self.meta.is_terminating()
    }

    /// The resourceVersion of the namespace's hierarchy configuration: it changes when the
    /// namespace changes and when its children do.
    pub fn hierarchy_resource_version(&self) -> u64 {
        self.resource_version().max(self.children_rv)
    }
}

/// The hierarchy of every namespace in the cluster.
///
/// Cloning it is cheap (names, nodes and child sets are shared, and copied only when written):
/// a list or watch takes a snapshot and renders from it without holding the cache's lock, so a
/// 100,000-namespace answer neither blocks the watch nor is built in memory all at once.
#[derive(Debug, Clone)]
pub struct Forest {
    nodes: BTreeMap<Arc<str>, Arc<Node>>,
    /// parent → children. A parent may be listed here before (or after) it exists.
    children: BTreeMap<Arc<str>, Children>,
    /// The newest resourceVersion observed: the point in time the forest reflects.
    resource_version: u64,
    /// Tells sealed hierarchy state from forged.
    sealer: Sealer,
    /// hns's ResourceQuota in each namespace that has one, as last observed: the usage that
    /// the hierarchical quotas above it sum. Not namespace state, but kept here so a quota's
    /// status is derived, like everything else served, from one consistent picture.
    resource_quotas: BTreeMap<Arc<str>, Arc<ObservedQuota>>,
    /// The names external hierarchies reserve ([`Forest::reserved_by`]), each with the external
    /// namespaces whose tree labels name it: kept as namespaces change, so that a tool managing
    /// thousands of namespaces costs no walk over them per event or per creation.
    reserved: BTreeMap<Arc<str>, std::collections::BTreeSet<Arc<str>>>,
    /// Counts changes of the set of reserved names, for whoever publishes it.
    reserved_changes: u64,
}

/// The names namespace `node` reserves: its tree labels naming others, if it is external.
fn reserved_by_node(node: &Node) -> Vec<Arc<str>> {
    match node.external_manager() {
        Some(_) => node.tree_labels.ancestors().into_iter().map(|(a, _)| a.clone()).collect(),
        None => Vec::new(),
    }
}

/// hns's ResourceQuota in one namespace, as observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObservedQuota {
    /// Its `spec.hard`.
    pub hard: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Its `status.used`, exactly (unreadable quantities left out).
    pub used: crate::hierarchy::quotas::quantity::Amounts,
    /// Its uid and resourceVersion, preconditions of hns's writes to it.
    pub uid: Option<String>,
    /// Its resourceVersion.
    pub resource_version: Option<String>,
    /// Its allocation annotation (`hnc.x-k8s.io/hrq-allocation`), read.
    pub allocation: Option<crate::hierarchy::quotas::quantity::Amounts>,
    /// Its annotations naming the quota that requires each resource every container must
    /// declare (`required-by.hrq.hnc.x-k8s.io/RESOURCE`), by resource.
    pub required_by: BTreeMap<String, String>,
    /// When hns last saw its usage rise (or first saw it, not knowing what came before).
    pub increased_at: Option<std::time::Instant>,
}

impl ObservedQuota {
    /// Its resourceVersion as a number (`None` if unreadable).
    pub fn version(&self) -> Option<u64> {
        self.resource_version.as_deref().and_then(|v| v.parse().ok())
    }
}

/// A forest being rebuilt from a re-list, one namespace at a time, beside the forest still
/// served (see [`Forest::relist`]). A namespace the served forest holds at the same version
/// is shared with it, not read again, so a re-list of a cluster that barely changed costs
/// little more than the forest itself, and nothing is buffered as full Namespace objects.
pub struct Relist {
    forest: Forest,
}

impl Relist {
    /// Adds one listed namespace; `served` is the forest still served.
    pub fn add(&mut self, ns: Namespace, served: &Forest) {
        self.forest.observe_resource_version(ns.metadata.resource_version.as_deref());
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        let held = served.nodes.get(name);
        let unchanged = held.filter(|h| {
            h.meta.uid() == ns.metadata.uid.as_deref()
                && h.meta.resource_version() == ns.metadata.resource_version.as_deref()
        });
        if let Some(held) = unchanged {
            self.forest.insert_shared(held.clone());
            return;
        }
        let mut node = Node::from_namespace(ns, &self.forest.sealer);
        if node.forgery().is_some() {
            if let Some(held) = held.filter(|h| same_namespace(h, &node)) {
                node.keep_facts_of(held);
            }
        }
        self.forest.insert(node);
    }
}

impl Forest {
    /// An empty forest honouring state sealed by `sealer`.
    pub fn new(sealer: Sealer) -> Self {
        Forest {
            nodes: BTreeMap::new(),
            children: BTreeMap::new(),
            resource_version: 0,
            sealer,
            resource_quotas: BTreeMap::new(),
            reserved: BTreeMap::new(),
            reserved_changes: 0,
        }
    }

    /// hns's ResourceQuota in namespace `ns`, as last observed.
    pub fn observed_quota(&self, ns: &str) -> Option<&ObservedQuota> {
        self.resource_quotas.get(ns).map(|q| &**q)
    }

    /// Records hns's ResourceQuota in `ns` (`None`: there is none).
    pub fn observe_quota(&mut self, ns: &str, observed: Option<ObservedQuota>) {
        match observed {
            Some(q) => self.resource_quotas.insert(ns.into(), Arc::new(q)),
            None => self.resource_quotas.remove(ns),
        };
    }

    /// Replaces every observed ResourceQuota (after their watch re-listed).
    pub fn replace_observed_quotas(&mut self, all: BTreeMap<String, ObservedQuota>) {
        self.resource_quotas = all.into_iter().map(|(ns, q)| (ns.into(), Arc::new(q))).collect();
    }

    /// The sealer, for writers that seal what they write.
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// The node a Namespace object makes, as [`Forest::upsert`] would hold it: forged facts
    /// give way to those of the version held now.
    pub fn node_of(&self, ns: Namespace) -> Node {
        let mut node = Node::from_namespace(ns, &self.sealer);
        if node.forgery().is_some() {
            if let Some(held) = self.nodes.get(node.name()).filter(|h| same_namespace(h, &node)) {
                node.keep_facts_of(held);
            }
        }
        node
    }

    /// Records the current state of a namespace (added or changed). An older version than the
    /// one held is ignored: a write's response and the watch may arrive in either order.
    pub fn upsert(&mut self, ns: Namespace) {
        let node = self.node_of(ns);
        self.upsert_node(node);
    }

    /// [`Forest::upsert`] of the node [`Forest::node_of`] made (reading a namespace checks its
    /// seal, which is worth doing once).
    pub fn upsert_node(&mut self, node: Node) {
        self.observe_resource_version(node.meta.resource_version());
        self.insert(node);
    }

    /// Holds `node` unless a newer version of it is held.
    fn insert(&mut self, mut node: Node) {
        let name: Arc<str> = node.meta.name().clone();
        if name.is_empty() {
            return;
        }
        let old_parent = match self.nodes.get(&name) {
            Some(held) if held.resource_version() > node.resource_version() => return,
            Some(held) => {
                node.children_rv = held.children_rv;
                Some(held.parent.clone())
            }
            None => None,
        };
        node.tree_labels = self.shared_tree_labels(&node);
        let rv = node.resource_version();
        // The children of the old and the new parent change when the namespace appears or moves.
        if old_parent.as_ref() != Some(&node.parent) {
            for p in old_parent.flatten().iter().chain(node.parent.iter()) {
                self.touch_children(p, rv);
            }
        }
        self.unlink(&name);
        if let Some(p) = &node.parent {
            self.children.entry(p.as_str().into()).or_default().insert(name.clone());
        }
        let (held, new) = (self.reserves(&name), reserved_by_node(&node));
        self.rereserve(&name, held, new);
        self.nodes.insert(name, Arc::new(node));
    }

    /// The names the held namespace `name` reserves.
    fn reserves(&self, name: &str) -> Vec<Arc<str>> {
        self.nodes.get(name).map(|n| reserved_by_node(n)).unwrap_or_default()
    }

    /// Namespace `name` reserved `held` and now reserves `new`: only the difference is
    /// recorded, and counted as a change only where a name starts or stops being reserved.
    fn rereserve(&mut self, name: &Arc<str>, held: Vec<Arc<str>>, new: Vec<Arc<str>>) {
        for gone in held.iter().filter(|h| !new.contains(h)) {
            if let Some(by) = self.reserved.get_mut(gone) {
                by.remove(name);
                if by.is_empty() {
                    self.reserved.remove(gone);
                    self.reserved_changes += 1;
                }
            }
        }
        for added in new.into_iter().filter(|n| !held.contains(n)) {
            let by = self.reserved.entry(added).or_default();
            if by.is_empty() {
                self.reserved_changes += 1;
            }
            by.insert(name.clone());
        }
    }

    fn touch_children(&mut self, parent: &str, rv: u64) {
        if let Some(p) = self.nodes.get_mut(parent).filter(|p| p.children_rv < rv) {
            Arc::make_mut(p).children_rv = rv;
        }
    }

    /// Forgets a deleted namespace. Its children keep naming it as their parent.
    pub fn remove(&mut self, ns: &Namespace) {
        self.observe_resource_version(ns.metadata.resource_version.as_deref());
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        if let Some(parent) = self.nodes.get(name).and_then(|n| n.parent.clone()) {
            self.touch_children(&parent, crate::resource_version::number(&ns.metadata));
        }
        self.unlink(name);
        let held = self.reserves(name);
        if let Some((key, _)) = self.nodes.remove_entry(name) {
            self.rereserve(&key, held, Vec::new());
        }
    }

    /// Records that the cluster has reached `rv`. Namespaces' resourceVersions come from one
    /// etcd revision counter, so the highest seen is how current the forest is.
    fn observe_resource_version(&mut self, rv: Option<&str>) {
        if let Some(rv) = rv.and_then(|rv| rv.parse::<u64>().ok()) {
            self.resource_version = self.resource_version.max(rv);
        }
    }

    /// The resourceVersion the forest reflects, for list responses.
    pub fn resource_version(&self) -> String {
        self.resource_version.to_string()
    }

    /// The resourceVersion the forest reflects, as a number.
    pub fn resource_version_number(&self) -> u64 {
        self.resource_version
    }

    /// Replaces the whole forest with `namespaces`, a re-list (see [`Relist`]).
    pub fn replace_all(&mut self, namespaces: impl IntoIterator<Item = Namespace>) {
        let mut relist = self.relist();
        for ns in namespaces {
            relist.add(ns, self);
        }
        self.replace_with(relist);
    }

    /// Starts rebuilding the forest from a re-list of every namespace, while this one is still
    /// served.
    pub fn relist(&self) -> Relist {
        Relist { forest: Forest::new(self.sealer.clone()) }
    }

    /// Replaces the forest with the one `relist` rebuilt (see [`Forest::rebuilt_from`]).
    pub fn replace_with(&mut self, relist: Relist) {
        *self = self.rebuilt_from(relist);
    }

    /// The forest `relist` rebuilt, to replace this one. What this forest knew of a forged
    /// namespace carried over; ResourceQuotas have their own watch, so they stay.
    pub fn rebuilt_from(&self, relist: Relist) -> Forest {
        let mut rebuilt = relist.forest;
        rebuilt.resource_quotas = self.resource_quotas.clone();
        rebuilt.share_tree_labels();
        rebuilt.date_children();
        rebuilt
    }

    /// Without history, a parent's children last changed no later than its newest child.
    fn date_children(&mut self) {
        let newest: Vec<(Arc<str>, u64)> = self
            .children
            .iter()
            .map(|(p, cs)| {
                (
                    p.clone(),
                    cs.iter()
                        .filter_map(|c| self.nodes.get(c))
                        .map(|n| n.resource_version())
                        .max()
                        .unwrap_or(0),
                )
            })
            .collect();
        for (p, rv) in newest {
            if let Some(n) = self.nodes.get_mut(&p).filter(|n| n.children_rv != rv) {
                Arc::make_mut(n).children_rv = rv;
            }
        }
    }

    /// `node`'s tree labels sharing what the forest holds: those of the version held when they
    /// are the same (namespaces below it may point at them), else its parent's when they are
    /// those one deeper, else listed with the forest's own copy of each ancestor's name.
    fn shared_tree_labels(&self, node: &Node) -> Arc<TreeLabels> {
        let labels = &node.tree_labels;
        let parent = node.parent.as_deref().and_then(|p| self.nodes.get_key_value(p));
        let below = parent.and_then(|(name, parent)| labels.below(name, &parent.tree_labels));
        if let Some(held) = self.nodes.get(node.name()).filter(|h| h.tree_labels == *labels) {
            if below.is_none() || !held.tree_labels.is_listed() {
                return held.tree_labels.clone();
            }
        }
        match below {
            Some(below) => Arc::new(below),
            None => {
                Arc::new(labels.sharing_names(|a| self.nodes.get_key_value(a).map(|(held, _)| held.clone())))
            }
        }
    }

    /// Shares every namespace's tree labels (see [`Forest::shared_tree_labels`]), parents before
    /// their children: a re-list comes in name order, so a namespace may arrive before its
    /// parent, whose labels it could not point at then.
    fn share_tree_labels(&mut self) {
        let mut listed: Vec<(usize, Arc<str>)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.tree_labels.is_listed())
            .map(|(name, n)| (n.tree_labels.ancestors().len(), name.clone()))
            .collect();
        listed.sort();
        for (_, name) in listed {
            let Some(node) = self.nodes.get(&name) else { continue };
            let labels = self.shared_tree_labels(node);
            if !Arc::ptr_eq(&labels, &node.tree_labels) {
                if let Some(node) = self.nodes.get_mut(&name) {
                    Arc::make_mut(node).tree_labels = labels;
                }
            }
        }
    }

    /// Holds `node`, a node of another forest, in a forest that does not hold its name yet.
    fn insert_shared(&mut self, node: Arc<Node>) {
        let name = node.meta.name().clone();
        if let Some(p) = &node.parent {
            self.children.entry(p.as_str().into()).or_default().insert(name.clone());
        }
        self.rereserve(&name, Vec::new(), reserved_by_node(&node));
        self.nodes.insert(name, node);
    }

    fn unlink(&mut self, name: &str) {
        let Some(old_parent) = self.nodes.get(name).and_then(|n| n.parent.clone()) else {
            return;
        };
        if let Some(set) = self.children.get_mut(old_parent.as_str()) {
            set.remove(name);
            if set.is_empty() {
                self.children.remove(old_parent.as_str());
            }
        }
    }

    /// The external hierarchy manager that reserves the name `name`, and the external namespace
    /// whose tree labels name it: an ancestor that exists only in that tool's hierarchy. A
    /// namespace of that name would be taken for that ancestor by every policy selecting its
    /// subtree by tree label, so hns refuses to create one (HNC's rule).
    pub fn reserved_by(&self, name: &str) -> Option<(&str, &str)> {
        let by = self.reserved.get(name)?.iter().next()?;
        let node = self.nodes.get(by)?;
        Some((node.external_manager()?, node.name()))
    }

    /// Every name external hierarchies reserve ([`Forest::reserved_by`]), in order.
    pub fn reserved_names(&self) -> Vec<String> {
        self.reserved.keys().map(|n| n.to_string()).collect()
    }

    /// A number that changes whenever [`Forest::reserved_names`] does.
    pub fn reserved_changes(&self) -> u64 {
        self.reserved_changes
    }

    /// The namespace, if it exists.
    pub fn get(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name).map(|n| &**n)
    }

    /// All namespaces, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values().map(|n| &**n)
    }

    /// Every name the forest knows, in order, once each: its namespaces and the parents they name,
    /// which may be gone (their children still list them). What a list across namespaces visits.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let mut nodes = self.nodes.keys().map(|k| &**k).peekable();
        let mut parents = self.children.keys().map(|k| &**k).peekable();
        std::iter::from_fn(move || match (nodes.peek(), parents.peek()) {
            (Some(n), Some(p)) if p < n => parents.next(),
            (Some(n), Some(p)) if p == n => {
                parents.next();
                nodes.next()
            }
            (Some(_), _) => nodes.next(),
            (None, _) => parents.next(),
        })
    }

    /// The namespaces' names, shared (each is one allocation, whoever holds it).
    pub fn shared_names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.nodes.keys()
    }

    /// How many namespaces the forest holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the forest holds no namespace.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The namespaces naming `name` as their parent, sorted by name.
    pub fn children(&self, name: &str) -> impl Iterator<Item = &str> {
        self.children.get(name).into_iter().flat_map(|set| set.iter()).map(|c| &**c)
    }

    /// Whether `node` is in a hierarchy by its place: it has a parent or a child.
    pub fn in_a_hierarchy(&self, node: &Node) -> bool {
        node.parent.is_some() || self.children(node.name()).next().is_some()
    }

    /// The subnamespaces of `name` (children created through it), sorted by name.
    pub fn subnamespaces<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children(name)
            .filter_map(|c| self.get(c))
            .filter(move |n| n.is_subnamespace && n.parent.as_deref() == Some(name))
    }

    /// Whether namespace `name`, about to be deleted, must first get HNC's `hasSubnamespace`
    /// finalizer: it has subnamespaces, lacks the finalizer and is not terminating yet (the API
    /// server refuses new finalizers on a terminating object). Held so, it stays Terminating
    /// until its subnamespaces are gone, and a subnamespace stuck below keeps every namespace
    /// above it in sight (`kubectl hns diagnose` follows the chain down). It is added just before
    /// the deletion, by whoever deletes (the namespace webhook for a user, hns for its own
    /// deletions), not when the namespace gets its first subnamespace: that would cost a second
    /// write for every subnamespace that becomes a parent, and in a deep tree nearly all do.
    ///
    /// A hold already there is made again once half its grace is over ([`Node::hold_left`]), so
    /// that the controller does not take it back while the deletion it is for commits.
    pub fn needs_hold(&self, name: &str, now: jiff::Timestamp) -> bool {
        self.get(name).is_some_and(|node| {
            !node.is_terminating()
                && (!node.is_held() || node.hold_left(now).is_none_or(|left| left < HOLD_GRACE / 2))
                && self.subnamespaces(name).next().is_some()
        })
    }

    /// Whether namespace `name` is terminating (or gone).
    pub fn is_terminating(&self, name: &str) -> bool {
        self.nodes.get(name).is_none_or(|n| n.is_terminating())
    }

    /// Whether the Subnamespace object of subnamespace `node` is still there. Its deletion is
    /// over once its namespace terminates while its parent terminates too (or is gone): what
    /// remains is the namespace controller's work inside it. Shown any longer, it would be content
    /// the parent's namespace controller waits for, retrying with growing back-off, so that a deep
    /// subtree went one level per retry (a 60-level chain took 35 minutes).
    pub fn anchor_exists(&self, node: &Node) -> bool {
        let parent = node.parent.as_deref().unwrap_or_default();
        !node.is_terminating() || !self.is_terminating(parent)
    }

    /// The subnamespaces to delete because namespace `name` terminates: every subnamespace
    /// below it through subnamespaces, not yet terminating, with its uid, when cascading
    /// deletion is allowed there. Deleting them all at once lets the whole subtree terminate
    /// together, in time that grows with its size, not its depth.
    pub fn cascade(&self, name: &str) -> Vec<(String, Option<String>)> {
        if !self.is_terminating(name) || !self.allows_cascading_deletion(name) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut seen = HashSet::from([name.to_string()]);
        let mut queue = vec![name.to_string()];
        while let Some(n) = queue.pop() {
            for sub in self.subnamespaces(&n) {
                if !seen.insert(sub.name().to_string()) {
                    continue;
                }
                if !sub.is_terminating() {
                    out.push((sub.name().to_string(), sub.meta.uid().map(str::to_string)));
                }
                queue.push(sub.name().to_string());
            }
        }
        out.sort();
        out
    }

    /// The hierarchical quotas that cover namespace `name`, nearest first: those in it and in
    /// each of its ancestors, each with the namespace it lives in.
    pub fn quotas_covering(&self, name: &str) -> Vec<(&str, &str, &StoredQuota)> {
        self.ancestry_names(name)
            .into_iter()
            .rev()
            .filter_map(|ns| self.nodes.get_key_value(ns.as_str()))
            .flat_map(|(ns, node)| node.quotas().iter().map(move |(q, stored)| (&**ns, q.as_str(), stored)))
            .collect()
    }

    /// Whether deleting `name` may delete its subnamespaces: it, or any ancestor, allows
    /// cascading deletion (HNC's rule).
    pub fn allows_cascading_deletion(&self, name: &str) -> bool {
        self.ancestry_names(name).iter().any(|n| self.get(n).is_some_and(|n| n.allow_cascading_deletion))
    }

    /// `name`, its parent, its grandparent and so on, nearest first, as far as parents are named,
    /// without end in a cycle: for walks that [`Forest::reaches_root`] has shown to end.
    pub fn ancestors_up<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        std::iter::successors(Some(name), |n| self.get(n).and_then(|node| node.parent.as_deref()))
    }

    /// Whether walking up from `name` ends, at a root or at a missing parent, within
    /// [`SHORT_WALK`] steps: then neither `name` nor any ancestor of it is in a cycle. It
    /// allocates nothing, where the walks that remember what they saw (to stop in a cycle) copy
    /// and hash every name: the controller asks this of every ancestor of every namespace it
    /// reconciles, once per propagated kind.
    pub fn reaches_root(&self, name: &str) -> bool {
        self.ancestors_up(name).take(SHORT_WALK + 1).count() <= SHORT_WALK
    }

    /// `name` and its ancestors, root first, as far as they can be followed. The walk stops at a
    /// missing parent or at the first namespace seen twice, so a cycle yields each member once.
    pub fn ancestry_names(&self, name: &str) -> Vec<String> {
        if self.reaches_root(name) {
            let mut chain: Vec<String> = self.ancestors_up(name).map(str::to_string).collect();
            chain.reverse();
            return chain;
        }
        let mut seen = HashSet::new();
        let mut chain = Vec::new();
        let mut cur = Some(name.to_string());
        while let Some(n) = cur {
            if !seen.insert(n.clone()) {
                break;
            }
            cur = self.get(&n).and_then(|node| node.parent.clone());
            chain.push(n);
        }
        chain.reverse();
        chain
    }

    /// The members of the cycle `name` is in, starting with `name`, or `None` when it is in none.
    /// A namespace below a cycle is not in it.
    pub fn cycle_names(&self, name: &str) -> Option<Vec<String>> {
        if self.reaches_root(name) {
            return None;
        }
        let mut members = vec![name.to_string()];
        let mut seen = HashSet::from([name.to_string()]);
        let mut cur = self.nodes.get(name)?.parent.clone();
        while let Some(n) = cur {
            if n == name {
                return Some(members);
            }
            if !seen.insert(n.clone()) {
                return None; // a cycle above us, which we are not part of
            }
            cur = self.get(&n).and_then(|node| node.parent.clone());
            members.push(n);
        }
        None
    }

    /// Every namespace below `name`, breadth first; `name` itself is never included, even in a
    /// cycle.
    pub fn descendant_names(&self, name: &str) -> Vec<String> {
        let mut seen = HashSet::from([name.to_string()]);
        let mut out = Vec::new();
        let mut queue: Vec<&str> = self.children(name).collect();
        while !queue.is_empty() {
            let mut next = Vec::new();
            for n in queue {
                if seen.insert(n.to_string()) {
                    out.push(n.to_string());
                    next.extend(self.children(n));
                }
            }
            queue = next;
        }
        out
    }
}

/// Whether two nodes are versions of the same namespace, not two namespaces of the same name.
fn same_namespace(a: &Node, b: &Node) -> bool {
    a.meta.uid() == b.meta.uid()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Fixtures: a forest from a compact description.
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A Namespace named `name` with parent `parent` (`sub` makes it a subnamespace), sealed as
    /// hns would have written it.
    pub fn namespace(name: &str, parent: Option<&str>, sub: bool) -> Namespace {
        let mut annotations = BTreeMap::new();
        if let Some(p) = parent {
            let key = if sub { keys::SUBNAMESPACE_OF } else { keys::PARENT };
            annotations.insert(key.to_string(), p.to_string());
        }
        sealed(Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(annotations),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// `ns` with its seal made current, as after one of hns's writes.
    pub fn sealed(mut ns: Namespace) -> Namespace {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let annotations = ns.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.remove(keys::SEAL);
        if let Some(seal) = crate::hierarchy::seal::testing::sealer().seal(&name, annotations) {
            annotations.insert(keys::SEAL.to_string(), seal);
        }
        ns
    }

    /// Stores quota `name` with limits `hard` (JSON) on namespace `ns` of `f`, as hns writes it.
    pub fn with_quota(f: &mut Forest, ns: &str, name: &str, hard: &str) {
        let mut obj = f.get(ns).expect("the namespace is in the forest").namespace();
        let annotations = obj.metadata.annotations.get_or_insert_default();
        let mut quotas: BTreeMap<String, serde_json::Value> = annotations
            .get(keys::RESOURCE_QUOTAS)
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default();
        let hard: serde_json::Value = serde_json::from_str(hard).expect("limits as JSON");
        quotas.insert(
            name.into(),
            serde_json::json!({"uid": format!("uid-{ns}-{name}"), "creationTimestamp": "2026-01-01T00:00:00Z", "hard": hard}),
        );
        annotations.insert(keys::RESOURCE_QUOTAS.into(), serde_json::to_string(&quotas).unwrap_or_default());
        f.upsert(sealed(obj));
    }

    /// Makes `ns` of `f` external, managed by `manager`, carrying the tree labels `labels`
    /// (ancestor, depth) of that tool's hierarchy besides its own, and `extra` labels.
    pub fn external(f: &mut Forest, ns: &str, manager: &str, labels: &[(&str, u32)], extra: &[(&str, &str)]) {
        let mut obj = f.get(ns).expect("the namespace is in the forest").namespace();
        obj.metadata.annotations.get_or_insert_default().insert(keys::MANAGED_BY.into(), manager.into());
        let carried = obj.metadata.labels.get_or_insert_default();
        carried.insert(keys::tree_label(ns), "0".into());
        carried.extend(labels.iter().map(|(a, d)| (keys::tree_label(a), d.to_string())));
        carried.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        f.upsert(obj);
    }

    /// An empty forest with the unit tests' key.
    pub fn empty() -> Forest {
        Forest::new(crate::hierarchy::seal::testing::sealer())
    }

    /// A forest from `"child:parent"` pairs; a lone name is a root, `child:~parent` a subnamespace.
    pub fn forest(spec: &str) -> Forest {
        let mut f = empty();
        for item in spec.split_whitespace() {
            match item.split_once(':') {
                None => f.upsert(namespace(item, None, false)),
                Some((c, p)) => match p.strip_prefix('~') {
                    Some(p) => f.upsert(namespace(c, Some(p), true)),
                    None => f.upsert(namespace(c, Some(p), false)),
                },
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::{keys, Arc, Forest, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn children_and_descendants() {
        let f = forest("acme team-a:acme team-b:~acme svc-1:team-a");
        assert_eq!(f.children("acme").collect::<Vec<_>>(), ["team-a", "team-b"]);
        assert_eq!(f.descendant_names("acme"), ["team-a", "team-b", "svc-1"]);
        assert!(f.get("team-b").unwrap().is_subnamespace);
        assert!(!f.get("team-a").unwrap().is_subnamespace);
    }

    #[test]
    fn only_a_new_resource_version_or_finalizer_is_bookkeeping() {
        let f = forest("acme");
        let node = |change: &dyn Fn(&mut Namespace)| {
            let mut ns = namespace("team-a", Some("acme"), true);
            ns.metadata.resource_version = Some("7".into());
            ns.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
            change(&mut ns);
            f.node_of(sealed(ns))
        };
        let held = node(&|_| {});
        let marked = node(&|ns| {
            ns.metadata.resource_version = Some("8".into());
            ns.metadata.finalizers = Some(vec![keys::HAS_SUBNAMESPACE_FINALIZER.into()]);
        });
        assert!(held.differs_only_in_bookkeeping(&marked));
        let relabelled =
            node(&|ns| ns.metadata.labels = Some([("team".to_string(), "b".to_string())].into()));
        let moved = node(&|ns| *ns = namespace("team-a", Some("other"), true));
        let tree_labelled = node(&|ns| {
            ns.metadata
                .labels
                .get_or_insert_default()
                .insert("acme.tree.hnc.x-k8s.io/depth".into(), "1".into());
        });
        let terminating = node(&|ns| {
            ns.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()))
        });
        let cascading = node(&|ns| {
            ns.metadata
                .annotations
                .get_or_insert_default()
                .insert(keys::ALLOW_CASCADING_DELETION.into(), "true".into());
        });
        for other in [relabelled, moved, tree_labelled, terminating, cascading] {
            assert!(!held.differs_only_in_bookkeeping(&other), "{other:?}");
        }
    }

    #[test]
    fn tree_labels_are_kept_apart_compactly_and_given_back_whole() {
        use std::sync::Arc;
        let mut f = forest("acme team-a:acme");
        let mut ns = namespace("svc", Some("team-a"), false);
        let labels: std::collections::BTreeMap<String, String> = [
            ("acme.tree.hnc.x-k8s.io/depth", "2"),
            ("team-a.tree.hnc.x-k8s.io/depth", "1"),
            ("svc.tree.hnc.x-k8s.io/depth", "0"),
            ("gone.tree.hnc.x-k8s.io/depth", "not-a-depth"),
            ("team", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        ns.metadata.labels = Some(labels.clone());
        f.upsert(ns);
        let node = f.get("svc").unwrap();
        let stored = node.meta.labels().unwrap().to_map();
        assert_eq!(stored.len(), 2, "only what is not a tree label stays in the object: {stored:?}");
        assert_eq!(node.labels(), labels, "given back whole");
        assert_eq!(node.namespace().metadata.labels, Some(labels));
        let mut applied = namespace("applied", None, false);
        applied.metadata.annotations.get_or_insert_default().insert(super::LAST_APPLIED.into(), "{}".into());
        assert!(!super::trimmed(applied).metadata.annotations.unwrap().contains_key(super::LAST_APPLIED));
        let (held, _) = f.nodes.get_key_value("acme").unwrap();
        let ancestors = node.tree_labels.ancestors();
        let (shared, _) = ancestors.iter().find(|(a, _)| &***a == "acme").unwrap();
        assert!(Arc::ptr_eq(held, shared), "an ancestor's name is the forest's own");
    }

    #[test]
    fn ancestry_is_root_first() {
        let f = forest("acme team-a:acme svc-1:team-a");
        assert_eq!(f.ancestry_names("svc-1"), ["acme", "team-a", "svc-1"]);
        assert_eq!(f.ancestry_names("acme"), ["acme"]);
    }

    #[test]
    fn missing_parent_ends_the_ancestry_there() {
        let f = forest("orphan:gone");
        assert_eq!(f.ancestry_names("orphan"), ["gone", "orphan"]);
        assert!(f.get("gone").is_none());
        assert_eq!(f.children("gone").collect::<Vec<_>>(), ["orphan"]);
        let f = forest("a b:a c:gone z:a");
        assert_eq!(
            f.names().collect::<Vec<_>>(),
            ["a", "b", "c", "gone", "z"],
            "gone parents too, in order, once"
        );
    }

    #[test]
    fn reparenting_moves_the_child() {
        let mut f = forest("a b c:a");
        f.upsert(namespace("c", Some("b"), false));
        assert_eq!(f.children("a").count(), 0);
        assert_eq!(f.children("b").collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn removing_keeps_children_pointing_at_the_missing_parent() {
        let mut f = forest("a b:a");
        f.remove(&namespace("a", None, false));
        assert!(f.get("a").is_none());
        assert_eq!(f.get("b").unwrap().parent.as_deref(), Some("a"));
        assert_eq!(f.children("a").collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn tracks_the_newest_resource_version() {
        let mut f = empty();
        let mut ns = namespace("a", None, false);
        ns.metadata.resource_version = Some("17".into());
        f.upsert(ns.clone());
        ns.metadata.resource_version = Some("9".into());
        f.remove(&ns);
        assert_eq!(f.resource_version(), "17");
    }

    #[test]
    fn older_versions_do_not_overwrite_newer_ones() {
        let mut f = empty();
        let mut new = namespace("a", Some("p"), false);
        new.metadata.resource_version = Some("20".into());
        let mut old = namespace("a", None, false);
        old.metadata.resource_version = Some("19".into());
        f.upsert(new);
        f.upsert(old);
        assert_eq!(f.get("a").unwrap().parent.as_deref(), Some("p"));
    }

    #[test]
    fn a_parent_changes_when_its_children_do() {
        let mut f = empty();
        let with_rv = |mut ns: k8s_openapi::api::core::v1::Namespace, rv: &str| {
            ns.metadata.resource_version = Some(rv.into());
            ns
        };
        f.upsert(with_rv(namespace("p", None, false), "10"));
        f.upsert(with_rv(namespace("c", Some("p"), false), "11"));
        assert_eq!(f.get("p").unwrap().hierarchy_resource_version(), 11);
        f.upsert(with_rv(namespace("c", Some("p"), false), "12"));
        assert_eq!(f.get("p").unwrap().hierarchy_resource_version(), 11, "same parent: children unchanged");
        f.remove(&with_rv(namespace("c", Some("p"), false), "13"));
        assert_eq!(f.get("p").unwrap().hierarchy_resource_version(), 13);
        f.upsert(with_rv(namespace("p", None, false), "14"));
        assert_eq!(f.get("p").unwrap().hierarchy_resource_version(), 14);
    }

    #[test]
    fn cycles_are_safe_to_walk() {
        let f = forest("a:c b:a c:b below:a");
        assert_eq!(f.cycle_names("a").unwrap(), ["a", "c", "b"]);
        assert_eq!(f.cycle_names("b").unwrap(), ["b", "a", "c"]);
        assert_eq!(f.cycle_names("below"), None);
        assert_eq!(f.ancestry_names("below"), ["b", "c", "a", "below"]);
        let mut d = f.descendant_names("a");
        d.sort();
        assert_eq!(d, ["b", "below", "c"]);
    }

    #[test]
    fn quotas_cover_their_namespace_and_everything_below() {
        let mut f = forest("acme team-a:~acme svc:team-a other");
        super::testing::with_quota(&mut f, "acme", "org", r#"{"pods":"10"}"#);
        super::testing::with_quota(&mut f, "team-a", "team", r#"{"pods":"4"}"#);
        let names = |ns: &str| -> Vec<(String, String)> {
            f.quotas_covering(ns).into_iter().map(|(n, q, _)| (n.to_string(), q.to_string())).collect()
        };
        let pair = |n: &str, q: &str| (n.to_string(), q.to_string());
        assert_eq!(names("svc"), [pair("team-a", "team"), pair("acme", "org")], "nearest first");
        assert_eq!(names("acme"), [pair("acme", "org")]);
        assert!(names("other").is_empty());
        assert_eq!(f.quotas_covering("svc")[1].2.hard["pods"].0, "10");
    }

    #[test]
    fn cascading_deletion_is_inherited() {
        let mut f = forest("a b:~a c:~b");
        assert!(!f.allows_cascading_deletion("c"));
        let mut ns = namespace("a", None, false);
        ns.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(hns_api::keys::ALLOW_CASCADING_DELETION.into(), "true".into());
        f.upsert(sealed(ns));
        assert!(f.allows_cascading_deletion("c"));
        assert_eq!(f.subnamespaces("a").map(|n| n.name()).collect::<Vec<_>>(), ["b"]);
    }

    fn terminating(mut ns: k8s_openapi::api::core::v1::Namespace) -> k8s_openapi::api::core::v1::Namespace {
        ns.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
        ns
    }

    #[test]
    fn a_terminating_parent_takes_every_subnamespace_below_it_at_once() {
        let mut f = forest("a b:~a c:~b full:b d:~full");
        let mut a = namespace("a", None, false);
        a.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(hns_api::keys::ALLOW_CASCADING_DELETION.into(), "true".into());
        f.upsert(sealed(a.clone()));
        assert!(f.cascade("a").is_empty(), "nothing while a lives");
        f.upsert(sealed(terminating(a)));
        // Full namespaces stay (and so what is below them), as in HNC.
        let names: Vec<String> = f.cascade("a").into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["b", "c"]);
        f.upsert(sealed(terminating(namespace("b", Some("a"), true))));
        let names: Vec<String> = f.cascade("a").into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["c"], "those already terminating are not deleted again");
    }

    #[test]
    fn cascading_needs_permission() {
        let mut f = forest("a b:~a");
        f.upsert(terminating(namespace("a", None, false)));
        assert!(f.cascade("a").is_empty());
    }

    #[test]
    fn an_anchor_is_gone_once_both_namespaces_terminate() {
        let mut f = forest("a b:~a");
        let shown = |f: &super::Forest| f.anchor_exists(f.get("b").unwrap());
        assert!(shown(&f));
        f.upsert(sealed(terminating(namespace("b", Some("a"), true))));
        assert!(shown(&f), "a terminating subnamespace of a live parent shows, Terminating");
        f.upsert(terminating(namespace("a", None, false)));
        assert!(!shown(&f));
        f.remove(&namespace("a", None, false));
        assert!(!shown(&f));
    }

    #[test]
    fn derived_object_labels_round_trip() {
        let mut ns = namespace("a", None, false);
        let meta = super::ObjectLabels {
            annotations: [("kubectl.kubernetes.io/last-applied-configuration".to_string(), "{}".to_string())]
                .into(),
            managed_fields: vec![crate::ssa::Entry {
                manager: "flux".into(),
                operation: crate::ssa::Operation::Apply,
                time: Some("2024-05-01T10:00:00Z".into()),
                fields: crate::ssa::FieldSet::from_fields_v1(
                    &serde_json::json!({"f:spec": {"f:parent": {}}}),
                )
                .unwrap(),
            }],
            ..Default::default()
        };
        ns.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(hns_api::keys::HIERARCHY_OBJECT_META.into(), meta.to_annotation().unwrap());
        let node = super::Node::from_namespace(sealed(ns), &crate::hierarchy::seal::testing::sealer());
        assert_eq!(*node.hierarchy_meta(), meta);
        let mut shown = ObjectMeta::default();
        node.hierarchy_meta().fill(&mut shown);
        assert_eq!(super::ObjectLabels::of(&shown), meta, "served and read back unchanged");
        assert_eq!(super::ObjectLabels::default().to_annotation(), None);
    }

    #[test]
    fn forged_state_is_ignored_and_the_last_sealed_state_kept() {
        let mut f = forest("victim mine team:~mine");
        let forge = |mut ns: k8s_openapi::api::core::v1::Namespace, key: &str, value: &str| {
            ns.metadata.annotations.as_mut().unwrap().insert(key.into(), value.into());
            ns.metadata.resource_version = Some("50".into());
            ns
        };
        // A namespace outside hierarchies names a parent without hns: not honoured.
        f.upsert(forge(namespace("mine", None, false), hns_api::keys::PARENT, "victim"));
        let mine = f.get("mine").unwrap();
        assert_eq!(mine.parent, None);
        assert_eq!(f.children("victim").count(), 0);
        assert_eq!(mine.forgery(), Some(&[hns_api::keys::PARENT.to_string()][..]));
        // A sealed subnamespace moved by hand keeps its sealed parent.
        f.upsert(forge(namespace("team", Some("mine"), true), hns_api::keys::SUBNAMESPACE_OF, "victim"));
        let team = f.get("team").unwrap();
        assert_eq!(team.parent.as_deref(), Some("mine"));
        assert!(team.is_subnamespace);
        assert!(team.forgery().is_some());
        // So does it after a re-list.
        let objects: Vec<_> = f.iter().map(|n| n.namespace()).collect();
        f.replace_all(objects);
        assert_eq!(f.get("team").unwrap().parent.as_deref(), Some("mine"));
        // A seal copied from another namespace does not verify either.
        let mut copied = namespace("other", None, false);
        let seal = namespace("team", Some("mine"), true).metadata.annotations.unwrap();
        copied.metadata.annotations = Some(seal);
        f.upsert(copied);
        assert_eq!(f.get("other").unwrap().parent, None);
        assert!(f.get("other").unwrap().forgery().is_some());
    }

    /// `ns` with the tree labels hns gives it in `f`.
    fn tree_labelled(f: &Forest, name: &str) -> Namespace {
        let mut ns = f.get(name).unwrap().namespace();
        let labels = ns.metadata.labels.get_or_insert_default();
        for (depth, ancestor) in f.ancestry_names(name).iter().rev().enumerate() {
            labels.insert(keys::tree_label(ancestor), depth.to_string());
        }
        ns.metadata.resource_version = Some("5".into());
        ns
    }

    #[test]
    fn a_relist_shares_unchanged_namespaces_and_names() {
        let mut f = forest("acme team:~acme dev:~team ops:~team");
        let labelled: Vec<Namespace> =
            ["acme", "team", "dev", "ops"].iter().map(|n| tree_labelled(&f, n)).collect();
        // Descendants first, as a re-list in name order may bring them.
        f.replace_all(labelled.iter().rev().cloned());
        let (team, dev, ops) = (f.get("team").unwrap(), f.get("dev").unwrap(), f.get("ops").unwrap());
        assert!(team.tree_labels.points_at(&f.get("acme").unwrap().tree_labels), "below its parent");
        for sibling in [dev, ops] {
            assert!(sibling.tree_labels.points_at(&team.tree_labels), "{} below its parent", sibling.name());
        }
        assert_eq!(dev.labels(), labelled[2].metadata.labels.clone().unwrap(), "given back whole");
        assert_eq!(ops.labels(), labelled[3].metadata.labels.clone().unwrap(), "given back whole");
        let before = f.clone();
        let mut relist = f.relist();
        for ns in labelled.iter().cloned() {
            relist.add(ns, &before);
        }
        let mut changed = labelled[2].clone();
        changed.metadata.resource_version = Some("6".into());
        relist.add(changed, &before);
        f.replace_with(relist);
        assert!(Arc::ptr_eq(&f.nodes["acme"], &before.nodes["acme"]), "unchanged: shared, not read again");
        assert!(!Arc::ptr_eq(&f.nodes["dev"], &before.nodes["dev"]), "changed: read again");
        assert_eq!(f.children("acme").collect::<Vec<_>>(), ["team"]);
        assert_eq!(f.ancestry_names("dev"), ["acme", "team", "dev"]);
    }

    #[test]
    fn self_parent_is_a_cycle_of_one() {
        let f = forest("a:a");
        assert_eq!(f.cycle_names("a").unwrap(), ["a"]);
        assert_eq!(f.ancestry_names("a"), ["a"]);
        assert!(f.descendant_names("a").is_empty());
    }

    #[test]
    fn subnamespace_annotation_wins_over_parent_annotation() {
        let mut ns = namespace("c", Some("real"), true);
        ns.metadata.annotations.as_mut().unwrap().insert(hns_api::keys::PARENT.into(), "other".into());
        let node = super::Node::from_namespace(sealed(ns), &crate::hierarchy::seal::testing::sealer());
        assert_eq!(node.parent.as_deref(), Some("real"));
    }
}
