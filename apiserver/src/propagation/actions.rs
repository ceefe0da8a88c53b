//! The copies one namespace should hold of one kind, and the writes that get it there.
//!
//! For namespace `ns`: every source in an ancestor that selects `ns` should have a copy here;
//! the nearest ancestor wins when two share a name. A namespace's own object of that name is
//! never overwritten (HNC reports a conflict instead). Copies whose source is gone are deleted.
//! Nothing changes in a namespace whose propagation is halted.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::DynamicObject;

use hns_api::config::Mode;

use super::copies;
use super::exceptions::{self, Exceptions};
use crate::hierarchy::conditions;
use crate::hierarchy::forest::Forest;
use crate::hierarchy::policy::Policy;

/// A write that brings a namespace closer to what the hierarchy wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this copy.
    Create(DynamicObject),
    /// Replace the copy of this name (found at this resourceVersion) with this content.
    Update(DynamicObject),
    /// Delete the copy of this name (its uid, so only that object goes), copied from
    /// `source_namespace`.
    Delete { name: String, uid: Option<String>, source_namespace: String },
    /// A source would overwrite the namespace's own object: reported, not done.
    Conflict { name: String, source_namespace: String },
}

impl Action {
    /// The name of the object the action is about, and the namespace its source is (or was) in.
    pub fn target(&self) -> (&str, &str) {
        match self {
            Action::Create(copy) | Action::Update(copy) => (
                copy.metadata.name.as_deref().unwrap_or_default(),
                copies::source_namespace(copy).unwrap_or_default(),
            ),
            Action::Delete { name, source_namespace, .. } | Action::Conflict { name, source_namespace } => {
                (name, source_namespace)
            }
        }
    }
}

/// The objects of one kind, by namespace and name.
pub type Objects = BTreeMap<(String, String), Arc<DynamicObject>>;

fn in_namespace<'a>(objects: &'a Objects, ns: &'a str) -> impl Iterator<Item = &'a Arc<DynamicObject>> + 'a {
    objects.range((ns.to_string(), String::new())..).take_while(move |((n, _), _)| n == ns).map(|(_, o)| o)
}

/// Whether `source` goes to namespace `target` (with `labels`). Exception annotations that do
/// not parse send it nowhere: reading a typo as "no exception" could leak a Secret into every
/// descendant ([`unreadable`] names such sources, for the controller to report).
fn goes_to(source: &DynamicObject, mode: Mode, target: &str, labels: &BTreeMap<String, String>) -> bool {
    Exceptions::parse(source.metadata.annotations.as_ref()).is_ok_and(|e| e.selects(mode, target, labels))
}

/// The sources in `ns` whose exception annotations do not parse, with why, where that matters:
/// the kind propagates (`mode`) and `ns` takes part in propagation. Such a source propagates
/// nowhere (see [`goes_to`]); its owner should hear why.
pub fn unreadable(
    policy: &Policy,
    objects: &Objects,
    mode: Mode,
    ns: &str,
) -> Vec<(Arc<DynamicObject>, exceptions::Error)> {
    if !matches!(mode, Mode::Propagate | Mode::AllowPropagate) || policy.is_excluded(ns) {
        return Vec::new();
    }
    in_namespace(objects, ns)
        .filter(|o| !copies::is_copy(o))
        .filter_map(|o| Exceptions::parse(o.metadata.annotations.as_ref()).err().map(|e| (o.clone(), e)))
        .collect()
}

/// The actions for kind `kind` (in `mode`) in namespace `ns`.
pub fn actions(
    forest: &Forest,
    policy: &Policy,
    objects: &Objects,
    kind: &str,
    mode: Mode,
    ns: &str,
) -> Vec<Action> {
    let Some(node) = forest.get(ns) else { return Vec::new() };
    if mode == Mode::Ignore
        || policy.is_excluded(ns)
        || node.is_terminating()
        || conditions::is_halted(forest, policy, ns)
    {
        return Vec::new();
    }
    let labels = node.labels();

    // Wanted copies: nearest ancestor first, so it wins a name.
    let mut wanted: BTreeMap<String, (String, DynamicObject)> = BTreeMap::new();
    if mode != Mode::Remove {
        let mut ancestry = forest.ancestry_names(ns);
        ancestry.pop();
        for ancestor in ancestry.iter().rev().filter(|a| !policy.is_excluded(a)) {
            for source in in_namespace(objects, ancestor).filter(|o| !copies::is_copy(o)) {
                let name = source.metadata.name.clone().unwrap_or_default();
                if wanted.contains_key(&name)
                    || copies::never_propagates(policy, source, kind).is_some()
                    || !goes_to(source, mode, ns, &labels)
                {
                    continue;
                }
                wanted.insert(name, (ancestor.clone(), copies::copy_of(policy, source, ancestor, ns)));
            }
        }
    }

    let mut out = Vec::new();
    let here: BTreeMap<String, &Arc<DynamicObject>> =
        in_namespace(objects, ns).map(|o| (o.metadata.name.clone().unwrap_or_default(), o)).collect();
    for (name, (from, copy)) in &wanted {
        match here.get(name) {
            None => out.push(Action::Create(copy.clone())),
            Some(found) if !copies::is_copy(found) => {
                out.push(Action::Conflict { name: name.clone(), source_namespace: from.clone() })
            }
            Some(found) if copies::same_copy(found, copy) => {}
            Some(found) => {
                let mut update = copy.clone();
                update.metadata.resource_version = found.metadata.resource_version.clone();
                out.push(Action::Update(update));
            }
        }
    }
    for (name, found) in &here {
        if copies::is_copy(found) && !wanted.contains_key(name) && found.metadata.deletion_timestamp.is_none()
        {
            out.push(Action::Delete {
                name: name.clone(),
                uid: found.metadata.uid.clone(),
                source_namespace: copies::source_namespace(found).unwrap_or_default().to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// `list` keyed as a kind's objects are: by namespace and name.
    pub fn objects(list: Vec<DynamicObject>) -> Objects {
        list.into_iter()
            .map(|o| ((o.metadata.namespace.clone().unwrap(), o.metadata.name.clone().unwrap()), Arc::new(o)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::hierarchy::policy::testing::policy;
    use crate::propagation::copies::testing::obj;
    use crate::propagation::copies::INHERITED_FROM;
    use serde_json::json;

    use testing::objects;

    fn summary(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                Action::Create(o) => format!("create {}", o.metadata.name.as_deref().unwrap()),
                Action::Update(o) => format!("update {}", o.metadata.name.as_deref().unwrap()),
                Action::Delete { name, .. } => format!("delete {name}"),
                Action::Conflict { name, source_namespace } => {
                    format!("conflict {name} from {source_namespace}")
                }
            })
            .collect()
    }

    fn role(ns: &str, name: &str) -> DynamicObject {
        obj(ns, name, &[], &[], json!({"rules": [{"verbs": ["get"]}]}))
    }

    fn copy(ns: &str, name: &str, from: &str) -> DynamicObject {
        obj(ns, name, &[(INHERITED_FROM, from)], &[], json!({"rules": [{"verbs": ["get"]}]}))
    }

    #[test]
    fn sources_flow_to_every_descendant() {
        let f = forest("acme team-a:acme svc:team-a");
        let objs = objects(vec![role("acme", "readers"), role("team-a", "devs")]);
        let p = policy();
        assert_eq!(
            summary(&actions(&f, &p, &objs, "Role", Mode::Propagate, "svc")),
            ["create devs", "create readers"]
        );
        assert!(actions(&f, &p, &objs, "Role", Mode::Propagate, "acme").is_empty(), "roots get nothing");
    }

    #[test]
    fn existing_copies_are_kept_updated_or_removed() {
        let f = forest("acme team-a:acme");
        let mut tampered = copy("team-a", "readers", "acme");
        tampered.data["rules"][0]["verbs"] = json!(["*"]);
        let objs = objects(vec![role("acme", "readers"), tampered, copy("team-a", "orphan", "acme")]);
        assert_eq!(
            summary(&actions(&f, &policy(), &objs, "Role", Mode::Propagate, "team-a")),
            ["update readers", "delete orphan"]
        );
        let objs = objects(vec![role("acme", "readers"), copy("team-a", "readers", "acme")]);
        assert!(actions(&f, &policy(), &objs, "Role", Mode::Propagate, "team-a").is_empty(), "converged");
    }

    #[test]
    fn own_objects_are_never_overwritten() {
        let f = forest("acme team-a:acme");
        let objs = objects(vec![role("acme", "readers"), role("team-a", "readers")]);
        assert_eq!(
            summary(&actions(&f, &policy(), &objs, "Role", Mode::Propagate, "team-a")),
            ["conflict readers from acme"]
        );
    }

    #[test]
    fn the_nearest_ancestor_wins_a_name() {
        let f = forest("acme team-a:acme svc:team-a");
        let mut near = role("team-a", "shared");
        near.data["rules"][0]["verbs"] = json!(["list"]);
        let objs = objects(vec![role("acme", "shared"), near]);
        let acts = actions(&f, &policy(), &objs, "Role", Mode::Propagate, "svc");
        let Action::Create(c) = &acts[0] else { panic!("{acts:?}") };
        assert_eq!(c.metadata.labels.as_ref().unwrap()[INHERITED_FROM], "team-a");
    }

    #[test]
    fn modes() {
        let f = forest("acme team-a:acme");
        let objs = objects(vec![role("acme", "readers"), copy("team-a", "readers", "acme")]);
        assert_eq!(
            summary(&actions(&f, &policy(), &objs, "Role", Mode::Remove, "team-a")),
            ["delete readers"]
        );
        assert!(actions(&f, &policy(), &objs, "Role", Mode::Ignore, "team-a").is_empty());
        assert_eq!(
            summary(&actions(&f, &policy(), &objs, "Role", Mode::AllowPropagate, "team-a")),
            ["delete readers"]
        );
    }

    #[test]
    fn unreadable_exceptions_send_a_source_nowhere_and_remove_its_copies() {
        use crate::propagation::exceptions::{NONE, SELECT};
        let f = forest("acme team-a:acme");
        let mut bad = role("acme", "readers");
        bad.metadata.annotations = Some([(NONE.to_string(), "maybe".to_string())].into());
        let mut good = role("acme", "writers");
        good.metadata.annotations = Some([(SELECT.to_string(), "!other".to_string())].into());
        let objs = objects(vec![bad, good, copy("team-a", "readers", "acme")]);
        assert_eq!(
            summary(&actions(&f, &policy(), &objs, "Role", Mode::Propagate, "team-a")),
            ["create writers", "delete readers"]
        );
        let found = unreadable(&policy(), &objs, Mode::Propagate, "acme");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0.metadata.name.as_deref(), Some("readers"));
        assert!(unreadable(&policy(), &objs, Mode::Propagate, "team-a").is_empty(), "copies are not judged");
        assert!(unreadable(&policy(), &objs, Mode::Remove, "acme").is_empty(), "nothing propagates anyway");
    }

    #[test]
    fn nothing_moves_in_a_halted_subtree() {
        let f = forest("a:b b:a c:a");
        let objs = objects(vec![role("a", "r"), copy("c", "stale", "a")]);
        assert!(actions(&f, &policy(), &objs, "Role", Mode::Propagate, "c").is_empty());
    }
}
