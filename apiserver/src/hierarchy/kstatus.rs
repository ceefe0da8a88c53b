//! The kstatus conditions of the objects hns serves ([`hns_api::kstatus`]): what Flux and kpt
//! read, and what Argo CD health checks can (docs/gitops.md has them). Every object hns serves is derived from namespaces when read, so
//! its status always describes its current spec: generation and observedGeneration are both
//! [`GENERATION`], and each condition dates from what it describes (the namespace's creation or
//! deletion, the quota's creation, the oldest problem), never from the read.

use hns_api::kstatus::{READY, RECONCILING, STALLED};
use hns_api::SubnamespaceState;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The generation of every object hns serves, and so its status's observedGeneration.
pub const GENERATION: i64 = 1;

fn condition(type_: &str, status: bool, reason: &str, message: String, since: Option<&Time>) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: since.cloned().unwrap_or(Time(jiff::Timestamp::UNIX_EPOCH)),
        observed_generation: Some(GENERATION),
    }
}

/// A subnamespace's conditions in `state`: `Ready`, with `Stalled` when only a person can fix
/// it and `Reconciling` while it goes away. `since`: the namespace's creation, or its deletion
/// when terminating.
pub fn subnamespace(
    state: SubnamespaceState,
    name: &str,
    parent: &str,
    since: Option<&Time>,
) -> Vec<Condition> {
    use SubnamespaceState::*;
    // Not ready: `Ready=False` and, with the same reason and message, `Reconciling` (hns is on
    // it) or `Stalled` (someone must act).
    let not_ready = |reason: &str, message: String, why: &str| {
        vec![
            condition(READY, false, reason, message.clone(), since),
            condition(why, true, reason, message, since),
        ]
    };
    match state {
        Ok => {
            let message = format!("namespace {name} exists and is a subnamespace of {parent}");
            vec![condition(READY, true, "Ok", message, since)]
        }
        // HNC's two other states, which hns does not reach today (its subnamespace is created
        // with its namespace, and a taken name is refused), mapped as their meaning says.
        Missing => not_ready("Missing", format!("namespace {name} does not exist yet"), RECONCILING),
        Conflict => not_ready(
            "Conflict",
            format!("namespace {name} exists and is not a subnamespace of {parent}"),
            STALLED,
        ),
        Forbidden => not_ready(
            "Forbidden",
            format!(
                "namespace {parent} is excluded from hierarchies (hns-apiserver's --excluded-namespace), so it may not have subnamespaces: delete this subnamespace, or stop excluding {parent}"
            ),
            STALLED,
        ),
        Terminating => not_ready("Terminating", format!("namespace {name} is being deleted"), RECONCILING),
    }
}

/// `Stalled` for a namespace's hierarchy configuration with HNC's `problems`, none without: hns
/// cannot give the namespace its place until someone fixes them. Dated from the oldest problem.
pub fn hierarchy_configuration(problems: &[Condition]) -> Option<Condition> {
    let first = problems.first()?;
    let since = problems.iter().map(|c| &c.last_transition_time).min_by_key(|t| t.0);
    let message = problems
        .iter()
        .map(|c| format!("{} ({}): {}", c.type_, c.reason, c.message))
        .collect::<Vec<_>>()
        .join("; ");
    Some(condition(STALLED, true, &first.reason, message, since))
}

/// A hierarchical quota's `Ready`: its limits hold for its namespace's subtree from its creation
/// on (admission enforces them, whatever the subtree uses now).
pub fn quota(name: &str, namespace: &str, since: Option<&Time>) -> Condition {
    let message = format!("quota {name} limits namespace {namespace} and every namespace under it");
    condition(READY, true, "Enforced", message, since)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnamespace_is_ready_stalled_or_reconciling() {
        let types = |state| -> Vec<(String, String)> {
            subnamespace(state, "dev", "team-a", None).into_iter().map(|c| (c.type_, c.status)).collect()
        };
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter().map(|(t, s)| (t.to_string(), s.to_string())).collect()
        };
        assert_eq!(types(SubnamespaceState::Ok), pairs(&[("Ready", "True")]));
        assert_eq!(types(SubnamespaceState::Forbidden), pairs(&[("Ready", "False"), ("Stalled", "True")]));
        assert_eq!(types(SubnamespaceState::Conflict), pairs(&[("Ready", "False"), ("Stalled", "True")]));
        assert_eq!(types(SubnamespaceState::Missing), pairs(&[("Ready", "False"), ("Reconciling", "True")]));
        assert_eq!(
            types(SubnamespaceState::Terminating),
            pairs(&[("Ready", "False"), ("Reconciling", "True")])
        );
    }

    #[test]
    fn a_healthy_configuration_has_no_condition_and_a_broken_one_is_stalled_since_its_oldest_problem() {
        assert!(hierarchy_configuration(&[]).is_none());
        let at = |s: &str| Time(s.parse().unwrap());
        let problem = |reason: &str, since: &str| Condition {
            type_: "ActivitiesHalted".into(),
            status: "True".into(),
            reason: reason.into(),
            message: format!("{reason} happened"),
            last_transition_time: at(since),
            observed_generation: None,
        };
        let stalled = hierarchy_configuration(&[
            problem("ParentMissing", "2026-01-02T00:00:00Z"),
            problem("InCycle", "2026-01-01T00:00:00Z"),
        ])
        .unwrap();
        assert_eq!((stalled.type_.as_str(), stalled.reason.as_str()), ("Stalled", "ParentMissing"));
        assert_eq!(stalled.last_transition_time, at("2026-01-01T00:00:00Z"));
        assert!(
            stalled.message.contains("ActivitiesHalted (InCycle): InCycle happened"),
            "{}",
            stalled.message
        );
    }
}
