//! One test per rule of the ledger.

use super::*;
use crate::hierarchy::forest::testing::{forest, sealed};

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(r, q)| (r.to_string(), Quantity(q.to_string()))).collect()
}

fn amounts(pairs: &[(&str, &str)]) -> Amounts {
    quantity::parse_list(&list(pairs)).unwrap()
}

fn entry(chain: &[&str], granted: Option<&str>) -> Entry {
    Entry {
        chain: chain.iter().map(|k| k.to_string()).collect(),
        granted: granted.map(|g| list(&[("pods", g)])),
        approvals: 0,
    }
}

/// `acme/budget` (pods: 3) over acme, a, b; `a/small` (pods: 1) over a. acme holds 1 pod.
fn ledger() -> Ledger {
    Ledger {
        quotas: [("acme/budget".into(), list(&[("pods", "3")])), ("a/small".into(), list(&[("pods", "1")]))]
            .into(),
        namespaces: [
            ("acme".into(), entry(&["acme/budget"], Some("1"))),
            ("a".into(), entry(&["a/small", "acme/budget"], Some("0"))),
            ("b".into(), entry(&["acme/budget"], Some("0"))),
        ]
        .into(),
    }
}

fn update(ns: &str, old: &str, new: &str) -> StatusUpdate {
    StatusUpdate {
        namespace: ns.into(),
        old_version: 7,
        old_used: amounts(&[("pods", old)]),
        new_used: amounts(&[("pods", new)]),
        from_admission: true,
    }
}

fn allowed(v: Verdict) -> Option<Grant> {
    match v {
        Verdict::Allow(grant) => grant,
        Verdict::Deny(r) => panic!("refused: {r}"),
    }
}

fn refused(v: Verdict) -> Refusal {
    match v {
        Verdict::Deny(r) => r,
        Verdict::Allow(_) => panic!("allowed"),
    }
}

fn granted(l: &Ledger, ns: &str) -> (Option<String>, u64) {
    let e = &l.namespaces[ns];
    (e.granted.as_ref().and_then(|g| g.get("pods")).map(|q| q.0.clone()), e.approvals)
}

/// A ResourceQuota at `version` using `pods`, its allocation `allocated`.
fn seen_with(version: u64, pods: &str, allocated: &str) -> Observed {
    Observed {
        version,
        used: Some(amounts(&[("pods", pods)])),
        allocation: Some(amounts(&[("pods", allocated)])),
    }
}

/// A ResourceQuota at `version` using `pods`, without an allocation.
fn seen(version: u64, pods: &str) -> Observed {
    Observed { version, used: Some(amounts(&[("pods", pods)])), allocation: None }
}

#[test]
fn an_increase_within_every_quota_is_granted_counted_and_annotated() {
    let grant = allowed(approve(&ledger(), &update("b", "0", "1"))).unwrap();
    assert_eq!(granted(&grant.next, "b"), (Some("1".into()), 1));
    assert_eq!(grant.allocation, Some(list(&[("pods", "1")])));
    assert_eq!(
        allocation_text(&list(&[("pods", "1"), ("requests.cpu", "500m")])),
        "pods=1,requests.cpu=500m"
    );
}

#[test]
fn an_increase_over_a_quota_is_refused_with_hncs_message() {
    let l = allowed(approve(&ledger(), &update("b", "0", "1"))).unwrap().next;
    let r = refused(approve(&l, &update("a", "0", "2")));
    assert_eq!(
        r.to_string(),
        r#"exceeded hierarchical quota in namespace "a": "small", requested: pods=2, used: pods=0, limited: pods=1"#
    );
    let l = allowed(approve(&l, &update("a", "0", "1"))).unwrap().next;
    let r = refused(approve(&l, &update("acme", "1", "2")));
    assert_eq!(
        r.to_string(),
        r#"exceeded hierarchical quota in namespace "acme": "budget", requested: pods=1, used: pods=3, limited: pods=3"#
    );
}

#[test]
fn a_grant_is_never_lowered_by_an_approval() {
    // b was granted 2 (an update that may still commit); an update to 1 keeps 2 and is counted.
    let l = allowed(approve(&ledger(), &update("b", "0", "2"))).unwrap().next;
    let again = allowed(approve(&l, &update("b", "0", "1"))).unwrap();
    assert_eq!(granted(&again.next, "b"), (Some("2".into()), 2));
    let r = refused(approve(&again.next, &update("acme", "1", "2")));
    assert!(r.to_string().contains("used: pods=3"), "the 2 granted count: {r}");
}

#[test]
fn far_from_a_limit_a_grant_comes_with_headroom() {
    let mut l = ledger();
    l.quotas.insert("acme/budget".into(), list(&[("pods", "1000"), ("requests.cpu", "10")]));
    l.quotas.remove("a/small");
    for e in l.namespaces.values_mut() {
        e.chain = vec!["acme/budget".into()];
        e.granted = Some(list(&[("pods", "0"), ("requests.cpu", "0")]));
    }
    let up = StatusUpdate {
        namespace: "b".into(),
        old_version: 7,
        old_used: amounts(&[("pods", "0"), ("requests.cpu", "0")]),
        new_used: amounts(&[("pods", "1"), ("requests.cpu", "100m")]),
        from_admission: true,
    };
    let grant = allowed(approve(&l, &up)).unwrap();
    // Free after the need: 999 pods and 9.9 CPUs, over 4 x 3 namespaces; whole pods, millicores.
    assert_eq!(grant.allocation, Some(list(&[("pods", "84"), ("requests.cpu", "925m")])));
}

#[test]
fn the_nearest_limit_bounds_the_headroom() {
    let mut l = ledger();
    l.quotas.insert("acme/budget".into(), list(&[("pods", "1000")]));
    l.quotas.insert("a/small".into(), list(&[("pods", "9")]));
    let grant = allowed(approve(&l, &update("a", "0", "1"))).unwrap();
    assert_eq!(grant.allocation, Some(list(&[("pods", "3")])), "1 + (9 - 1) / 4");
}

#[test]
fn decreases_are_allowed_and_keep_the_grant() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().granted = None;
    assert_eq!(approve(&l, &update("b", "1", "0")), Verdict::Allow(None), "unknown: nothing to record");
    let lower = allowed(approve(&ledger(), &update("acme", "1", "0"))).unwrap();
    assert_eq!(granted(&lower.next, "acme"), (Some("1".into()), 1));
}

#[test]
fn an_unknown_usage_refuses_increases_with_try_again() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().granted = None;
    let r = refused(approve(&l, &update("b", "0", "1")));
    assert!(matches!(r, Refusal::NotReady { .. }), "{r}");
    let r = refused(approve(&l, &update("acme", "1", "2")));
    assert_eq!(
        r.to_string(),
        r#"hierarchical quotas covering namespace "acme" are being set up (the usage of namespace b is not known yet): try again in a moment"#
    );
    let r = refused(approve(&l, &update("other", "0", "1")));
    assert!(matches!(r, Refusal::NotReady { .. }), "no entry: {r}");
}

#[test]
fn a_quota_limiting_a_new_resource_makes_its_namespaces_unknown() {
    let mut l = ledger();
    l.quotas.insert("acme/budget".into(), list(&[("pods", "3"), ("services", "2")]));
    assert!(!knows(&l, "b"), "b's grant says nothing of services");
    assert!(matches!(refused(approve(&l, &update("b", "0", "1"))), Refusal::NotReady { .. }));
    let observed = [("b".to_string(), seen(9, "0"))].into();
    assert_eq!(
        reclaims(&l, &observed, &BTreeSet::new())[0].target,
        list(&[("pods", "0")]),
        "filled from the usage"
    );
}

/// Issue 40, B2: a namespace admin's quota on a resource whose usage hns does not know in their
/// namespace holds up nothing outside it.
#[test]
fn a_quota_below_on_other_resources_never_holds_up_the_quotas_above() {
    let mut l = ledger();
    l.quotas.insert("a/tiny".into(), list(&[("count/widgets.example.com", "5")]));
    l.namespaces.get_mut("a").unwrap().chain.insert(0, "a/tiny".into());
    assert!(!knows(&l, "a"), "a's usage of widgets is not known");
    assert!(allowed(approve(&l, &update("b", "0", "1"))).is_some(), "a sibling under the quota above");
    assert!(allowed(approve(&l, &update("acme", "1", "2"))).is_some(), "the parent");
    let totals = Totals::of(&l);
    assert!(totals.others("b", &amounts(&[("pods", "0")]), "acme/budget").is_ok(), "reclaims too");
}

#[test]
fn a_resource_kubernetes_does_not_count_is_used_zero() {
    let hard = list(&[("pods", "5"), ("count/widgets.example.com", "5")]);
    assert_eq!(
        counted_usage(Some(&hard), Some(&list(&[("pods", "2")]))),
        Some(amounts(&[("pods", "2"), ("count/widgets.example.com", "0")]))
    );
    assert_eq!(counted_usage(Some(&hard), None), None, "not counted yet");
    assert_eq!(counted_usage(None, Some(&list(&[("pods", "2")]))), Some(amounts(&[("pods", "2")])));
}

#[test]
fn a_quota_missing_from_the_ledger_is_try_again() {
    let mut l = ledger();
    l.quotas.remove("a/small");
    assert!(matches!(refused(approve(&l, &update("a", "0", "1"))), Refusal::NotReady { .. }));
}

#[test]
fn recalculations_are_always_allowed_and_counted() {
    let mut up = update("b", "0", "9");
    up.from_admission = false;
    let grant = allowed(approve(&ledger(), &up)).unwrap();
    assert_eq!(granted(&grant.next, "b"), (Some("9".into()), 1), "the truth, over the quota or not");
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().granted = None;
    let grant = allowed(approve(&l, &up)).unwrap();
    assert_eq!(granted(&grant.next, "b"), (None, 1), "unknown stays unknown, but a fill must start over");
    assert_eq!(grant.allocation, None);
}

#[test]
fn only_increased_resources_are_checked() {
    let mut l = ledger();
    l.quotas.insert("acme/budget".into(), list(&[("pods", "3"), ("services", "1")]));
    for e in l.namespaces.values_mut() {
        e.granted = Some(list(&[("pods", "0"), ("services", "0")]));
    }
    l.namespaces.get_mut("acme").unwrap().granted = Some(list(&[("pods", "5"), ("services", "0")]));
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
    let mut object = f.get(ns).unwrap().namespace();
    let quota = format!(
        r#"{{"{name}":{{"uid":"u-{name}","creationTimestamp":"2026-01-01T00:00:00Z","hard":{{"pods":"{pods}"}}}}}}"#
    );
    object.metadata.annotations.get_or_insert_default().insert(hns_api::keys::RESOURCE_QUOTAS.into(), quota);
    f.upsert(sealed(object));
}

#[test]
fn membership_follows_the_forest_and_keeps_the_grants_of_those_that_stay() {
    let mut f = forest("acme a:~acme b:~acme c:b other");
    with_quota(&mut f, "acme", "budget", 3);
    with_quota(&mut f, "a", "small", 1);
    let mut previous = ledger();
    previous.namespaces.get_mut("b").unwrap().approvals = 4;
    previous.namespaces.insert("gone".into(), entry(&["acme/budget"], Some("1")));
    let next = membership(&f, "acme", &previous);
    assert_eq!(next.quotas, ledger().quotas);
    assert_eq!(next.namespaces.keys().collect::<Vec<_>>(), ["a", "acme", "b", "c"]);
    assert_eq!(next.namespaces["a"].chain, ["a/small", "acme/budget"]);
    assert_eq!(granted(&next, "b"), (Some("0".into()), 4), "kept");
    assert_eq!(next.namespaces["c"], entry(&["acme/budget"], None), "joined: unknown");
    assert_eq!(trees(&f), BTreeSet::from(["acme".to_string()]));
    assert!(any_quota(&f));
    assert!(!any_quota(&forest("acme a:~acme other")), "no quota anywhere");
    assert_eq!(membership(&f, "other", &Ledger::default()), Ledger::default());
    assert_eq!(root_of(&f, "c"), "acme");
}

#[test]
fn a_namespaces_quotas_as_they_would_be_replace_its_own_and_cover_its_subtree() {
    let mut f = forest("acme a:~acme b:~acme c:b");
    with_quota(&mut f, "acme", "budget", 3);
    with_quota(&mut f, "a", "small", 1);
    let b_quotas = [("wide".to_string(), list(&[("pods", "2")]))].into();
    let next = skeleton_with(&f, "acme", "b", &b_quotas);
    assert_eq!(next.namespaces["c"].chain, ["b/wide", "acme/budget"], "covers b's subtree, nearest first");
    assert_eq!(next.quotas["b/wide"], list(&[("pods", "2")]));
    assert_eq!(
        skeleton_with(&f, "acme", "a", &BTreeMap::new()).namespaces["a"].chain,
        ["acme/budget"],
        "a's own gone"
    );
    assert_eq!(
        skeleton_with(&f, "acme", "a", &[("small".to_string(), list(&[("pods", "1")]))].into()),
        skeleton(&f, "acme")
    );
}

/// Issue 40, B2's variant: the ledger never grows past what a ConfigMap holds. Namespaces
/// joining a full tree are left out (they stay pending); those already in keep their grants.
#[test]
fn a_full_ledger_leaves_out_the_namespaces_joining_it() {
    let long: Vec<(String, String)> = (0..MAX_RESOURCES_PER_QUOTA)
        .map(|i| (format!("count/{i}-{}.example.com", "w".repeat(200)), "5".to_string()))
        .collect();
    let limits: ResourceList = long.iter().map(|(r, q)| (r.clone(), Quantity(q.clone()))).collect();
    let mut current =
        Ledger { quotas: [("acme/wide".to_string(), limits.clone())].into(), ..Default::default() };
    current.namespaces.insert(
        "acme".into(),
        Entry { chain: vec!["acme/wide".into()], granted: Some(limits.clone()), approvals: 3 },
    );
    let mut next = current.clone();
    for i in 0..200 {
        next.namespaces
            .insert(format!("kid-{i:03}"), Entry { chain: vec!["acme/wide".into()], ..Default::default() });
    }
    assert!(projected_size(&next) > LIMIT_BYTES, "every kid adds a grant of each resource");
    let (fitted, left_out) = fit(next, &current);
    assert!(projected_size(&fitted) <= LIMIT_BYTES);
    assert!(!left_out.is_empty() && fitted.namespaces.contains_key("kid-000"), "the first names joined");
    assert!(!fitted.namespaces.contains_key("kid-199"), "the last were left out");
    assert_eq!(fitted.namespaces["acme"], current.namespaces["acme"], "those already in keep their grants");
    let (same, none) = fit(current.clone(), &current);
    assert_eq!((same, none), (current, vec![]));
}

#[test]
fn reclaims_fill_unknown_entries_and_take_back_what_is_held_beyond_the_usage() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().granted = None;
    l.namespaces.get_mut("a").unwrap().granted = Some(list(&[("pods", "1")]));
    l.namespaces.get_mut("a").unwrap().approvals = 3;
    let observed: BTreeMap<String, Observed> = [
        ("b".to_string(), seen(31, "2")),
        ("a".to_string(), seen_with(20, "0", "1")),
        ("acme".to_string(), seen_with(40, "1", "1")),
    ]
    .into();
    let plan = reclaims(&l, &observed, &BTreeSet::new());
    let planned: Vec<_> = plan.iter().map(|r| (r.namespace.as_str(), r.version, r.approvals)).collect();
    assert_eq!(planned, [("a", 20, 3), ("b", 31, 0)], "acme holds exactly its usage");
    assert_eq!(plan[0].target, list(&[("pods", "0")]), "near the limit: no headroom kept");
    assert_eq!(plan[1].target, list(&[("pods", "2")]), "filled");
    // a's grant of 1 not yet on its ResourceQuota: an update in flight, left alone for a pass.
    let mut observed = observed;
    observed.insert("a".into(), seen_with(20, "0", "0"));
    assert_eq!(in_flight(&l, &observed), BTreeSet::from([("a".to_string(), 20)]));
    assert_eq!(reclaims(&l, &observed, &BTreeSet::new()).len(), 1, "only b");
    let before = BTreeSet::from([("a".to_string(), 20)]);
    assert_eq!(reclaims(&l, &observed, &before).len(), 2, "still so a pass later: abandoned");
    let unknown = [("b".to_string(), Observed { version: 50, ..Default::default() })].into();
    assert!(reclaims(&l, &unknown, &BTreeSet::new()).is_empty(), "no status.used yet: nothing to learn");
}

#[test]
fn far_from_a_limit_a_grant_keeps_some_headroom() {
    let mut l = ledger();
    l.quotas.insert("acme/budget".into(), list(&[("pods", "1200")]));
    l.quotas.remove("a/small");
    for e in l.namespaces.values_mut() {
        e.chain = vec!["acme/budget".into()];
    }
    l.namespaces.get_mut("b").unwrap().granted = Some(list(&[("pods", "200")]));
    // acme 1 and a 0 granted: b's fresh headroom at usage 10 is (1200 - 1 - 10) / 12 = 99.
    let observed: BTreeMap<String, Observed> = [("b".to_string(), seen_with(9, "10", "200"))].into();
    assert!(reclaims(&l, &observed, &BTreeSet::new()).is_empty(), "200 is within 10 + 2 x 99");
    let observed: BTreeMap<String, Observed> = [("b".to_string(), seen_with(9, "0", "200"))].into();
    assert_eq!(
        reclaims(&l, &observed, &BTreeSet::new())[0].target,
        list(&[("pods", "99")]),
        "down to 0 + 99"
    );
}

#[test]
fn slack_lowers_others_to_their_usage_before_a_refusal() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().granted = Some(list(&[("pods", "2")]));
    let observed: BTreeMap<String, Observed> =
        [("b".to_string(), seen_with(30, "0", "2")), ("acme".to_string(), seen_with(40, "1", "1"))].into();
    let plan = slack(&l, &observed, &["acme/budget".to_string()], "a");
    assert_eq!(plan.len(), 1);
    assert_eq!((plan[0].namespace.as_str(), plan[0].target.clone()), ("b", list(&[("pods", "0")])));
    assert!(slack(&l, &observed, &["acme/budget".to_string()], "b").is_empty(), "not its own");
    let in_flight: BTreeMap<String, Observed> = [("b".to_string(), seen_with(30, "0", "0"))].into();
    assert!(slack(&l, &in_flight, &["acme/budget".to_string()], "a").is_empty(), "its update is committing");
    assert_eq!(
        parse_allocation("pods=2,requests.cpu=500m"),
        Some(amounts(&[("pods", "2"), ("requests.cpu", "0.5")]))
    );
    assert_eq!(parse_allocation("pods"), None);
}

/// A reclaim in namespace `b`, planned at version 30 with no approvals, of `target` pods where
/// `used` were used.
fn reclaim_of_pods(target: &str, used: &str) -> Reclaim {
    Reclaim {
        namespace: "b".into(),
        version: 30,
        approvals: 0,
        target: list(&[("pods", target)]),
        used: amounts(&[("pods", used)]),
    }
}

#[test]
fn a_reclaim_applies_only_if_nothing_was_approved_since_it_was_planned() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().granted = Some(list(&[("pods", "2")]));
    let plan = reclaim_of_pods("0", "0");
    assert_eq!(granted(&apply(&l, std::slice::from_ref(&plan)), "b"), (Some("0".into()), 0));
    l.namespaces.get_mut("b").unwrap().approvals = 1;
    assert_eq!(apply(&l, &[plan]), l, "an approval since may stand on the old grant");
}

#[test]
fn the_ledger_reads_back_as_written() {
    let mut l = ledger();
    l.namespaces.get_mut("b").unwrap().approvals = 2;
    let json = serde_json::to_string(&l).unwrap();
    assert!(json.contains(r#""b":{"chain":["acme/budget"],"granted":{"pods":"0"},"approvals":2}"#), "{json}");
    assert_eq!(serde_json::from_str::<Ledger>(&json).unwrap(), l);
    assert_eq!(configmap_name("acme"), "hrq-ledger-acme");
}

#[test]
fn namespaces_without_a_grant_are_counted_as_unknown_usage() {
    let mut l = ledger();
    assert_eq!(l.unknown_usage(), 0);
    l.namespaces.insert("c".into(), entry(&["acme/budget"], None));
    assert_eq!(l.unknown_usage(), 1);
}

#[test]
fn a_reclaim_still_holds_at_a_later_version_only_where_its_usage_and_allocation_allow() {
    let plan = reclaim_of_pods("2", "1");
    let later = |used: Option<&[(&str, &str)]>, allocation: Option<&[(&str, &str)]>| Observed {
        version: 31,
        used: used.map(amounts),
        allocation: allocation.map(amounts),
    };
    assert!(
        plan.still_holds(&later(Some(&[("pods", "1")]), Some(&[("pods", "2")]))),
        "only the limits moved"
    );
    assert!(
        plan.still_holds(&later(Some(&[("pods", "1"), ("secrets", "1")]), Some(&[("pods", "3")]))),
        "a resource limited since is left for a later plan"
    );
    assert!(!plan.still_holds(&later(Some(&[("pods", "2")]), Some(&[("pods", "2")]))), "the usage moved");
    assert!(!plan.still_holds(&later(Some(&[("pods", "1")]), Some(&[("pods", "1")]))), "lowered since");
    assert!(!plan.still_holds(&later(Some(&[("pods", "1")]), None)), "no allocation: not above the usage");
    assert!(!plan.still_holds(&later(None, None)), "not counted");
}
