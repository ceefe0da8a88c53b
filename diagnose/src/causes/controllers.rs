//! Built-in finalizers that no controller removes because the controller is not there:
//! kube-controller-manager not running at all (its Lease no longer renewed), a Service's
//! `service.kubernetes.io/load-balancer-cleanup` on a cluster where no cloud-controller-manager
//! runs, and `kubernetes.io/pvc-protection` on a claim no pod uses, long after its deletion,
//! while kube-controller-manager runs (its pvc-protection controller evidently disabled).

use hns_api::duration::human_duration;
use k8s_openapi::jiff::Timestamp;

use super::content::remove_finalizer;
use super::{age, listing, Cause, CauseKind};
use crate::conditions;
use crate::controllers::{LeaseState, CLOUD_CONTROLLER_LEASE, CONTROLLER_MANAGER_LEASE};
use crate::evidence::{Evidence, Leftover, NamespaceState};

/// The component that runs a built-in controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Component {
    ControllerManager,
    CloudControllerManager,
}

/// Kubernetes' own finalizers and the controller that removes each, as kube-controller-manager's
/// `--controllers` flag names it (cmd/kube-controller-manager/names); `kubernetes` is the
/// namespace's `spec.finalizers` entry. Matched exactly.
const OWNERS: &[(&str, Component, &str)] = &[
    ("kubernetes", Component::ControllerManager, "namespace-controller"),
    (
        "kubernetes.io/pvc-protection",
        Component::ControllerManager,
        "persistentvolumeclaim-protection-controller",
    ),
    ("kubernetes.io/pv-protection", Component::ControllerManager, "persistentvolume-protection-controller"),
    ("foregroundDeletion", Component::ControllerManager, "garbage-collector-controller"),
    ("orphan", Component::ControllerManager, "garbage-collector-controller"),
    ("batch.kubernetes.io/job-tracking", Component::ControllerManager, "job-controller"),
    ("resource.kubernetes.io/delete-protection", Component::ControllerManager, "resourceclaim-controller"),
    (LB_CLEANUP, Component::CloudControllerManager, "service-lb-controller"),
];

const LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";
const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The pvc-protection controller removes its finalizer within seconds of a deleted claim's
/// last pod going; a claim deleted this long ago that no pod mounts is not waiting for it (two
/// minutes leave room for a busy or restarting kube-controller-manager).
const PVC_UNUSED_SECONDS: i64 = 120;
/// A Lease counts as not renewed this long past its duration: leader election renews it every
/// few seconds, and the server clocks of the components differ a little.
const LEASE_SLACK_SECONDS: i64 = 10;

/// The controller that removes built-in `finalizer`, and whether kube-controller-manager runs it.
fn owner(finalizer: &str) -> Option<(Component, &'static str)> {
    OWNERS
        .iter()
        .find(|(name, ..)| *name == finalizer)
        .map(|(_, component, controller)| (*component, *controller))
}

/// The causes of `ns` whose controller is missing, and the finalizers they account for, which
/// the generic pending-finalizer rule must not report again.
#[derive(Debug, Default)]
pub struct Found {
    /// The causes.
    pub causes: Vec<Cause>,
    /// The finalizers they explain.
    pub finalizers: Vec<String>,
}

impl Found {
    /// Whether kube-controller-manager was found not running.
    pub fn manager_down(&self) -> bool {
        self.causes.iter().any(|c| c.kind == CauseKind::ControllerManagerDown)
    }
}

/// The causes of `ns` that a missing controller explains.
pub fn causes(ns: &NamespaceState, ev: &Evidence) -> Found {
    let mut found = Found::default();
    let down = controller_manager_down(ns, ev);
    if let Some(cause) = down {
        found.finalizers.extend(finalizers_of(ns, ev, Component::ControllerManager));
        found.causes.push(cause);
    } else if let Some(cause) = unused_claims(ns, ev) {
        // Claims still in use keep being reported as waiting for their pods.
        let covered = cause.remedy.as_ref().map_or(0, |r| r.actions.len());
        if covered == holding(ns, ev, PVC_PROTECTION).len() {
            found.finalizers.push(PVC_PROTECTION.into());
        }
        found.causes.push(cause);
    }
    if let Some(cause) = load_balancer_cleanup(ns, ev) {
        found.finalizers.push(LB_CLEANUP.into());
        found.causes.push(cause);
    }
    found
}

/// Whether a leader-election Lease is renewed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Liveness<'a> {
    /// Renewed within its duration, `.1` seconds ago.
    Renewed(&'a LeaseState, i64),
    /// Not renewed for `.1` seconds, longer than its duration.
    Stale(&'a LeaseState, i64),
    /// No such Lease.
    Absent,
    /// The Leases could not be read.
    Unknown,
}

/// The server's "now": kube-apiserver's latest renewal of its own Lease, or the scan's clock.
fn server_now(ev: &Evidence) -> Timestamp {
    ev.controllers.leases.as_ref().and_then(|l| l.apiserver_renewed).unwrap_or(ev.now)
}

fn liveness<'a>(ev: &'a Evidence, component: Component) -> Liveness<'a> {
    let Some(leases) = &ev.controllers.leases else { return Liveness::Unknown };
    let lease = match component {
        Component::ControllerManager => leases.controller_manager.as_ref(),
        Component::CloudControllerManager => leases.cloud_controller.as_ref(),
    };
    let Some(lease) = lease else { return Liveness::Absent };
    // A Lease that shows no renewal tells nothing.
    let Some(renewed) = lease.renewed else { return Liveness::Absent };
    let since = age(server_now(ev), renewed).max(0);
    if since > lease.duration_seconds + LEASE_SLACK_SECONDS {
        Liveness::Stale(lease, since)
    } else {
        Liveness::Renewed(lease, since)
    }
}

/// "Lease kube-system/NAME: held by H, last renewed at T (D ago), lease duration Ns".
fn lease_line(name: &str, lease: &LeaseState, since: i64) -> String {
    let holder = if lease.holder.is_empty() { "nobody".to_string() } else { lease.holder.clone() };
    let renewed = match lease.renewed {
        Some(t) => format!("last renewed at {t} ({} ago)", human_duration(since)),
        None => "never renewed".to_string(),
    };
    format!(
        "Lease kube-system/{name}: held by {holder}, {renewed}, lease duration {}s",
        lease.duration_seconds
    )
}

/// The deleted objects of `ns` holding `finalizer`.
fn holding<'a>(ns: &'a NamespaceState, ev: &'a Evidence, finalizer: &'a str) -> Vec<&'a Leftover> {
    ev.leftovers_in(&ns.name)
        .filter(|l| l.deletion_timestamp.is_some() && l.finalizers.iter().any(|f| f == finalizer))
        .collect()
}

/// The finalizers of `component`'s controllers that the deleted objects of `ns` hold.
fn finalizers_of(ns: &NamespaceState, ev: &Evidence, component: Component) -> Vec<String> {
    let mut out: Vec<String> = ev
        .leftovers_in(&ns.name)
        .filter(|l| l.deletion_timestamp.is_some())
        .flat_map(|l| l.finalizers.iter())
        .filter(|f| owner(f).is_some_and(|(c, _)| c == component))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// kube-controller-manager's Lease has not been renewed for longer than its duration: nothing
/// runs the namespace controller, the garbage collector or the protection controllers. Without
/// a Lease (`--leader-elect=false`) nothing can be told from it, and nothing is said.
fn controller_manager_down(ns: &NamespaceState, ev: &Evidence) -> Option<Cause> {
    let Liveness::Stale(lease, since) = liveness(ev, Component::ControllerManager) else { return None };
    let mut evidence = vec![
        lease_line(CONTROLLER_MANAGER_LEASE, lease, since),
        "a running kube-controller-manager renews its Lease every few seconds".into(),
    ];
    if ns.spec_finalizers.iter().any(|f| f == "kubernetes") {
        evidence
            .push("spec.finalizers holds \"kubernetes\", which only its namespace-controller removes".into());
    }
    for finalizer in finalizers_of(ns, ev, Component::ControllerManager) {
        let objects: Vec<String> = holding(ns, ev, &finalizer).iter().map(|l| l.display_name()).collect();
        let controller = owner(&finalizer).map(|(_, c)| c).unwrap_or_default();
        evidence.push(format!(
            "{finalizer}, removed by its {controller}, holds {} deleted object(s): {}",
            objects.len(),
            listing(&objects, 5)
        ));
    }
    Some(Cause::advice_only(
        CauseKind::ControllerManagerDown,
        format!("kube-controller-manager is not running: its Lease was last renewed {} ago", human_duration(since)),
        evidence,
        "Start kube-controller-manager again and find out why it stopped (on kubeadm clusters it is the static pod /etc/kubernetes/manifests/kube-controller-manager.yaml: see crictl ps -a and crictl logs on the control-plane nodes; on a managed cluster, ask the provider). Once it runs it finishes this deletion by itself; removing its finalizers by hand instead would skip the cleanup each stands for.",
    ))
}

/// Whether kube-controller-manager evidently runs: its Lease is renewed or, without a Lease,
/// its namespace controller has written this namespace's deletion conditions.
fn manager_runs(ns: &NamespaceState, ev: &Evidence) -> Option<String> {
    match liveness(ev, Component::ControllerManager) {
        Liveness::Renewed(lease, since) => Some(format!(
            "kube-controller-manager runs: {}",
            lease_line(CONTROLLER_MANAGER_LEASE, lease, since)
        )),
        Liveness::Absent if conditions::any_written(&ns.conditions) => Some(
            "kube-controller-manager runs: its namespace-controller has written this namespace's deletion conditions".into(),
        ),
        _ => None,
    }
}

/// Deleted claims holding `kubernetes.io/pvc-protection` long after their deletion although
/// no pod mounts them, while kube-controller-manager runs: its pvc-protection controller,
/// which would have removed the finalizer within seconds, is evidently disabled.
fn unused_claims(ns: &NamespaceState, ev: &Evidence) -> Option<Cause> {
    let running = manager_runs(ns, ev)?;
    let now = server_now(ev);
    let claims: Vec<&Leftover> = holding(ns, ev, PVC_PROTECTION)
        .into_iter()
        .filter(|l| l.resource.group.is_empty() && l.resource.plural == "persistentvolumeclaims")
        .filter(|l| l.deletion_timestamp.is_some_and(|t| age(now, t) > PVC_UNUSED_SECONDS))
        .filter(|l| ev.controllers.claim_users(&ns.name, &l.name).is_some_and(|users| users.is_empty()))
        .collect();
    if claims.is_empty() {
        return None;
    }
    let names: Vec<String> = claims
        .iter()
        .map(|l| {
            let since = l.deletion_timestamp.map(|t| age(now, t)).unwrap_or(0);
            format!("{} (deleted {} ago)", l.name, human_duration(since))
        })
        .collect();
    let controller = "persistentvolumeclaim-protection-controller";
    Some(Cause {
        kind: CauseKind::DisabledController,
        summary: format!(
            "{} PersistentVolumeClaim(s) keep {PVC_PROTECTION} although no pod uses them: kube-controller-manager's {controller} is likely disabled",
            claims.len()
        ),
        evidence: vec![
            format!("{PVC_PROTECTION} on deleted claim(s): {}", listing(&names, 10)),
            format!("no pod in namespace {} mounts them", ns.name),
            running,
            format!("its {controller} removes the finalizer within seconds once no pod uses the claim"),
        ],
        advice: format!(
            "Look at kube-controller-manager's --controllers flag: an entry -{controller} (or its old name -pvc-protection) disables it. Enable it again and it removes the finalizer by itself; or remove the finalizer."
        ),
        risk: "If a pod does use a claim after all (one created since the scan, or one the scan could not see), the claim goes, and with reclaim policy Delete its volume and data, while the pod still uses them.".into(),
        remedy: Some(remove_finalizer(&ns.name, PVC_PROTECTION, &claims)),
    })
}

/// Deleted Services waiting for `service.kubernetes.io/load-balancer-cleanup`: only the
/// service-lb-controller of a cloud-controller-manager removes it, once the cloud load balancer
/// is deleted (kube-controller-manager has no cloud provider since in-tree providers were
/// removed in Kubernetes 1.31).
fn load_balancer_cleanup(ns: &NamespaceState, ev: &Evidence) -> Option<Cause> {
    let services = holding(ns, ev, LB_CLEANUP);
    if services.is_empty() {
        return None;
    }
    let mut evidence = vec![format!(
        "{LB_CLEANUP} on deleted Service(s): {}",
        listing(&services.iter().map(|l| service_line(l, ev)).collect::<Vec<_>>(), 10)
    )];
    if let Liveness::Renewed(lease, since) = liveness(ev, Component::CloudControllerManager) {
        evidence.push(format!(
            "a cloud-controller-manager runs: {}",
            lease_line(CLOUD_CONTROLLER_LEASE, lease, since)
        ));
        return Some(failing_cloud_controller(ns, &services, evidence, &lease.holder));
    }
    let doubts = cloud_evidence(ev, &services, &mut evidence);
    let mut remedy = remove_finalizer(&ns.name, LB_CLEANUP, &services);
    remedy.needs_force = (!doubts.is_empty()).then(|| doubts.join("; "));
    Some(Cause {
        kind: CauseKind::NoCloudController,
        summary: format!(
            "{} Service(s) wait for {LB_CLEANUP}, but no cloud-controller-manager runs to remove it",
            services.len()
        ),
        evidence,
        advice: "Nothing in this cluster deletes cloud load balancers, so nothing removes this finalizer: remove it. If the cluster does have a cloud provider, start its cloud-controller-manager instead: it deletes the load balancer and removes the finalizer itself.".into(),
        risk: "If a cloud load balancer was in fact created for these Services, it is left behind and still billed: check the cloud console for it and delete it by hand.".into(),
        remedy: Some(remedy),
    })
}

/// `ns/name (type T, deleted D ago[, load balancer at A])`.
fn service_line(l: &Leftover, ev: &Evidence) -> String {
    let since = l.deletion_timestamp.map(|t| age(ev.now, t)).unwrap_or(0);
    let mut line = format!("{} (", l.name);
    if let Some(lb) = ev.controllers.load_balancer(&l.namespace, &l.name) {
        line.push_str(&format!("type {}, ", lb.type_));
    }
    line.push_str(&format!("deleted {} ago)", human_duration(since)));
    line
}

/// Adds what shows that no cloud controller runs to `evidence`; returns what leaves a doubt,
/// for which the remedy needs `--force`.
fn cloud_evidence(ev: &Evidence, services: &[&Leftover], evidence: &mut Vec<String>) -> Vec<String> {
    let mut doubts = Vec::new();
    match liveness(ev, Component::CloudControllerManager) {
        Liveness::Stale(lease, since) => evidence.push(format!(
            "{}: the cloud-controller-manager that held it stopped",
            lease_line(CLOUD_CONTROLLER_LEASE, lease, since)
        )),
        Liveness::Absent => evidence.push(format!(
            "no Lease kube-system/{CLOUD_CONTROLLER_LEASE}: no cloud-controller-manager runs under its default name"
        )),
        Liveness::Unknown | Liveness::Renewed(..) => {
            doubts.push("the Leases of kube-system could not be read, so a running cloud-controller-manager cannot be ruled out".into())
        }
    }
    match &ev.controllers.provider_ids {
        Some(ids) if ids.is_empty() => evidence.push("the cluster has no nodes, so no cloud provider initialized any".into()),
        Some(ids) => match ids.iter().find(|id| !id.is_empty()) {
            None => evidence.push(format!(
                "none of the {} node(s) read has a spec.providerID: no cloud provider initialized them",
                ids.len()
            )),
            Some(id) => doubts.push(format!(
                "a node has spec.providerID {id}: a cloud provider initialized it, so its cloud-controller-manager may run under another Lease name"
            )),
        },
        None => doubts.push("the nodes could not be read, so a cloud provider cannot be ruled out".into()),
    }
    for l in services {
        match ev.controllers.load_balancer(&l.namespace, &l.name) {
            Some(lb) if lb.ingress.is_empty() => evidence.push(format!(
                "Service {} has no status.loadBalancer.ingress: no load balancer was ever reported for it",
                l.name
            )),
            Some(lb) => doubts.push(format!(
                "Service {} has a load balancer at {}: delete it in the cloud first",
                l.name,
                lb.ingress.join(", ")
            )),
            None => {}
        }
    }
    evidence.push("kube-controller-manager runs no cloud service controller (in-tree cloud providers were removed in Kubernetes 1.31): only a cloud-controller-manager removes this finalizer".into());
    doubts
}

/// A cloud-controller-manager runs, yet the finalizer stays: it fails to delete the load balancer.
fn failing_cloud_controller(
    ns: &NamespaceState,
    services: &[&Leftover],
    evidence: Vec<String>,
    holder: &str,
) -> Cause {
    let first = services.first().map(|l| l.name.as_str()).unwrap_or_default();
    Cause::advice_only(
        CauseKind::PendingFinalizer,
        format!(
            "{} Service(s) wait for the cloud-controller-manager to delete their load balancer",
            services.len()
        ),
        evidence,
        format!(
            "The cloud-controller-manager ({holder}) runs but has not deleted the load balancer: read its logs (service-lb-controller) and the Service's events (kubectl describe service -n {} {first}); missing cloud permissions or a load balancer changed by hand are the usual reasons. It removes the finalizer once the load balancer is gone.",
            ns.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::controllers::{ClaimUse, Leases, LoadBalancer};
    use crate::evidence::ResourceType;
    use crate::remedy::RemedyId;

    fn lease(renewed_ago: i64) -> LeaseState {
        LeaseState { holder: "cp1_abc".into(), renewed: Some(ago(renewed_ago)), duration_seconds: 15 }
    }

    fn deleted(resource: ResourceType, name: &str, finalizer: &str, since: i64) -> Leftover {
        let mut l = deleted_leftover(resource, "ns", name, since);
        l.finalizers = vec![finalizer.into()];
        l
    }

    fn with(leases: Option<Leases>, leftovers: Vec<Leftover>) -> (NamespaceState, Evidence) {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        ev.leftovers = leftovers;
        ev.controllers.leases = leases;
        (ns, ev)
    }

    fn manager(renewed_ago: i64) -> Option<Leases> {
        Some(Leases { controller_manager: Some(lease(renewed_ago)), ..Default::default() })
    }

    fn claim(since: i64) -> Leftover {
        deleted(core("persistentvolumeclaims", "PersistentVolumeClaim"), "data", PVC_PROTECTION, since)
    }

    #[test]
    fn built_in_finalizers_are_matched_exactly() {
        assert_eq!(
            owner("kubernetes.io/pvc-protection"),
            Some((Component::ControllerManager, "persistentvolumeclaim-protection-controller"))
        );
        assert_eq!(owner(LB_CLEANUP), Some((Component::CloudControllerManager, "service-lb-controller")));
        assert_eq!(owner("orphan"), Some((Component::ControllerManager, "garbage-collector-controller")));
        assert_eq!(owner("kubernetes.io/pvc-protection-x"), None);
        assert_eq!(owner("example.com/kubernetes"), None);
        assert_eq!(owner("Orphan"), None);
    }

    #[test]
    fn a_lease_not_renewed_past_its_duration_means_the_manager_is_down() {
        let pods = core("pods", "Pod");
        let leftovers = vec![claim(600), deleted(pods, "job-1", "batch.kubernetes.io/job-tracking", 600)];
        let (ns, ev) = with(manager(300), leftovers);
        let found = causes(&ns, &ev);
        assert!(found.manager_down());
        assert_eq!(found.finalizers, ["batch.kubernetes.io/job-tracking", PVC_PROTECTION]);
        let c = &found.causes[0];
        assert_eq!(c.summary, "kube-controller-manager is not running: its Lease was last renewed 5m ago");
        assert_eq!(
            c.evidence[0],
            "Lease kube-system/kube-controller-manager: held by cp1_abc, last renewed at 2025-12-31T23:55:00Z (5m ago), lease duration 15s"
        );
        assert!(c.evidence.iter().any(|e| e.contains("\"kubernetes\", which only its namespace-controller")));
        assert!(c.evidence.iter().any(|e| e == "kubernetes.io/pvc-protection, removed by its persistentvolumeclaim-protection-controller, holds 1 deleted object(s): persistentvolumeclaims/data"), "{c:?}");
        assert!(c.remedy.is_none());
        assert_eq!(found.causes.len(), 1, "the claim is the manager's, not a disabled controller's");
    }

    #[test]
    fn the_servers_clock_decides_whether_a_lease_is_renewed() {
        let (ns, mut ev) = with(manager(300), vec![]);
        ev.controllers.leases.as_mut().unwrap().apiserver_renewed = Some(ago(295));
        assert!(!causes(&ns, &ev).manager_down(), "renewed 5s before the API server's own renewal");
        for fresh in [manager(20), None, Some(Leases::default())] {
            let (ns, ev) = with(fresh, vec![]);
            assert!(!causes(&ns, &ev).manager_down(), "renewed, unreadable or without leader election");
        }
    }

    fn with_users(ev: &mut Evidence, users: &[&str]) {
        ev.controllers.claims_read = vec!["ns".into()];
        ev.controllers.claims = users
            .iter()
            .map(|p| ClaimUse { namespace: "ns".into(), claim: "data".into(), pod: p.to_string() })
            .collect();
    }

    #[test]
    fn an_unused_claim_long_deleted_names_the_disabled_controller() {
        let (ns, mut ev) = with(manager(2), vec![claim(600)]);
        with_users(&mut ev, &[]);
        let found = causes(&ns, &ev);
        assert_eq!(found.finalizers, [PVC_PROTECTION]);
        let c = &found.causes[0];
        assert_eq!(c.kind, CauseKind::DisabledController);
        assert!(c.summary.ends_with(
            "kube-controller-manager's persistentvolumeclaim-protection-controller is likely disabled"
        ));
        assert_eq!(c.evidence[0], "kubernetes.io/pvc-protection on deleted claim(s): data (deleted 10m ago)");
        assert!(c.evidence[2]
            .starts_with("kube-controller-manager runs: Lease kube-system/kube-controller-manager"));
        assert!(c
            .advice
            .contains("--controllers flag: an entry -persistentvolumeclaim-protection-controller"));
        assert!(c.risk.contains("its volume and data"));
        let remedy = c.remedy.as_ref().unwrap();
        assert_eq!(
            remedy.id,
            RemedyId::RemoveObjectFinalizer { namespace: "ns".into(), finalizer: PVC_PROTECTION.into() }
        );
        assert!(remedy.actions[0].describe().contains("/api/v1/namespaces/ns/persistentvolumeclaims/data"));
    }

    #[test]
    fn a_claim_in_use_recent_or_unread_is_left_to_the_controller() {
        for (since, users, read) in [(600, vec!["web"], true), (60, vec![], true), (600, vec![], false)] {
            let (ns, mut ev) = with(manager(2), vec![claim(since)]);
            if read {
                with_users(&mut ev, &users);
            }
            assert!(causes(&ns, &ev).causes.is_empty(), "{since} {users:?} {read}");
        }
    }

    #[test]
    fn without_a_lease_the_namespace_controllers_conditions_show_the_manager_runs() {
        let (mut ns, mut ev) = with(Some(Leases::default()), vec![claim(600)]);
        with_users(&mut ev, &[]);
        assert!(causes(&ns, &ev).causes.is_empty(), "nothing shows the manager runs");
        ns.conditions = vec![cond(conditions::CONTENT_REMAINING, "False", "")];
        let c = &causes(&ns, &ev).causes[0];
        assert!(c.evidence[2].contains("namespace-controller has written"), "{c:?}");
    }

    fn service(ingress: &[&str]) -> (Leftover, LoadBalancer) {
        let l = deleted(core("services", "Service"), "web", LB_CLEANUP, 120);
        let lb = LoadBalancer {
            namespace: "ns".into(),
            name: "web".into(),
            type_: "LoadBalancer".into(),
            ingress: ingress.iter().map(|s| s.to_string()).collect(),
        };
        (l, lb)
    }

    fn with_service(leases: Option<Leases>, ingress: &[&str], provider_ids: Option<Vec<&str>>) -> Cause {
        let (l, lb) = service(ingress);
        let (ns, mut ev) = with(leases, vec![l]);
        ev.controllers.load_balancers = vec![lb];
        ev.controllers.provider_ids = provider_ids.map(|p| p.iter().map(|s| s.to_string()).collect());
        let found = causes(&ns, &ev);
        assert_eq!(found.finalizers, [LB_CLEANUP]);
        found.causes.into_iter().next().unwrap()
    }

    #[test]
    fn a_load_balancer_finalizer_without_a_cloud_controller_is_removed() {
        let c = with_service(Some(Leases::default()), &[], Some(vec![""]));
        assert_eq!(c.kind, CauseKind::NoCloudController);
        assert_eq!(c.summary, "1 Service(s) wait for service.kubernetes.io/load-balancer-cleanup, but no cloud-controller-manager runs to remove it");
        assert_eq!(c.evidence[0], "service.kubernetes.io/load-balancer-cleanup on deleted Service(s): web (type LoadBalancer, deleted 2m ago)");
        assert!(c.evidence[1].starts_with("no Lease kube-system/cloud-controller-manager"));
        assert!(c.evidence[2].starts_with("none of the 1 node(s) read has a spec.providerID"));
        assert!(c.evidence[3].contains("no status.loadBalancer.ingress"));
        assert!(c.risk.contains("left behind and still billed"));
        let remedy = c.remedy.unwrap();
        assert!(remedy.needs_force.is_none());
        assert!(remedy.actions[0].describe().contains("/api/v1/namespaces/ns/services/web"));
    }

    #[test]
    fn a_doubt_about_the_cloud_needs_force() {
        let stale = Some(Leases { cloud_controller: Some(lease(600)), ..Default::default() });
        let c = with_service(stale, &[], Some(vec!["aws:///eu-west-1a/i-0abc"]));
        assert!(c.evidence[1].ends_with("the cloud-controller-manager that held it stopped"), "{c:?}");
        let why = c.remedy.unwrap().needs_force.unwrap();
        assert!(why.contains("spec.providerID aws:///eu-west-1a/i-0abc"), "{why}");
        let c = with_service(Some(Leases::default()), &["203.0.113.7"], Some(vec![]));
        assert!(c.remedy.unwrap().needs_force.unwrap().contains("load balancer at 203.0.113.7"));
        let c = with_service(None, &[], None);
        let why = c.remedy.unwrap().needs_force.unwrap();
        assert!(
            why.contains("Leases of kube-system could not be read")
                && why.contains("nodes could not be read")
        );
    }

    #[test]
    fn a_running_cloud_controller_is_failing() {
        let running = Some(Leases { cloud_controller: Some(lease(3)), ..Default::default() });
        let c = with_service(running, &["203.0.113.7"], None);
        assert_eq!(c.kind, CauseKind::PendingFinalizer);
        assert!(c.evidence[1].starts_with(
            "a cloud-controller-manager runs: Lease kube-system/cloud-controller-manager: held by cp1_abc"
        ));
        assert!(
            c.advice.contains("read its logs") && c.advice.contains("kubectl describe service -n ns web")
        );
        assert!(c.remedy.is_none());
    }

    #[test]
    fn the_diagnosis_says_the_manager_is_down_once_instead_of_each_symptom() {
        let (_, mut ev) = with(manager(600), vec![claim(900)]);
        let d = crate::diagnose(&ev);
        let kinds: Vec<CauseKind> = d.namespaces[0].causes.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [CauseKind::ControllerManagerDown], "no stalled controller, no pending finalizer");
        ev.controllers.leases = manager(2);
        let d = crate::diagnose(&ev);
        let kinds: Vec<CauseKind> = d.namespaces[0].causes.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [CauseKind::ControllerStalled, CauseKind::PendingFinalizer], "claim users unread");
    }
}
