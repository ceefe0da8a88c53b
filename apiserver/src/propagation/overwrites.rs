//! Objects of namespaces' own that a change would have propagation overwrite, asked before the
//! change is made. HNC refuses such changes instead of leaving a namespace's own object in the
//! way of its ancestors' policy (copies never overwrite sources, see [`super::actions`]): starting
//! to propagate a kind (the HNCConfiguration) and moving a namespace under a new parent (its
//! HierarchyConfiguration). Pure functions: both ask [`super::actions::actions`], the rule the
//! controller follows, so "would overwrite" means exactly what the controller would report.

use std::collections::BTreeSet;

use hns_api::config::Mode;

use super::actions::{self, Action, Objects};
use crate::hierarchy::forest::Forest;
use crate::hierarchy::policy::Policy;
use crate::hierarchy::rules::Refusal;

/// A namespace's own object that a source of the same name in an ancestor would overwrite.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Overwrite {
    /// The namespace of the object in the way.
    pub namespace: String,
    /// Its name (the source's too).
    pub name: String,
    /// The namespace of the source.
    pub source_namespace: String,
}

/// The objects in `namespaces` that sources of kind `kind` (in `mode`) would overwrite.
pub fn find<'a>(
    forest: &Forest,
    policy: &Policy,
    objects: &Objects,
    kind: &str,
    mode: Mode,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Vec<Overwrite> {
    let mut found = Vec::new();
    for ns in namespaces {
        for action in actions::actions(forest, policy, objects, kind, mode, ns) {
            if let Action::Conflict { name, source_namespace } = action {
                found.push(Overwrite { namespace: ns.to_string(), name, source_namespace });
            }
        }
    }
    found
}

/// The objects in the subtree of `ns` that a move would newly have overwritten: those in the
/// way of a source once the forest is `after` (see [`crate::hierarchy::plan::moved`]) and not
/// already in the way of that same source before. A conflict the subtree has now with an
/// ancestor it keeps is no reason to refuse a move; an object that would not propagate there
/// (its mode, its exception annotations, a nearer source of the same name) is no conflict.
pub fn after_move(
    before: &Forest,
    after: &Forest,
    policy: &Policy,
    objects: &Objects,
    kind: &str,
    mode: Mode,
    ns: &str,
) -> Vec<Overwrite> {
    let subtree: Vec<String> = std::iter::once(ns.to_string()).chain(before.descendant_names(ns)).collect();
    let names = || subtree.iter().map(String::as_str);
    let already: BTreeSet<Overwrite> =
        find(before, policy, objects, kind, mode, names()).into_iter().collect();
    find(after, policy, objects, kind, mode, names()).into_iter().filter(|o| !already.contains(o)).collect()
}

/// The objects in the descendants of `ns` that a source there would newly have overwritten once
/// written: those in the way of a source from `ns` with the source as `after` holds it, and not
/// already in its way as `before` holds it (an object already in the way of a source is no
/// reason to refuse changing that source, say its data, just as for [`after_move`]).
pub fn after_source_change(
    forest: &Forest,
    policy: &Policy,
    before: &Objects,
    after: &Objects,
    kind: &str,
    mode: Mode,
    ns: &str,
) -> Vec<Overwrite> {
    // Only a descendant holding an object of its own of a source's name can be in its way; the
    // others need no plan (which would build a copy for each).
    let holders: Vec<String> = forest
        .descendant_names(ns)
        .into_iter()
        .filter(|d| after.iter().any(|((n, _), o)| n == d && !super::copies::is_copy(o)))
        .collect();
    let from_here = |objects: &Objects| {
        find(forest, policy, objects, kind, mode, holders.iter().map(String::as_str))
            .into_iter()
            .filter(|o| o.source_namespace == ns)
            .collect::<Vec<_>>()
    };
    let already: BTreeSet<Overwrite> = from_here(before).into_iter().collect();
    from_here(after).into_iter().filter(|o| !already.contains(o)).collect()
}

/// HNC's refusal of a source whose copies would overwrite the objects `found` in descendants: a
/// conflict (409), resolved by another name or by removing those objects.
pub fn source_refusal(found: &[Overwrite]) -> Option<String> {
    if found.is_empty() {
        return None;
    }
    let namespaces: Vec<String> = found.iter().map(|o| o.namespace.clone()).collect();
    Some(format!(
        "would overwrite objects in the following descendant namespace(s): {}. To fix this, choose a different name for the object, or remove the conflicting objects from the listed namespaces",
        listed(&namespaces, ", ").trim_start_matches(", ")
    ))
}

/// How many objects a refusal names before it counts the rest.
pub const SHOWN: usize = 10;

/// `items`, at most [`SHOWN`] of them, each preceded by `before`, and how many more there are.
pub fn listed(items: &[String], before: &str) -> String {
    let mut out: String = items.iter().take(SHOWN).map(|i| format!("{before}{i}")).collect();
    if items.len() > SHOWN {
        out.push_str(&format!("{before}… and {} more", items.len() - SHOWN));
    }
    out
}

/// HNC's refusal of a move that would overwrite `objects` (each `(kind, object)`, where a kind
/// reads like Go's `rbac.authorization.k8s.io/v1, Kind=RoleBinding`): a conflict (409), which
/// removing or renaming the objects resolves.
pub fn move_refusal(objects: &[(String, Overwrite)]) -> Option<Refusal> {
    if objects.is_empty() {
        return None;
    }
    let items: Vec<String> = objects
        .iter()
        .map(|(kind, o)| format!("Namespace \"{}\": {} ({kind})", o.namespace, o.name))
        .collect();
    Some(Refusal::Conflict(format!(
        "Cannot update hierarchy because it would overwrite the following object(s):{}\nTo fix this, please rename or remove the conflicting objects first.",
        listed(&items, "\n  * ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::hierarchy::plan::moved;
    use crate::hierarchy::policy::testing::policy;
    use crate::propagation::actions::testing::objects;
    use crate::propagation::copies::testing::obj;
    use crate::propagation::copies::INHERITED_FROM;
    use crate::propagation::exceptions::{NONE, TREE_SELECT};
    use kube::api::DynamicObject;
    use serde_json::json;

    fn rb(ns: &str, name: &str, annotations: &[(&str, &str)]) -> DynamicObject {
        obj(ns, name, &[], annotations, json!({"subjects": []}))
    }

    /// `(namespace, name, source)` of what moving `ns` under `parent` would overwrite.
    fn moving(
        f: &Forest,
        objs: &Objects,
        mode: Mode,
        ns: &str,
        parent: &str,
    ) -> Vec<(String, String, String)> {
        let p = policy();
        let after = moved(f, &p, ns, Some(parent));
        after_move(f, &after, &p, objs, "RoleBinding", mode, ns)
            .into_iter()
            .map(|o| (o.namespace, o.name, o.source_namespace))
            .collect()
    }

    fn one(ns: &str, name: &str, from: &str) -> Vec<(String, String, String)> {
        vec![(ns.into(), name.into(), from.into())]
    }

    /// `(namespace, source)` of what writing `source` (replacing any object of its name in its
    /// namespace) would newly overwrite.
    fn writing(f: &Forest, objs: Vec<DynamicObject>, source: DynamicObject) -> Vec<(String, String)> {
        let ns = source.metadata.namespace.clone().unwrap();
        let before = objects(objs.clone());
        let mut after = objects(objs);
        after.insert((ns.clone(), source.metadata.name.clone().unwrap()), std::sync::Arc::new(source));
        after_source_change(f, &policy(), &before, &after, "RoleBinding", Mode::Propagate, &ns)
            .into_iter()
            .map(|o| (o.namespace, o.source_namespace))
            .collect()
    }

    #[test]
    fn a_new_source_over_descendants_own_objects_is_refused_naming_them() {
        let f = forest("root a:root b:root b1:b other");
        let own = vec![rb("a", "sres", &[]), rb("b1", "sres", &[]), rb("other", "sres", &[])];
        let found = writing(&f, own.clone(), rb("root", "sres", &[]));
        assert_eq!(found, [("a".into(), "root".into()), ("b1".into(), "root".into())]);
        let overwrites: Vec<Overwrite> = found
            .iter()
            .map(|(ns, from)| Overwrite {
                namespace: ns.clone(),
                name: "sres".into(),
                source_namespace: from.clone(),
            })
            .collect();
        assert_eq!(
            source_refusal(&overwrites).unwrap(),
            "would overwrite objects in the following descendant namespace(s): a, b1. To fix this, choose a different name for the object, or remove the conflicting objects from the listed namespaces"
        );
        assert_eq!(writing(&f, own.clone(), rb("root", "viewers", &[])), [], "another name");
        assert_eq!(writing(&f, own.clone(), rb("b1", "sres", &[])), [], "a leaf has no descendants");
        let f = forest("root child:root grandchild:child");
        // child's own object is nearer to grandchild than root's source: only child's is in the way.
        let own = vec![rb("child", "sres", &[]), rb("grandchild", "sres", &[])];
        assert_eq!(writing(&f, own, rb("root", "sres", &[])), [("child".into(), "root".into())]);
    }

    #[test]
    fn a_source_that_would_not_reach_them_or_was_in_their_way_already_is_no_new_overwrite() {
        let f = forest("root child:root");
        let own = rb("child", "sres", &[]);
        assert_eq!(
            writing(&f, vec![own.clone()], rb("root", "sres", &[(NONE, "true")])),
            [],
            "propagates nowhere"
        );
        // A source already in the way may still change; one that starts propagating may not.
        let was = rb("root", "sres", &[]);
        assert_eq!(writing(&f, vec![own.clone(), was], rb("root", "sres", &[("x", "y")])), []);
        let held_back = rb("root", "sres", &[(NONE, "true")]);
        assert_eq!(
            writing(&f, vec![own, held_back], rb("root", "sres", &[])),
            [("child".into(), "root".into())]
        );
    }

    #[test]
    fn a_source_of_a_new_ancestor_over_an_own_object_in_the_subtree() {
        let f = forest("root org:root child grandchild:child");
        let objs = objects(vec![rb("root", "org-sres", &[]), rb("grandchild", "org-sres", &[])]);
        assert_eq!(moving(&f, &objs, Mode::Propagate, "child", "org"), one("grandchild", "org-sres", "root"));
        let objs = objects(vec![rb("org", "org-sres", &[]), rb("child", "org-sres", &[])]);
        assert_eq!(moving(&f, &objs, Mode::Propagate, "child", "org"), one("child", "org-sres", "org"));
    }

    #[test]
    fn copies_and_objects_that_would_not_propagate_are_no_conflict() {
        let f = forest("org child");
        let copy = obj("child", "org-sres", &[(INHERITED_FROM, "old")], &[], json!({}));
        assert!(moving(
            &f,
            &objects(vec![rb("org", "org-sres", &[]), copy]),
            Mode::Propagate,
            "child",
            "org"
        )
        .is_empty());
        let none = objects(vec![rb("org", "org-sres", &[(NONE, "true")]), rb("child", "org-sres", &[])]);
        assert!(moving(&f, &none, Mode::Propagate, "child", "org").is_empty());
        let plain = objects(vec![rb("org", "org-sres", &[]), rb("child", "org-sres", &[])]);
        assert!(moving(&f, &plain, Mode::AllowPropagate, "child", "org").is_empty(), "not opted in");
        assert!(moving(&f, &plain, Mode::Remove, "child", "org").is_empty());
        let elsewhere =
            objects(vec![rb("org", "org-sres", &[(TREE_SELECT, "other")]), rb("child", "org-sres", &[])]);
        assert!(moving(&f, &elsewhere, Mode::Propagate, "child", "org").is_empty());
    }

    #[test]
    fn tree_selects_are_judged_on_the_labels_after_the_move() {
        let f = forest("org child");
        let objs = objects(vec![rb("org", "r", &[(TREE_SELECT, "child")]), rb("child", "r", &[])]);
        assert_eq!(moving(&f, &objs, Mode::Propagate, "child", "org"), one("child", "r", "org"));
    }

    #[test]
    fn conflicts_the_subtree_already_has_do_not_count_and_the_nearest_source_wins() {
        let f = forest("a b:a c x");
        // c's own r is in the way of a's now; moving c under b changes nothing about that.
        let f2 = forest("a b:a c:a");
        let objs = objects(vec![rb("a", "r", &[]), rb("c", "r", &[])]);
        assert!(moving(&f2, &objs, Mode::Propagate, "c", "b").is_empty());
        // In the way of one ancestor's r now, of a new ancestor's after: that one is new.
        let f4 = forest("a b c:a");
        let objs = objects(vec![rb("a", "r", &[]), rb("b", "r", &[]), rb("c", "r", &[])]);
        assert_eq!(moving(&f4, &objs, Mode::Propagate, "c", "b"), one("c", "r", "b"));
        // Under c, its own r wins the name for c's subtree: only c itself is in the way.
        let f3 = forest("a c d:c");
        let objs = objects(vec![rb("a", "r", &[]), rb("c", "r", &[]), rb("d", "r", &[])]);
        assert_eq!(moving(&f3, &objs, Mode::Propagate, "c", "a"), one("c", "r", "a"));
        assert!(moving(&f, &objects(vec![]), Mode::Propagate, "c", "x").is_empty());
    }

    #[test]
    fn the_refusal_reads_like_hncs() {
        let o =
            Overwrite { namespace: "child".into(), name: "org-sres".into(), source_namespace: "org".into() };
        let Some(Refusal::Conflict(m)) =
            move_refusal(&[("rbac.authorization.k8s.io/v1, Kind=RoleBinding".into(), o)])
        else {
            panic!()
        };
        assert_eq!(
            m,
            "Cannot update hierarchy because it would overwrite the following object(s):\n  * Namespace \"child\": org-sres (rbac.authorization.k8s.io/v1, Kind=RoleBinding)\nTo fix this, please rename or remove the conflicting objects first."
        );
        assert_eq!(move_refusal(&[]), None);
        let many: Vec<String> = (0..12).map(|i| i.to_string()).collect();
        assert!(listed(&many, ", ").ends_with(", 9, … and 2 more"));
    }
}
