//! Deleted pods that wait for their node: only the kubelet of a pod's node confirms that the
//! pod's containers stopped, so a pod on a node whose kubelet stopped reporting (NotReady, never
//! reported) stays Terminating forever, and its namespace with it. A pod bound to a node that no
//! longer exists is force-deleted by the pod garbage collector after its quarantine.

use std::collections::BTreeMap;

use hns_api::duration::human_duration;

use super::{age, listing, Cause, CauseKind};
use crate::conditions::{self, CONTENT_FAILURE};
use crate::evidence::{Evidence, NamespaceState, ResourceType};
use crate::nodes::{BoundPod, NodeHealth};
use crate::remedy::{Action, Remedy, RemedyId};

/// kube-controller-manager's pod garbage collector (pkg/controller/podgc) deletes the pods of
/// a node that is still missing this long after it first noticed it missing…
const PODGC_QUARANTINE_SECONDS: i64 = 40;
/// …on one of its passes, which run this often.
const PODGC_PERIOD_SECONDS: i64 = 20;

/// One cause per node, not Ready or missing, that deleted pods of `ns` wait for.
pub fn pods_waiting_for_nodes(ns: &NamespaceState, ev: &Evidence) -> Vec<Cause> {
    waiting(ns, ev)
        .into_iter()
        .map(|(node, (health, pods))| node_cause(ns, node, health, &pods, ev))
        .collect()
}

/// The names of the pods of `ns` that those causes cover, so no other rule reports them too.
pub fn waiting_pod_names(ns: &NamespaceState, ev: &Evidence) -> Vec<String> {
    waiting(ns, ev).into_values().flat_map(|(_, pods)| pods.into_iter().map(|p| p.name.clone())).collect()
}

type Waiting<'a> = BTreeMap<&'a str, (&'a NodeHealth, Vec<&'a BoundPod>)>;

/// The other objects of `ns` the namespace controller has not deleted because pods wait for a
/// node: it deletes the pods of a namespace first and the rest only once they are gone
/// (Kubernetes 1.33 and later), so those objects are held back, not "never deleted".
pub fn held_back_by_pods(ns: &NamespaceState, ev: &Evidence) -> Vec<String> {
    if waiting(ns, ev).is_empty() {
        return Vec::new();
    }
    held_back(ns, ev)
}

fn held_back(ns: &NamespaceState, ev: &Evidence) -> Vec<String> {
    ev.leftovers_in(&ns.name)
        .filter(|l| l.deletion_timestamp.is_none())
        .filter(|l| !(l.resource.group.is_empty() && l.resource.plural == "pods"))
        .map(|l| l.display_name())
        .collect()
}

/// Why PersistentVolumeClaim `claim` of `ns` keeps `kubernetes.io/pvc-protection`: the deleted
/// pods that still mount it and wait for a lost node, one line each.
pub fn claim_users(ns: &NamespaceState, ev: &Evidence, claim: &str) -> Vec<String> {
    waiting(ns, ev)
        .into_iter()
        .flat_map(|(node, (_, pods))| pods.into_iter().map(move |p| (node, p)))
        .filter(|(_, p)| p.claims.iter().any(|c| c == claim))
        .map(|(node, p)| {
            format!("claim {claim} is still used by pod {}, which waits for node {node}: fix that first, and the finalizer clears by itself", p.name)
        })
        .collect()
}

/// Whether the namespace's content-failure condition says only that pods remain, which the
/// pods waiting for nodes explain: the namespace controller reports pods that outlive their
/// grace period as "unexpected items still remain", and deletes nothing else while pods remain.
pub fn explains_content_failure(ns: &NamespaceState, ev: &Evidence) -> bool {
    let Some(c) = conditions::failing(&ns.conditions, CONTENT_FAILURE) else { return false };
    !waiting(ns, ev).is_empty() && pods_remain_only(&c.message)
}

fn pods_remain_only(message: &str) -> bool {
    message.contains(" 1 remaining: unexpected items still remain") && message.ends_with("Resource=pods")
}

/// The deleted pods of `ns` by node, for the nodes read and found not Ready (or missing).
fn waiting<'a>(ns: &NamespaceState, ev: &'a Evidence) -> Waiting<'a> {
    let mut by_node: Waiting<'a> = BTreeMap::new();
    for pod in ev.nodes.pods.iter().filter(|p| p.namespace == ns.name) {
        // A node that could not be read is not taken for a lost one.
        match ev.nodes.health(&pod.node) {
            None | Some(NodeHealth::Ready) => {}
            Some(health) => {
                by_node.entry(pod.node.as_str()).or_insert_with(|| (health, Vec::new())).1.push(pod)
            }
        }
    }
    by_node
}

fn node_cause(
    ns: &NamespaceState,
    node: &str,
    health: &NodeHealth,
    pods: &[&BoundPod],
    ev: &Evidence,
) -> Cause {
    let names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    let who = match names.as_slice() {
        [one] => format!("pod {one} waits"),
        _ => format!("{} pods ({}) wait", names.len(), listing(&names, 5)),
    };
    let (summary, advice, risk) = match health {
        NodeHealth::Missing => missing(&who, node),
        _ => not_ready(&who, node, health, &ns.name, &names[0]),
    };
    Cause {
        kind: CauseKind::PodsWaitingForNode,
        summary,
        evidence: pod_evidence(ns, node, health, pods, ev),
        advice,
        risk,
        remedy: Some(Remedy::new(
            RemedyId::ForceDeletePodsOnNode { namespace: ns.name.clone(), node: node.to_string() },
            format!("force-delete {} pod(s) bound to node {node}", pods.len()),
            pods.iter().copied().map(force_delete).collect(),
        )),
    }
}

/// The node's state, the pods bound to it, and what they hold up.
fn pod_evidence(
    ns: &NamespaceState,
    node: &str,
    health: &NodeHealth,
    pods: &[&BoundPod],
    ev: &Evidence,
) -> Vec<String> {
    let deleted: Vec<String> = pods
        .iter()
        .map(|p| match p.deletion_timestamp.map(|t| age(ev.now, t)) {
            Some(over) if over >= 0 => format!("{} (grace period over {} ago)", p.name, human_duration(over)),
            _ => format!("{} (in its grace period)", p.name),
        })
        .collect();
    let mut evidence = vec![
        node_evidence(node, health, ev),
        format!("deleted pods bound to node {node} in namespace {}: {}", ns.name, listing(&deleted, 10)),
        format!("only the kubelet of node {node} confirms that a pod's containers stopped; until it does, a deleted pod stays Terminating, and its namespace with it"),
    ];
    let mut claims: Vec<String> = pods.iter().flat_map(|p| p.claims.iter().cloned()).collect();
    claims.sort();
    claims.dedup();
    if !claims.is_empty() {
        evidence.push(format!(
            "they use PersistentVolumeClaim(s) {}, which kubernetes.io/pvc-protection keeps until these pods are gone",
            listing(&claims, 10)
        ));
    }
    let rest = held_back(ns, ev);
    if !rest.is_empty() {
        evidence.push(format!(
            "the namespace controller deletes the namespace's other objects only once its pods are gone: {} wait ({})",
            rest.len(),
            listing(&rest, 5)
        ));
    }
    if let Some(c) =
        conditions::failing(&ns.conditions, CONTENT_FAILURE).filter(|c| pods_remain_only(&c.message))
    {
        evidence.push(c.quoted());
    }
    evidence
}

fn node_evidence(node: &str, health: &NodeHealth, ev: &Evidence) -> String {
    match health {
        NodeHealth::NotReady { status, reason, message, since } => {
            let since = since
                .map(|t| format!(" since {t} ({} ago)", human_duration(age(ev.now, t))))
                .unwrap_or_default();
            format!("node {node}: Ready={status}{since}: {reason}: {message}")
        }
        NodeHealth::NeverReported { registered } => {
            let at = registered.map(|t| format!(" (registered at {t})")).unwrap_or_default();
            format!("node {node} has no Ready condition: no kubelet ever reported for it{at}")
        }
        NodeHealth::Missing => format!("node {node} does not exist: there is no Node object of that name"),
        NodeHealth::Ready => format!("node {node} is Ready"),
    }
}

/// Summary, advice and risk for pods on a node that exists but does not report.
fn not_ready(
    who: &str,
    node: &str,
    health: &NodeHealth,
    ns: &str,
    example: &str,
) -> (String, String, String) {
    let state = match health {
        NodeHealth::NotReady { since: Some(t), .. } => format!("NotReady since {t}"),
        NodeHealth::NeverReported { .. } => "whose kubelet never reported".to_string(),
        _ => "NotReady".to_string(),
    };
    (
        format!("{who} for node {node}, {state}"),
        format!(
            "First check that the machine behind node {node} is really gone or powered off (your cloud console or hypervisor; kubectl describe node {node}). If it will come back, start its kubelet again: it confirms the deletions itself. If it is gone for good, delete its Node object (kubectl delete node {node}): the pod garbage collector then force-deletes every pod bound to it, in every namespace, after its {PODGC_QUARANTINE_SECONDS}s quarantine. To free only this namespace, force-delete its pods on {node} (the remedy below; by hand: kubectl delete pod -n {ns} {example} --grace-period=0 --force)."
        ),
        format!(
            "Force deletion removes the pods from the API without their kubelet's confirmation: if node {node} is only partitioned, not dead, their containers keep running (and writing to their volumes) until its kubelet reconnects and stops them, while a controller may already start replacements elsewhere (a StatefulSet a second pod with the same identity and volumes)."
        ),
    )
}

/// Summary, advice and risk for pods bound to a node that no longer exists.
fn missing(who: &str, node: &str) -> (String, String, String) {
    let within = PODGC_QUARANTINE_SECONDS + PODGC_PERIOD_SECONDS;
    (
        format!(
            "{who} for node {node}, which does not exist: the pod garbage collector force-deletes it after its {PODGC_QUARANTINE_SECONDS}s quarantine"
        ),
        format!(
            "Waiting is enough: kube-controller-manager's pod garbage collector (podgc) force-deletes pods bound to a node that no longer exists within about {within}s of noticing it gone (a {PODGC_QUARANTINE_SECONDS}s quarantine, passes every {PODGC_PERIOD_SECONDS}s). The remedy below does the same now. If the pods are still there minutes after the node went, podgc is not running: check kube-controller-manager and its --controllers."
        ),
        format!(
            "Little: no Node object means no kubelet reports for these pods. Only if a machine still runs as {node} without being able to register do their containers keep running until it is stopped."
        ),
    )
}

fn force_delete(p: &BoundPod) -> Action {
    Action::DeleteObject {
        resource: ResourceType::pods(),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        resource_version: p.resource_version.clone(),
        force: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::conditions::CONTENT_REMAINING;
    use crate::nodes::NodeState;

    fn pod(ns: &str, name: &str, node: &str) -> BoundPod {
        BoundPod {
            namespace: ns.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "9".into(),
            deletion_timestamp: Some(ago(90)),
            node: node.into(),
            claims: Vec::new(),
        }
    }

    fn lost(since: i64) -> NodeHealth {
        NodeHealth::NotReady {
            status: "Unknown".into(),
            reason: "NodeStatusUnknown".into(),
            message: "Kubelet stopped posting node status.".into(),
            since: Some(ago(since)),
        }
    }

    fn with_nodes(nodes: Vec<(&str, NodeHealth)>, pods: Vec<BoundPod>) -> (NamespaceState, Evidence) {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        ev.nodes.nodes =
            nodes.into_iter().map(|(name, health)| NodeState { name: name.into(), health }).collect();
        ev.nodes.pods = pods;
        (ns, ev)
    }

    #[test]
    fn a_pod_on_a_not_ready_node_waits_for_it() {
        let mut web = pod("ns", "web", "n1");
        web.claims = vec!["data".into()];
        let (ns, ev) = with_nodes(vec![("n1", lost(300))], vec![web, pod("other", "x", "n1")]);
        let causes = pods_waiting_for_nodes(&ns, &ev);
        assert_eq!(causes.len(), 1, "one cause per node, this namespace's pods only");
        let c = &causes[0];
        assert_eq!(c.kind, CauseKind::PodsWaitingForNode);
        assert_eq!(c.summary, "pod web waits for node n1, NotReady since 2025-12-31T23:55:00Z");
        assert_eq!(
            c.evidence[0],
            "node n1: Ready=Unknown since 2025-12-31T23:55:00Z (5m ago): NodeStatusUnknown: Kubelet stopped posting node status."
        );
        assert_eq!(
            c.evidence[1],
            "deleted pods bound to node n1 in namespace ns: web (grace period over 90s ago)"
        );
        assert!(c.evidence[3].contains("data, which kubernetes.io/pvc-protection keeps"), "{c:?}");
        assert!(c.advice.contains("kubectl delete node n1") && c.advice.contains("--grace-period=0"));
        assert!(c.risk.contains("partitioned"));
        let remedy = c.remedy.as_ref().unwrap();
        assert_eq!(remedy.id, RemedyId::ForceDeletePodsOnNode { namespace: "ns".into(), node: "n1".into() });
        assert_eq!(
            remedy.actions[0].describe(),
            "DELETE /api/v1/namespaces/ns/pods/web with preconditions uid=uid-web, resourceVersion=9, gracePeriodSeconds=0"
        );
        assert_eq!(waiting_pod_names(&ns, &ev), ["web"]);
    }

    #[test]
    fn a_claim_held_by_such_a_pod_names_it() {
        let mut web = pod("ns", "web", "n1");
        web.claims = vec!["data".into()];
        let (ns, ev) = with_nodes(vec![("n1", lost(300))], vec![web, pod("ns", "other", "n1")]);
        assert_eq!(
            claim_users(&ns, &ev, "data"),
            ["claim data is still used by pod web, which waits for node n1: fix that first, and the finalizer clears by itself"]
        );
        assert!(claim_users(&ns, &ev, "logs").is_empty());
    }

    #[test]
    fn pods_on_ready_or_unread_nodes_are_left_to_other_rules() {
        let pods = vec![pod("ns", "a", "ready"), pod("ns", "b", "unread")];
        let (ns, ev) = with_nodes(vec![("ready", NodeHealth::Ready)], pods);
        assert!(pods_waiting_for_nodes(&ns, &ev).is_empty());
        assert!(waiting_pod_names(&ns, &ev).is_empty());
    }

    #[test]
    fn a_missing_node_is_left_to_the_pod_garbage_collector() {
        let pods = vec![pod("ns", "a", "gone"), pod("ns", "b", "gone")];
        let (ns, ev) = with_nodes(vec![("gone", NodeHealth::Missing)], pods);
        let c = &pods_waiting_for_nodes(&ns, &ev)[0];
        assert_eq!(
            c.summary,
            "2 pods (a, b) wait for node gone, which does not exist: the pod garbage collector force-deletes it after its 40s quarantine"
        );
        assert!(c.evidence[0].contains("no Node object"));
        assert!(c.advice.contains("within about 60s"), "{}", c.advice);
        assert_eq!(c.remedy.as_ref().unwrap().actions.len(), 2);
    }

    #[test]
    fn a_node_that_never_reported_is_not_ready() {
        let registered = NodeHealth::NeverReported { registered: Some(ago(60)) };
        let (ns, ev) = with_nodes(vec![("n1", registered)], vec![pod("ns", "web", "n1")]);
        let c = &pods_waiting_for_nodes(&ns, &ev)[0];
        assert_eq!(c.summary, "pod web waits for node n1, whose kubelet never reported");
        assert!(c.evidence[0].contains("no Ready condition"));
    }

    #[test]
    fn the_diagnosis_names_the_node_not_the_stale_pod() {
        let (_, mut ev) = with_nodes(vec![("n1", lost(300))], vec![pod("ns", "web", "n1")]);
        ev.namespaces[0].conditions = vec![
            cond(CONTENT_REMAINING, "True", "pods has 1 resource instances"),
            cond(CONTENT_FAILURE, "True", "Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: ns for gvr: /v1, Resource=pods"),
        ];
        ev.leftovers.push(deleted_leftover(core("pods", "Pod"), "ns", "web", 90));
        ev.leftovers.push(leftover(core("configmaps", "ConfigMap"), "ns", "kube-root-ca.crt"));
        let d = crate::diagnose(&ev);
        let kinds: Vec<CauseKind> = d.namespaces[0].causes.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [CauseKind::PodsWaitingForNode], "the content failure is the pod's");
        let evidence = &d.namespaces[0].causes[0].evidence;
        assert!(evidence.last().unwrap().contains("unexpected items still remain"), "{evidence:?}");
        assert!(evidence
            .iter()
            .any(|e| e.ends_with("only once its pods are gone: 1 wait (configmaps/kube-root-ca.crt)")));
        ev.namespaces[0].conditions[1].message =
            "Failed to delete all resource types, 1 remaining: admission webhook denied it".into();
        let d = crate::diagnose(&ev);
        assert_eq!(d.namespaces[0].causes[0].kind, CauseKind::ContentDeletionFailure, "not the pod's");
    }
}
