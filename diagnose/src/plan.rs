//! The fix's decisions, apart from its API calls: which remedy a namespace needs next, whether
//! it may go ahead, and how the namespace ends when it cannot. Pure, so every rule is
//! unit-tested without a cluster.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::causes::{Cause, NamespaceDiagnosis};
use super::remedy::{Remedy, RemedyId};

/// A remedy applied this often whose cause is still there does not work.
const MAX_ATTEMPTS: u32 = 2;

/// How the fix of one namespace ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", rename_all_fields = "camelCase", tag = "outcome", content = "detail")]
pub enum Outcome {
    /// The namespace is gone (GET returned 404).
    Fixed,
    /// A remedy was declined, lacked rights, or needs `--force`.
    Refused(String),
    /// A remedy failed.
    Failed(String),
    /// No remedy is left and the namespace is still there.
    StillStuck(String),
}

/// What to do about a namespace next.
#[derive(Debug, PartialEq)]
pub enum Next<'a> {
    /// Apply this cause's remedy.
    Apply(&'a Cause),
    /// Stop working on the namespace.
    Settle(Outcome),
}

/// The remedies a fix has applied or been refused, by identity, so a re-scan that finds them
/// again is not asked about or applied again without end.
#[derive(Debug, Default)]
pub struct History {
    attempts: HashMap<RemedyId, u32>,
    declined: HashSet<RemedyId>,
}

impl History {
    /// The next step for `n`: its first cause with a remedy, unless that remedy was declined or
    /// no longer works; `None` when no cause has a remedy.
    pub fn next<'a>(&self, n: &'a NamespaceDiagnosis) -> Option<Next<'a>> {
        let cause = n.causes.iter().find(|c| c.remedy.is_some())?;
        let remedy = cause.remedy.as_ref()?;
        Some(if self.declined.contains(&remedy.id) {
            Next::Settle(declined(remedy))
        } else if self.attempts.get(&remedy.id).copied().unwrap_or(0) >= MAX_ATTEMPTS {
            Next::Settle(Outcome::Failed(format!("{}: still there after: {}", cause.summary, remedy.summary)))
        } else {
            Next::Apply(cause)
        })
    }

    /// Records that `remedy` is being applied.
    pub fn attempt(&mut self, remedy: &Remedy) {
        *self.attempts.entry(remedy.id.clone()).or_default() += 1;
    }

    /// Records that the operator declined `remedy`; the namespace ends so.
    pub fn decline(&mut self, remedy: &Remedy) -> Outcome {
        self.declined.insert(remedy.id.clone());
        declined(remedy)
    }
}

fn declined(remedy: &Remedy) -> Outcome {
    Outcome::Refused(format!("declined: {}", remedy.summary))
}

/// Why `remedy`, its rights checked, may not be applied: rights the user lacks, or content
/// that may remain when `--force` (`force`) was not given.
pub fn refusal(remedy: &Remedy, force: bool) -> Option<Outcome> {
    if !remedy.missing_rights.is_empty() {
        let lacking = remedy.missing_rights.join(", ");
        return Some(Outcome::Refused(format!("{}: you lack the rights to {lacking}", remedy.summary)));
    }
    let remains = remedy.needs_force.as_ref().filter(|_| !force)?;
    Some(Outcome::Refused(format!(
        "{}: refused while content may remain ({remains}); --force finalizes anyway",
        remedy.summary
    )))
}

/// Why `n` is still stuck when nothing is left to try: its causes, in words.
pub fn remaining(n: &NamespaceDiagnosis) -> String {
    if n.causes.is_empty() {
        return "no cause found; the namespace controller has not finished".to_string();
    }
    n.causes.iter().map(|c| c.summary.as_str()).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::causes::{diagnose, CauseKind};

    /// A namespace held by a finalizer of its own, Terminating long enough that the silent
    /// namespace controller is a cause too (one without a remedy, listed first).
    fn held(name: &str) -> NamespaceDiagnosis {
        let mut ns = terminating(name);
        ns.metadata_finalizers = vec!["example.com/hold".into()];
        diagnose(&evidence(vec![ns])).namespaces.remove(0)
    }

    fn remedy(n: &NamespaceDiagnosis) -> &Remedy {
        n.causes.iter().find_map(|c| c.remedy.as_ref()).unwrap()
    }

    #[test]
    fn the_first_cause_with_a_remedy_comes_next() {
        let n = held("ns");
        assert_eq!(n.causes[0].kind, CauseKind::ControllerStalled);
        let Some(Next::Apply(cause)) = History::default().next(&n) else { panic!("{n:?}") };
        assert_eq!(cause.kind, CauseKind::NamespaceFinalizer);
        let mut bare = n.clone();
        bare.causes.truncate(1);
        assert_eq!(History::default().next(&bare), None, "nothing to apply");
    }

    /// A namespace with a pod no kubelet confirms gone: its remedy's words name no namespace.
    fn with_a_stale_pod(name: &str) -> NamespaceDiagnosis {
        let mut ev = evidence(vec![terminating(name)]);
        ev.leftovers.push(deleted_leftover(core("pods", "Pod"), name, "p", 600));
        diagnose(&ev).namespaces.remove(0)
    }

    #[test]
    fn a_declined_remedy_settles_its_namespace_only() {
        let (a, b) = (with_a_stale_pod("a"), with_a_stale_pod("b"));
        assert_eq!(remedy(&a).summary, remedy(&b).summary, "the same words");
        let mut history = History::default();
        let outcome = history.decline(remedy(&a));
        assert_eq!(outcome, Outcome::Refused("declined: force-delete 1 pod(s)".into()));
        assert_eq!(history.next(&a), Some(Next::Settle(outcome)));
        assert!(matches!(history.next(&b), Some(Next::Apply(_))), "b's remedy is another one");
    }

    #[test]
    fn a_remedy_that_does_not_work_fails_after_its_attempts() {
        let n = held("ns");
        let mut history = History::default();
        history.attempt(remedy(&n));
        assert!(matches!(history.next(&n), Some(Next::Apply(_))), "one more try");
        history.attempt(remedy(&n));
        assert_eq!(
            history.next(&n),
            Some(Next::Settle(Outcome::Failed(
                "the namespace carries the finalizer example.com/hold: still there after: remove finalizer example.com/hold from namespace ns"
                    .into()
            )))
        );
    }

    #[test]
    fn attempts_count_by_identity_not_by_words() {
        let mut ev = evidence(vec![terminating("ns")]);
        for name in ["a", "b"] {
            ev.leftovers.push(leftover(core("configmaps", "ConfigMap"), "ns", name));
        }
        let before = diagnose(&ev).namespaces.remove(0);
        ev.leftovers.pop();
        let after = diagnose(&ev).namespaces.remove(0);
        assert_ne!(remedy(&before).summary, remedy(&after).summary, "the count changed");
        let mut history = History::default();
        history.attempt(remedy(&before));
        history.attempt(remedy(&before));
        assert!(matches!(history.next(&after), Some(Next::Settle(Outcome::Failed(_)))));
    }

    #[test]
    fn missing_rights_and_remaining_content_refuse() {
        let n = held("ns");
        let mut r = remedy(&n).clone();
        assert_eq!(refusal(&r, false), None);
        r.needs_force = Some("1 object(s) remain".into());
        assert_eq!(refusal(&r, true), None, "--force goes ahead");
        let Some(Outcome::Refused(why)) = refusal(&r, false) else { panic!() };
        assert!(
            why.ends_with("refused while content may remain (1 object(s) remain); --force finalizes anyway")
        );
        r.missing_rights = vec!["patch namespaces".into()];
        assert_eq!(
            refusal(&r, true),
            Some(Outcome::Refused(
                "remove finalizer example.com/hold from namespace ns: you lack the rights to patch namespaces".into()
            ))
        );
    }

    #[test]
    fn what_remains_is_the_causes_in_words() {
        let mut n = held("ns");
        assert_eq!(
            remaining(&n),
            "the namespace controller has not acted on this namespace; the namespace carries the finalizer example.com/hold"
        );
        n.causes.clear();
        assert_eq!(remaining(&n), "no cause found; the namespace controller has not finished");
    }
}
