//! One test per rule of the ledger.

use super::*;
use crate::hierarchy::forest::testing::{forest, sealed};

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(r, q)| (r.to_string(), Quantity(q.to_string()))).collect()
}

fn amounts(pairs: &[(&str, &str)]) -> Amounts {
    quantity::parse_list(&list(pairs)).unwrap()
}

fn entry(chain: &[&str], usage: Option<(u64, &[(&str, &str)])>) -> Entry {
    Entry {
        chain: chain.iter().map(|k| k.to_string()).collect(),
        basis: usage.map(|(b, _)| b),
        used: usage.map(|(_, u)| list(u)).unwrap_or_default(),
    }
}

/// `acme/budget` (pods: 3) over acme, a, b; `a/small` (pods: 1) over a.
fn ledger() -> Ledger {
    Ledger {
        quotas: [("acme/budget".into(), list(&[("pods", "3")])), ("a/small".into(), list(&[("pods", "1")]))]
            .into(),
        namespaces: [
            ("acme".into(), entry(&["acme/budget"], Some((10, &[("pods", "1")])))),
            ("a".into(), entry(&["a/small", "acme/budget"], Some((20, &[("pods", "0")])))),
            ("b".into(), entry(&["acme/budget"], Some((30, &[("pods", "0")])))),
        ]
        .into(),
    }
}

fn update(ns: &str, version: u64, old: &str, new: &str) -> StatusUpdate {
    StatusUpdate {
        namespace: ns.into(),
        old_version: version,
        old_used: amounts(&[("pods", old)]),
        new_used: amounts(&[("pods", new)]),
        from_admission: true,
    }
}

fn allowed(v: Verdict) -> Option<Ledger> {
    match v {
        Verdict::Allow(next) => next,
        Verdict::Deny(r) => panic!("refused: {r}"),
    }
}

fn refused(v: Verdict) -> Refusal {
    match v {
        Verdict::Deny(r) => r,
        Verdict::Allow(_) => panic!("allowed"),
    }
}

fn used(l: &Ledger, ns: &str) -> (Option<u64>, String) {
    let e = &l.namespaces[ns];
    (e.basis, e.used.get("pods").map(|q| q.0.clone()).unwrap_or_default())
}

#[test]
fn an_increase_within_every_quota_is_recorded_at_the_old_version() {
    let next = allowed(approve(&ledger(), &update("b", 30, "0", "1"))).unwrap();
    assert_eq!(used(&next, "b"), (Some(30), "1".into()));
}

#[test]
fn an_increase_over_a_quota_is_refused_with_hncs_message() {
    let l = allowed(approve(&ledger(), &update("b", 30, "0", "1"))).unwrap();
    let r = refused(approve(&l, &update("a", 20, "0", "2")));
    assert_eq!(
        r.to_string(),
        r#"exceeded hierarchical quota in namespace "a": "small", requested: pods=2, used: pods=0, limited: pods=1"#
    );
    let l = allowed(approve(&l, &update("a", 20, "0", "1"))).unwrap();
    let r = refused(approve(&l, &update("acme", 10, "1", "2")));
    assert_eq!(
        r.to_string(),
        r#"exceeded hierarchical quota in namespace "acme": "budget", requested: pods=1, used: pods=3, limited: pods=3"#
    );
}

#[test]
fn two_approvals_from_one_version_count_once_as_the_larger() {
    let l = allowed(approve(&ledger(), &update("b", 30, "0", "1"))).unwrap();
    let again = approve(&l, &update("b", 30, "0", "1"));
    assert_eq!(again, Verdict::Allow(None), "already recorded");
    let l = allowed(approve(&l, &update("b", 30, "0", "2"))).unwrap();
    assert_eq!(used(&l, "b"), (Some(30), "2".into()));
    let smaller = approve(&l, &update("b", 30, "0", "1"));
    assert_eq!(smaller, Verdict::Allow(None), "the larger stays: either may commit");
}

#[test]
fn the_check_counts_the_entry_on_the_same_basis() {
    // b holds 2 approved at 30; another update from 30 to 1 fits alone, but the ledger must
    // keep 2 (that one may still commit), so the sum stays 1 + 0 + 2.
    let l = allowed(approve(&ledger(), &update("b", 30, "0", "2"))).unwrap();
    let r = refused(approve(&l, &update("acme", 10, "1", "2")));
    assert!(r.to_string().contains("used: pods=3"), "{r}");
}

#[test]
fn a_newer_committed_old_object_replaces_the_entry_even_lower() {
    let l = allowed(approve(&ledger(), &update("b", 30, "0", "2"))).unwrap();
    // The RQ moved on to 35 with 1 pod (the approval for 2 never committed).
    let next = allowed(approve(&l, &update("b", 35, "1", "2"))).unwrap();
    assert_eq!(used(&next, "b"), (Some(35), "2".into()));
    let decrease = allowed(approve(&l, &update("b", 35, "1", "0"))).unwrap();
    assert_eq!(used(&decrease, "b"), (Some(35), "1".into()), "the committed state, not the proposal");
}

#[test]
fn an_update_older_than_the_basis_is_allowed_and_not_recorded() {
    let l = ledger();
    assert_eq!(approve(&l, &update("b", 29, "0", "9")), Verdict::Allow(None));
}

#[test]
fn decreases_are_always_allowed() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().basis = None;
    assert_eq!(approve(&l, &update("b", 30, "1", "0")), Verdict::Allow(None));
    let lower = allowed(approve(&ledger(), &update("acme", 12, "5", "4"))).unwrap();
    assert_eq!(used(&lower, "acme"), (Some(12), "5".into()), "the committed 5: the 4 may never commit");
}

#[test]
fn an_unknown_usage_refuses_increases_with_try_again() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().basis = None;
    let r = refused(approve(&l, &update("b", 30, "0", "1")));
    assert!(matches!(r, Refusal::NotReady { .. }), "{r}");
    let r = refused(approve(&l, &update("acme", 10, "1", "2")));
    assert_eq!(
        r.to_string(),
        r#"hierarchical quotas covering namespace "acme" are being set up (the usage of namespace b is not known yet): try again in a moment"#
    );
    let r = refused(approve(&l, &update("other", 1, "0", "1")));
    assert!(matches!(r, Refusal::NotReady { .. }), "no entry: {r}");
    // a is under acme/budget too, but b's unknown usage only matters for that quota.
    let mut l = ledger();
    l.quotas.insert("a/small".into(), list(&[("pods", "5")]));
    l.namespaces.get_mut("b").unwrap().basis = None;
    assert!(matches!(refused(approve(&l, &update("a", 20, "0", "1"))), Refusal::NotReady { .. }));
}

#[test]
fn a_quota_missing_from_the_ledger_is_try_again() {
    let mut l = ledger();
    l.quotas.remove("a/small");
    assert!(matches!(refused(approve(&l, &update("a", 20, "0", "1"))), Refusal::NotReady { .. }));
}

#[test]
fn recalculations_are_always_allowed_and_recorded_the_same_way() {
    let mut up = update("b", 30, "0", "9");
    up.from_admission = false;
    let next = allowed(approve(&ledger(), &up)).unwrap();
    assert_eq!(used(&next, "b"), (Some(30), "9".into()));
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().basis = None;
    assert_eq!(approve(&l, &up), Verdict::Allow(None), "unknown stays unknown: the reconciler fills it");
}

#[test]
fn only_increased_resources_are_checked() {
    let mut l = ledger();
    l.quotas.insert("acme/budget".into(), list(&[("pods", "3"), ("services", "1")]));
    l.namespaces.get_mut("acme").unwrap().used = list(&[("pods", "5"), ("services", "0")]);
    let up = StatusUpdate {
        namespace: "acme".into(),
        old_version: 10,
        old_used: amounts(&[("pods", "5"), ("services", "0")]),
        new_used: amounts(&[("pods", "5"), ("services", "1")]),
        from_admission: true,
    };
    allowed(approve(&l, &up)).unwrap();
    let mut more = up.clone();
    more.new_used = amounts(&[("pods", "6"), ("services", "1")]);
    let r = refused(approve(&l, &more));
    assert!(r.to_string().ends_with("requested: pods=1, used: pods=5, limited: pods=3"), "{r}");
}

/// Puts quota `name` with `pods` pods in namespace `ns` of `f`, as hns stores it.
pub(super) fn with_quota(f: &mut Forest, ns: &str, name: &str, pods: u32) {
    let mut object = (*f.get(ns).unwrap().object).clone();
    let quota = format!(
        r#"{{"{name}":{{"uid":"u-{name}","creationTimestamp":"2026-01-01T00:00:00Z","hard":{{"pods":"{pods}"}}}}}}"#
    );
    object.metadata.annotations.get_or_insert_default().insert(hns_api::keys::RESOURCE_QUOTAS.into(), quota);
    f.upsert(sealed(object));
}

#[test]
fn membership_follows_the_forest_and_keeps_the_usage_of_those_that_stay() {
    let mut f = forest("acme a:~acme b:~acme c:b other");
    with_quota(&mut f, "acme", "budget", 3);
    with_quota(&mut f, "a", "small", 1);
    let mut previous = ledger();
    previous.namespaces.insert("gone".into(), entry(&["acme/budget"], Some((5, &[("pods", "1")]))));
    let next = membership(&f, "acme", &previous);
    assert_eq!(next.quotas, ledger().quotas);
    assert_eq!(next.namespaces.keys().collect::<Vec<_>>(), ["a", "acme", "b", "c"]);
    assert_eq!(next.namespaces["a"].chain, ["a/small", "acme/budget"]);
    assert_eq!(used(&next, "b"), (Some(30), "0".into()), "kept");
    assert_eq!(next.namespaces["c"], entry(&["acme/budget"], None), "joined: unknown");
    assert_eq!(trees(&f), BTreeSet::from(["acme".to_string()]));
    assert_eq!(membership(&f, "other", &Ledger::default()), Ledger::default());
    assert_eq!(root_of(&f, "c"), "acme");
}

#[test]
fn observe_fills_unknown_usage_and_lowers_only_on_a_newer_version() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().basis = None;
    l.namespaces.get_mut("a").unwrap().used = list(&[("pods", "1")]);
    let seen = |v: u64, pods: &str| Observed { version: v, used: Some(amounts(&[("pods", pods)])) };
    let observed: BTreeMap<String, Observed> = [
        ("b".to_string(), seen(31, "2")),
        ("a".to_string(), seen(20, "0")),
        ("acme".to_string(), seen(40, "0")),
    ]
    .into();
    let next = observe(&l, &observed);
    assert_eq!(used(&next, "b"), (Some(31), "2".into()), "filled");
    assert_eq!(used(&next, "a"), (Some(20), "1".into()), "same basis: an approval may still commit");
    assert_eq!(used(&next, "acme"), (Some(40), "0".into()), "newer: lowered");
    let unknown = [("b".to_string(), Observed { version: 50, used: None })].into();
    assert_eq!(observe(&l, &unknown), l, "no status.used yet: nothing to learn");
    assert!(knows(&next, "b") && !knows(&l, "b") && !knows(&l, "other"));
}

#[test]
fn held_names_entries_above_their_resourcequota_on_its_own_version() {
    let mut l = ledger();
    l.namespaces.get_mut("a").unwrap().used = list(&[("pods", "1")]);
    let seen = |v: u64, pods: &str| Observed { version: v, used: Some(amounts(&[("pods", pods)])) };
    let observed: BTreeMap<String, Observed> = [
        ("a".to_string(), seen(20, "0")),
        ("b".to_string(), seen(30, "0")),
        ("acme".to_string(), seen(11, "0")),
    ]
    .into();
    assert_eq!(held(&l, &observed), ["a"]);
}

#[test]
fn the_ledger_reads_back_as_written() {
    let json = serde_json::to_string(&ledger()).unwrap();
    assert!(json.contains(r#""b":{"chain":["acme/budget"],"basis":30,"used":{"pods":"0"}}"#), "{json}");
    assert_eq!(serde_json::from_str::<Ledger>(&json).unwrap(), ledger());
    assert_eq!(configmap_name("acme"), "hrq-ledger-acme");
}
