//! The hierarchy followed down: deleting a namespace in hns deletes the subnamespaces below it
//! (with cascading deletion, the whole subtree at once), so a namespace the user asks about may
//! be held, or have left something behind, far below it. Each stuck namespace below is
//! reported on the way down to it, leaf first ("h1 waits for h1-c, which waits for h1-c-g:
//! ..."), with the leaf's own remedy: fixing that one object frees every namespace above it,
//! whereas finalizing one above would orphan what is below.

use super::{Cause, CauseKind, NamespaceDiagnosis};
use crate::evidence::{Evidence, NamespaceState};
use crate::remedy::RemedyId;

/// The Terminating namespaces below `name`, deepest first: the order to fix them in.
pub fn stuck_below<'a>(name: &'a str, ev: &'a Evidence) -> Vec<&'a NamespaceState> {
    let mut below: Vec<&NamespaceState> = ev.below(name).into_iter().filter(|n| n.terminating()).collect();
    below.reverse();
    below
}

/// One cause for `n` per stuck namespace below it that has causes of its own, given every
/// namespace's own diagnosis (`own`, without these causes). A remedy `n` already has, or an
/// earlier one below already gave (one unavailable APIService holds them all), is not repeated.
pub fn causes(n: &NamespaceDiagnosis, own: &[NamespaceDiagnosis], ev: &Evidence) -> Vec<Cause> {
    let mut remedies: Vec<RemedyId> =
        n.causes.iter().filter_map(|c| c.remedy.as_ref().map(|r| r.id.clone())).collect();
    let mut out = Vec::new();
    for below in stuck_below(&n.name, ev) {
        let Some(leaf) = own.iter().find(|d| d.name == below.name) else { continue };
        let Some(first) = leaf.causes.iter().find(|c| c.remedy.is_some()).or(leaf.causes.first()) else {
            continue;
        };
        if let Some(r) = &first.remedy {
            if remedies.contains(&r.id) {
                continue;
            }
            remedies.push(r.id.clone());
        }
        let path = ev.path(&n.name, below);
        if path.len() >= 2 {
            out.push(chain_cause(&path, first, ev));
        }
    }
    out
}

/// The cause for the top of `path` (at least two long) of the first cause of its leaf.
fn chain_cause(path: &[String], leaf_cause: &Cause, ev: &Evidence) -> Cause {
    let (top, leaf) = (&path[0], &path[path.len() - 1]);
    let mut evidence = vec![format!("the way down: {}", path_states(path, ev))];
    evidence.extend(leaf_cause.evidence.iter().map(|e| format!("in {leaf}: {e}")));
    Cause {
        kind: CauseKind::StuckSubtree,
        summary: format!("{}: {}", chain_words(path, ev), leaf_cause.summary),
        evidence,
        advice: format!(
            "Fix {leaf} first: {} Once {leaf} is gone, the namespaces above it up to {top} go by themselves; finalizing one of them by hand instead would orphan what is below it.",
            leaf_cause.advice
        ),
        risk: leaf_cause.risk.clone(),
        remedy: leaf_cause.remedy.clone(),
    }
}

/// "h1 waits for h1-c, which waits for h1-c-g" when every namespace on the way is
/// Terminating; otherwise where the way was cut, e.g. "h1-c-g, below h1 through h1-c (gone),
/// is still Terminating".
fn chain_words(path: &[String], ev: &Evidence) -> String {
    let terminating = |name: &String| ev.namespace(name).is_some_and(NamespaceState::terminating);
    if path.len() >= 2 && path.iter().all(terminating) {
        let mut words = format!("{} waits for {}", path[0], path[1]);
        for name in &path[2..] {
            words.push_str(&format!(", which waits for {name}"));
        }
        return words;
    }
    let (top, leaf) = (&path[0], &path[path.len() - 1]);
    let through: Vec<String> = path[1..path.len() - 1].iter().map(|n| with_state(n, ev)).collect();
    let through = if through.is_empty() { String::new() } else { format!(" through {}", through.join(", ")) };
    format!("{leaf}, below {}{through}, is still Terminating", with_state(top, ev))
}

/// Each namespace on the way with where it stands.
fn path_states(path: &[String], ev: &Evidence) -> String {
    path.iter()
        .map(|n| {
            let state = match ev.namespace(n) {
                None => "gone",
                Some(ns) if ns.terminating() => "Terminating",
                Some(_) => "Active",
            };
            format!("{n} ({state})")
        })
        .collect::<Vec<_>>()
        .join(" > ")
}

/// `name`, marked "(gone)" when it no longer exists.
fn with_state(name: &str, ev: &Evidence) -> String {
    if ev.namespace(name).is_some() {
        name.to_string()
    } else {
        format!("{name} (gone)")
    }
}

#[cfg(test)]
mod tests {
    use hns_api::keys::{ALLOW_CASCADING_DELETION, HAS_SUBNAMESPACE_FINALIZER, SUBNAMESPACE_OF};

    use super::*;
    use crate::causes::diagnose;
    use crate::causes::fixtures::*;
    use crate::plan::{refusal, Outcome};
    use crate::remedy::Action;

    /// `name`, Terminating, a subnamespace of `parent`.
    fn sub(name: &str, parent: &str) -> NamespaceState {
        let mut ns = recently_deleted(name);
        ns.annotations.insert(SUBNAMESPACE_OF.into(), parent.into());
        ns
    }

    /// `ns` holding hns's finalizer for its subnamespaces.
    fn holding(mut ns: NamespaceState) -> NamespaceState {
        ns.metadata_finalizers.push(HAS_SUBNAMESPACE_FINALIZER.into());
        ns
    }

    /// Terminating for 30s: too soon to call the namespace controller stalled.
    fn recently_deleted(name: &str) -> NamespaceState {
        NamespaceState { deletion_timestamp: Some(ago(30)), ..terminating(name) }
    }

    /// The scenario: h1 (cascading deletion) > h1-c > h1-c-g, where ConfigMap x in
    /// h1-c-g waits for a finalizer nothing removes; `gone` namespaces no longer exist.
    fn three_levels(gone: &[&str]) -> Evidence {
        let mut h1 = recently_deleted("h1");
        h1.annotations.insert(ALLOW_CASCADING_DELETION.into(), "true".into());
        let all = vec![holding(h1), holding(sub("h1-c", "h1")), sub("h1-c-g", "h1-c")];
        let mut ev = evidence(all.into_iter().filter(|n| !gone.contains(&n.name.as_str())).collect());
        ev.targets = vec!["h1".into()];
        let mut x = deleted_leftover(core("configmaps", "ConfigMap"), "h1-c-g", "x", 300);
        x.finalizers = vec!["example.com/f".into()];
        ev.leftovers.push(x);
        ev
    }

    fn leaf_remedy() -> RemedyId {
        RemedyId::RemoveObjectFinalizer { namespace: "h1-c-g".into(), finalizer: "example.com/f".into() }
    }

    #[test]
    fn the_parent_is_told_the_way_down_to_the_one_object() {
        let d = diagnose(&three_levels(&[]));
        let names: Vec<&str> = d.namespaces.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["h1", "h1-c-g", "h1-c"], "the target, then below it deepest first");
        let h1 = &d.namespaces[0];
        let chain = h1.causes.iter().find(|c| c.kind == CauseKind::StuckSubtree).unwrap();
        assert_eq!(
            chain.summary,
            "h1 waits for h1-c, which waits for h1-c-g: 1 object(s) wait for finalizer example.com/f, which no controller is removing"
        );
        assert_eq!(
            chain.evidence[0],
            "the way down: h1 (Terminating) > h1-c (Terminating) > h1-c-g (Terminating)"
        );
        let remedy = chain.remedy.as_ref().unwrap();
        assert_eq!(remedy.id, leaf_remedy());
        assert!(matches!(
            &remedy.actions[..],
            [Action::RemoveFinalizer { finalizer, .. }] if finalizer == "example.com/f"
        ));
        assert_eq!(d.namespaces[1].path, ["h1", "h1-c", "h1-c-g"]);
        let h1_c = &d.namespaces[2];
        assert_eq!(h1_c.causes[0].summary.split(':').next(), Some("h1-c waits for h1-c-g"));
    }

    #[test]
    fn a_parent_finalized_by_hand_still_leads_to_what_it_left_behind() {
        let d = diagnose(&three_levels(&["h1"]));
        let h1 = &d.namespaces[0];
        assert!(!h1.stuck(), "h1 itself is gone");
        assert_eq!(
            h1.causes[0].summary,
            "h1-c-g, below h1 (gone) through h1-c, is still Terminating: 1 object(s) wait for finalizer example.com/f, which no controller is removing"
        );
        assert_eq!(h1.causes[0].remedy.as_ref().unwrap().id, leaf_remedy());
        assert_eq!(d.namespaces[1].name, "h1-c-g");
        assert!(d.namespaces[1].stuck(), "so a fix works on it");
    }

    #[test]
    fn hns_finalizer_is_not_a_cause_of_its_own_while_the_subnamespaces_terminate() {
        let d = diagnose(&three_levels(&[]));
        let finalizer_causes =
            d.namespaces[0].causes.iter().filter(|c| c.kind == CauseKind::NamespaceFinalizer);
        assert_eq!(finalizer_causes.count(), 0, "the way down explains it");
    }

    #[test]
    fn a_cause_the_parent_shares_is_not_repeated_on_the_way_down() {
        let mut ev = three_levels(&[]);
        ev.leftovers.clear();
        ev.api_services.push(dead_api_service());
        let d = diagnose(&ev);
        let kinds: Vec<CauseKind> = d.namespaces[0].causes.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [CauseKind::UnavailableApiService], "the APIService once, not per level");
        assert!(d.namespaces[1..].iter().all(|n| n.causes[0].kind == CauseKind::UnavailableApiService));
    }

    #[test]
    fn finalizing_a_parent_with_subnamespaces_left_needs_force() {
        let d = diagnose(&three_levels(&[]));
        let last = d.namespaces[0].last_resort.as_ref().unwrap();
        let remedy = last.remedy.as_ref().unwrap();
        let why = remedy.needs_force.clone().unwrap();
        assert!(why.contains("finalizing it would orphan h1-c, h1-c-g"), "{why}");
        let Some(Outcome::Refused(refused)) = refusal(remedy, false) else { panic!("{remedy:?}") };
        assert!(
            refused.contains("would orphan h1-c, h1-c-g") && refused.ends_with("--force finalizes anyway")
        );
        assert_eq!(refusal(remedy, true), None, "--force goes ahead");
        let leaf = d.namespaces[1].last_resort.as_ref().unwrap().remedy.as_ref().unwrap();
        assert!(!leaf.needs_force.as_deref().unwrap_or_default().contains("orphan"), "nothing below h1-c-g");
    }
}
