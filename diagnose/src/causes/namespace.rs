//! Finalizers on the Namespace object itself, and finalizing it by hand as the last resort.

use super::{listing, single, Cause, CauseKind};
use crate::conditions::{self, DISCOVERY_FAILURE};
use crate::evidence::{Evidence, NamespaceState};
use crate::finalizers::attribute;
use hns_api::keys::HAS_SUBNAMESPACE_FINALIZER;

use crate::remedy::{Action, Holder, Remedy, RemedyId};

/// The namespace controller's own entry in `spec.finalizers`.
const KUBERNETES: &str = "kubernetes";

/// `spec.finalizers` entries other than `kubernetes`, which another system (OpenShift's
/// `openshift.io/origin`, for one) must remove.
pub fn foreign_spec_finalizers(ns: &NamespaceState) -> Vec<Cause> {
    ns.spec_finalizers
        .iter()
        .filter(|f| *f != KUBERNETES)
        .map(|f| {
            // Keep `kubernetes`: the namespace controller must still empty the namespace.
            let to: Vec<String> = ns.spec_finalizers.iter().filter(|x| *x != f).cloned().collect();
            Cause {
                kind: CauseKind::ForeignSpecFinalizer,
                summary: format!("spec.finalizers holds {f}, which is not the namespace controller's"),
                evidence: vec![format!("spec.finalizers: {}", ns.spec_finalizers.join(", "))],
                advice: format!(
                    "{f} belongs to another system (openshift.io/origin is OpenShift's). If that system still runs, let it finish; if it was removed, drop {f} through the finalize subresource (kubectl edit and patch cannot change spec.finalizers)."
                ),
                risk: format!("The system behind {f} does not run its cleanup for this namespace."),
                remedy: single(
                    RemedyId::DropSpecFinalizer { namespace: ns.name.clone(), finalizer: f.clone() },
                    format!("drop {f} from spec.finalizers of {}", ns.name),
                    Action::FinalizeNamespace {
                        namespace: ns.name.clone(),
                        resource_version: ns.resource_version.clone(),
                        from: ns.spec_finalizers.clone(),
                        to,
                    },
                ),
            }
        })
        .collect()
}

/// The namespace's own `metadata.finalizers`, which some controllers (Rancher, kopf operators)
/// add and must remove.
/// hns's own `hasSubnamespace` is left to [`super::hierarchy::subnamespace_finalizer`], which
/// knows when it is right.
pub fn metadata_finalizers(ns: &NamespaceState, ev: &Evidence) -> Vec<Cause> {
    ns.metadata_finalizers
        .iter()
        .enumerate()
        .filter(|(_, f)| *f != HAS_SUBNAMESPACE_FINALIZER)
        .map(|(index, f)| {
            let who = attribute(f, "", &ev.crds);
            let mut evidence = vec![
                format!("metadata.finalizers: {}", ns.metadata_finalizers.join(", ")),
                format!("it is removed by {}", who.controller),
            ];
            if conditions::any_written(&ns.conditions)
                && !conditions::read(&ns.conditions).iter().any(|r| r.problem)
            {
                evidence.push("every deletion condition reports success: only finalizers hold the namespace".into());
            }
            Cause {
                kind: CauseKind::NamespaceFinalizer,
                summary: format!("the namespace carries the finalizer {f}"),
                evidence,
                advice: format!(
                    "If {} is still installed, bring it back so it finishes; if it was uninstalled, remove this finalizer.",
                    who.controller
                ),
                risk: format!(
                    "Cleanup that {} does for this namespace (permissions or records elsewhere) does not happen.",
                    who.controller
                ),
                remedy: finalizer_removal(ns, index),
            }
        })
        .collect()
}

/// Removing the `index`th of `ns`'s `metadata.finalizers`.
pub fn finalizer_removal(ns: &NamespaceState, index: usize) -> Option<Remedy> {
    let f = ns.metadata_finalizers.get(index)?;
    single(
        RemedyId::RemoveNamespaceFinalizer { namespace: ns.name.clone(), finalizer: f.clone() },
        format!("remove finalizer {f} from namespace {}", ns.name),
        Action::RemoveFinalizer {
            holder: Holder::Namespace { name: ns.name.clone() },
            finalizer: f.clone(),
            index,
            resource_version: ns.resource_version.clone(),
        },
    )
}

/// Removing `kubernetes` from `spec.finalizers` by hand, skipping the namespace controller.
/// Refused without `--force` while content remains or may remain unseen.
pub fn last_resort(ns: &NamespaceState, ev: &Evidence) -> Option<Cause> {
    if !ns.spec_finalizers.iter().any(|f| f == KUBERNETES) {
        return None;
    }
    let content = remaining_content(ns, ev);
    let to: Vec<String> = ns.spec_finalizers.iter().filter(|f| *f != KUBERNETES).cloned().collect();
    let mut remedy = single(
        RemedyId::Finalize { namespace: ns.name.clone() },
        format!("finalize namespace {} (remove \"kubernetes\" from spec.finalizers)", ns.name),
        Action::FinalizeNamespace {
            namespace: ns.name.clone(),
            resource_version: ns.resource_version.clone(),
            from: ns.spec_finalizers.clone(),
            to,
        },
    )?;
    remedy.needs_force = (!content.is_empty()).then(|| content.join("; "));
    let evidence = if content.is_empty() {
        vec!["no content remains and discovery was complete".into()]
    } else {
        content
    };
    Some(Cause {
        kind: CauseKind::LastResort,
        summary: "finalize the namespace by hand, skipping the namespace controller".into(),
        evidence,
        advice: "Only when the remedies above did not free the namespace and the namespace controller cannot finish (it is gone or keeps failing).".into(),
        risk: "Content still in the namespace stays in etcd without a namespace: invisible to kubectl, and back again if a namespace of the same name is created; what it guarded outside the cluster is orphaned.".into(),
        remedy: Some(remedy),
    })
}

/// What shows that content remains or may remain unseen.
fn remaining_content(ns: &NamespaceState, ev: &Evidence) -> Vec<String> {
    let mut found = Vec::new();
    let left: Vec<String> = ev.leftovers_in(&ns.name).map(|l| l.display_name()).collect();
    if !left.is_empty() {
        found.push(format!("{} object(s) remain: {}", left.len(), listing(&left, 5)));
    }
    let unseen: Vec<String> = ev
        .discovery_failures
        .iter()
        .map(|f| f.group_version.clone())
        .chain(ev.list_failures.iter().filter(|f| f.namespace == ns.name).map(|f| f.resource.qualified()))
        .collect();
    // Finalizing a parent does not wait for its subnamespaces: they would stay, naming a
    // parent that no longer exists, cut off from the policies and objects it gave them.
    let below: Vec<String> = ev.below(&ns.name).iter().map(|n| n.name.clone()).collect();
    if !below.is_empty() {
        found.push(format!(
            "finalizing it would orphan {}, the namespace(s) below it that still exist",
            listing(&below, 5)
        ));
    }
    if !unseen.is_empty() {
        found.push(format!("content of {} could not be listed and may remain", listing(&unseen, 5)));
    } else if conditions::failing(&ns.conditions, DISCOVERY_FAILURE).is_some() {
        found.push(format!("condition {DISCOVERY_FAILURE} is True: content may remain unseen"));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::evidence::DiscoveryFailure;

    #[test]
    fn drops_only_the_foreign_spec_finalizer() {
        let mut ns = terminating("ns");
        ns.spec_finalizers = vec!["openshift.com/origin".into(), "kubernetes".into()];
        let causes = foreign_spec_finalizers(&ns);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].remedy.as_ref().unwrap().actions[0],
            Action::FinalizeNamespace {
                namespace: "ns".into(),
                resource_version: "100".into(),
                from: vec!["openshift.com/origin".into(), "kubernetes".into()],
                to: vec!["kubernetes".into()],
            }
        );
        assert!(foreign_spec_finalizers(&terminating("plain")).is_empty());
    }

    #[test]
    fn removes_a_namespace_metadata_finalizer_by_index() {
        let mut ns = terminating("ns");
        ns.spec_finalizers.clear();
        ns.metadata_finalizers = vec!["a.example.com/x".into(), "b.example.com/y".into()];
        ns.conditions = vec![cond(DISCOVERY_FAILURE, "False", "")];
        let ev = evidence(vec![ns.clone()]);
        let causes = metadata_finalizers(&ns, &ev);
        assert_eq!(causes.len(), 2);
        assert!(causes[1].evidence[2].contains("only finalizers hold"));
        assert!(matches!(
            &causes[1].remedy.as_ref().unwrap().actions[0],
            Action::RemoveFinalizer { index: 1, .. }
        ));
    }

    #[test]
    fn the_last_resort_needs_force_while_content_may_remain() {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        let clean = last_resort(&ns, &ev).unwrap();
        assert!(clean.remedy.as_ref().unwrap().needs_force.is_none());
        ev.discovery_failures
            .push(DiscoveryFailure { group_version: "dead.example.com/v1".into(), message: "503".into() });
        let unseen = last_resort(&ns, &ev).unwrap();
        let why = unseen.remedy.as_ref().unwrap().needs_force.clone().unwrap();
        assert!(why.contains("dead.example.com/v1 could not be listed"), "{why}");
        let mut done = ns.clone();
        done.spec_finalizers.clear();
        assert!(last_resort(&done, &ev).is_none());
    }
}
