//! What to write to Namespace objects, as pure functions of the forest: for a hierarchy change
//! someone asked for (here: from the forest and the desired state to a Namespace or a JSON
//! merge patch, which [`crate::store::writer`] sends), and for what the controller keeps on
//! every namespace ([`upkeep`]).
//!
//! Every change to one namespace is one write, so a crash leaves either the old or the new
//! state of that namespace, never half of it.

pub mod upkeep;

use std::collections::BTreeMap;

use hns_api::{keys, MetaKvp};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Map, Value};

use crate::hierarchy::forest::{Forest, Node, ObjectLabels, StoredQuota};
use crate::hierarchy::lineage::Lineage;
use crate::hierarchy::namespace_meta::Pairs;
use crate::hierarchy::policy::Policy;
use crate::hierarchy::quotas;
use crate::hierarchy::seal;

/// The hierarchy facts hns keeps on one namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HierarchyState {
    /// Parent of a full namespace (a subnamespace's parent never changes).
    pub parent: Option<String>,
    /// `allowCascadingDeletion`.
    pub allow_cascading_deletion: bool,
    /// `spec.labels`.
    pub managed_labels: Vec<MetaKvp>,
    /// `spec.annotations`.
    pub managed_annotations: Vec<MetaKvp>,
    /// Labels and annotations of the HierarchyConfiguration object.
    pub hierarchy_meta: ObjectLabels,
    /// Labels and annotations of the Subnamespace object.
    pub subnamespace_meta: ObjectLabels,
    /// The HierarchicalResourceQuotas stored on the namespace.
    pub quotas: BTreeMap<String, StoredQuota>,
}

impl HierarchyState {
    /// The state a namespace has now.
    pub fn of(node: &Node) -> Self {
        HierarchyState {
            parent: node.parent.clone(),
            allow_cascading_deletion: node.allow_cascading_deletion,
            managed_labels: node.managed_labels().to_vec(),
            managed_annotations: node.managed_annotations().to_vec(),
            hierarchy_meta: node.hierarchy_meta().clone(),
            subnamespace_meta: node.subnamespace_meta().clone(),
            quotas: node.quotas().clone(),
        }
    }
}

fn quotas_annotation(quotas: &BTreeMap<String, StoredQuota>) -> Option<String> {
    (!quotas.is_empty()).then(|| serde_json::to_string(quotas).unwrap_or_default())
}

fn kvp_annotation(v: &[MetaKvp]) -> Option<String> {
    (!v.is_empty()).then(|| serde_json::to_string(v).unwrap_or_default())
}

/// The hierarchy annotations (those [`crate::hierarchy::seal`] covers) that `state` is written as.
fn sealed_annotations(state: &HierarchyState, is_subnamespace: bool) -> BTreeMap<String, String> {
    let parent_key = if is_subnamespace { keys::SUBNAMESPACE_OF } else { keys::PARENT };
    [
        (parent_key, state.parent.clone()),
        (keys::ALLOW_CASCADING_DELETION, state.allow_cascading_deletion.then(|| "true".to_string())),
        (keys::MANAGED_LABELS, kvp_annotation(&state.managed_labels)),
        (keys::MANAGED_ANNOTATIONS, kvp_annotation(&state.managed_annotations)),
        (keys::HIERARCHY_OBJECT_META, state.hierarchy_meta.to_annotation()),
        (keys::SUBNAMESPACE_OBJECT_META, state.subnamespace_meta.to_annotation()),
        (keys::RESOURCE_QUOTAS, quotas_annotation(&state.quotas)),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
    .collect()
}

/// Annotation changes (a merge patch's `metadata.annotations`) that give `node` exactly the
/// hierarchy annotations `want` and a seal over them. Compared with what the namespace carries,
/// not with what the forest honours, so forged values are overwritten too.
fn sealed_changes(forest: &Forest, node: &Node, want: &BTreeMap<String, String>) -> Map<String, Value> {
    let mut result = node.meta.annotations().map(Pairs::to_map).unwrap_or_default();
    let mut changes = Map::new();
    for key in seal::SEALED {
        if result.get(*key) != want.get(*key) {
            changes.insert(key.to_string(), want.get(*key).map_or(Value::Null, |v| Value::String(v.clone())));
            match want.get(*key) {
                Some(v) => result.insert(key.to_string(), v.clone()),
                None => result.remove(*key),
            };
        }
    }
    let seal = forest.sealer().seal(node.name(), &result);
    if result.get(keys::SEAL) != seal.as_ref() {
        changes.insert(keys::SEAL.to_string(), seal.map_or(Value::Null, Value::String));
    }
    changes
}

/// Annotation changes putting back the sealed hierarchy state of a namespace whose annotations
/// were forged (see [`Node::forgery`]): what the forest honours, sealed again. Empty when the
/// namespace's annotations are hns's own.
pub fn revert_forgery(forest: &Forest, node: &Node) -> Map<String, Value> {
    if node.forgery().is_none() {
        return Map::new();
    }
    sealed_changes(forest, node, &sealed_annotations(&HierarchyState::of(node), node.is_subnamespace))
}

/// The labels of a lone namespace (no parent, no children): its own tree label at depth 0 and
/// `included-namespace`, as HNC gives every namespace it manages; none on an excluded one, nor
/// with `--label-lone-namespaces=false`. kube-apiserver (hns's admission policy) or hns's
/// mutating webhook sets them in the request that creates a namespace, so that hns need not
/// write the namespace again afterwards.
pub fn lone_labels(policy: &Policy, ns: &str) -> BTreeMap<String, String> {
    if policy.is_excluded(ns) || !policy.label_lone_namespaces {
        return BTreeMap::new();
    }
    BTreeMap::from([
        (keys::tree_label(ns), "0".to_string()),
        (keys::INCLUDED_NAMESPACE.to_string(), "true".to_string()),
    ])
}

/// The labels of hns that namespace `ns` should carry under `parent`, the one rule for API
/// writes and the controller alike. Every namespace hns manages (every one not excluded) carries
/// its own depth-0 tree label and `included-namespace`, as under HNC: policies written for HNC
/// select a namespace by them whether or not it has children; with
/// `--label-lone-namespaces=false`, only namespaces in a hierarchy do. Only a member of a
/// hierarchy (it has a parent or children) carries its ancestors' tree labels and the
/// membership label, which selects the fail-closed webhook: an hns outage must never block
/// namespaces outside hierarchies. In or below a cycle the ancestry has no root: only its own
/// tree label is certain, and tree labels must never express a cycle.
///
/// An external namespace ([`Node::external_manager`]) also keeps the tree labels its manager
/// gave it, and its descendants get them one deeper for each level ([`tree_labels`]).
pub fn hierarchy_labels(
    forest: &Forest,
    policy: &Policy,
    ns: &str,
    parent: Option<&str>,
) -> BTreeMap<String, String> {
    let mut labels = hns_labels(forest, policy, ns, parent);
    if parent.is_none() && !policy.is_excluded(ns) {
        labels.extend(external_tree_labels(forest, ns, 0));
    }
    labels
}

/// [`hierarchy_labels`] without an external namespace's own external tree labels.
fn hns_labels(forest: &Forest, policy: &Policy, ns: &str, parent: Option<&str>) -> BTreeMap<String, String> {
    let member = parent.is_some() || forest.children(ns).next().is_some();
    if !member {
        return lone_labels(policy, ns);
    }
    if policy.is_excluded(ns) {
        return BTreeMap::new();
    }
    let tangled = parent.is_some_and(|p| {
        !forest.reaches_root(p) && forest.ancestry_names(p).iter().any(|a| forest.cycle_names(a).is_some())
    });
    let mut labels = tree_labels(forest, ns, if tangled { None } else { parent });
    labels.insert(keys::INCLUDED_NAMESPACE.to_string(), "true".to_string());
    labels.insert(keys::HIERARCHY_MEMBER.to_string(), "true".to_string());
    labels
}

/// Tree labels of namespace `ns` under `parent`: one per existing ancestor with its distance,
/// and `ns` itself at 0. A cycle or a missing ancestor ends the chain. Below an external root,
/// the root's external tree labels follow, each as deep as the root plus its own depth.
fn tree_labels(forest: &Forest, ns: &str, parent: Option<&str>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([(keys::tree_label(ns), "0".to_string())]);
    if let Some(p) = parent {
        let ancestry = forest.ancestry_names(p);
        let existing: Vec<&String> =
            ancestry.iter().filter(|a| forest.get(a).is_some() && a.as_str() != ns).collect();
        for (depth, a) in existing.iter().rev().enumerate() {
            labels.insert(keys::tree_label(a), (depth + 1).to_string());
        }
        // An external namespace has no parent, so one at the top is the root (never a cycle's).
        if let Some(root) = existing.first() {
            for (k, v) in external_tree_labels(forest, root, existing.len()) {
                // A name of hns's own hierarchy wins (hns refuses to create reserved names).
                labels.entry(k).or_insert(v);
            }
        }
    }
    labels
}

/// The tree labels external namespace `root` carries beyond its own, each `deeper` further
/// down; none when `root` is not external.
fn external_tree_labels(forest: &Forest, root: &str, deeper: usize) -> BTreeMap<String, String> {
    let Some(node) = forest.get(root).filter(|n| n.external_manager().is_some()) else {
        return BTreeMap::new();
    };
    node.tree_labels
        .ancestors()
        .into_iter()
        .map(|(a, depth)| (keys::tree_label(a), (depth as usize + deeper).to_string()))
        .collect()
}

/// The Namespace object of a new subnamespace `name` of `parent`.
pub fn new_subnamespace(
    forest: &Forest,
    policy: &Policy,
    parent: &str,
    name: &str,
    state: &HierarchyState,
) -> Namespace {
    let mut labels = hierarchy_labels(forest, policy, name, Some(parent));
    // Created in a quota's subtree: pending from its first moment (see `quotas::pending`).
    if Lineage::of(forest, parent).under_quota() {
        labels.insert(keys::HRQ_PENDING_LABEL.to_string(), "true".to_string());
    }
    let state = HierarchyState { parent: Some(parent.to_string()), ..state.clone() };
    let mut annotations = sealed_annotations(&state, true);
    if let Some(seal) = forest.sealer().seal(name, &annotations) {
        annotations.insert(keys::SEAL.to_string(), seal);
    }
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A merge patch taking `node` to `desired`, or `None` when nothing changes. It carries the
/// namespace's resourceVersion, so it fails with a conflict if the namespace changed meanwhile.
/// A subnamespace's parent stays what it is: it is fixed at creation.
pub fn hierarchy_patch(
    forest: &Forest,
    policy: &Policy,
    node: &Node,
    desired: &HierarchyState,
) -> Option<Value> {
    let mut desired = desired.clone();
    if node.is_subnamespace {
        desired.parent = node.parent.clone();
    }
    let want = sealed_annotations(&desired, node.is_subnamespace);
    let annotations = sealed_changes(forest, node, &want);
    let labels = membership_labels(forest, policy, node, desired.parent.as_deref());
    if annotations.is_empty() && labels.is_empty() {
        return None;
    }
    Some(json!({
        "metadata": {
            "resourceVersion": node.meta.resource_version(),
            "annotations": annotations,
            "labels": labels,
        }
    }))
}

/// The forest as it would be once `ns` has moved under `parent` and the controller has
/// relabelled its subtree: what propagation would do after a move can be planned on it before
/// the move is made. Costs a copy of the forest (its nodes share their Namespace objects).
pub fn moved(forest: &Forest, policy: &Policy, ns: &str, parent: Option<&str>) -> Forest {
    let mut after = forest.clone();
    // Tree labels follow parents, not labels, so once `ns` names its new parent every
    // descendant's labels can be worked out in any order.
    for name in std::iter::once(ns.to_string()).chain(forest.descendant_names(ns)) {
        let Some(node) = after.get(&name) else { continue };
        let mut state = HierarchyState::of(node);
        if name == ns {
            state.parent = parent.map(str::to_string);
        }
        let Some(patch) = hierarchy_patch(&after, policy, node, &state) else { continue };
        let mut value = serde_json::to_value(node.namespace()).unwrap_or_default();
        json_patch::merge(&mut value, &patch);
        if let Ok(written) = serde_json::from_value::<Namespace>(value) {
            after.upsert(written);
        }
    }
    after
}

/// Label changes taking `node` to [`hierarchy_labels`] under `parent`.
fn membership_labels(
    forest: &Forest,
    policy: &Policy,
    node: &Node,
    parent: Option<&str>,
) -> Map<String, Value> {
    let current = node.labels();
    let want = hierarchy_labels(forest, policy, node.name(), parent);
    let mut changes = Map::new();
    for (k, v) in &want {
        if current.get(k) != Some(v) {
            changes.insert(k.clone(), Value::String(v.clone()));
        }
    }
    // The pending label is the controller's to remove, once the namespace's usage is counted.
    let hierarchy_owned = |k: &str| keys::is_hns_label(k) && k != keys::HRQ_PENDING_LABEL;
    for k in current.keys().filter(|k| hierarchy_owned(k) && !want.contains_key(*k)) {
        changes.insert(k.clone(), Value::Null);
    }
    // Moving into a quota's subtree: pending in the same write, so nothing is created there
    // before its usage is counted.
    if parent != node.parent.as_deref()
        && !current.contains_key(keys::HRQ_PENDING_LABEL)
        && quotas::enters_quota(forest, node.name(), parent)
    {
        changes.insert(keys::HRQ_PENDING_LABEL.to_string(), Value::String("true".into()));
    }
    changes
}

/// A patch marking `node` as a hierarchy member before it gains a child, or `None` if its place
/// makes it one already ([`Forest::in_a_hierarchy`]). Marking first means a crash leaves at
/// worst a member without children, which is harmless. The mark carries its time ([`keys::MARKED_AT`]): the controller keeps it for up to
/// [`crate::hierarchy::forest::MARK_GRACE`] although the child is not there yet, so the parent
/// does not lose its membership (and the fail-closed webhook it selects) between the mark and
/// the child; once the child is there, it removes only the mark's time. A namespace that still
/// carries the labels without a parent or a child (an earlier mark whose child did not come, or
/// a last child just gone) is marked again, for the time.
pub fn mark_member(forest: &Forest, node: &Node, now: jiff::Timestamp) -> Option<Value> {
    if forest.in_a_hierarchy(node) {
        return None;
    }
    let changes: Map<String, Value> =
        member_labels(node).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    Some(json!({"metadata": {"labels": changes, "annotations": {keys::MARKED_AT: now.to_string()}}}))
}

/// The labels that make `node` a complete member: the membership label and the labels every
/// managed namespace has (a parent is never excluded).
pub fn member_labels(node: &Node) -> BTreeMap<String, String> {
    let own = keys::tree_label(node.name());
    BTreeMap::from([
        (keys::HIERARCHY_MEMBER.to_string(), "true".to_string()),
        (keys::INCLUDED_NAMESPACE.to_string(), "true".to_string()),
        (own.clone(), node.labels().get(&own).cloned().unwrap_or_else(|| "0".into())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::hierarchy::policy::testing::policy;

    #[test]
    fn tree_labels_count_distance_to_each_ancestor() {
        let f = forest("acme team-a:acme svc:team-a");
        let l = tree_labels(&f, "new", Some("svc"));
        assert_eq!(l["new.tree.hnc.x-k8s.io/depth"], "0");
        assert_eq!(l["svc.tree.hnc.x-k8s.io/depth"], "1");
        assert_eq!(l["team-a.tree.hnc.x-k8s.io/depth"], "2");
        assert_eq!(l["acme.tree.hnc.x-k8s.io/depth"], "3");
        assert_eq!(l.len(), 4);
    }

    #[test]
    fn tree_labels_skip_missing_ancestors_and_never_loop() {
        let f = forest("b:gone a:c c:a");
        assert_eq!(tree_labels(&f, "x", Some("b")).len(), 2);
        let l = tree_labels(&f, "x", Some("a"));
        assert_eq!(l.len(), 3, "{l:?}");
    }

    #[test]
    fn an_external_roots_tree_labels_are_kept_and_handed_down() {
        let mut f = forest("acme dev:~acme other");
        crate::hierarchy::forest::testing::external(&mut f, "acme", "cs", &[("org", 1), ("all", 2)], &[]);
        let root = hierarchy_labels(&f, &policy(), "acme", None);
        assert_eq!(root[&keys::tree_label("org")], "1");
        assert_eq!(root[&keys::tree_label("all")], "2");
        assert_eq!(root[&keys::tree_label("acme")], "0");
        let child = hierarchy_labels(&f, &policy(), "dev", Some("acme"));
        assert_eq!(child[&keys::tree_label("acme")], "1");
        assert_eq!(child[&keys::tree_label("org")], "2");
        assert_eq!(child[&keys::tree_label("all")], "3");
        assert_eq!(f.reserved_by("org"), Some(("cs", "acme")));
        assert_eq!(f.reserved_names(), ["all", "org"]);
        // Moved out from under it, a namespace loses them.
        let moved = hierarchy_labels(&f, &policy(), "dev", Some("other"));
        assert!(!moved.contains_key(&keys::tree_label("org")), "{moved:?}");
        // The reserved names follow the namespace: relabelled, released, deleted.
        let before = f.reserved_changes();
        crate::hierarchy::forest::testing::external(&mut f, "acme", "cs", &[("org", 1)], &[]);
        assert_eq!(f.reserved_names(), ["all", "org"]);
        assert_eq!(f.reserved_changes(), before, "the same names: no change to publish");
        let mut released = f.get("acme").unwrap().namespace();
        released.metadata.annotations.get_or_insert_default().remove(keys::MANAGED_BY);
        f.upsert(released.clone());
        assert!(f.reserved_names().is_empty() && f.reserved_by("org").is_none());
        crate::hierarchy::forest::testing::external(&mut f, "other", "cs", &[("org", 1)], &[]);
        assert_eq!(f.reserved_by("org"), Some(("cs", "other")));
        f.remove(&f.get("other").unwrap().namespace());
        assert!(f.reserved_names().is_empty());
    }

    #[test]
    fn a_managed_by_annotation_on_a_child_makes_nothing_external() {
        let mut f = forest("acme team:acme");
        crate::hierarchy::forest::testing::external(&mut f, "team", "cs", &[("org", 1)], &[]);
        assert_eq!(f.get("team").unwrap().external_manager(), None, "the parent wins");
        assert!(!hierarchy_labels(&f, &policy(), "team", Some("acme")).contains_key(&keys::tree_label("org")));
        assert_eq!(f.reserved_by("org"), None);
        let mut hnc = forest("acme");
        crate::hierarchy::forest::testing::external(
            &mut hnc,
            "acme",
            keys::MANAGED_BY_HNC,
            &[("org", 1)],
            &[],
        );
        assert!(!hierarchy_labels(&hnc, &policy(), "acme", None).contains_key(&keys::tree_label("org")));
    }

    #[test]
    fn a_new_subnamespace_is_complete_in_one_object() {
        let f = forest("acme team-a:acme");
        let ns = new_subnamespace(&f, &policy(), "team-a", "dev", &HierarchyState::default());
        let labels = ns.metadata.labels.unwrap();
        assert_eq!(labels["acme.tree.hnc.x-k8s.io/depth"], "2");
        assert_eq!(labels[keys::HIERARCHY_MEMBER], "true");
        assert_eq!(ns.metadata.annotations.unwrap()[keys::SUBNAMESPACE_OF], "team-a");
    }

    #[test]
    fn entering_a_quotas_subtree_is_pending_from_the_same_write() {
        let mut f = forest("acme team-a:~acme other");
        crate::hierarchy::forest::testing::with_quota(&mut f, "acme", "org", r#"{"pods":"10"}"#);
        let ns = new_subnamespace(&f, &policy(), "team-a", "dev", &HierarchyState::default());
        assert_eq!(ns.metadata.labels.unwrap()[keys::HRQ_PENDING_LABEL], "true", "created under a quota");
        let ns = new_subnamespace(&f, &policy(), "other", "dev", &HierarchyState::default());
        assert!(!ns.metadata.labels.unwrap().contains_key(keys::HRQ_PENDING_LABEL), "no quota above");

        let node = f.get("other").unwrap();
        let moved = HierarchyState { parent: Some("team-a".into()), ..HierarchyState::of(node) };
        let p = hierarchy_patch(&f, &policy(), node, &moved).unwrap();
        assert_eq!(p["metadata"]["labels"][keys::HRQ_PENDING_LABEL], "true", "moved under a quota");
        assert_eq!(p["metadata"]["annotations"][keys::PARENT], "team-a", "in the same write");
    }

    #[test]
    fn hierarchy_writes_leave_the_pending_label_to_the_controller() {
        let mut f = forest("acme team-a:~acme");
        crate::hierarchy::forest::testing::with_quota(&mut f, "acme", "org", r#"{"pods":"10"}"#);
        let mut ns = f.get("team-a").unwrap().namespace();
        let mut labels = hierarchy_labels(&f, &policy(), "team-a", Some("acme"));
        labels.insert(keys::HRQ_PENDING_LABEL.into(), "true".into());
        ns.metadata.labels = Some(labels);
        f.upsert(ns);
        let node = f.get("team-a").unwrap();
        let cascading = HierarchyState { allow_cascading_deletion: true, ..HierarchyState::of(node) };
        let p = hierarchy_patch(&f, &policy(), node, &cascading).unwrap();
        assert_eq!(p["metadata"]["labels"].get(keys::HRQ_PENDING_LABEL), None, "{p}");
    }

    #[test]
    fn quotas_are_written_sealed_with_the_rest_of_the_hierarchy() {
        let f = forest("acme");
        let node = f.get("acme").unwrap();
        let mut desired = HierarchyState::of(node);
        let stored = crate::hierarchy::quotas::new_stored(BTreeMap::new(), ObjectLabels::default());
        desired.quotas.insert("org".into(), stored.clone());
        let p = hierarchy_patch(&f, &policy(), node, &desired).unwrap();
        let mut written = node.namespace();
        let annotations = written.metadata.annotations.get_or_insert_default();
        for (k, v) in p["metadata"]["annotations"].as_object().unwrap() {
            annotations.insert(k.clone(), v.as_str().unwrap().to_string());
        }
        let read = Node::from_namespace(written, f.sealer());
        assert!(read.forgery().is_none(), "sealed");
        assert_eq!(read.quotas()["org"], stored);
    }

    #[test]
    fn set_parent_patch() {
        let f = forest("acme team-a");
        let node = f.get("team-a").unwrap();
        let desired = HierarchyState { parent: Some("acme".into()), ..HierarchyState::of(node) };
        let p = hierarchy_patch(&f, &policy(), node, &desired).unwrap();
        assert_eq!(p["metadata"]["annotations"][keys::PARENT], "acme");
        assert_eq!(p["metadata"]["labels"]["acme.tree.hnc.x-k8s.io/depth"], "1");
        assert_eq!(p["metadata"]["labels"]["team-a.tree.hnc.x-k8s.io/depth"], "0");
        let unchanged = hierarchy_patch(&f, &policy(), node, &HierarchyState::of(node)).unwrap();
        assert_eq!(unchanged["metadata"]["annotations"], json!({}), "only the labels of a managed namespace");
        let mut labelled = node.namespace();
        labelled.metadata.labels = Some(hierarchy_labels(&f, &policy(), "team-a", None));
        let node = Node::from_namespace(labelled, f.sealer());
        assert!(
            hierarchy_patch(&f, &policy(), &node, &HierarchyState::of(&node)).is_none(),
            "no change, no write"
        );
    }

    #[test]
    fn every_managed_namespace_has_its_own_labels_but_only_members_the_membership() {
        let f = forest("alone acme team-a:acme kube-system");
        let p = policy();
        let alone = hierarchy_labels(&f, &p, "alone", None);
        assert_eq!(alone.len(), 2, "{alone:?}");
        assert_eq!(alone["alone.tree.hnc.x-k8s.io/depth"], "0");
        assert_eq!(alone[keys::INCLUDED_NAMESPACE], "true");
        let root = hierarchy_labels(&f, &p, "acme", None);
        assert_eq!(root[keys::HIERARCHY_MEMBER], "true", "a parent is a member");
        assert_eq!(root[keys::INCLUDED_NAMESPACE], "true");
        assert!(hierarchy_labels(&f, &p, "kube-system", None).is_empty(), "excluded: none at all");
    }

    #[test]
    fn without_lone_namespace_labels_only_members_are_labelled() {
        let f = forest("alone acme team-a:acme");
        let p = policy().with_lone_namespace_labels(false);
        assert!(hierarchy_labels(&f, &p, "alone", None).is_empty());
        assert!(lone_labels(&p, "alone").is_empty());
        let root = hierarchy_labels(&f, &p, "acme", None);
        assert_eq!(root["acme.tree.hnc.x-k8s.io/depth"], "0", "a parent is labelled: {root:?}");
        assert_eq!(root[keys::INCLUDED_NAMESPACE], "true");
        let child = hierarchy_labels(&f, &p, "team-a", Some("acme"));
        assert_eq!(child["acme.tree.hnc.x-k8s.io/depth"], "1", "{child:?}");
        assert_eq!(child[keys::HIERARCHY_MEMBER], "true");
    }

    #[test]
    fn moved_relabels_the_whole_subtree() {
        let f = forest("org t1:org t2:org x:t1 y:x");
        let after = moved(&f, &policy(), "x", Some("t2"));
        assert_eq!(after.get("x").unwrap().parent.as_deref(), Some("t2"));
        let labels = after.get("y").unwrap().labels();
        assert_eq!(labels["t2.tree.hnc.x-k8s.io/depth"], "2");
        assert!(!labels.contains_key("t1.tree.hnc.x-k8s.io/depth"), "{labels:?}");
        assert_eq!(f.get("x").unwrap().parent.as_deref(), Some("t1"), "the forest itself is unchanged");
    }

    #[test]
    fn becoming_a_root_removes_old_tree_labels() {
        let mut f = forest("acme");
        let mut ns = crate::hierarchy::forest::testing::namespace("team-a", Some("acme"), false);
        ns.metadata.labels = Some(
            [
                ("acme.tree.hnc.x-k8s.io/depth".to_string(), "1".to_string()),
                ("team-a.tree.hnc.x-k8s.io/depth".to_string(), "0".to_string()),
                (keys::HIERARCHY_MEMBER.to_string(), "true".to_string()),
            ]
            .into(),
        );
        f.upsert(ns);
        let node = f.get("team-a").unwrap();
        let p = hierarchy_patch(
            &f,
            &policy(),
            node,
            &HierarchyState { parent: None, ..HierarchyState::of(node) },
        )
        .unwrap();
        assert_eq!(p["metadata"]["annotations"][keys::PARENT], Value::Null);
        let labels = &p["metadata"]["labels"];
        assert_eq!(labels["acme.tree.hnc.x-k8s.io/depth"], Value::Null);
        assert!(labels.get("team-a.tree.hnc.x-k8s.io/depth").is_none(), "its own label stays");
        assert_eq!(labels[keys::INCLUDED_NAMESPACE], "true");
        assert_eq!(labels[keys::HIERARCHY_MEMBER], Value::Null, "no longer in a hierarchy");
    }

    #[test]
    fn parents_are_marked_before_they_gain_children() {
        let f = forest("acme team:acme");
        assert!(
            mark_member(&f, f.get("acme").unwrap(), jiff::Timestamp::now()).is_none(),
            "a parent already"
        );
        assert!(mark_member(&f, f.get("team").unwrap(), jiff::Timestamp::now()).is_none(), "a child already");
        let f = forest("acme");
        let p = mark_member(&f, f.get("acme").unwrap(), jiff::Timestamp::now()).unwrap();
        assert_eq!(p["metadata"]["labels"][keys::HIERARCHY_MEMBER], "true");
        assert_eq!(p["metadata"]["labels"]["acme.tree.hnc.x-k8s.io/depth"], "0");
        assert_eq!(p["metadata"]["labels"][keys::INCLUDED_NAMESPACE], "true");
    }

    #[test]
    fn hns_writes_are_sealed() {
        let f = forest("acme team-a");
        let ns = new_subnamespace(&f, &policy(), "acme", "dev", &HierarchyState::default());
        let node = Node::from_namespace(ns, f.sealer());
        assert_eq!(node.forgery(), None);
        assert_eq!(node.parent.as_deref(), Some("acme"));

        let team = f.get("team-a").unwrap();
        let desired = HierarchyState { parent: Some("acme".into()), ..HierarchyState::of(team) };
        let p = hierarchy_patch(&f, &policy(), team, &desired).unwrap();
        let mut value = serde_json::to_value(team.namespace()).unwrap();
        json_patch::merge(&mut value, &p);
        let written: Namespace = serde_json::from_value(value).unwrap();
        let node = Node::from_namespace(written, f.sealer());
        assert_eq!((node.forgery(), node.parent.as_deref()), (None, Some("acme")));
    }

    #[test]
    fn reverting_a_forgery_restores_the_sealed_state() {
        let mut f = forest("acme victim team:~acme");
        let mut ns = f.get("team").unwrap().namespace();
        ns.metadata.annotations.as_mut().unwrap().insert(keys::SUBNAMESPACE_OF.into(), "victim".into());
        f.upsert(ns);
        let node = f.get("team").unwrap();
        let changes = revert_forgery(&f, node);
        assert_eq!(changes[keys::SUBNAMESPACE_OF], "acme");
        let mut value = serde_json::to_value(node.namespace()).unwrap();
        json_patch::merge(&mut value, &json!({"metadata": {"annotations": changes}}));
        let reverted = Node::from_namespace(serde_json::from_value(value).unwrap(), f.sealer());
        assert_eq!((reverted.forgery(), reverted.parent.as_deref()), (None, Some("acme")));
        assert!(revert_forgery(&f, f.get("acme").unwrap()).is_empty());
    }
}
