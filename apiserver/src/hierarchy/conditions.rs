//! Namespace conditions (HNC's types, reasons and messages), computed from the forest.
//!
//! A namespace whose place in the hierarchy is broken — its parent is missing or excluded, or it
//! is in a cycle — has `ActivitiesHalted`: nothing propagates into it or below it, and each
//! descendant says why with reason `AncestorHaltActivities`. The controller records the
//! conditions on the namespace (with their transition times), where every replica reads them.

use hns_api::keys;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::hierarchy::forest::{Forest, Node};
use crate::hierarchy::policy::Policy;

/// Condition type: propagation into (and below) the namespace has stopped.
pub const ACTIVITIES_HALTED: &str = "ActivitiesHalted";
/// Condition type: the namespace's configuration is partly unusable.
pub const BAD_CONFIGURATION: &str = "BadConfiguration";

/// Every (type, reason) hns reports, for metrics that show zeros too.
pub const ALL: &[(&str, &str)] = &[
    (ACTIVITIES_HALTED, "ParentMissing"),
    (ACTIVITIES_HALTED, "InCycle"),
    (ACTIVITIES_HALTED, "IllegalParent"),
    (ACTIVITIES_HALTED, "AncestorHaltActivities"),
    (BAD_CONFIGURATION, "IllegalManagedLabel"),
    (BAD_CONFIGURATION, "IllegalManagedAnnotation"),
    (BAD_CONFIGURATION, FORGED),
];

/// Reason: hierarchy annotations that hns did not write (see [`crate::hierarchy::seal`]).
pub const FORGED: &str = "ForgedHierarchyState";

/// A condition without its timestamp.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NsCondition {
    /// `ActivitiesHalted` or `BadConfiguration`.
    pub type_: &'static str,
    /// Why.
    pub reason: &'static str,
    /// For people.
    pub message: String,
}

/// The namespace's own halting condition, ignoring its ancestors.
fn own_halt(forest: &Forest, policy: &Policy, ns: &str) -> Option<NsCondition> {
    let node = forest.get(ns)?;
    let halt = |reason, message| Some(NsCondition { type_: ACTIVITIES_HALTED, reason, message });
    if let Some(cycle) = forest.cycle_names(ns) {
        let mut members = cycle.clone();
        members.push(cycle[0].clone());
        return halt("InCycle", format!("Namespace is a member of the cycle: {}", members.join(" <- ")));
    }
    parent_halt(forest, policy, node)
}

/// The halt a namespace not in a cycle owes to its parent: excluded, or missing.
fn parent_halt(forest: &Forest, policy: &Policy, node: &Node) -> Option<NsCondition> {
    let halt = |reason, message| Some(NsCondition { type_: ACTIVITIES_HALTED, reason, message });
    let parent = node.parent.as_deref()?;
    if policy.is_excluded(parent) {
        return halt("IllegalParent", format!("Parent \"{parent}\" is an unmanaged namespace"));
    }
    if forest.get(parent).is_none() {
        return halt("ParentMissing", format!("Parent \"{parent}\" does not exist"));
    }
    None
}

/// The nearest ancestor of `ns` that halts on its own, if any.
pub fn halted_ancestor(forest: &Forest, policy: &Policy, ns: &str) -> Option<String> {
    if forest.reaches_root(ns) {
        // No cycle above: an ancestor halts on its own only for its parent's sake.
        return forest
            .ancestors_up(ns)
            .skip(1)
            .map_while(|a| forest.get(a))
            .find(|a| parent_halt(forest, policy, a).is_some())
            .map(|a| a.name().to_string());
    }
    let mut ancestry = forest.ancestry_names(ns);
    ancestry.pop(); // ns itself
    ancestry.into_iter().rev().find(|a| own_halt(forest, policy, a).is_some())
}

/// Whether propagation into `ns` has stopped.
pub fn is_halted(forest: &Forest, policy: &Policy, ns: &str) -> bool {
    own_halt(forest, policy, ns).is_some() || halted_ancestor(forest, policy, ns).is_some()
}

/// All conditions of `ns`, sorted.
pub fn conditions(forest: &Forest, policy: &Policy, ns: &str) -> Vec<NsCondition> {
    let mut out = Vec::new();
    match (own_halt(forest, policy, ns), halted_ancestor(forest, policy, ns)) {
        (Some(c), _) => out.push(c),
        (None, Some(root)) => out.push(NsCondition {
            type_: ACTIVITIES_HALTED,
            reason: "AncestorHaltActivities",
            message: format!(
                "Propagation paused in \"{ns}\" and its descendants due to ActivitiesHalted condition on ancestor \"{root}\""
            ),
        }),
        (None, None) => {}
    }
    if let Some(node) = forest.get(ns) {
        if let Some(forged) = node.forgery() {
            out.push(forgery(node, forged));
        }
        for kv in node.managed_labels().iter().filter(|kv| !policy.is_managed_label(&kv.key)) {
            out.push(NsCondition {
                type_: BAD_CONFIGURATION,
                reason: "IllegalManagedLabel",
                message: format!("Not a legal managed label (set via --managed-namespace-label): {}", kv.key),
            });
        }
        for kv in node.managed_annotations().iter().filter(|kv| !policy.is_managed_annotation(&kv.key)) {
            out.push(NsCondition {
                type_: BAD_CONFIGURATION,
                reason: "IllegalManagedAnnotation",
                message: format!(
                    "Not a legal managed annotation (set via --managed-namespace-annotation): {}",
                    kv.key
                ),
            });
        }
    }
    out.sort();
    out
}

/// The condition of a namespace carrying hierarchy annotations hns did not write: it names
/// them with their values, and the state hns keeps instead.
fn forgery(node: &crate::hierarchy::forest::Node, forged: &[String]) -> NsCondition {
    let annotations = node.meta.annotations();
    let found: Vec<String> = forged
        .iter()
        .filter(|k| k.as_str() != keys::SEAL)
        .map(|k| format!("{k}={:?}", annotations.and_then(|a| a.get(k)).unwrap_or("")))
        .collect();
    let found = if found.is_empty() { format!("a stray {}", keys::SEAL) } else { found.join(", ") };
    let kept = match (&node.parent, node.is_subnamespace) {
        (Some(p), true) => format!("subnamespace of \"{p}\""),
        (Some(p), false) => format!("parent \"{p}\""),
        (None, _) => "no parent".to_string(),
    };
    NsCondition {
        type_: BAD_CONFIGURATION,
        reason: FORGED,
        message: format!(
            "Hierarchy annotations not written by hns (no valid {}) are ignored and reverted: {found}; the namespace keeps {kept}. Change the hierarchy with kubectl hns set / kubectl hns create",
            keys::SEAL
        ),
    }
}

/// The conditions recorded on a namespace (annotation `hnc.x-k8s.io/conditions`).
pub fn recorded(annotation: Option<&str>) -> Vec<Condition> {
    annotation.and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default()
}

/// The conditions to record: `current`, keeping the transition time of each that was already
/// recorded unchanged.
pub fn to_record(current: &[NsCondition], previous: &[Condition], now: jiff::Timestamp) -> Vec<Condition> {
    current
        .iter()
        .map(|c| {
            let since = previous
                .iter()
                .find(|p| p.type_ == c.type_ && p.reason == c.reason && p.message == c.message)
                .map(|p| p.last_transition_time.clone())
                .unwrap_or(Time(now));
            Condition {
                type_: c.type_.to_string(),
                status: "True".into(),
                reason: c.reason.to_string(),
                message: c.message.clone(),
                last_transition_time: since,
                observed_generation: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::hierarchy::policy::testing::policy;

    fn reasons(f: &Forest, ns: &str) -> Vec<&'static str> {
        conditions(f, &policy(), ns).into_iter().map(|c| c.reason).collect()
    }

    /// `n0` (below `top`) to `n{depth-1}`, each the parent of the next.
    fn chain(top: &str, depth: usize) -> String {
        (0..depth)
            .map(|i| if i == 0 { format!("n0:{top}") } else { format!("n{i}:n{}", i - 1) })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn chains_longer_than_the_short_walk_are_judged_alike() {
        for depth in [3, 300] {
            let f = forest(&format!("{} ok", chain("gone", depth)));
            let deepest = format!("n{}", depth - 1);
            assert_eq!(halted_ancestor(&f, &policy(), &deepest).as_deref(), Some("n0"), "depth {depth}");
            assert_eq!(reasons(&f, &deepest), ["AncestorHaltActivities"]);
            assert_eq!(f.ancestry_names(&deepest).len(), depth + 1, "the missing parent ends it");
            let f = forest(&format!("{} top", chain("top", depth)));
            assert_eq!(halted_ancestor(&f, &policy(), &deepest), None, "depth {depth}");
            assert!(reasons(&f, &deepest).is_empty());
        }
        let f = forest(&format!("{} top:n299", chain("top", 300)));
        assert_eq!(reasons(&f, "n150"), ["InCycle"], "a cycle of 301 is found");
    }

    #[test]
    fn hnc_conditions() {
        let f = forest("a:b b:a c:a orphan:gone kid:orphan x:kube-system fine root fine:root");
        assert_eq!(reasons(&f, "a"), ["InCycle"]);
        assert_eq!(
            conditions(&f, &policy(), "a")[0].message,
            "Namespace is a member of the cycle: a <- b <- a"
        );
        assert_eq!(reasons(&f, "c"), ["AncestorHaltActivities"]);
        assert_eq!(reasons(&f, "orphan"), ["ParentMissing"]);
        assert_eq!(conditions(&f, &policy(), "orphan")[0].message, "Parent \"gone\" does not exist");
        assert_eq!(reasons(&f, "kid"), ["AncestorHaltActivities"]);
        assert!(conditions(&f, &policy(), "kid")[0].message.contains("ancestor \"orphan\""));
        assert_eq!(reasons(&f, "x"), ["IllegalParent"]);
        assert!(reasons(&f, "fine").is_empty());
        assert!(is_halted(&f, &policy(), "kid"));
        assert!(!is_halted(&f, &policy(), "fine"));
    }

    #[test]
    fn transition_times_survive_unchanged_conditions() {
        let f = forest("orphan:gone");
        let now = jiff::Timestamp::now();
        let first = to_record(&conditions(&f, &policy(), "orphan"), &[], now);
        let later = now.checked_add(jiff::SignedDuration::from_secs(60)).unwrap();
        let second = to_record(&conditions(&f, &policy(), "orphan"), &first, later);
        assert_eq!(second[0].last_transition_time, Time(now));
        assert_eq!(second[0].status, "True");
    }
}
