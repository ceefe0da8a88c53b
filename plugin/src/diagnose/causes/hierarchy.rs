//! hns's own case: deleting a namespace deletes its subnamespaces (the namespace controller
//! deletes its `subnamespaces.hnc.x-k8s.io` through hns's API), and hns refuses to delete a
//! subnamespace that has children unless cascading deletion is allowed on it or an ancestor.
//! The parent then stays Terminating with a content failure naming subnamespaces.
//!
//! The hierarchy lives on Namespace annotations: `hnc.x-k8s.io/subnamespace-of: P` and
//! `hnc.x-k8s.io/parent: P` name the parent, `hnc.x-k8s.io/allow-cascading-deletion: "true"`
//! allows cascading deletion.

use std::collections::HashSet;

use hns_api::keys::{ALLOW_CASCADING_DELETION, SUBNAMESPACE_OF};

use super::{listing, single, Cause, CauseKind};
use crate::diagnose::conditions::{self, CONTENT_FAILURE};
use crate::diagnose::evidence::{Evidence, NamespaceState};
use crate::diagnose::remedy::{Action, RemedyId};

/// The subnamespaces of `ns` whose deletion hns refuses, one cause each.
pub fn blocked_subnamespaces(ns: &NamespaceState, ev: &Evidence) -> Vec<Cause> {
    let failure = conditions::failing(&ns.conditions, CONTENT_FAILURE);
    blocked(ns, ev)
        .into_iter()
        .map(|child| {
            let failure = failure.filter(|c| names_refusal_of(&c.message, &child.name));
            let kids = children(&child.name, ev);
            let subtree = descendants(&child.name, ev);
            let mut evidence = vec![
                format!("{} is a subnamespace of {} (annotation {SUBNAMESPACE_OF})", child.name, ns.name),
                format!(
                    "it has children ({}), and neither it nor an ancestor sets {ALLOW_CASCADING_DELETION}",
                    listing(&kids, 5)
                ),
            ];
            if let Some(c) = failure {
                evidence.push(format!("condition {CONTENT_FAILURE}: {}", c.message));
            }
            Cause {
                kind: CauseKind::BlockedSubnamespace,
                summary: format!("subnamespace {} is not a leaf and does not allow cascading deletion", child.name),
                evidence,
                advice: format!(
                    "Delete or move the children of {} first, or allow cascading deletion on it (kubectl hns set {} --allowCascadingDeletion) if its whole subtree should go with {}.",
                    child.name, child.name, ns.name
                ),
                risk: format!(
                    "Allowing cascading deletion deletes {} and all its descendants ({}) with everything in them.",
                    child.name,
                    listing(&subtree, 10)
                ),
                remedy: single(
                    RemedyId::AllowCascadingDeletion { namespace: child.name.clone() },
                    format!("allow cascading deletion on {}", child.name),
                    Action::AllowCascadingDeletion {
                        namespace: child.name.clone(),
                        resource_version: child.resource_version.clone(),
                        has_annotations: !child.annotations.is_empty(),
                    },
                ),
            }
        })
        .collect()
}

/// Whether the namespace controller's `message` reports hns's refusal to delete subnamespace
/// `child`: by hns's refusal text or by the object's quoted name, both of which delimit the
/// name, so a mere mention of "subnamespace", or a longer name containing `child`'s, is not
/// taken for evidence about `child`.
fn names_refusal_of(message: &str, child: &str) -> bool {
    let refusal = format!("subnamespace {child} is not a leaf");
    let object = format!("subnamespaces.{} \"{child}\"", hns_api::GROUP);
    message.contains(&refusal) || message.contains(&object)
}

/// The display names (`subnamespaces.hnc.x-k8s.io/NAME`) of the blocked subnamespaces, which
/// are not "never deleted content" but this cause.
pub fn blocked_names(ns: &NamespaceState, ev: &Evidence) -> Vec<String> {
    blocked(ns, ev).iter().map(|c| format!("subnamespaces.{}/{}", hns_api::GROUP, c.name)).collect()
}

fn blocked<'a>(ns: &NamespaceState, ev: &'a Evidence) -> Vec<&'a NamespaceState> {
    ev.namespaces
        .iter()
        .filter(|c| c.annotations.get(SUBNAMESPACE_OF) == Some(&ns.name))
        .filter(|c| !children(&c.name, ev).is_empty() && !cascading_allowed(c, ev))
        .collect()
}

fn children(name: &str, ev: &Evidence) -> Vec<String> {
    ev.namespaces.iter().filter(|n| n.parent() == Some(name)).map(|n| n.name.clone()).collect()
}

/// Every namespace below `name`, cycle-safe.
fn descendants(name: &str, ev: &Evidence) -> Vec<String> {
    ev.below(name).iter().map(|n| n.name.clone()).collect()
}

/// Whether `ns` or an ancestor allows cascading deletion, cycle-safe.
fn cascading_allowed(ns: &NamespaceState, ev: &Evidence) -> bool {
    let mut seen = HashSet::new();
    let mut current = Some(ns);
    while let Some(n) = current {
        if !seen.insert(n.name.as_str()) {
            return false;
        }
        if n.annotations.get(ALLOW_CASCADING_DELETION).is_some_and(|v| v == "true") {
            return true;
        }
        current = n.parent().and_then(|p| ev.namespace(p));
    }
    false
}

#[cfg(test)]
mod tests {
    use hns_api::keys::PARENT;

    use super::*;
    use crate::diagnose::causes::fixtures::*;

    fn ns(name: &str, annotations: &[(&str, &str)]) -> NamespaceState {
        NamespaceState {
            name: name.into(),
            resource_version: "9".into(),
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    /// parent ─ sub (subnamespace) ─ grandchild, and parent ─ leaf (subnamespace).
    fn tree(sub_annotations: &[(&str, &str)]) -> (NamespaceState, Evidence) {
        let parent = terminating("parent");
        let mut sub_ann = vec![(SUBNAMESPACE_OF, "parent")];
        sub_ann.extend_from_slice(sub_annotations);
        let ev = evidence(vec![
            parent.clone(),
            ns("sub", &sub_ann),
            ns("grandchild", &[(SUBNAMESPACE_OF, "sub")]),
            ns("leaf", &[(SUBNAMESPACE_OF, "parent")]),
        ]);
        (parent, ev)
    }

    #[test]
    fn a_non_leaf_subnamespace_without_cascading_deletion_blocks() {
        let (parent, ev) = tree(&[]);
        let causes = blocked_subnamespaces(&parent, &ev);
        assert_eq!(causes.len(), 1, "the leaf does not block");
        assert!(causes[0].summary.starts_with("subnamespace sub is not a leaf"));
        assert!(causes[0].risk.contains("(grandchild)"));
        assert_eq!(
            causes[0].remedy.as_ref().unwrap().actions[0],
            Action::AllowCascadingDeletion {
                namespace: "sub".into(),
                resource_version: "9".into(),
                has_annotations: true,
            }
        );
        assert_eq!(blocked_names(&parent, &ev), ["subnamespaces.hnc.x-k8s.io/sub"]);
    }

    #[test]
    fn cascading_deletion_on_it_or_an_ancestor_unblocks() {
        let (parent, ev) = tree(&[(ALLOW_CASCADING_DELETION, "true")]);
        assert!(blocked_subnamespaces(&parent, &ev).is_empty());
        let (mut parent, mut ev) = tree(&[]);
        parent.annotations.insert(ALLOW_CASCADING_DELETION.into(), "true".into());
        ev.namespaces[0] = parent.clone();
        assert!(blocked_subnamespaces(&parent, &ev).is_empty());
    }

    #[test]
    fn the_condition_is_evidence_only_for_the_subnamespace_it_names() {
        let (mut parent, mut ev) = tree(&[]);
        let other = "Failed to delete all resource types, 1 remaining: subnamespace x-sub is not a leaf and doesn't allow cascading deletion";
        parent.conditions = vec![cond(CONTENT_FAILURE, "True", other)];
        ev.namespaces[0] = parent.clone();
        assert_eq!(blocked_subnamespaces(&parent, &ev)[0].evidence.len(), 2, "x-sub is not sub");
        let own = "Failed to delete all resource types, 1 remaining: subnamespace sub is not a leaf and doesn't allow cascading deletion";
        parent.conditions = vec![cond(CONTENT_FAILURE, "True", own)];
        ev.namespaces[0] = parent.clone();
        assert!(blocked_subnamespaces(&parent, &ev)[0].evidence[2].ends_with(own));
        assert!(names_refusal_of(r#"subnamespaces.hnc.x-k8s.io "sub" is forbidden"#, "sub"));
        assert!(!names_refusal_of(r#"subnamespaces.hnc.x-k8s.io "sub-2" is forbidden"#, "sub"));
    }

    #[test]
    fn cycles_do_not_loop() {
        let ev = evidence(vec![ns("a", &[(PARENT, "b")]), ns("b", &[(PARENT, "a")])]);
        assert!(!cascading_allowed(&ev.namespaces[0], &ev));
        assert_eq!(descendants("a", &ev), ["b"]);
    }
}
