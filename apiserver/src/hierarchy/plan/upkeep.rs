//! What hns's controller keeps on each namespace: tree labels, the membership label, managed
//! labels and annotations inherited down the tree, and recorded conditions. A pure function of
//! the forest: the desired metadata, as a merge patch against what the namespace has; the
//! controller (`crate::controller`) sends it.

use std::collections::BTreeMap;

use hns_api::keys;
use serde_json::{json, Map, Value};

use crate::hierarchy::conditions::{self, NsCondition};
use crate::hierarchy::forest::{Forest, Node};
use crate::hierarchy::lineage::Lineage;
use crate::hierarchy::namespace_meta::Pairs;
use crate::hierarchy::plan;
use crate::hierarchy::policy::Policy;

/// The labels hns wants on `node`, whose lineage is `lineage`, and the keys it owns there
/// (wanted or not); `marked` when a mark for its first child still stands ([`mark_done`]).
fn desired_labels(lineage: &Lineage, policy: &Policy, node: &Node, marked: bool) -> BTreeMap<String, String> {
    let mut labels = plan::hierarchy_labels(lineage.forest(), policy, node.name(), node.parent.as_deref());
    // Marked a member for a child that is being made: it stays one until the child comes.
    if marked && !policy.is_excluded(node.name()) {
        labels.extend(plan::member_labels(node));
    }
    if crate::hierarchy::quotas::pending(lineage) {
        labels.insert(keys::HRQ_PENDING_LABEL.to_string(), "true".to_string());
    }
    for kv in inherited(lineage, |n| n.managed_labels(), |n| n.meta.labels()) {
        if policy.is_managed_label(&kv.0) && !keys::is_hns_label(&kv.0) {
            labels.insert(kv.0, kv.1);
        }
    }
    labels
}

/// Whether the membership marked on `node` before its first child ([`keys::MARKED_AT`]) has done
/// its work: the namespace is in a hierarchy by its own place now (the child came), or the
/// mark's grace is over (it never will); true too when there is no mark. Once the child came,
/// the mark's time goes, so that losing the child later ends the membership at once.
fn mark_done(forest: &Forest, node: &Node, now: jiff::Timestamp) -> bool {
    forest.in_a_hierarchy(node) || node.mark_left(now).is_none()
}

/// Managed key/values from the namespace's ancestry, root first so nearer ones win: each
/// one's `spec` (`pick`) and, on an external namespace, what it carries itself (`carried`), as
/// HNC lets the tool managing it set managed labels and annotations directly; the tool's values
/// win over the spec's there, as in HNC, so that hns never writes over them. The caller keeps
/// the keys that are managed.
fn inherited<'f>(
    lineage: &Lineage<'f>,
    pick: impl Fn(&'f Node) -> &'f [hns_api::MetaKvp],
    carried: impl Fn(&'f Node) -> Option<Pairs<'f>>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for n in lineage.nodes() {
        out.extend(pick(n).iter().map(|kv| (kv.key.clone(), kv.value.clone())));
        if n.external_manager().is_some() {
            let pairs = carried(n).into_iter().flat_map(Pairs::iter);
            out.extend(pairs.map(|(k, v)| (k.to_string(), v.to_string())));
        }
    }
    out
}

/// What the controller writes to one namespace, and what it tells once the write went through.
#[derive(Debug)]
pub struct Upkeep {
    /// A merge patch bringing the namespace to what the hierarchy wants, guarded by its
    /// resourceVersion.
    pub patch: Value,
    /// Its conditions that were not recorded before, told as Events once the write succeeds.
    pub new_conditions: Vec<NsCondition>,
    /// The namespace's uid, which those Events name.
    pub uid: Option<String>,
    /// Whether the write reverts hierarchy annotations hns did not write.
    pub reverts_forgery: bool,
}

/// The upkeep of `ns`, or `None` if it already is what the hierarchy wants.
pub fn due(forest: &Forest, policy: &Policy, ns: &str, now: jiff::Timestamp) -> Option<Upkeep> {
    let node = forest.get(ns)?;
    let meta = &node.meta;
    let current_labels = node.labels();
    let current_annotations = meta.annotations().map(Pairs::to_map).unwrap_or_default();

    // One walk up the forest serves every question below about the ancestors.
    let lineage = Lineage::of(forest, ns);
    let marked = !mark_done(forest, node, now);
    let want = desired_labels(&lineage, policy, node, marked);
    let mut labels = Map::new();
    for (k, v) in &want {
        if current_labels.get(k) != Some(v) {
            labels.insert(k.clone(), v.clone().into());
        }
    }
    let owned = |k: &String| keys::is_hns_label(k) || policy.is_managed_label(k);
    for k in current_labels.keys().filter(|k| owned(k) && !want.contains_key(*k)) {
        labels.insert(k.clone(), Value::Null);
    }

    // Forged hierarchy annotations go back to the sealed state the forest honours.
    let mut annotations = plan::revert_forgery(forest, node);
    // A mark's time goes once the child came, or with the mark once its grace is over.
    if meta.annotation(keys::MARKED_AT).is_some() && !marked {
        annotations.insert(keys::MARKED_AT.to_string(), Value::Null);
    }
    let recorded = conditions::recorded(meta.annotation(keys::CONDITIONS));
    let current = conditions::conditions(forest, policy, ns);
    let record = conditions::to_record(&current, &recorded, now);
    if record != recorded {
        let value = if record.is_empty() {
            Value::Null
        } else {
            serde_json::to_string(&record).unwrap_or_default().into()
        };
        annotations.insert(keys::CONDITIONS.to_string(), value);
    }
    let want_annotations: BTreeMap<String, String> =
        inherited(&lineage, |n| n.managed_annotations(), |n| n.meta.annotations())
            .into_iter()
            .filter(|(k, _)| policy.is_managed_annotation(k) && !keys::HNS_ANNOTATIONS.contains(&k.as_str()))
            .collect();
    for (k, v) in &want_annotations {
        if current_annotations.get(k) != Some(v) {
            annotations.insert(k.clone(), v.clone().into());
        }
    }
    for k in current_annotations
        .keys()
        .filter(|k| policy.is_managed_annotation(k) && !want_annotations.contains_key(*k))
    {
        if !keys::HNS_ANNOTATIONS.contains(&k.as_str()) {
            annotations.insert(k.clone(), Value::Null);
        }
    }

    let finalizers = finalizers(forest, node, now);
    if finalizers.is_some() && meta.annotation(keys::HELD_AT).is_some() {
        annotations.insert(keys::HELD_AT.to_string(), Value::Null);
    }
    if labels.is_empty() && annotations.is_empty() && finalizers.is_none() {
        return None;
    }
    let mut metadata =
        json!({"resourceVersion": meta.resource_version(), "labels": labels, "annotations": annotations});
    if let Some(finalizers) = finalizers {
        metadata["finalizers"] = finalizers.into();
    }
    let new_conditions = current
        .into_iter()
        .filter(|c| !recorded.iter().any(|r| r.reason == c.reason && r.message == c.message))
        .collect();
    Some(Upkeep {
        patch: json!({ "metadata": metadata }),
        new_conditions,
        uid: meta.uid().map(str::to_string),
        reverts_forgery: node.forgery().is_some(),
    })
}

/// The namespace's finalizers without HNC's `hasSubnamespace`, or `None` if they are right. It
/// is added just before the namespace is deleted, by whoever deletes it
/// ([`Forest::needs_hold`]), never here, and stays while the namespace has subnamespaces, so
/// that a parent is not gone before its subnamespaces are. A terminating namespace that may not
/// delete its subnamespaces (its deletion went round the webhook) lets them go instead, as HNC
/// does, and a live one lets the hold go once its grace is over ([`Node::hold_left`]). The
/// patch carries the whole list, guarded by the resourceVersion like the rest.
fn finalizers(forest: &Forest, node: &Node, now: jiff::Timestamp) -> Option<Vec<String>> {
    let has = node.is_held();
    let name = node.name();
    let keep = || {
        forest.subnamespaces(name).next().is_some()
            && if node.is_terminating() {
                forest.allows_cascading_deletion(name)
            } else {
                node.hold_left(now).is_some()
            }
    };
    (has && !keep()).then(|| {
        node.meta
            .finalizers()
            .filter(|f| *f != keys::HAS_SUBNAMESPACE_FINALIZER)
            .map(str::to_string)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::{forest, namespace, sealed};
    use crate::hierarchy::forest::HOLD_GRACE;
    use crate::hierarchy::policy::testing::policy;
    use hns_api::MetaKvp;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    /// The upkeep's patch alone.
    fn patch(f: &Forest, policy: &Policy, ns: &str, now: jiff::Timestamp) -> Option<Value> {
        due(f, policy, ns, now).map(|u| u.patch)
    }

    /// Applies a patch's label changes to the forest's copy, as the API server would.
    fn apply(f: &mut Forest, ns: &str, patch: &Value) {
        let mut obj = f.get(ns).unwrap().namespace();
        let mut v = serde_json::to_value(&obj).unwrap();
        let mut p = patch.clone();
        p["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        json_patch::merge(&mut v, &p);
        obj = serde_json::from_value(v).unwrap();
        f.upsert(obj);
    }

    /// `name` in `f` marked deleted, with cascading deletion allowed or not.
    fn delete(f: &mut Forest, name: &str, cascading: bool) {
        let mut ns = f.get(name).unwrap().namespace();
        ns.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
        if cascading {
            ns.metadata
                .annotations
                .get_or_insert_default()
                .insert(keys::ALLOW_CASCADING_DELETION.into(), "true".into());
        }
        f.upsert(sealed(ns));
    }

    /// The finalizers `ns` has once the controller's patch is applied.
    fn finalizers_after(f: &mut Forest, ns: &str) -> Vec<String> {
        if let Some(p) = patch(f, &policy(), ns, now()) {
            apply(f, ns, &p);
        }
        f.get(ns).unwrap().meta.finalizers().map(str::to_string).collect()
    }

    /// `name` in `f` with HNC's `hasSubnamespace` finalizer after `others`, made `ago`, as
    /// whoever deletes it adds it first.
    fn hold(f: &mut Forest, name: &str, others: &[&str], ago: std::time::Duration) {
        let mut ns = f.get(name).unwrap().namespace();
        let finalizers = others.iter().copied().chain([keys::HAS_SUBNAMESPACE_FINALIZER]);
        ns.metadata.finalizers = Some(finalizers.map(str::to_string).collect());
        let at = now() - jiff::SignedDuration::try_from(ago).unwrap();
        ns.metadata.annotations.get_or_insert_default().insert(keys::HELD_AT.into(), at.to_string());
        f.upsert(ns);
    }

    const JUST_NOW: std::time::Duration = std::time::Duration::ZERO;

    #[test]
    fn a_parent_is_held_only_once_deleted_and_until_its_subnamespaces_are_gone() {
        let mut f = forest("acme full:acme sub:~acme");
        assert!(finalizers_after(&mut f, "acme").is_empty(), "a live parent costs no write of its own");
        assert!(f.needs_hold("acme", now()), "whoever deletes it holds it first");
        assert!(!f.needs_hold("sub", now()) && !f.needs_hold("full", now()), "no subnamespaces, as in HNC");

        hold(&mut f, "acme", &[], JUST_NOW);
        assert!(!f.needs_hold("acme", now()));
        delete(&mut f, "acme", true);
        assert_eq!(
            finalizers_after(&mut f, "acme"),
            [keys::HAS_SUBNAMESPACE_FINALIZER],
            "kept while sub exists"
        );
        let sub = f.get("sub").unwrap().namespace();
        f.remove(&sub);
        assert!(finalizers_after(&mut f, "acme").is_empty(), "released once sub is gone");
    }

    #[test]
    fn too_late_to_hold_a_terminating_namespace_and_released_without_cascading() {
        let mut f = forest("acme sub:~acme");
        delete(&mut f, "acme", true);
        assert!(!f.needs_hold("acme", now()), "the API server refuses new finalizers on it");

        let mut f = forest("acme sub:~acme");
        hold(&mut f, "acme", &[], JUST_NOW);
        delete(&mut f, "acme", false);
        assert!(finalizers_after(&mut f, "acme").is_empty(), "its subnamespaces are not deleted with it");
    }

    /// Issue 40, B4: a hold made for a deletion that never came (refused after the hold, or a
    /// forged admission review) does not outlive its grace on a live namespace.
    #[test]
    fn a_hold_left_on_a_live_namespace_goes_after_its_grace_and_others_stay() {
        let mut f = forest("acme sub:~acme");
        hold(&mut f, "acme", &["example.com/keep"], JUST_NOW);
        assert_eq!(
            finalizers_after(&mut f, "acme"),
            ["example.com/keep", keys::HAS_SUBNAMESPACE_FINALIZER],
            "within its grace: the deletion it was made for may still commit"
        );
        let left = f.get("acme").unwrap().hold_left(now()).unwrap();
        assert!(left > HOLD_GRACE / 2 && left <= HOLD_GRACE, "{left:?}");
        hold(&mut f, "acme", &["example.com/keep"], HOLD_GRACE * 2 / 3);
        assert!(f.needs_hold("acme", now()), "made again before a deletion once half its grace is over");
        hold(&mut f, "acme", &["example.com/keep"], HOLD_GRACE + std::time::Duration::from_secs(1));
        assert_eq!(finalizers_after(&mut f, "acme"), ["example.com/keep"], "taken back after its grace");
        assert!(f.get("acme").unwrap().meta.annotation(keys::HELD_AT).is_none(), "with its time");

        let mut f = forest("acme sub:~acme");
        hold(&mut f, "acme", &[], JUST_NOW);
        let sub = f.get("sub").unwrap().namespace();
        f.remove(&sub);
        assert!(finalizers_after(&mut f, "acme").is_empty(), "gone with its last subnamespace");
    }

    #[test]
    fn descendants_get_tree_labels_and_converge() {
        let mut f = forest("acme team-a:acme svc:team-a");
        for ns in ["acme", "team-a", "svc"] {
            let p = patch(&f, &policy(), ns, now()).expect("unlabelled namespaces need labels");
            apply(&mut f, ns, &p);
            assert!(patch(&f, &policy(), ns, now()).is_none(), "{ns}: a second pass changes nothing");
        }
        let labels = f.get("svc").unwrap().labels();
        assert_eq!(labels["acme.tree.hnc.x-k8s.io/depth"], "2");
        assert_eq!(labels["team-a.tree.hnc.x-k8s.io/depth"], "1");
        assert_eq!(labels[keys::HIERARCHY_MEMBER], "true");
    }

    #[test]
    fn tampered_and_stale_labels_are_repaired() {
        let mut f = forest("acme team-a:acme");
        let mut ns = namespace("team-a", Some("acme"), false);
        ns.metadata.labels = Some(
            [
                ("acme.tree.hnc.x-k8s.io/depth".to_string(), "7".to_string()),
                ("old.tree.hnc.x-k8s.io/depth".to_string(), "1".to_string()),
            ]
            .into(),
        );
        f.upsert(ns);
        let p = patch(&f, &policy(), "team-a", now()).unwrap();
        assert_eq!(p["metadata"]["labels"]["acme.tree.hnc.x-k8s.io/depth"], "1");
        assert_eq!(p["metadata"]["labels"]["old.tree.hnc.x-k8s.io/depth"], Value::Null);
    }

    #[test]
    fn cycles_get_only_their_own_label_and_a_condition() {
        let f = forest("a:b b:a");
        let p = patch(&f, &policy(), "a", now()).unwrap();
        let labels = p["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels["a.tree.hnc.x-k8s.io/depth"], "0");
        assert!(!labels.contains_key("b.tree.hnc.x-k8s.io/depth"), "no label may express the cycle");
        let conds: Vec<Value> =
            serde_json::from_str(p["metadata"]["annotations"][keys::CONDITIONS].as_str().unwrap()).unwrap();
        assert_eq!(conds[0]["reason"], "InCycle");
    }

    #[test]
    fn managed_labels_flow_down_and_nearer_wins() {
        let mut f = forest("org team:org");
        let mut org = namespace("org", None, false);
        let kvs = vec![
            MetaKvp { key: "team.example.com/owner".into(), value: "platform".into() },
            MetaKvp { key: "team.example.com/tier".into(), value: "gold".into() },
        ];
        org.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(keys::MANAGED_LABELS.into(), serde_json::to_string(&kvs).unwrap());
        f.upsert(sealed(org));
        let mut team = namespace("team", Some("org"), false);
        let mine = vec![MetaKvp { key: "team.example.com/owner".into(), value: "alice".into() }];
        team.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(keys::MANAGED_LABELS.into(), serde_json::to_string(&mine).unwrap());
        f.upsert(sealed(team));
        let p = patch(&f, &policy(), "team", now()).unwrap();
        assert_eq!(p["metadata"]["labels"]["team.example.com/owner"], "alice");
        assert_eq!(p["metadata"]["labels"]["team.example.com/tier"], "gold");
    }

    #[test]
    fn an_external_namespace_keeps_what_its_manager_gives_it_and_hands_it_down() {
        let mut f = forest("org team:~org");
        let given = [("team.example.com/owner", "platform"), ("hnc.x-k8s.io/included-namespace", "true")];
        crate::hierarchy::forest::testing::external(&mut f, "org", "cs", &[("abstract", 1)], &given);
        let mut obj = f.get("org").unwrap().namespace();
        obj.metadata.annotations.get_or_insert_default().insert("note".into(), "from cs".into());
        obj.metadata.labels.get_or_insert_default().insert(keys::HIERARCHY_MEMBER.into(), "true".into());
        f.upsert(obj);
        let mut obj = f.get("org").unwrap().namespace();
        let spec = vec![MetaKvp { key: "team.example.com/owner".into(), value: "from-spec".into() }];
        obj.metadata
            .annotations
            .get_or_insert_default()
            .insert(keys::MANAGED_LABELS.into(), serde_json::to_string(&spec).unwrap());
        f.upsert(sealed(obj));
        let root = patch(&f, &policy(), "org", now());
        assert!(root.is_none(), "nothing of the manager's is taken away or written over: {root:?}");
        let p = patch(&f, &policy(), "team", now()).unwrap();
        assert_eq!(p["metadata"]["labels"]["abstract.tree.hnc.x-k8s.io/depth"], "2");
        assert_eq!(p["metadata"]["labels"]["org.tree.hnc.x-k8s.io/depth"], "1");
        assert_eq!(p["metadata"]["labels"]["team.example.com/owner"], "platform");
        assert_eq!(p["metadata"]["annotations"]["note"], "from cs");
        // Without the annotation, org is an ordinary root again: the manager's labels go.
        let mut obj = f.get("org").unwrap().namespace();
        obj.metadata.annotations.get_or_insert_default().remove(keys::MANAGED_BY);
        obj.metadata.resource_version = Some("99".into());
        f.upsert(obj);
        let p = patch(&f, &policy(), "org", now()).unwrap();
        assert_eq!(p["metadata"]["labels"]["abstract.tree.hnc.x-k8s.io/depth"], Value::Null);
        assert_eq!(p["metadata"]["labels"]["team.example.com/owner"], "from-spec", "the spec's now");
    }

    #[test]
    fn a_namespace_that_leaves_every_hierarchy_loses_its_labels() {
        let mut f = crate::hierarchy::forest::testing::empty();
        let mut ns = namespace("alone", None, false);
        ns.metadata.labels = Some(
            [
                ("alone.tree.hnc.x-k8s.io/depth".to_string(), "0".to_string()),
                (keys::HIERARCHY_MEMBER.to_string(), "true".to_string()),
            ]
            .into(),
        );
        f.upsert(ns);
        let p = patch(&f, &policy(), "alone", now()).unwrap();
        assert_eq!(p["metadata"]["labels"][keys::HIERARCHY_MEMBER], Value::Null);
        assert!(
            p["metadata"]["labels"].get("alone.tree.hnc.x-k8s.io/depth").is_none(),
            "its own label stays"
        );
    }

    #[test]
    fn lone_namespaces_are_labelled_but_excluded_ones_are_not() {
        let mut f = forest("alone kube-system");
        let p = patch(&f, &policy(), "alone", now()).expect("a lone namespace needs its labels");
        let labels = p["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels["alone.tree.hnc.x-k8s.io/depth"], "0");
        assert_eq!(labels[keys::INCLUDED_NAMESPACE], "true");
        assert!(!labels.contains_key(keys::HIERARCHY_MEMBER), "the fail-open webhook must keep covering it");
        apply(&mut f, "alone", &p);
        assert!(patch(&f, &policy(), "alone", now()).is_none(), "converged");
        assert!(patch(&f, &policy(), "kube-system", now()).is_none(), "excluded: nothing to write");
        let mut forged = namespace("kube-system", None, false);
        forged.metadata.labels = Some(
            [
                (keys::INCLUDED_NAMESPACE.to_string(), "true".to_string()),
                ("kube-system.tree.hnc.x-k8s.io/depth".into(), "0".into()),
            ]
            .into(),
        );
        f.upsert(forged);
        let p = patch(&f, &policy(), "kube-system", now()).unwrap();
        assert_eq!(p["metadata"]["labels"][keys::INCLUDED_NAMESPACE], Value::Null);
        assert_eq!(p["metadata"]["labels"]["kube-system.tree.hnc.x-k8s.io/depth"], Value::Null);
    }

    #[test]
    fn forged_hierarchy_state_is_reverted_and_reported() {
        let mut f = forest("victim mine");
        let mut forged = namespace("mine", None, false);
        forged.metadata.annotations.as_mut().unwrap().insert(keys::PARENT.into(), "victim".into());
        f.upsert(forged);
        let p = patch(&f, &policy(), "mine", now()).unwrap();
        assert_eq!(p["metadata"]["annotations"][keys::PARENT], Value::Null, "{p}");
        let recorded: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> =
            serde_json::from_str(p["metadata"]["annotations"][keys::CONDITIONS].as_str().unwrap()).unwrap();
        assert_eq!(recorded[0].reason, conditions::FORGED);
        assert!(recorded[0].message.contains("hnc.x-k8s.io/parent=\"victim\""), "{}", recorded[0].message);
        assert!(recorded[0].message.contains("keeps no parent"), "{}", recorded[0].message);
    }

    /// `name` in `f` marked a member before its first child, `ago`, as the API handlers mark it.
    fn mark(f: &mut Forest, name: &str, ago: std::time::Duration) {
        let at = now() - jiff::SignedDuration::try_from(ago).unwrap();
        let p = plan::mark_member(f, f.get(name).unwrap(), at).expect("not a member yet");
        apply(f, name, &p);
    }

    /// A parent marked for the child being made keeps its membership until the child comes:
    /// taken back and given again, it would cost two writes and leave the parent outside the
    /// fail-closed webhook in between.
    #[test]
    fn a_parent_marked_for_its_first_child_stays_a_member_until_it_comes() {
        use crate::hierarchy::forest::MARK_GRACE;
        let mut f = forest("acme");
        mark(&mut f, "acme", JUST_NOW);
        assert!(patch(&f, &policy(), "acme", now()).is_none(), "no child yet, and nothing to write");
        let left = f.get("acme").unwrap().look_again_in(now()).unwrap();
        assert!(left > MARK_GRACE / 2 && left <= MARK_GRACE, "looked at again after its grace: {left:?}");

        f.upsert(namespace("dev", Some("acme"), true));
        let p = patch(&f, &policy(), "acme", now()).expect("the child came: the mark's time goes");
        assert_eq!(p["metadata"]["annotations"][keys::MARKED_AT], Value::Null);
        assert!(p["metadata"]["labels"].as_object().unwrap().is_empty(), "a member by its child: {p}");
        apply(&mut f, "acme", &p);

        // Losing the child later ends the membership at once.
        let dev = f.get("dev").unwrap().namespace();
        f.remove(&dev);
        let p = patch(&f, &policy(), "acme", now()).expect("no longer in a hierarchy");
        assert_eq!(p["metadata"]["labels"][keys::HIERARCHY_MEMBER], Value::Null, "{p}");
    }

    #[test]
    fn a_mark_whose_child_never_came_goes_after_its_grace() {
        use crate::hierarchy::forest::MARK_GRACE;
        let mut f = forest("acme");
        mark(&mut f, "acme", MARK_GRACE + std::time::Duration::from_secs(1));
        let p = patch(&f, &policy(), "acme", now()).expect("taken back");
        assert_eq!(p["metadata"]["labels"][keys::HIERARCHY_MEMBER], Value::Null, "{p}");
        assert_eq!(p["metadata"]["annotations"][keys::MARKED_AT], Value::Null, "{p}");
        assert!(p["metadata"]["labels"].get(keys::INCLUDED_NAMESPACE).is_none(), "a lone namespace keeps it");

        // A time ahead (another replica's clock) counts as now; one further ahead than clocks
        // drift apart was not written by hns: no mark, and the membership goes.
        let ahead = |seconds| now() + jiff::SignedDuration::from_secs(seconds);
        let mut f = forest("acme");
        let p = plan::mark_member(&f, f.get("acme").unwrap(), ahead(30)).unwrap();
        apply(&mut f, "acme", &p);
        assert_eq!(f.get("acme").unwrap().mark_left(now()), Some(MARK_GRACE));
        let mut f = forest("acme");
        let p = plan::mark_member(&f, f.get("acme").unwrap(), ahead(600)).unwrap();
        apply(&mut f, "acme", &p);
        assert!(f.get("acme").unwrap().mark_left(now()).is_none());
        let p = patch(&f, &policy(), "acme", now()).expect("not hns's mark");
        assert_eq!(p["metadata"]["labels"][keys::HIERARCHY_MEMBER], Value::Null, "{p}");

        // A namespace still labelled from a mark whose child did not come is marked again.
        let mut f = forest("acme");
        mark(&mut f, "acme", MARK_GRACE + std::time::Duration::from_secs(1));
        assert!(plan::mark_member(&f, f.get("acme").unwrap(), now()).is_some(), "a fresh time");
    }
}
