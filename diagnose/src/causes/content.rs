//! Objects left in the namespace: never deleted, pods no kubelet confirms gone, and objects
//! that wait for a finalizer.

use std::collections::BTreeMap;

use super::{age, listing, Cause, CauseKind};
use crate::conditions::{self, CONTENT_FAILURE, FINALIZERS_REMAINING};
use crate::evidence::{Evidence, Leftover, NamespaceState};
use crate::finalizers::attribute;
use crate::remedy::{Action, Holder, Remedy, RemedyId};

/// Before the controller's first pass, undeleted content is normal: it deletes it on that pass.
const FIRST_PASS_SECONDS: i64 = 60;
/// How long past its deletion timestamp (the end of its grace period) a pod may take to go.
const POD_GRACE_SECONDS: i64 = 30;

/// Objects the namespace controller has not deleted although it has had its pass.
pub fn undeleted(ns: &NamespaceState, ev: &Evidence, excluded: &[String]) -> Option<Cause> {
    let since = ns.deletion_timestamp.map(|t| age(ev.now, t)).unwrap_or(0);
    if !conditions::any_written(&ns.conditions) && since < FIRST_PASS_SECONDS {
        return None;
    }
    let objects: Vec<&Leftover> = ev
        .leftovers_in(&ns.name)
        .filter(|l| l.deletion_timestamp.is_none() && !excluded.contains(&l.display_name()))
        .collect();
    if objects.is_empty() {
        return None;
    }
    let names: Vec<String> = objects.iter().map(|l| l.display_name()).collect();
    let mut evidence =
        vec![format!("{} object(s) have no deletionTimestamp: {}", objects.len(), listing(&names, 10))];
    if let Some(c) = conditions::failing(&ns.conditions, CONTENT_FAILURE) {
        evidence.push(c.quoted());
    }
    let actions = objects.iter().map(|l| delete(l, false)).collect();
    Some(Cause {
        kind: CauseKind::UndeletedContent,
        summary: format!("{} object(s) were never deleted", objects.len()),
        evidence,
        advice: "The namespace controller's DELETE of these failed or has not happened yet. Once the causes above are fixed it deletes them itself; deleting them now saves waiting for its next retry.".into(),
        risk: "None beyond the namespace deletion already asked for: these objects go with the namespace anyway.".into(),
        remedy: Some(Remedy::new(
            RemedyId::DeleteContent { namespace: ns.name.clone() },
            format!("delete the {} object(s) left in {}", objects.len(), ns.name),
            actions,
        )),
    })
}

/// The DELETE of leftover `l`, with the uid and resourceVersion it was read at as preconditions;
/// `force` skips the grace period.
fn delete(l: &Leftover, force: bool) -> Action {
    Action::DeleteObject {
        resource: l.resource.clone(),
        namespace: l.namespace.clone(),
        name: l.name.clone(),
        uid: l.uid.clone(),
        resource_version: l.resource_version.clone(),
        force,
    }
}

/// Pods past their grace period without finalizers: a kubelet should have confirmed them gone.
/// Pods in `excluded` are reported already (waiting for a lost node).
pub fn terminating_pods(ns: &NamespaceState, ev: &Evidence, excluded: &[String]) -> Option<Cause> {
    let pods: Vec<&Leftover> = ev
        .leftovers_in(&ns.name)
        .filter(|l| l.resource.group.is_empty() && l.resource.plural == "pods")
        .filter(|l| !excluded.contains(&l.name))
        .filter(|l| l.finalizers.is_empty())
        .filter(|l| l.deletion_timestamp.is_some_and(|t| age(ev.now, t) > POD_GRACE_SECONDS))
        .collect();
    if pods.is_empty() {
        return None;
    }
    let names: Vec<String> = pods.iter().map(|l| l.name.clone()).collect();
    let actions = pods.iter().map(|l| delete(l, true)).collect();
    Some(Cause {
        kind: CauseKind::TerminatingPods,
        summary: format!("{} pod(s) are past their grace period and no kubelet confirms them gone", pods.len()),
        evidence: vec![format!("pods: {}", listing(&names, 10))],
        advice: "Their node is probably gone or NotReady (kubectl get nodes). If it is really gone, force-delete them.".into(),
        risk: "Force deletion removes only the API object: if the node is alive the containers keep running, and a StatefulSet may start a second copy.".into(),
        remedy: Some(Remedy::new(
            RemedyId::ForceDeletePods { namespace: ns.name.clone() },
            format!("force-delete {} pod(s)", pods.len()),
            actions,
        )),
    })
}

/// Deleted objects that wait for a finalizer, one cause per finalizer. Finalizers in
/// `explained` are reported already (their controller is missing).
pub fn pending_finalizers(ns: &NamespaceState, ev: &Evidence, explained: &[String]) -> Vec<Cause> {
    let mut by_finalizer: BTreeMap<&str, Vec<&Leftover>> = BTreeMap::new();
    for l in ev.leftovers_in(&ns.name).filter(|l| l.deletion_timestamp.is_some()) {
        for f in l.finalizers.iter().filter(|f| !explained.contains(f)) {
            by_finalizer.entry(f).or_default().push(l);
        }
    }
    let condition = conditions::failing(&ns.conditions, FINALIZERS_REMAINING);
    by_finalizer
        .into_iter()
        .map(|(finalizer, objects)| {
            let mut cause = finalizer_cause(&ns.name, finalizer, &objects, ev);
            if finalizer == "kubernetes.io/pvc-protection" {
                cause
                    .evidence
                    .extend(objects.iter().flat_map(|o| super::nodes::claim_users(ns, ev, &o.name)));
            }
            if let Some(c) = condition {
                cause.evidence.push(c.quoted());
            }
            cause
        })
        .collect()
}

fn finalizer_cause(namespace: &str, finalizer: &str, objects: &[&Leftover], ev: &Evidence) -> Cause {
    let who = attribute(finalizer, &objects[0].resource.group, &ev.crds);
    let names: Vec<String> = objects
        .iter()
        .map(|l| {
            let since = l.deletion_timestamp.map(|t| age(ev.now, t)).unwrap_or(0);
            let owners = if l.owners.is_empty() {
                String::new()
            } else {
                format!(", owned by {}", l.owners.join(", "))
            };
            format!("{} (deleted {since}s ago{owners})", l.display_name())
        })
        .collect();
    let evidence = vec![
        format!("{finalizer} on {} deleted object(s): {}", objects.len(), listing(&names, 10)),
        format!("it is removed by {}", who.controller),
    ];
    if who.builtin {
        return Cause {
            kind: CauseKind::PendingFinalizer,
            summary: format!("{} object(s) wait for {finalizer}", objects.len()),
            evidence,
            advice: who
                .hint
                .unwrap_or("Check that the Kubernetes component that owns it runs.")
                .to_string(),
            risk: "None: a Kubernetes finalizer is not removed by hand; the fault it points to is fixed instead.".into(),
            remedy: None,
        };
    }
    Cause {
        kind: CauseKind::PendingFinalizer,
        summary: format!("{} object(s) wait for finalizer {finalizer}, which no controller is removing", objects.len()),
        evidence,
        advice: format!(
            "If {} is still installed, bring it back (check its pods and logs): it finishes its cleanup and removes the finalizer. If it was uninstalled, remove this finalizer, and only it.",
            who.controller
        ),
        risk: format!(
            "Whatever {finalizer} guards outside the cluster (cloud resources, external records) is not cleaned up and may be orphaned."
        ),
        remedy: Some(remove_finalizer(namespace, finalizer, objects)),
    }
}

/// Removes `finalizer` from each of `objects`, deleted objects of `namespace`.
pub(super) fn remove_finalizer(namespace: &str, finalizer: &str, objects: &[&Leftover]) -> Remedy {
    let actions = objects
        .iter()
        .map(|l| Action::RemoveFinalizer {
            holder: Holder::Object {
                resource: l.resource.clone(),
                namespace: l.namespace.clone(),
                name: l.name.clone(),
            },
            finalizer: finalizer.to_string(),
            index: l.finalizers.iter().position(|f| f == finalizer).unwrap_or(0),
            resource_version: l.resource_version.clone(),
        })
        .collect();
    Remedy::new(
        RemedyId::RemoveObjectFinalizer {
            namespace: namespace.to_string(),
            finalizer: finalizer.to_string(),
        },
        format!("remove finalizer {finalizer} from {} object(s)", objects.len()),
        actions,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::conditions::CONTENT_REMAINING;

    #[test]
    fn undeleted_content_waits_for_the_controllers_first_pass() {
        let mut ns = terminating("ns");
        ns.deletion_timestamp = Some(ago(5));
        let mut ev = evidence(vec![ns.clone()]);
        ev.leftovers.push(leftover(core("configmaps", "ConfigMap"), "ns", "a"));
        assert!(undeleted(&ns, &ev, &[]).is_none(), "too early to tell");
        ns.conditions = vec![cond(CONTENT_FAILURE, "True", "webhook said no")];
        let c = undeleted(&ns, &ev, &[]).unwrap();
        assert_eq!(c.summary, "1 object(s) were never deleted");
        assert!(c.evidence[1].ends_with("webhook said no"));
        assert!(matches!(&c.remedy.as_ref().unwrap().actions[0], Action::DeleteObject { force: false, .. }));
        assert!(undeleted(&ns, &ev, &["configmaps/a".into()]).is_none());
    }

    #[test]
    fn pods_past_their_grace_are_force_deleted() {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        ev.leftovers.push(deleted_leftover(core("pods", "Pod"), "ns", "p", 10));
        assert!(terminating_pods(&ns, &ev, &[]).is_none(), "still in its grace period");
        ev.leftovers[0].deletion_timestamp = Some(ago(600));
        let c = terminating_pods(&ns, &ev, &[]).unwrap();
        assert!(matches!(&c.remedy.as_ref().unwrap().actions[0], Action::DeleteObject { force: true, .. }));
    }

    #[test]
    fn a_foreign_finalizer_is_removed_alone() {
        let mut ns = terminating("ns");
        ns.conditions = vec![
            cond(CONTENT_REMAINING, "True", "widgets.stable.example.com has 1 resource instances"),
            cond(FINALIZERS_REMAINING, "True", "stable.example.com/cleanup in 1 resource instances"),
        ];
        let mut ev = evidence(vec![ns.clone()]);
        ev.crds = vec!["widgets.stable.example.com".into()];
        let mut w = deleted_leftover(widgets(), "ns", "w", 120);
        w.finalizers = vec!["other.example.org/x".into(), "stable.example.com/cleanup".into()];
        ev.leftovers.push(w);
        let causes = pending_finalizers(&ns, &ev, &[]);
        assert_eq!(causes.len(), 2);
        let c = causes.iter().find(|c| c.summary.contains("stable.example.com/cleanup")).unwrap();
        assert!(c.evidence[0].contains("widgets.stable.example.com/w (deleted 120s ago)"), "{c:?}");
        assert!(c.evidence[1].contains("the controller of stable.example.com"));
        assert!(c.evidence[2].contains(FINALIZERS_REMAINING));
        assert_eq!(
            c.remedy.as_ref().unwrap().actions[0],
            Action::RemoveFinalizer {
                holder: Holder::Object { resource: widgets(), namespace: "ns".into(), name: "w".into() },
                finalizer: "stable.example.com/cleanup".into(),
                index: 1,
                resource_version: "7".into(),
            }
        );
        assert_eq!(
            c.remedy.as_ref().unwrap().id,
            RemedyId::RemoveObjectFinalizer {
                namespace: "ns".into(),
                finalizer: "stable.example.com/cleanup".into()
            }
        );
    }

    #[test]
    fn a_kubernetes_finalizer_is_explained_not_removed() {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        let mut pvc =
            deleted_leftover(core("persistentvolumeclaims", "PersistentVolumeClaim"), "ns", "data", 60);
        pvc.finalizers = vec!["kubernetes.io/pvc-protection".into()];
        ev.leftovers.push(pvc);
        let causes = pending_finalizers(&ns, &ev, &[]);
        assert!(causes[0].remedy.is_none());
        assert!(causes[0].advice.contains("pod"));
    }
}
