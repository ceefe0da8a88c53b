//! The diagnosis for people (text, coloured when asked) and for tools (JSON).

use std::fmt::Write;

use hns_api::duration::human_duration;
use serde::Serialize;

use super::causes::{Cause, Diagnosis, NamespaceDiagnosis, NamespaceStatus};
use super::conditions::Reading;
use super::fix::FixReport;
use super::summary::{self, Root};

/// How the report marks its words. The plugin colours them on a terminal; [`Plain`] leaves
/// them as they are.
pub trait Style {
    /// For problems.
    fn bad(&self, s: &str) -> String;
    /// For what is fine.
    fn good(&self, s: &str) -> String;
    /// For risks and warnings.
    fn warn(&self, s: &str) -> String;
    /// For detail.
    fn dim(&self, s: &str) -> String;
    /// For headings.
    fn head(&self, s: &str) -> String;
}

/// Words without marks.
pub struct Plain;

impl Style for Plain {
    fn bad(&self, s: &str) -> String {
        s.to_string()
    }
    fn good(&self, s: &str) -> String {
        s.to_string()
    }
    fn warn(&self, s: &str) -> String {
        s.to_string()
    }
    fn dim(&self, s: &str) -> String {
        s.to_string()
    }
    fn head(&self, s: &str) -> String {
        s.to_string()
    }
}

/// How much the text report says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Each root cause once, with the namespaces it blocks, its safest fix and what `--fix`
    /// would do: what someone on call needs to act.
    Brief,
    /// Also every namespace on its own: the namespace controller's conditions, the evidence of
    /// each cause, the exact API calls of each remedy and its risk, and the last resort.
    Full,
}

/// The diagnosis as text.
pub fn text(diagnosis: &Diagnosis, paint: &dyn Style, detail: Detail) -> String {
    let mut out = String::new();
    for w in &diagnosis.warnings {
        let _ = writeln!(out, "{} {w}", paint.warn("warning:"));
    }
    if !diagnosis.warnings.is_empty() {
        out.push('\n');
    }
    if diagnosis.namespaces.is_empty() {
        let _ = writeln!(out, "{}", paint.good("No namespace is Terminating."));
    }
    match detail {
        Detail::Brief => brief(&mut out, diagnosis, paint),
        Detail::Full => full(&mut out, diagnosis, paint),
    }
    if !diagnosis.gaps.is_empty() {
        let _ = writeln!(out, "{}", paint.head("Not seen by this scan:"));
        for g in &diagnosis.gaps {
            let _ = writeln!(out, "  {}: {}", g.what, paint.dim(&g.error));
        }
        out.push('\n');
    }
    out
}

/// Every namespace in full; past one stuck namespace, each root cause is stated once, first.
fn full(out: &mut String, diagnosis: &Diagnosis, paint: &dyn Style) {
    let stuck = diagnosis.namespaces.iter().filter(|n| n.stuck()).count();
    let roots = if stuck > 1 { summary::roots(diagnosis) } else { Vec::new() };
    if stuck > 1 {
        roots_text(out, diagnosis, stuck, &roots, paint, cause_body);
        let _ = writeln!(out, "Each namespace follows; a root cause above is referred to by its number.\n");
    }
    for n in &diagnosis.namespaces {
        namespace(out, n, &roots, paint);
    }
}

/// The namespaces that are not stuck in a line each, then the root causes with their fixes.
fn brief(out: &mut String, diagnosis: &Diagnosis, paint: &dyn Style) {
    for n in diagnosis.namespaces.iter().filter(|n| !n.stuck()) {
        let _ = writeln!(out, "{}", not_terminating(n, paint, " (their causes follow)"));
    }
    let stuck: Vec<&NamespaceDiagnosis> = diagnosis.namespaces.iter().filter(|n| n.stuck()).collect();
    let roots = summary::roots(diagnosis);
    match stuck[..] {
        [] => {}
        [n] => {
            let since = n.terminating_seconds.map(human_duration).unwrap_or_default();
            let _ = writeln!(out, "{}: {} for {since}", paint.head(&title(n)), paint.bad("Terminating"));
            if n.causes.is_empty() {
                let _ = writeln!(out, "  {}", paint.good(NO_CAUSE_YET));
            }
            for (i, r) in roots.iter().enumerate() {
                let _ =
                    writeln!(out, "  {} {}", paint.head(&format!("{}.", i + 1)), paint.bad(&r.cause.summary));
                cause_fix(out, r.cause, paint);
            }
        }
        _ => roots_text(out, diagnosis, stuck.len(), &roots, paint, cause_fix),
    }
    last_resort(out, &stuck, paint);
    out.push('\n');
}

/// The brief report's word on the last resort, which `--fix` offers only after the remedies,
/// to a namespace they did not free.
fn last_resort(out: &mut String, stuck: &[&NamespaceDiagnosis], paint: &dyn Style) {
    let remedies: Vec<&super::remedy::Remedy> =
        stuck.iter().filter_map(|n| n.last_resort.as_ref()?.remedy.as_ref()).collect();
    let held = remedies.iter().filter(|r| r.needs_force.is_some()).count();
    let which = match (stuck.len(), remedies.len()) {
        (_, 0) => return,
        (1, _) => "it".to_string(),
        (all, n) if n == all => "them".to_string(),
        (_, n) => format!("{n} of them"),
    };
    let _ = writeln!(
        out,
        "  {} finalizing by hand, only if the fixes above do not free {which}: --fix offers it after them.",
        paint.warn("Last resort:")
    );
    if held > 0 {
        let _ = writeln!(
            out,
            "  While content remains ({held} namespace(s)) it is refused without --force, which leaves that content orphaned in etcd; --details says what remains."
        );
    }
}

/// What the brief report says of a cause: the safest fix, and what `--fix` would do.
fn cause_fix(out: &mut String, c: &Cause, paint: &dyn Style) {
    let _ = writeln!(out, "       fix: {}", c.advice);
    if let Some(r) = &c.remedy {
        let _ = writeln!(out, "       --fix would: {}", r.summary);
        remedy_limits(out, r, paint);
    }
}

/// What keeps `--fix` from applying a remedy as it is.
fn remedy_limits(out: &mut String, r: &super::remedy::Remedy, paint: &dyn Style) {
    if let Some(why) = &r.needs_force {
        let _ = writeln!(out, "       {} {why}", paint.warn("refused without --force, because:"));
    }
    if !r.missing_rights.is_empty() {
        let _ =
            writeln!(out, "       {} {}", paint.warn("you lack the rights to:"), r.missing_rights.join(", "));
    }
}

const NO_CAUSE_YET: &str =
    "No cause found: the namespace controller may still be at work; look again in a minute.";

/// A namespace's name, with the way down to it when it was found below a named one.
fn title(n: &NamespaceDiagnosis) -> String {
    let mut name = format!("Namespace {}", n.name);
    if n.path.len() > 1 {
        name.push_str(&format!(" (below {})", n.path[..n.path.len() - 1].join(" > ")));
    }
    name
}

/// The line for a namespace that is not Terminating: nothing to do there, or namespaces below it
/// are stuck, followed by `then` (what comes after the line: its causes, or the root causes).
fn not_terminating(n: &NamespaceDiagnosis, paint: &dyn Style, then: &str) -> String {
    let state = match n.status {
        NamespaceStatus::NotFound => "not found",
        _ => "Active, not being deleted",
    };
    let name = paint.head(&title(n));
    if n.causes.is_empty() {
        format!("{name}: {}", paint.good(&format!("{state} (nothing to do)")))
    } else {
        format!("{name}: {state}, but namespaces below it are stuck{then}")
    }
}

/// Root causes in the same words as the one before them are folded into one entry from this
/// many on (each is still detailed with its namespace).
const FOLD_ALIKE: usize = 3;

/// Lines of a namespace list, so that 200 names do not flood the screen.
const LIST_WIDTH: usize = 100;
const LIST_LINES: usize = 2;

/// Every root cause once, with the namespaces it blocks, in the order to fix them.
fn roots_text(
    out: &mut String,
    diagnosis: &Diagnosis,
    stuck: usize,
    roots: &[Root],
    paint: &dyn Style,
    body: fn(&mut String, &Cause, &dyn Style),
) {
    let head = format!("{stuck} namespaces are Terminating. Their root causes, in the order to fix them:");
    let _ = writeln!(out, "{}", paint.head(&head));
    let mut i = 0;
    while i < roots.len() {
        let r = &roots[i];
        let _ = writeln!(out, "  {} {}", paint.head(&format!("{}.", i + 1)), paint.bad(&r.cause.summary));
        let lead = format!("blocks {} namespace(s): ", r.namespaces.len());
        namespace_list(out, "       ", &lead, &r.namespaces);
        body(out, r.cause, paint);
        // A thousand namespaces each held by its own object are a thousand roots in the same
        // words: the first is stated, the rest are counted with the namespaces they block.
        let alike = roots[i + 1..].iter().take_while(|o| o.cause.summary == r.cause.summary).count();
        if alike >= FOLD_ALIKE {
            let names: Vec<&str> =
                roots[i + 1..=i + alike].iter().flat_map(|o| o.namespaces.iter().copied()).collect();
            let numbers = format!("{}.–{}.", i + 2, i + 1 + alike);
            let _ =
                writeln!(out, "  {} the same, each with its own objects and remedy:", paint.head(&numbers));
            namespace_list(out, "       ", &format!("blocks {} namespace(s): ", names.len()), &names);
            i += alike;
        }
        i += 1;
    }
    let bare: Vec<&str> = diagnosis
        .namespaces
        .iter()
        .filter(|n| n.stuck() && n.causes.is_empty())
        .map(|n| n.name.as_str())
        .collect();
    if !bare.is_empty() {
        let lead = format!("No cause found yet in {} namespace(s): ", bare.len());
        namespace_list(out, "  ", &lead, &bare);
    }
}

/// `names` after `lead`, wrapped and elided, each line after `indent`.
fn namespace_list(out: &mut String, indent: &str, lead: &str, names: &[&str]) {
    // The lines after the first are indented two more.
    let width = LIST_WIDTH - indent.len() - 2;
    for (i, line) in summary::wrap(lead, names, width, LIST_LINES).iter().enumerate() {
        let more = if i == 0 { "" } else { "  " };
        let _ = writeln!(out, "{indent}{more}{line}");
    }
}

fn namespace(out: &mut String, n: &NamespaceDiagnosis, roots: &[Root], paint: &dyn Style) {
    if !n.stuck() {
        let _ = writeln!(out, "{}", not_terminating(n, paint, ":"));
        if !n.causes.is_empty() {
            causes(out, n, roots, paint);
        }
        out.push('\n');
        return;
    }
    let name = paint.head(&title(n));
    let since = n.terminating_seconds.map(human_duration).unwrap_or_default();
    let _ = writeln!(out, "{name}: {} for {since}", paint.bad("Terminating"));
    let list = |v: &[String]| if v.is_empty() { "(none)".to_string() } else { v.join(", ") };
    let _ = writeln!(
        out,
        "  spec.finalizers: {}    metadata.finalizers: {}    objects left: {}",
        list(&n.spec_finalizers),
        list(&n.metadata_finalizers),
        n.leftovers
    );
    let _ = writeln!(out, "  Conditions written by the namespace controller:");
    for r in &n.conditions {
        condition(out, r, paint);
    }
    if n.causes.is_empty() {
        let _ = writeln!(out, "  {}", paint.good(NO_CAUSE_YET));
    } else {
        let _ = writeln!(out, "  Causes, in the order to fix them:");
        causes(out, n, roots, paint);
    }
    if let Some(c) = &n.last_resort {
        cause(out, "Last resort:", c, paint);
    }
    out.push('\n');
}

fn causes(out: &mut String, n: &NamespaceDiagnosis, roots: &[Root], paint: &dyn Style) {
    for (i, c) in n.causes.iter().enumerate() {
        let label = format!("{}.", i + 1);
        match roots.iter().position(|r| summary::same_root(r.cause, c)) {
            Some(k) => reference(out, &label, c, &roots[k], k + 1, paint),
            None => cause(out, &label, c, paint),
        }
    }
}

/// A cause stated above as root cause `number`: its words, and only the evidence this namespace
/// adds.
fn reference(out: &mut String, label: &str, c: &Cause, root: &Root, number: usize, paint: &dyn Style) {
    let see = format!("see root cause {number} above");
    let _ = writeln!(out, "  {} {}: {}", paint.head(label), paint.bad(&c.summary), paint.dim(&see));
    // A chain's evidence repeats its leaf's as "in LEAF: …": stated above as well.
    let stated = |e: &String| {
        let bare =
            e.strip_prefix("in ").and_then(|e| e.split_once(": ")).map_or(e.as_str(), |(_, rest)| rest);
        root.cause.evidence.iter().any(|r| r == e || r == bare)
    };
    for e in c.evidence.iter().filter(|e| !stated(e)) {
        let _ = writeln!(out, "       evidence: {}", paint.dim(e));
    }
}

fn condition(out: &mut String, r: &Reading, paint: &dyn Style) {
    let status = match (r.status.as_str(), r.problem) {
        ("", _) => paint.warn("unset"),
        (s, true) => paint.bad(s),
        (s, false) => paint.good(s),
    };
    let detail = if r.problem { format!("{}: {}", r.reason, r.message) } else { r.reason.clone() };
    let _ = writeln!(out, "    {:<45} {status} {}", r.type_, paint.dim(&detail));
    if r.problem || r.status.is_empty() {
        let _ = writeln!(out, "      {}", r.meaning);
    }
}

fn cause(out: &mut String, label: &str, c: &Cause, paint: &dyn Style) {
    let _ = writeln!(out, "  {} {}", paint.head(label), paint.bad(&c.summary));
    cause_body(out, c, paint);
}

/// A cause's evidence, advice, remedy and risk.
fn cause_body(out: &mut String, c: &Cause, paint: &dyn Style) {
    for e in &c.evidence {
        let _ = writeln!(out, "       evidence: {}", paint.dim(e));
    }
    let _ = writeln!(out, "       safest fix: {}", c.advice);
    if let Some(r) = &c.remedy {
        let _ = writeln!(out, "       remedy: {}", r.summary);
        for a in &r.actions {
            let _ = writeln!(out, "         {}", paint.dim(&a.describe()));
        }
        remedy_limits(out, r, paint);
    }
    let _ = writeln!(out, "       risk: {}", paint.warn(&c.risk));
}

/// The diagnosis, and the fix's outcome when there was one, as JSON.
pub fn json(diagnosis: &Diagnosis, fix: Option<&FixReport>) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Document<'a> {
        #[serde(flatten)]
        diagnosis: &'a Diagnosis,
        /// Each root cause once, with every namespace it blocks.
        summary: Vec<Root<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        fix: Option<&'a FixReport>,
    }
    // Plain data with string keys: serialization cannot fail.
    serde_json::to_string_pretty(&Document { diagnosis, summary: summary::roots(diagnosis), fix })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::diagnose;
    use crate::causes::fixtures::*;
    use crate::plan::Outcome;

    fn stuck() -> Diagnosis {
        let mut ev = with_dead_api_service(vec![held_by_dead_api_service("demo")]);
        ev.targets.push("missing".into());
        diagnose(&ev)
    }

    #[test]
    fn prints_causes_with_evidence_remedy_and_risk() {
        let out = text(&stuck(), &Plain, Detail::Full);
        assert!(out.starts_with("warning: APIService v1.dead.example.com is unavailable"), "{out}");
        assert!(out.contains("Namespace demo: Terminating for 10m\n"), "{out}");
        assert!(out.contains("NamespaceDeletionDiscoveryFailure"));
        assert!(out.contains("  1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)"));
        assert!(
            out.contains("evidence: condition NamespaceDeletionDiscoveryFailure names dead.example.com/v1")
        );
        assert!(out.contains("DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1.dead.example.com with preconditions uid=uid-apisvc, resourceVersion=5"));
        assert!(out.contains("risk: Deleting the APIService removes dead.example.com/v1"));
        assert!(out.contains("Last resort:"));
        assert!(out.contains("Namespace missing: not found"));
    }

    /// `count` namespaces held by the dead APIService.
    fn many(count: usize) -> Diagnosis {
        let namespaces = (1..=count).map(|i| held_by_dead_api_service(&format!("team-{i:02}"))).collect();
        diagnose(&with_dead_api_service(namespaces))
    }

    #[test]
    fn many_namespaces_lead_with_each_root_cause_once() {
        let out = text(&many(50), &Plain, Detail::Full);
        let (summary, details) = out.split_once("\nNamespace team-01:").expect(&out);
        assert!(summary.lines().count() <= 20, "one screen:\n{summary}");
        assert!(summary.contains("50 namespaces are Terminating. Their root causes, in the order to fix them:\n  1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)\n       blocks 50 namespace(s): team-01, team-02,"), "{summary}");
        assert!(summary.contains("… and "), "elided: {summary}");
        assert!(summary.contains("DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1.dead.example.com"));
        assert_eq!(out.matches("remedy: delete APIService").count(), 1, "said once:\n{out}");
        assert_eq!(
            details.matches("1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck): see root cause 1 above\n").count(),
            50
        );
        assert!(details.contains("Namespace team-50: Terminating"));
    }

    #[test]
    fn a_chain_refers_to_its_leaf_without_repeating_the_leaf_evidence() {
        let mut d = many(2);
        let leaf = d.namespaces[1].causes[0].clone();
        let chain = &mut d.namespaces[0].causes[0];
        chain.kind = crate::causes::CauseKind::StuckSubtree;
        chain.summary = format!("team-01 waits for team-02: {}", leaf.summary);
        chain.evidence = vec!["the way down: team-01 (Terminating) > team-02 (Terminating)".into()];
        chain.evidence.extend(leaf.evidence.iter().map(|e| format!("in team-02: {e}")));
        let out = text(&d, &Plain, Detail::Full);
        let details = out.split_once("\nNamespace team-01:").expect(&out).1;
        assert!(details.contains("evidence: the way down: team-01"), "{details}");
        assert!(!details.contains("in team-02:"), "stated in the summary:\n{details}");
    }

    #[test]
    fn namespaces_without_a_cause_are_named_in_the_summary() {
        let mut d = many(3);
        d.namespaces[2].causes.clear();
        let out = text(&d, &Plain, Detail::Full);
        assert!(out.contains("blocks 2 namespace(s): team-01, team-02\n"), "{out}");
        assert!(out.contains("\n  No cause found yet in 1 namespace(s): team-03\n"), "{out}");
    }

    #[test]
    fn alike_root_causes_are_folded_into_one_entry() {
        let mut ev = evidence((1..=40).map(|i| terminating(&format!("team-{i:02}"))).collect());
        for ns in &mut ev.namespaces {
            ns.metadata_finalizers = vec!["example.com/hold".into()];
        }
        let d = diagnose(&ev);
        let out = text(&d, &Plain, Detail::Full);
        let summary = out.split_once("\nNamespace team-01:").expect(&out).0;
        assert!(summary.lines().count() <= 30, "one screen:\n{summary}");
        // Root 1: the namespace controller silent in all 40; then each one's own finalizer.
        assert!(summary.contains("  2. the namespace carries the finalizer example.com/hold\n       blocks 1 namespace(s): team-01\n"), "{summary}");
        assert!(summary.contains("  3.–41. the same, each with its own objects and remedy:\n       blocks 39 namespace(s): team-02, team-03,"), "{summary}");
        assert_eq!(
            summary.matches("       remedy: ").count(),
            1,
            "the first stated whole, the rest folded:\n{summary}"
        );
        assert!(out.contains("see root cause 41 above"), "the details keep their numbers");
    }

    #[test]
    fn one_namespace_has_no_summary() {
        let out = text(&many(1), &Plain, Detail::Full);
        assert!(!out.contains("root cause"), "{out}");
    }

    #[test]
    fn json_summarises_each_root_cause_once() {
        let v: serde_json::Value = serde_json::from_str(&json(&many(50), None)).unwrap();
        let summary = v["summary"].as_array().unwrap();
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0]["kind"], "unavailable_api_service");
        assert_eq!(summary[0]["remedy"]["actions"][0]["kind"], "delete_api_service");
        assert_eq!(summary[0]["namespaces"].as_array().unwrap().len(), 50);
        assert_eq!(v["namespaces"].as_array().unwrap().len(), 50, "the details stay");
    }

    #[test]
    fn the_brief_report_gives_the_cause_the_fix_and_what_fix_would_do() {
        let out = text(&stuck(), &Plain, Detail::Brief);
        assert!(out.contains("Namespace missing: not found (nothing to do)\n"), "{out}");
        assert!(out.contains("Namespace demo: Terminating for 10m\n  1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)\n       fix: "), "{out}");
        assert!(out.contains("       --fix would: delete APIService v1.dead.example.com\n"), "{out}");
        for detail in ["evidence:", "DELETE /apis", "risk:", "remove \"kubernetes\"", "Conditions written"] {
            assert!(!out.contains(detail), "{detail} only with --details: {out}");
        }
        // The last resort is named, not detailed: discovery failed, so content may remain unseen.
        assert!(out.contains("  Last resort: finalizing by hand, only if the fixes above do not free it: --fix offers it after them.\n  While content remains (1 namespace(s)) it is refused without --force"), "{out}");
        assert!(out.lines().count() <= 10, "{out}");
    }

    #[test]
    fn the_brief_report_of_many_namespaces_is_their_root_causes() {
        let out = text(&many(50), &Plain, Detail::Brief);
        assert!(out.contains("50 namespaces are Terminating. Their root causes, in the order to fix them:\n  1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)\n       blocks 50 namespace(s): team-01,"), "{out}");
        assert!(out.contains("--fix would: delete APIService"), "{out}");
        assert!(!out.contains("Namespace team-01"), "no namespace on its own: {out}");
        assert!(
            out.contains("  Last resort: finalizing by hand, only if the fixes above do not free them:"),
            "{out}"
        );
        assert!(out.lines().count() <= 12, "{out}");
    }

    /// Marks each word with its style's name, to show which words the report gives which.
    struct Marked;

    impl Style for Marked {
        fn bad(&self, s: &str) -> String {
            format!("<bad>{s}</bad>")
        }
        fn good(&self, s: &str) -> String {
            format!("<good>{s}</good>")
        }
        fn warn(&self, s: &str) -> String {
            format!("<warn>{s}</warn>")
        }
        fn dim(&self, s: &str) -> String {
            format!("<dim>{s}</dim>")
        }
        fn head(&self, s: &str) -> String {
            format!("<head>{s}</head>")
        }
    }

    #[test]
    fn problems_headings_and_risks_are_marked() {
        let out = text(&stuck(), &Marked, Detail::Full);
        assert!(out.contains("<head>Namespace demo</head>: <bad>Terminating</bad> for 10m"), "{out}");
        assert!(
            out.contains("<bad>APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)</bad>"),
            "{out}"
        );
        assert!(out.contains("risk: <warn>Deleting the APIService"), "{out}");
    }

    #[test]
    fn json_carries_the_diagnosis_and_the_fix() {
        let mut fix = FixReport::default();
        fix.namespaces.insert("demo".into(), Outcome::Refused("declined".into()));
        let v: serde_json::Value = serde_json::from_str(&json(&stuck(), Some(&fix))).unwrap();
        assert_eq!(v["namespaces"][0]["status"], "terminating");
        assert_eq!(v["namespaces"][0]["causes"][0]["kind"], "unavailable_api_service");
        assert_eq!(v["namespaces"][0]["causes"][0]["remedy"]["actions"][0]["kind"], "delete_api_service");
        assert_eq!(v["namespaces"][1]["status"], "not-found");
        assert_eq!(v["fix"]["namespaces"]["demo"]["outcome"], "refused");
        assert_eq!(v["fix"]["namespaces"]["demo"]["detail"], "declined");
    }
}
