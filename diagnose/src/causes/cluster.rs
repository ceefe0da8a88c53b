//! Causes outside the namespace that stop the namespace controller everywhere: the controller
//! itself not running, unavailable APIServices, and discovery it cannot complete.

use super::{age, single, Cause, CauseKind};
use crate::conditions::{self, DISCOVERY_FAILURE, GV_PARSING_FAILURE};
use crate::evidence::{ApiServiceState, Evidence, NamespaceState};
use crate::remedy::{Action, RemedyId};

/// How long the namespace controller may take before its silence is a sign: it writes the
/// conditions on its first pass, normally within seconds of the deletion.
const STALL_AFTER_SECONDS: i64 = 120;

/// The namespace controller has not written any deletion condition long after the deletion.
pub fn controller_stalled(ns: &NamespaceState, ev: &Evidence) -> Option<Cause> {
    let since = age(ev.now, ns.deletion_timestamp?);
    let waiting = ns.spec_finalizers.iter().any(|f| f == "kubernetes");
    if conditions::any_written(&ns.conditions) || since < STALL_AFTER_SECONDS || !waiting {
        return None;
    }
    Some(Cause::advice_only(
        CauseKind::ControllerStalled,
        "the namespace controller has not acted on this namespace",
        vec![
            format!("Terminating for {since}s, yet none of the five deletion conditions is set"),
            "spec.finalizers still holds \"kubernetes\", which only the namespace controller removes".into(),
        ],
        "Check that kube-controller-manager runs and is healthy, that its namespace controller is enabled (--controllers), and read its logs (namespace_controller). Once it runs it empties and removes the namespace by itself.",
    ))
}

/// APIServices that are unavailable or whose discovery failed: each blocks every namespace
/// deletion in the cluster.
pub fn unavailable_api_services(ns: &NamespaceState, ev: &Evidence) -> Vec<Cause> {
    let named = named_group_versions(ns);
    ev.api_services
        .iter()
        .filter(|s| s.service.is_some())
        .filter_map(|s| {
            let gv = s.group_version();
            let scan_failure = ev.discovery_failures.iter().find(|f| f.group_version == gv);
            let in_condition = named.contains(&gv);
            (s.unavailable() || scan_failure.is_some() || in_condition)
                .then(|| api_service_cause(s, scan_failure.map(|f| f.message.as_str()), in_condition))
        })
        .collect()
}

fn api_service_cause(s: &ApiServiceState, scan_failure: Option<&str>, in_condition: bool) -> Cause {
    let gv = s.group_version();
    let svc = s.service.as_ref().map(|r| r.to_string()).unwrap_or_default();
    let mut evidence = Vec::new();
    let reason = match &s.available {
        Some(c) => {
            evidence
                .push(format!("APIService {}: Available={} ({}): {}", s.name, c.status, c.reason, c.message));
            c.reason.clone()
        }
        None => "no Available condition".to_string(),
    };
    if in_condition {
        evidence.push(format!("condition {DISCOVERY_FAILURE} names {gv}"));
    }
    if let Some(m) = scan_failure {
        evidence.push(format!("discovery of {gv} failed: {m}"));
    }
    evidence.push(format!("served by Service {svc}"));
    evidence.push("an unavailable APIService blocks the deletion of every namespace in the cluster".into());
    Cause {
        kind: CauseKind::UnavailableApiService,
        summary: format!("APIService {} is unavailable ({reason})", s.name),
        evidence,
        advice: api_service_advice(s, &reason, &svc),
        risk: format!(
            "Deleting the APIService removes {gv} from the cluster: clients and controllers that use it fail until its component is reinstalled; objects its backend stores are not deleted."
        ),
        remedy: single(
            RemedyId::DeleteApiService { name: s.name.clone() },
            format!("delete APIService {}", s.name),
            Action::DeleteApiService {
                name: s.name.clone(),
                uid: s.uid.clone(),
                resource_version: s.resource_version.clone(),
            },
        ),
    }
}

fn api_service_advice(s: &ApiServiceState, reason: &str, svc: &str) -> String {
    if s.group == hns_api::GROUP {
        return format!(
            "This is hns's own API: restart hns-apiserver (Service {svc}) rather than delete it. hns keeps the hierarchy on Namespace annotations, so deleting the APIService loses nothing, and re-applying hns's manifests brings it back."
        );
    }
    let repair = match reason {
        "ServiceNotFound" => {
            format!("Its Service {svc} does not exist: reinstall the component that serves {}", s.group)
        }
        "MissingEndpoints" => format!("Service {svc} has no ready endpoints: start the pods behind it"),
        _ => {
            format!("Its backend (Service {svc}) does not answer: repair it (check its pods and their logs)")
        }
    };
    format!("{repair}, or delete the APIService if its component was uninstalled.")
}

/// Group-versions the namespace's discovery condition names as failing.
fn named_group_versions(ns: &NamespaceState) -> Vec<String> {
    conditions::failing(&ns.conditions, DISCOVERY_FAILURE)
        .map(|c| conditions::failing_group_versions(&c.message))
        .unwrap_or_default()
}

/// Discovery fails for group-versions that no APIService with a backend explains (or the
/// message cannot be parsed).
pub fn unexplained_discovery_failure(
    ns: &NamespaceState,
    ev: &Evidence,
    explained: &[Cause],
) -> Option<Cause> {
    let condition = conditions::failing(&ns.conditions, DISCOVERY_FAILURE)?;
    let served: Vec<String> =
        ev.api_services.iter().filter(|s| s.service.is_some()).map(ApiServiceState::group_version).collect();
    let named = conditions::failing_group_versions(&condition.message);
    let unexplained: Vec<&String> = named.iter().filter(|gv| !served.contains(gv)).collect();
    if unexplained.is_empty() && !(named.is_empty() && explained.is_empty()) {
        return None;
    }
    Some(Cause::advice_only(
        CauseKind::DiscoveryFailure,
        "API discovery fails for the namespace controller",
        vec![condition.quoted()],
        "Find the failing group-version with `kubectl api-resources` (it prints the discovery errors) and repair or remove what serves it.",
    ))
}

/// A group-version cannot be parsed.
pub fn group_version_parsing_failure(ns: &NamespaceState) -> Option<Cause> {
    let c = conditions::failing(&ns.conditions, GV_PARSING_FAILURE)?;
    Some(Cause::advice_only(
        CauseKind::GroupVersionParsingFailure,
        "a served group-version cannot be parsed",
        vec![c.quoted()],
        "An APIService or CRD advertises a malformed version: find it with `kubectl get apiservices` and fix or delete it.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::evidence::DiscoveryFailure;

    #[test]
    fn a_silent_controller_is_stalled_only_after_a_while() {
        let ns = terminating("ns");
        let ev = evidence(vec![ns.clone()]);
        assert!(controller_stalled(&ns, &ev).is_some());
        let mut fresh = ns.clone();
        fresh.deletion_timestamp = Some(ago(30));
        assert!(controller_stalled(&fresh, &ev).is_none());
        let mut spoken = ns.clone();
        spoken.conditions = vec![cond(DISCOVERY_FAILURE, "False", "")];
        assert!(controller_stalled(&spoken, &ev).is_none());
    }

    #[test]
    fn an_unavailable_api_service_blocks_with_its_evidence() {
        let ns = held_by_dead_api_service("ns");
        let mut ev = with_dead_api_service(vec![ns.clone()]);
        ev.discovery_failures
            .push(DiscoveryFailure { group_version: "dead.example.com/v1".into(), message: "503".into() });
        let causes = unavailable_api_services(&ns, &ev);
        assert_eq!(causes.len(), 1);
        let c = &causes[0];
        assert_eq!(c.summary, "APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)");
        assert!(c.evidence.iter().any(|e| e.contains("names dead.example.com/v1")));
        assert!(c.evidence.iter().any(|e| e.contains("discovery of dead.example.com/v1 failed")));
        assert_eq!(
            c.remedy.as_ref().unwrap().actions[0],
            Action::DeleteApiService {
                name: "v1.dead.example.com".into(),
                uid: "uid-apisvc".into(),
                resource_version: "5".into()
            }
        );
        assert!(unexplained_discovery_failure(&ns, &ev, &causes).is_none());
    }

    #[test]
    fn an_available_api_service_is_left_alone() {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        let mut hns = dead_api_service();
        hns.name = "v1alpha2.hnc.x-k8s.io".into();
        hns.group = "hnc.x-k8s.io".into();
        hns.available.as_mut().unwrap().status = "True".into();
        ev.api_services.push(hns);
        assert!(unavailable_api_services(&ns, &ev).is_empty());
    }

    #[test]
    fn hns_own_api_service_gets_its_own_advice() {
        let mut s = dead_api_service();
        s.group = "hnc.x-k8s.io".into();
        let c = api_service_cause(&s, None, false);
        assert!(c.advice.starts_with("This is hns's own API"));
    }

    #[test]
    fn discovery_failures_without_an_api_service_are_reported_as_such() {
        let ns = held_by_dead_api_service("ns");
        let ev = evidence(vec![ns.clone()]);
        let c = unexplained_discovery_failure(&ns, &ev, &[]).unwrap();
        assert_eq!(c.kind, CauseKind::DiscoveryFailure);
        assert!(c.remedy.is_none());
    }

    #[test]
    fn a_parsing_failure_is_read_from_its_condition() {
        let mut ns = terminating("ns");
        assert!(group_version_parsing_failure(&ns).is_none());
        ns.conditions = vec![cond(GV_PARSING_FAILURE, "True", "bad gv")];
        assert!(group_version_parsing_failure(&ns).unwrap().evidence[0].ends_with("bad gv"));
    }
}
