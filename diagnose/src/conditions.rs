//! The five conditions the namespace controller writes on a Terminating namespace (since
//! Kubernetes 1.16/1.17), read and explained, and the facts their messages carry.
//!
//! On every pass the controller writes each condition: `True` with a failure reason when that
//! step failed, `False` with an "ok" reason when it did not.

use serde::Serialize;

use super::evidence::Condition;

/// Discovery of some API group-versions failed, so the controller cannot tell the namespace is
/// empty.
pub const DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
/// A group-version from discovery could not be parsed.
pub const GV_PARSING_FAILURE: &str = "NamespaceDeletionGroupVersionParsingFailure";
/// Deleting some content failed.
pub const CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
/// Some objects remain.
pub const CONTENT_REMAINING: &str = "NamespaceContentRemaining";
/// Some remaining objects carry finalizers.
pub const FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

/// The five deletion conditions, in the order the controller works through them.
pub const DELETION_CONDITIONS: [&str; 5] =
    [DISCOVERY_FAILURE, GV_PARSING_FAILURE, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING];

/// One deletion condition as read from the namespace, with what it means.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`, or empty when the controller never wrote it.
    pub status: String,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// Whether it reports a problem.
    pub problem: bool,
    /// What it means for the namespace, in words.
    pub meaning: String,
}

/// Reads the five deletion conditions from a namespace's conditions, in their fixed order.
pub fn read(conditions: &[Condition]) -> Vec<Reading> {
    DELETION_CONDITIONS
        .iter()
        .map(|t| match conditions.iter().find(|c| c.type_ == *t) {
            Some(c) => Reading {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                problem: c.is_true(),
                meaning: meaning(t, c.is_true()).to_string(),
            },
            None => Reading {
                type_: t.to_string(),
                status: String::new(),
                reason: String::new(),
                message: String::new(),
                problem: false,
                meaning: "not written: the namespace controller has not processed this namespace".to_string(),
            },
        })
        .collect()
}

/// Whether the namespace controller has written any deletion condition.
pub fn any_written(conditions: &[Condition]) -> bool {
    conditions.iter().any(|c| DELETION_CONDITIONS.contains(&c.type_.as_str()))
}

/// The condition of type `type_` when it is `True`.
pub fn failing<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_ && c.is_true())
}

/// What each deletion condition means: (type, when it reports a problem, when it does not).
const MEANINGS: [(&str, &str, &str); 5] = [
    (
        DISCOVERY_FAILURE,
        "the controller cannot discover every API group, so it cannot prove the namespace is empty; an unavailable APIService is the usual reason, and it blocks every namespace deletion in the cluster",
        "every API group was discovered",
    ),
    (
        GV_PARSING_FAILURE,
        "a group-version served by the cluster cannot be parsed, so its content cannot be deleted",
        "every group-version was parsed",
    ),
    (
        CONTENT_FAILURE,
        "deleting some content failed; the message names the failure (often an admission webhook; \"unexpected items still remain … Resource=pods\" means deleted pods that no kubelet confirms gone)",
        "every delete call succeeded",
    ),
    (
        CONTENT_REMAINING,
        "objects remain; they are being deleted or wait for their finalizers",
        "no content remains",
    ),
    (
        FINALIZERS_REMAINING,
        "remaining objects carry finalizers that their controllers have not removed",
        "no remaining object carries a finalizer",
    ),
];

fn meaning(type_: &str, problem: bool) -> &'static str {
    MEANINGS
        .iter()
        .find(|(t, ..)| *t == type_)
        .map_or("", |&(_, failed, ok)| if problem { failed } else { ok })
}

/// The group-versions a `NamespaceDeletionDiscoveryFailure` message names as failing.
///
/// The message wraps client-go's `ErrGroupDiscoveryFailed`: `Discovery failed for some groups,
/// N failing: unable to retrieve the complete list of server APIs: g/v: err, g2/v2: err`.
pub fn failing_group_versions(message: &str) -> Vec<String> {
    const LIST: &str = "server APIs: ";
    let Some(start) = message.find(LIST) else {
        return Vec::new();
    };
    message[start + LIST.len()..]
        .split(", ")
        .filter_map(|part| part.split_once(": ").map(|(gv, _)| gv))
        .filter(|gv| gv.contains('/') && !gv.contains(' '))
        .map(str::to_string)
        .collect()
}

/// The webhook names a `NamespaceDeletionContentFailure` message says could not be called:
/// the API server words such a failure `failed calling webhook "NAME": …`.
pub fn failed_webhooks(message: &str) -> Vec<String> {
    const CALLING: &str = "failed calling webhook \"";
    let mut names = Vec::new();
    let mut rest = message;
    while let Some(i) = rest.find(CALLING) {
        rest = &rest[i + CALLING.len()..];
        if let Some(end) = rest.find('"') {
            let name = rest[..end].to_string();
            if !names.contains(&name) {
                names.push(name);
            }
            rest = &rest[end..];
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn reads_the_five_conditions_in_order_and_flags_missing_ones() {
        let got = read(&[
            cond(
                CONTENT_REMAINING,
                "True",
                "SomeResourcesRemain",
                "Some resources are remaining: widgets.example.com has 1 resource instances",
            ),
            cond(DISCOVERY_FAILURE, "False", "ResourcesDiscovered", "All resources successfully discovered"),
        ]);
        let types: Vec<&str> = got.iter().map(|r| r.type_.as_str()).collect();
        assert_eq!(types, DELETION_CONDITIONS);
        assert!(!got[0].problem);
        assert_eq!(got[0].meaning, "every API group was discovered");
        assert_eq!(got[1].status, "", "never written");
        assert!(got[1].meaning.starts_with("not written"));
        assert!(got[3].problem);
        assert_eq!(got[3].reason, "SomeResourcesRemain");
    }

    #[test]
    fn knows_whether_the_controller_wrote_anything() {
        assert!(!any_written(&[cond("Other", "True", "", "")]));
        assert!(any_written(&[cond(FINALIZERS_REMAINING, "False", "", "")]));
    }

    #[test]
    fn parses_failing_group_versions() {
        let one = "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: test.example.com/v1: the server is currently unable to handle the request";
        assert_eq!(failing_group_versions(one), ["test.example.com/v1"]);
        let two = "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server APIs: custom.metrics.k8s.io/v1beta1: the server is currently unable to handle the request, metrics.k8s.io/v1beta1: Get \"https://10.0.0.1:443\": dial tcp: connection refused";
        assert_eq!(failing_group_versions(two), ["custom.metrics.k8s.io/v1beta1", "metrics.k8s.io/v1beta1"]);
        assert!(failing_group_versions("some other error").is_empty());
    }

    #[test]
    fn parses_failed_webhooks() {
        let msg = "Failed to delete all resource types, 2 remaining: Internal error occurred: failed calling webhook \"deny.example.com\": Post \"https://x.y.svc:443/v?timeout=10s\": service \"x\" not found, Internal error occurred: failed calling webhook \"deny.example.com\": again";
        assert_eq!(failed_webhooks(msg), ["deny.example.com"]);
        assert!(failed_webhooks("nothing here").is_empty());
    }
}
