//! From evidence to causes: for each namespace, what keeps it in `Terminating`, in the order
//! the causes must be fixed, each with its evidence, the safest remedy and what that risks.
//!
//! Pure: no I/O, so every rule is unit-tested without a cluster.

mod admission;
mod cluster;
mod content;
mod controllers;
mod hierarchy;
mod namespace;
mod nodes;
mod subtree;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::conditions::{self, Reading};
use super::evidence::{Evidence, NamespaceState};
use super::remedy::{Action, Remedy, RemedyId};

/// What stops a namespace from going, in the order causes must be fixed: a cause earlier in
/// this list keeps the ones after it from being resolved (nothing progresses without the
/// namespace controller; discovery failures stop it from finishing anywhere; a webhook that
/// rejects DELETEs keeps content in place; content must go before finalizers matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// kube-controller-manager is not running (its Lease is not renewed).
    ControllerManagerDown,
    /// The namespace controller has not acted on the namespace.
    ControllerStalled,
    /// An APIService is unavailable, so discovery fails for every namespace deletion.
    UnavailableApiService,
    /// Discovery fails for a group-version no APIService explains.
    DiscoveryFailure,
    /// A group-version cannot be parsed.
    GroupVersionParsingFailure,
    /// A `failurePolicy: Fail` webhook whose backend is down rejects the calls.
    DeadWebhook,
    /// The controller's DELETEs failed for a reason not otherwise explained.
    ContentDeletionFailure,
    /// hns refuses to delete a subnamespace that is not a leaf.
    BlockedSubnamespace,
    /// A namespace below, deleted with this one, is stuck: the leaf of the way down, with its
    /// remedy.
    StuckSubtree,
    /// Objects were never deleted.
    UndeletedContent,
    /// Deleted pods bound to a node that is not Ready or no longer exists.
    PodsWaitingForNode,
    /// Pods past their grace period that no kubelet confirms gone.
    TerminatingPods,
    /// Deleted Services wait for a cloud load balancer's cleanup, and no cloud controller runs.
    NoCloudController,
    /// Deleted objects wait for a built-in controller that is evidently disabled.
    DisabledController,
    /// Deleted objects wait for a finalizer.
    PendingFinalizer,
    /// `spec.finalizers` holds an entry other than `kubernetes`.
    ForeignSpecFinalizer,
    /// The namespace's own `metadata.finalizers`.
    NamespaceFinalizer,
    /// Finalizing the namespace by hand: the last resort.
    LastResort,
}

/// One reason a namespace is stuck.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cause {
    /// What kind of cause.
    pub kind: CauseKind,
    /// One line.
    pub summary: String,
    /// What was observed that shows it.
    pub evidence: Vec<String>,
    /// The safest way out, in words.
    pub advice: String,
    /// What the remedy risks.
    pub risk: String,
    /// The API calls that undo it, when it can be undone through the API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<Remedy>,
}

impl Cause {
    /// A cause that only advice resolves: it has no remedy, so nothing is changed.
    pub(crate) fn advice_only(
        kind: CauseKind,
        summary: impl Into<String>,
        evidence: Vec<String>,
        advice: impl Into<String>,
    ) -> Cause {
        Cause {
            kind,
            summary: summary.into(),
            evidence,
            advice: advice.into(),
            risk: "None: nothing is changed.".into(),
            remedy: None,
        }
    }
}

/// Where a diagnosed namespace stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceStatus {
    /// Deleted, waiting to go.
    Terminating,
    /// Not deleted.
    Active,
    /// Does not exist (or is already gone).
    NotFound,
}

/// The diagnosis of one namespace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceDiagnosis {
    /// Its name.
    pub name: String,
    /// For a namespace diagnosed because it is below a target: the way down from that target
    /// to it, both included.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// Where it stands.
    pub status: NamespaceStatus,
    /// How long it has been Terminating, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminating_seconds: Option<i64>,
    /// `spec.finalizers`.
    pub spec_finalizers: Vec<String>,
    /// `metadata.finalizers`.
    pub metadata_finalizers: Vec<String>,
    /// The five deletion conditions (when Terminating).
    pub conditions: Vec<Reading>,
    /// How many objects remain in it.
    pub leftovers: usize,
    /// The causes, in the order they must be fixed.
    pub causes: Vec<Cause>,
    /// Finalizing by hand, to try only when the causes' remedies did not free it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_resort: Option<Cause>,
}

impl NamespaceDiagnosis {
    /// Whether it is stuck (Terminating).
    pub fn stuck(&self) -> bool {
        self.status == NamespaceStatus::Terminating
    }
}

/// Cluster-wide facts that limit what the scan could see.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gap {
    /// What could not be seen.
    pub what: String,
    /// Why.
    pub error: String,
}

/// The diagnosis of every target namespace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    /// One entry per target.
    pub namespaces: Vec<NamespaceDiagnosis>,
    /// What the scan could not see: failed discovery and failed lists.
    pub gaps: Vec<Gap>,
    /// Unavailable APIServices, which block every namespace deletion in the cluster, stuck
    /// or not yet.
    pub warnings: Vec<String>,
}

impl Diagnosis {
    /// Whether any target namespace is stuck.
    pub fn stuck(&self) -> bool {
        self.namespaces.iter().any(NamespaceDiagnosis::stuck)
    }

    /// Every remedy, for checking rights.
    pub fn remedies_mut(&mut self) -> impl Iterator<Item = &mut Remedy> {
        self.namespaces.iter_mut().flat_map(|n| {
            n.causes.iter_mut().chain(n.last_resort.iter_mut()).filter_map(|c| c.remedy.as_mut())
        })
    }
}

/// Diagnoses every target namespace in `evidence`, each followed by the stuck namespaces
/// below it (deepest first) that are not targets themselves.
pub fn diagnose(evidence: &Evidence) -> Diagnosis {
    let own: Vec<NamespaceDiagnosis> = diagnosed(evidence)
        .into_iter()
        .map(|(name, path)| {
            let mut n = match evidence.namespace(&name) {
                None => not_terminating(&name, NamespaceStatus::NotFound),
                Some(ns) if !ns.terminating() => not_terminating(&name, NamespaceStatus::Active),
                Some(ns) => stuck_namespace(ns, evidence),
            };
            n.path = path;
            n
        })
        .collect();
    let namespaces = own
        .iter()
        .map(|o| {
            let mut n = o.clone();
            n.causes.extend(subtree::causes(o, &own, evidence));
            n.causes.sort_by_key(|c| c.kind);
            n
        })
        .collect();
    let gaps = evidence
        .discovery_failures
        .iter()
        .map(|f| Gap { what: format!("discovery of {}", f.group_version), error: f.message.clone() })
        .chain(evidence.list_failures.iter().map(|f| Gap {
            what: format!("{} in namespace {}", f.resource.qualified(), f.namespace),
            error: f.message.clone(),
        }))
        .chain(evidence.unreadable.iter().map(|u| Gap { what: u.what.clone(), error: u.message.clone() }))
        .collect();
    let warnings = evidence
        .api_services
        .iter()
        .filter(|s| s.service.is_some() && s.unavailable())
        .map(|s| {
            let reason = s.available.as_ref().map(|c| c.reason.as_str()).unwrap_or_default();
            format!(
                "APIService {} is unavailable ({reason}): while it is, no namespace can be deleted",
                s.name
            )
        })
        .collect();
    Diagnosis { namespaces, gaps, warnings }
}

/// The namespaces to diagnose, each with its way down from the target it was found below
/// (empty for a target).
fn diagnosed(ev: &Evidence) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for target in &ev.targets {
        if !out.iter().any(|(n, _)| n == target) {
            out.push((target.clone(), Vec::new()));
        }
        for below in subtree::stuck_below(target, ev) {
            let listed = out.iter().any(|(n, _)| *n == below.name) || ev.targets.contains(&below.name);
            if !listed {
                out.push((below.name.clone(), ev.path(target, below)));
            }
        }
    }
    out
}

fn not_terminating(name: &str, status: NamespaceStatus) -> NamespaceDiagnosis {
    NamespaceDiagnosis {
        name: name.to_string(),
        path: Vec::new(),
        status,
        terminating_seconds: None,
        spec_finalizers: Vec::new(),
        metadata_finalizers: Vec::new(),
        conditions: Vec::new(),
        leftovers: 0,
        causes: Vec::new(),
        last_resort: None,
    }
}

fn stuck_namespace(ns: &NamespaceState, ev: &Evidence) -> NamespaceDiagnosis {
    let mut causes = Vec::new();
    let missing = controllers::causes(ns, ev);
    if !missing.manager_down() {
        causes.extend(cluster::controller_stalled(ns, ev));
    }
    let apis = cluster::unavailable_api_services(ns, ev);
    causes.extend(cluster::unexplained_discovery_failure(ns, ev, &apis));
    causes.extend(apis);
    causes.extend(cluster::group_version_parsing_failure(ns));
    let hooks = admission::dead_webhooks(ns, ev);
    let subnamespaces = hierarchy::blocked_subnamespaces(ns, ev);
    if !nodes::explains_content_failure(ns, ev) {
        causes.extend(admission::unexplained_content_failure(ns, &hooks, &subnamespaces));
    }
    causes.extend(hooks);
    let mut blocked: Vec<String> = hierarchy::blocked_names(ns, ev);
    blocked.extend(nodes::held_back_by_pods(ns, ev));
    causes.extend(subnamespaces);
    causes.extend(content::undeleted(ns, ev, &blocked));
    causes.extend(nodes::pods_waiting_for_nodes(ns, ev));
    causes.extend(content::terminating_pods(ns, ev, &nodes::waiting_pod_names(ns, ev)));
    causes.extend(content::pending_finalizers(ns, ev, &missing.finalizers));
    causes.extend(missing.causes);
    causes.extend(namespace::foreign_spec_finalizers(ns));
    causes.extend(hierarchy::subnamespace_finalizer(ns, ev));
    causes.extend(namespace::metadata_finalizers(ns, ev));
    // Stable: within a kind, the order the rules produced.
    causes.sort_by_key(|c| c.kind);
    NamespaceDiagnosis {
        name: ns.name.clone(),
        path: Vec::new(),
        status: NamespaceStatus::Terminating,
        terminating_seconds: ns.deletion_timestamp.map(|t| age(ev.now, t)),
        spec_finalizers: ns.spec_finalizers.clone(),
        metadata_finalizers: ns.metadata_finalizers.clone(),
        conditions: conditions::read(&ns.conditions),
        leftovers: ev.leftovers_in(&ns.name).count(),
        causes,
        last_resort: namespace::last_resort(ns, ev),
    }
}

/// Seconds from `then` to `now`.
pub(crate) fn age(now: Timestamp, then: Timestamp) -> i64 {
    now.duration_since(then).as_secs()
}

/// `items` joined with ", ", at most `max` of them, then how many more.
pub(crate) fn listing(items: &[String], max: usize) -> String {
    let mut s = items.iter().take(max).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > max {
        s.push_str(&format!(" and {} more", items.len() - max));
    }
    s
}

/// A remedy of one action.
pub(crate) fn single(id: RemedyId, summary: impl Into<String>, action: Action) -> Option<Remedy> {
    Some(Remedy::new(id, summary, vec![action]))
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Evidence builders for the rules' tests.

    use k8s_openapi::jiff::Timestamp;

    use crate::conditions::DISCOVERY_FAILURE;
    use crate::evidence::*;

    /// The message of the discovery condition while [`dead_api_service`] is unavailable.
    pub const DEAD_DISCOVERY: &str = "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: dead.example.com/v1: the server is currently unable to handle the request";

    /// The scan's "now": 2026-01-01T00:00:00Z.
    pub fn now() -> Timestamp {
        Timestamp::from_second(1_767_225_600).unwrap()
    }

    /// `seconds` before [`now`].
    pub fn ago(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 - seconds).unwrap()
    }

    /// A namespace Terminating for 10 minutes with the `kubernetes` finalizer.
    pub fn terminating(name: &str) -> NamespaceState {
        NamespaceState {
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "100".into(),
            deletion_timestamp: Some(ago(600)),
            spec_finalizers: vec!["kubernetes".into()],
            ..Default::default()
        }
    }

    /// A condition.
    pub fn cond(type_: &str, status: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "Reason".into(),
            message: message.into(),
        }
    }

    /// Evidence with `namespaces`, all targets.
    pub fn evidence(namespaces: Vec<NamespaceState>) -> Evidence {
        Evidence::new(now(), namespaces.iter().map(|n| n.name.clone()).collect(), namespaces)
    }

    /// A namespace [`terminating`] whose discovery condition names [`dead_api_service`].
    pub fn held_by_dead_api_service(name: &str) -> NamespaceState {
        let mut ns = terminating(name);
        ns.conditions = vec![cond(DISCOVERY_FAILURE, "True", DEAD_DISCOVERY)];
        ns
    }

    /// Evidence with `namespaces`, all targets, and the unavailable [`dead_api_service`].
    pub fn with_dead_api_service(namespaces: Vec<NamespaceState>) -> Evidence {
        let mut ev = evidence(namespaces);
        ev.api_services.push(dead_api_service());
        ev
    }

    /// A core/v1 type.
    pub fn core(plural: &str, kind: &str) -> ResourceType {
        ResourceType { group: String::new(), version: "v1".into(), plural: plural.into(), kind: kind.into() }
    }

    /// The CRD type `widgets.stable.example.com`.
    pub fn widgets() -> ResourceType {
        ResourceType {
            group: "stable.example.com".into(),
            version: "v1".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
        }
    }

    /// An object of `resource` in `ns`.
    pub fn leftover(resource: ResourceType, ns: &str, name: &str) -> Leftover {
        Leftover {
            resource,
            namespace: ns.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "7".into(),
            ..Default::default()
        }
    }

    /// An object of `resource` in `ns`, deleted `seconds` before [`now`].
    pub fn deleted_leftover(resource: ResourceType, ns: &str, name: &str, seconds: i64) -> Leftover {
        Leftover { deletion_timestamp: Some(ago(seconds)), ..leftover(resource, ns, name) }
    }

    /// An unavailable APIService `v1.dead.example.com`.
    pub fn dead_api_service() -> ApiServiceState {
        ApiServiceState {
            name: "v1.dead.example.com".into(),
            uid: "uid-apisvc".into(),
            resource_version: "5".into(),
            group: "dead.example.com".into(),
            version: "v1".into(),
            service: Some(ServiceRef { namespace: "default".into(), name: "dead".into(), port: Some(1) }),
            available: Some(Condition {
                type_: "Available".into(),
                status: "False".into(),
                reason: "FailedDiscoveryCheck".into(),
                message: "failing or missing response".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn reports_targets_that_are_not_stuck() {
        let mut active = terminating("active");
        active.deletion_timestamp = None;
        let mut ev = evidence(vec![active]);
        ev.targets.push("gone".into());
        let d = diagnose(&ev);
        assert_eq!(d.namespaces[0].status, NamespaceStatus::Active);
        assert_eq!(d.namespaces[1].status, NamespaceStatus::NotFound);
        assert!(!d.stuck());
    }

    #[test]
    fn orders_causes_the_way_they_must_be_fixed() {
        let mut ns = held_by_dead_api_service("ns");
        ns.spec_finalizers = vec!["openshift.com/origin".into(), "kubernetes".into()];
        ns.metadata_finalizers = vec!["example.com/keep".into()];
        let mut ev = with_dead_api_service(vec![ns]);
        let mut w = deleted_leftover(widgets(), "ns", "w", 300);
        w.finalizers = vec!["stable.example.com/cleanup".into()];
        ev.leftovers.push(w);
        let d = diagnose(&ev);
        assert!(d.stuck());
        let kinds: Vec<CauseKind> = d.namespaces[0].causes.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [
                CauseKind::UnavailableApiService,
                CauseKind::PendingFinalizer,
                CauseKind::ForeignSpecFinalizer,
                CauseKind::NamespaceFinalizer,
            ]
        );
        assert_eq!(d.namespaces[0].terminating_seconds, Some(600));
        assert_eq!(d.namespaces[0].leftovers, 1);
        let last = d.namespaces[0].last_resort.as_ref().unwrap();
        assert!(last.remedy.as_ref().unwrap().needs_force.is_some(), "content remains");
    }

    #[test]
    fn lists_what_the_scan_could_not_see() {
        let mut ev = evidence(vec![terminating("ns")]);
        ev.discovery_failures.push(crate::evidence::DiscoveryFailure {
            group_version: "dead.example.com/v1".into(),
            message: "503".into(),
        });
        let d = diagnose(&ev);
        assert_eq!(d.gaps[0].what, "discovery of dead.example.com/v1");
    }

    #[test]
    fn lists_at_most_a_few() {
        let items: Vec<String> = (1..=5).map(|i| i.to_string()).collect();
        assert_eq!(listing(&items, 3), "1, 2, 3 and 2 more");
        assert_eq!(listing(&items[..2], 3), "1, 2");
    }
}
