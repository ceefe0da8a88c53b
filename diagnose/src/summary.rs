//! The causes of many stuck namespaces, each root cause once: one unavailable APIService holds
//! every namespace being deleted, and printing it once per namespace buries the one thing to
//! fix under hundreds of copies. Pure, so the grouping and its order are unit-tested.
//!
//! Two causes are the same root when their remedies are the same (same [`RemedyId`]: the same
//! calls on the same objects, whichever namespace found them); a cause without a remedy is the
//! same root as another of its kind with the same words.

use std::cmp::Reverse;
use std::collections::HashMap;

use serde::Serialize;

use super::causes::{Cause, CauseKind, Diagnosis};
use super::remedy::RemedyId;

/// One root cause and the stuck namespaces it blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Root<'a> {
    /// The cause, as the namespace that shows it best states it (its own cause rather than the
    /// chain down from a namespace above it).
    #[serde(flatten)]
    pub cause: &'a Cause,
    /// Every stuck namespace it blocks, in the diagnosis's order.
    pub namespaces: Vec<&'a str>,
}

/// What makes two causes one root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Identity {
    /// The same calls on the same objects.
    Remedy(RemedyId),
    /// No remedy: the same kind and words.
    Words(CauseKind, String),
}

fn identity(c: &Cause) -> Identity {
    match &c.remedy {
        Some(r) => Identity::Remedy(r.id.clone()),
        None => Identity::Words(c.kind, c.summary.clone()),
    }
}

/// Whether `a` and `b` are the same root cause.
pub fn same_root(a: &Cause, b: &Cause) -> bool {
    identity(a) == identity(b)
}

/// The root causes of the stuck namespaces in `diagnosis`, each once, in the order to fix them.
///
/// By kind first, the order every namespace's own causes are fixed in (a cause of an earlier
/// kind keeps later ones from being resolved, in whichever namespace). Within a kind the roots
/// are independent of each other (different objects), so the one that blocks the most
/// namespaces comes first: fixing it frees the most; ties keep the diagnosis's order.
pub fn roots(diagnosis: &Diagnosis) -> Vec<Root<'_>> {
    let mut out: Vec<Root> = Vec::new();
    let mut index: HashMap<Identity, usize> = HashMap::new();
    for n in diagnosis.namespaces.iter().filter(|n| n.stuck()) {
        for c in &n.causes {
            let i = *index.entry(identity(c)).or_insert_with(|| {
                out.push(Root { cause: c, namespaces: Vec::new() });
                out.len() - 1
            });
            let root = &mut out[i];
            // A namespace's own cause says it better than the chain from one above it.
            if root.cause.kind == CauseKind::StuckSubtree && c.kind != CauseKind::StuckSubtree {
                root.cause = c;
            }
            if !root.namespaces.contains(&n.name.as_str()) {
                root.namespaces.push(&n.name);
            }
        }
    }
    out.sort_by_key(|r| (r.cause.kind, Reverse(r.namespaces.len())));
    out
}

/// `names` as lines of at most `width` characters, at most `max_lines` of them: as many names
/// as fit, then how many more. The first line starts with `lead`.
pub fn wrap(lead: &str, names: &[&str], width: usize, max_lines: usize) -> Vec<String> {
    let more = |n: usize| format!("… and {n} more");
    let room = more(names.len()).chars().count() + 2;
    let mut lines = vec![lead.to_string()];
    let mut on_line = 0;
    for (i, name) in names.iter().enumerate() {
        let last_line = lines.len() >= max_lines;
        let reserve = if last_line && i + 1 < names.len() { room } else { 0 };
        let line = lines.last_mut().expect("at least one line");
        let needed = line.chars().count() + 2 + name.chars().count() + reserve;
        if on_line == 0 || needed <= width {
            if on_line > 0 {
                line.push_str(", ");
            }
            line.push_str(name);
            on_line += 1;
        } else if last_line {
            line.push_str(&format!(", {}", more(names.len() - i)));
            break;
        } else {
            line.push(',');
            lines.push(name.to_string());
            on_line = 1;
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::causes::{diagnose, NamespaceDiagnosis};

    /// `count` namespaces held by the dead APIService; the ones in `held` also carry a finalizer
    /// `example.com/hold` of their own.
    fn many(count: usize, held: &[usize]) -> Diagnosis {
        let namespaces = (1..=count)
            .map(|i| {
                let mut ns = held_by_dead_api_service(&format!("ns-{i:02}"));
                if held.contains(&i) {
                    ns.metadata_finalizers = vec!["example.com/hold".into()];
                }
                ns
            })
            .collect();
        diagnose(&with_dead_api_service(namespaces))
    }

    #[test]
    fn one_api_service_is_one_root_blocking_every_namespace() {
        let d = many(50, &[]);
        let roots = roots(&d);
        assert_eq!(roots.len(), 1, "{roots:?}");
        assert_eq!(roots[0].cause.kind, CauseKind::UnavailableApiService);
        assert_eq!(roots[0].namespaces.len(), 50);
        assert_eq!(roots[0].namespaces[..2], ["ns-01", "ns-02"]);
    }

    #[test]
    fn roots_go_by_kind_then_by_how_many_they_free() {
        let d = many(3, &[2]);
        let kinds: Vec<(CauseKind, usize)> =
            roots(&d).iter().map(|r| (r.cause.kind, r.namespaces.len())).collect();
        assert_eq!(
            kinds,
            [(CauseKind::UnavailableApiService, 3), (CauseKind::NamespaceFinalizer, 1)],
            "the APIService first: nothing goes while it is unavailable"
        );
    }

    #[test]
    fn causes_without_a_remedy_group_by_their_words() {
        // Terminating for 10 minutes and no condition: the controller is silent in each.
        let mut ev = evidence(vec![terminating("a"), terminating("b"), terminating("c")]);
        ev.namespaces[0].metadata_finalizers = vec!["example.com/hold".into()];
        let d = diagnose(&ev);
        let roots = roots(&d);
        assert_eq!(roots[0].cause.kind, CauseKind::ControllerStalled);
        assert_eq!(roots[0].namespaces, ["a", "b", "c"], "the same words: one root");
        assert_eq!(roots[1].namespaces, ["a"]);
        assert!(same_root(roots[0].cause, &d.namespaces[2].causes[0]));
        assert!(!same_root(roots[0].cause, roots[1].cause));
    }

    #[test]
    fn within_a_kind_the_root_that_frees_most_comes_first() {
        let mut ev = evidence(vec![terminating("a"), terminating("b"), terminating("c")]);
        for ns in &mut ev.namespaces {
            ns.metadata_finalizers = vec!["example.com/hold".into()];
        }
        let mut d = diagnose(&ev);
        let finalizer = |n: &NamespaceDiagnosis| {
            n.causes.iter().find(|c| c.kind == CauseKind::NamespaceFinalizer).cloned().unwrap()
        };
        let (x, y) = (finalizer(&d.namespaces[0]), finalizer(&d.namespaces[1]));
        d.namespaces[0].causes = vec![x];
        d.namespaces[1].causes = vec![y.clone()];
        d.namespaces[2].causes = vec![y];
        let blocked: Vec<Vec<&str>> = roots(&d).into_iter().map(|r| r.namespaces).collect();
        assert_eq!(blocked, [vec!["b", "c"], vec!["a"]]);
    }

    #[test]
    fn only_stuck_namespaces_are_counted() {
        let mut d = many(2, &[]);
        d.namespaces[1].status = crate::NamespaceStatus::Active;
        assert_eq!(roots(&d)[0].namespaces, ["ns-01"]);
    }

    #[test]
    fn wraps_and_elides_long_lists() {
        let names: Vec<String> = (1..=50).map(|i| format!("ns-{i:02}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let lines = wrap("blocks 50: ", &names, 40, 2);
        assert_eq!(lines, ["blocks 50: ns-01, ns-02, ns-03, ns-04,", "ns-05, ns-06, ns-07, … and 43 more",]);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert_eq!(wrap("x: ", &names[..3], 40, 2), ["x: ns-01, ns-02, ns-03"], "all fit");
        assert_eq!(wrap("x: ", &[], 40, 2), ["x: "]);
    }
}
