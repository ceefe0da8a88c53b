//! hns's own case: deleting a namespace deletes its subnamespaces (the namespace controller
//! deletes its `subnamespaces.hnc.x-k8s.io` through hns's API), and hns refuses to delete a
//! subnamespace that has children unless cascading deletion is allowed on it or an ancestor.
//! The parent then stays Terminating with a content failure naming subnamespaces.
//!
//! The hierarchy lives on Namespace annotations: `hnc.x-k8s.io/subnamespace-of: P` and
//! `hnc.x-k8s.io/parent: P` name the parent, `hnc.x-k8s.io/allow-cascading-deletion: "true"`
//! allows cascading deletion. A namespace with subnamespaces carries hns's finalizer
//! `hnc.x-k8s.io/hasSubnamespace`, which hns removes once they are gone.

use std::collections::HashSet;

use hns_api::keys::{ALLOW_CASCADING_DELETION, HAS_SUBNAMESPACE_FINALIZER, SUBNAMESPACE_OF};

use super::namespace::finalizer_removal;
use super::{listing, single, Cause, CauseKind};
use crate::conditions::{self, CONTENT_FAILURE};
use crate::evidence::{Evidence, NamespaceState};
use crate::remedy::{Action, RemedyId};

/// The subnamespaces of `ns` whose deletion hns refuses, one cause each.
pub fn blocked_subnamespaces(ns: &NamespaceState, ev: &Evidence) -> Vec<Cause> {
    let failure = conditions::failing(&ns.conditions, CONTENT_FAILURE);
    blocked(ns, ev)
        .into_iter()
        .map(|child| {
            let failure = failure.filter(|c| names_refusal_of(&c.message, &child.name));
            let kids: Vec<String> = ev.children(&child.name).map(|n| n.name.clone()).collect();
            let subtree = descendants(&child.name, ev);
            let mut evidence = vec![
                format!("{} is a subnamespace of {} (annotation {SUBNAMESPACE_OF})", child.name, ns.name),
                format!(
                    "it has children ({}), and neither it nor an ancestor sets {ALLOW_CASCADING_DELETION}",
                    listing(&kids, 5)
                ),
            ];
            if let Some(c) = failure {
                evidence.push(c.quoted());
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

/// hns's finalizer `hasSubnamespace` on `ns`, when it is what holds `ns`: no subnamespace is
/// left yet hns has not removed it (hns is not running, or cannot write), or subnamespaces are
/// left that nothing is deleting. While its subnamespaces are Terminating, it is right, and
/// the way down to what holds them is the cause ([`super::subtree`]).
pub fn subnamespace_finalizer(ns: &NamespaceState, ev: &Evidence) -> Option<Cause> {
    let index = ns.metadata_finalizers.iter().position(|f| f == HAS_SUBNAMESPACE_FINALIZER)?;
    let subs: Vec<&NamespaceState> = ev.subnamespaces(&ns.name).collect();
    let alive: Vec<String> = subs.iter().filter(|n| !n.terminating()).map(|n| n.name.clone()).collect();
    let finalizers = format!("metadata.finalizers: {}", ns.metadata_finalizers.join(", "));
    if subs.is_empty() {
        return Some(Cause {
            kind: CauseKind::NamespaceFinalizer,
            summary: format!("hns's finalizer {HAS_SUBNAMESPACE_FINALIZER} is left although no subnamespace is"),
            evidence: vec![finalizers, format!("no namespace is a subnamespace of {} any more", ns.name)],
            advice: "hns removes it once the last subnamespace is gone: check that hns runs (kubectl -n hns-system get pods) and can write namespaces; if hns was uninstalled, remove the finalizer.".into(),
            risk: "None for the hierarchy: nothing is below this namespace any more.".into(),
            remedy: finalizer_removal(ns, index),
        });
    }
    if alive.is_empty() {
        return None;
    }
    Some(Cause {
        kind: CauseKind::NamespaceFinalizer,
        summary: format!("{} waits for its subnamespaces {}, which are not being deleted", ns.name, listing(&alive, 5)),
        evidence: vec![
            finalizers,
            format!("{} still exist and are not Terminating", listing(&alive, 10)),
            if cascading_allowed(ns, ev) {
                format!("cascading deletion is allowed, so hns deletes them with {}: hns is not running or cannot delete them", ns.name)
            } else {
                format!("cascading deletion is not allowed on {} or an ancestor, so hns does not delete them", ns.name)
            },
        ],
        advice: format!(
            "Check that hns runs (kubectl -n hns-system get pods), or delete the subnamespaces yourself (kubectl delete subns -n {} NAME) if they should go with {}.",
            ns.name, ns.name
        ),
        risk: "Deleting a subnamespace deletes everything in it.".into(),
        remedy: None,
    })
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
    ev.subnamespaces(&ns.name)
        .filter(|c| ev.children(&c.name).next().is_some() && !cascading_allowed(c, ev))
        .collect()
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
    use crate::causes::fixtures::*;

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

    #[test]
    fn hns_finalizer_left_without_subnamespaces_is_a_cause_with_its_removal() {
        let mut parent = terminating("parent");
        parent.metadata_finalizers = vec!["example.com/x".into(), HAS_SUBNAMESPACE_FINALIZER.into()];
        let ev = evidence(vec![parent.clone()]);
        let cause = subnamespace_finalizer(&parent, &ev).expect("nothing below: hns should have removed it");
        assert!(cause.summary.contains("although no subnamespace is"), "{}", cause.summary);
        let remedy = cause.remedy.unwrap();
        assert!(matches!(
            &remedy.actions[..],
            [Action::RemoveFinalizer { finalizer, index: 1, .. }] if finalizer == HAS_SUBNAMESPACE_FINALIZER
        ));
        let generic = crate::causes::namespace::metadata_finalizers(&parent, &ev);
        assert_eq!(generic.len(), 1, "example.com/x only: hns's is judged here");
    }

    #[test]
    fn hns_finalizer_with_live_subnamespaces_says_nothing_deletes_them() {
        let (mut parent, mut ev) = tree(&[]);
        parent.metadata_finalizers = vec![HAS_SUBNAMESPACE_FINALIZER.into()];
        ev.namespaces[0] = parent.clone();
        let cause = subnamespace_finalizer(&parent, &ev).unwrap();
        assert_eq!(
            cause.summary,
            "parent waits for its subnamespaces sub, leaf, which are not being deleted"
        );
        assert!(cause.evidence[2].contains("cascading deletion is not allowed"));
        for n in ev.namespaces.iter_mut().skip(1) {
            n.deletion_timestamp = Some(ago(10));
        }
        assert!(subnamespace_finalizer(&parent, &ev).is_none(), "terminating: the way down tells the rest");
    }
}
