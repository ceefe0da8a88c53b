//! What one namespace change does to the derived objects: which of them it can touch
//! ([`keys_for`]), how they stand before and after ([`snapshot`]), and the events between the two
//! ([`diff`]), which the namespace cache publishes to the [`crate::store::hub::Hub`].

use std::collections::BTreeMap;

use serde_json::Value;

use crate::hierarchy::forest::{Forest, Node};
use crate::hierarchy::identity::Derived;
use crate::hierarchy::objects;
use crate::hierarchy::policy::Policy;
use crate::store::hub::Event;

/// A derived object: its kind, namespace and name.
pub type Key = (Derived, String, String);

/// Derived objects by key, as they stand at one moment.
pub type Snapshot = BTreeMap<Key, Value>;

/// The derived objects a change of a namespace to `node` (or its deletion) can touch: its own
/// configuration, the configurations of its parent before and after, its Subnamespace in either
/// parent, and, when it starts terminating or goes, the Subnamespaces in it, which then may cease
/// to exist ([`Forest::anchor_exists`]).
pub fn keys_for(forest: &Forest, node: &Node, delete: bool) -> Vec<Key> {
    let ns = node.name();
    let hierarchy = |n: &str| (Derived::HierarchyConfiguration, n.to_string(), "hierarchy".to_string());
    let sub = |p: &str| (Derived::Subnamespace, p.to_string(), ns.to_string());
    let mut keys = vec![hierarchy(ns)];
    let terminating = !delete && node.is_terminating();
    let mut termination_changes = delete;
    if let Some(old) = forest.get(ns) {
        keys.extend(old.parent.as_deref().map(hierarchy));
        if old.is_subnamespace {
            keys.extend(old.parent.as_deref().map(sub));
        }
        termination_changes |= old.is_terminating() != terminating;
    }
    if !delete {
        keys.extend(node.parent.as_deref().map(hierarchy));
        if node.is_subnamespace {
            keys.extend(node.parent.as_deref().map(sub));
        }
    }
    keys.extend(quota_keys(forest, node, delete));
    if termination_changes {
        keys.extend(
            forest.subnamespaces(ns).map(|c| (Derived::Subnamespace, ns.to_string(), c.name().to_string())),
        );
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The quotas a change of a namespace to `node` can touch: its own (before and after, their
/// resourceVersion is the namespace's), and, when it moves or goes, those above it before and
/// after, whose subtree's usage it leaves or joins.
fn quota_keys(forest: &Forest, node: &Node, delete: bool) -> Vec<Key> {
    let ns = node.name();
    let old = forest.get(ns);
    let mut keys: Vec<Key> = old
        .into_iter()
        .flat_map(|o| o.quotas().keys())
        .chain(node.quotas().keys())
        .map(|q| (Derived::HierarchicalResourceQuota, ns.to_string(), q.clone()))
        .collect();
    let old_parent = old.and_then(|o| o.parent.as_deref());
    let new_parent = if delete { None } else { node.parent.as_deref() };
    if delete || old_parent != new_parent {
        keys.extend(quotas_above([old_parent, new_parent].into_iter().flatten(), forest));
    }
    keys
}

/// The keys of the quotas covering each of `namespaces`.
pub fn quotas_above<'a>(namespaces: impl IntoIterator<Item = &'a str>, forest: &Forest) -> Vec<Key> {
    namespaces
        .into_iter()
        .flat_map(|n| forest.quotas_covering(n))
        .map(|(n, q, _)| (Derived::HierarchicalResourceQuota, n.to_string(), q.to_string()))
        .collect()
}

/// The objects at `keys` as they stand in `forest` (absent ones are left out).
pub fn snapshot(forest: &Forest, policy: &Policy, keys: &[Key]) -> Snapshot {
    let mut snap = Snapshot::new();
    for key in keys {
        let (derived, ns, name) = key;
        if let Some(v) = objects::value(*derived, forest, policy, ns, name) {
            snap.insert(key.clone(), v);
        }
    }
    snap
}

/// The events that take `before` to `after` at resourceVersion `rv`.
pub fn diff(before: &Snapshot, after: &Snapshot, rv: u64) -> Vec<Event> {
    let mut events = Vec::new();
    let stamped = |v: &Value| {
        let mut v = v.clone();
        v["metadata"]["resourceVersion"] = rv.to_string().into();
        v
    };
    for (key, new) in after {
        let kind = match before.get(key) {
            None => "ADDED",
            Some(old) if old != new => "MODIFIED",
            Some(_) => continue,
        };
        events.push(Event::new(kind, key.0, stamped(new), rv));
    }
    for (key, old) in before.iter().filter(|(k, _)| !after.contains_key(*k)) {
        events.push(Event::new("DELETED", key.0, stamped(old), rv));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::{forest, namespace};
    use crate::hierarchy::policy::testing::policy;

    fn change(f: &mut Forest, ns: k8s_openapi::api::core::v1::Namespace, delete: bool) -> Vec<Event> {
        let p = policy();
        let node = f.node_of(ns.clone());
        let keys = keys_for(f, &node, delete);
        let before = snapshot(f, &p, &keys);
        if delete {
            f.remove(&ns);
        } else {
            f.upsert(ns);
        }
        diff(&before, &snapshot(f, &p, &keys), 7)
    }

    /// Each event as `KIND Derived namespace`.
    fn summary(events: &[Event]) -> Vec<String> {
        let namespace = |e: &Event| e.object["metadata"]["namespace"].as_str().unwrap_or("").to_string();
        events.iter().map(|e| format!("{} {:?} {}", e.kind, e.derived, namespace(e))).collect()
    }

    /// The events of `summary` about Subnamespaces.
    fn subnamespaces(events: &[Event]) -> Vec<String> {
        summary(events).into_iter().filter(|e| e.contains(" Subnamespace ")).collect()
    }

    #[test]
    fn a_new_subnamespace_adds_objects_and_modifies_its_parent() {
        let mut f = forest("team-a");
        let events = change(&mut f, namespace("dev", Some("team-a"), true), false);
        assert_eq!(
            summary(&events),
            [
                "ADDED HierarchyConfiguration dev",
                "MODIFIED HierarchyConfiguration team-a",
                "ADDED Subnamespace team-a"
            ]
        );
        assert!(events.iter().all(|e| e.object["metadata"]["resourceVersion"] == "7"));
    }

    #[test]
    fn deleting_a_namespace_deletes_its_objects() {
        let mut f = forest("team-a dev:~team-a");
        let events = change(&mut f, namespace("dev", Some("team-a"), true), true);
        assert_eq!(
            summary(&events),
            [
                "MODIFIED HierarchyConfiguration team-a",
                "DELETED HierarchyConfiguration dev",
                "DELETED Subnamespace team-a"
            ]
        );
    }

    #[test]
    fn anchors_go_when_a_terminating_subnamespace_finds_its_parent_terminating() {
        let terminating = |mut ns: k8s_openapi::api::core::v1::Namespace| {
            ns.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
            crate::hierarchy::forest::testing::sealed(ns)
        };
        let mut f = forest("team-a dev:~team-a");
        let events = change(&mut f, terminating(namespace("dev", Some("team-a"), true)), false);
        let subs = subnamespaces(&events);
        assert_eq!(subs, ["MODIFIED Subnamespace team-a"], "Terminating, still there");
        // The parent's own change must tell watchers of its Subnamespaces that dev's is gone.
        let events = change(&mut f, terminating(namespace("team-a", None, false)), false);
        let subs = subnamespaces(&events);
        assert_eq!(subs, ["DELETED Subnamespace team-a"]);
        // And nothing more when dev finally goes.
        let events = change(&mut f, namespace("dev", Some("team-a"), true), true);
        assert!(subnamespaces(&events).is_empty());
    }

    #[test]
    fn a_move_into_a_quotas_subtree_changes_the_quotas_usage() {
        let mut f = forest("acme team-a:~acme other");
        crate::hierarchy::forest::testing::with_quota(&mut f, "acme", "org", r#"{"pods":"10"}"#);
        let used = [("pods".to_string(), crate::hierarchy::quotas::quantity::Amount::parse("2").unwrap())];
        f.observe_quota(
            "other",
            Some(crate::hierarchy::forest::ObservedQuota { used: used.into(), ..Default::default() }),
        );
        let events = change(&mut f, namespace("other", Some("team-a"), false), false);
        let quota: Vec<_> =
            events.iter().filter(|e| e.derived == Derived::HierarchicalResourceQuota).collect();
        assert_eq!(quota.len(), 1, "{:?}", summary(&events));
        assert_eq!(quota[0].kind, "MODIFIED");
        assert_eq!(quota[0].object["status"]["used"]["pods"], "2");
    }

    #[test]
    fn a_move_modifies_both_parents() {
        let mut f = forest("a b c:a");
        let events = change(&mut f, namespace("c", Some("b"), false), false);
        assert_eq!(
            summary(&events),
            [
                "MODIFIED HierarchyConfiguration a",
                "MODIFIED HierarchyConfiguration b",
                "MODIFIED HierarchyConfiguration c"
            ]
        );
    }
}
