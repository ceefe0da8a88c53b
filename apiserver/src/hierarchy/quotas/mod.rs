//! Hierarchical resource quotas as pure logic: a quota's object with its status derived from
//! the usage observed below it, the ResourceQuota each covered namespace should hold, and when
//! a namespace is pending (it entered a quota's subtree and its usage is not counted yet).
//!
//! # The quota feature, layer by layer
//!
//! This folder is where the feature starts; every other part of it is named `quota*` in its
//! layer, with the I/O above the pure logic (see `docs/quotas.md` for why it cannot be
//! overspent):
//!
//! | layer | file | what it does |
//! |---|---|---|
//! | pure | `hierarchy/quotas/mod.rs` | a quota's status, a namespace's ResourceQuota, pending |
//! | pure | [`ledger`] | a tree's budgets, grants, approvals and reclaims; its model check |
//! | pure | [`quantity`] | Kubernetes quantities as exact numbers |
//! | store | `store/quota_ledgers.rs` | the ledgers' ConfigMaps, written by compare-and-swap |
//! | store | `store/quota_usage.rs` | the watch on hns's ResourceQuotas: the usage counted |
//! | store | `store/quota_allocations.rs` | lowers the grants annotated on ResourceQuotas |
//! | controller | `controller/quota_limits.rs` | each covered namespace's ResourceQuota limits |
//! | controller | `controller/quota_ledger.rs` | each tree's ledger in step with the forest |
//! | admission | `admission/quota_webhooks.rs` | approves usage against the ledger |
//! | API | `resources/hierarchicalresourcequotas.rs` | the `hierarchicalresourcequotas` resource |
//!
//! A quota itself is stored on its namespace (an annotation, read into the forest's nodes as
//! [`crate::hierarchy::forest::StoredQuota`]), so it moves and is sealed with the hierarchy.

pub mod ledger;
pub mod quantity;

use std::collections::BTreeMap;

use hns_api::quota::{CONDITION_EXCEEDED, RESOURCE_QUOTA_NAME};
use hns_api::{HierarchicalResourceQuota, HierarchicalResourceQuotaSpec, HierarchicalResourceQuotaStatus};
use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde_json::Value;

use self::quantity::{Amount, Amounts};
use crate::hierarchy::forest::{Forest, StoredQuota};
use crate::hierarchy::kstatus;
use crate::hierarchy::lineage::Lineage;

/// The reason of the `Exceeded` condition.
pub const REASON_EXCEEDED: &str = "Exceeded";

/// The quantities of `list` that read; a stored quota was checked when written, so nothing is
/// left out in practice.
fn amounts(list: &BTreeMap<String, Quantity>) -> Amounts {
    list.iter().filter_map(|(n, q)| Amount::parse(&q.0).ok().map(|a| (n.clone(), a))).collect()
}

/// The usage of namespace `ns` and everything below it, for each resource of `hard` (zero when
/// nothing is counted): what Kubernetes counted in each namespace's ResourceQuota.
pub fn subtree_used(forest: &Forest, ns: &str, hard: &Amounts) -> Amounts {
    let mut used: Amounts = hard.iter().map(|(n, a)| (n.clone(), Amount::ZERO.written_as(*a))).collect();
    for name in std::iter::once(ns.to_string()).chain(forest.descendant_names(ns)) {
        let Some(observed) = forest.observed_quota(&name) else { continue };
        let counted: Amounts = observed
            .used
            .iter()
            .filter(|(n, _)| hard.contains_key(*n))
            .map(|(n, a)| (n.clone(), *a))
            .collect();
        used = quantity::add(&used, &counted);
    }
    used
}

/// The `Exceeded` condition, if `used` is over any limit of `hard`: names each resource, its
/// usage and its limit, so the owner sees what to free or raise.
fn exceeded_condition(used: &Amounts, hard: &Amounts, since: Option<Time>) -> Option<Condition> {
    let over = quantity::exceeded(used, hard);
    if over.is_empty() {
        return None;
    }
    let what: Vec<String> = over
        .iter()
        .map(|r| format!("{r}: {} used of {}", used.get(*r).copied().unwrap_or_default(), hard[*r]))
        .collect();
    Some(Condition {
        type_: CONDITION_EXCEEDED.to_string(),
        status: "True".into(),
        reason: REASON_EXCEEDED.into(),
        message: format!(
            "the subtree uses more than this quota allows ({}); new usage is refused until usage is lowered or the limit raised",
            what.join(", ")
        ),
        last_transition_time: since.unwrap_or(Time(jiff::Timestamp::UNIX_EPOCH)),
        observed_generation: Some(1),
    })
}

/// The quota `name` of namespace `ns` as served, its status derived from the usage observed in
/// the subtree. Its resourceVersion is the namespace's, as for every derived object.
pub fn quota(forest: &Forest, ns: &str, name: &str) -> Option<HierarchicalResourceQuota> {
    let node = forest.get(ns)?;
    let stored = node.quotas().get(name)?;
    let hard = amounts(&stored.hard);
    let used = subtree_used(forest, ns, &hard);
    let created = stored.creation_timestamp.parse::<jiff::Timestamp>().ok().map(Time);
    let ns_meta = &node.meta;
    let mut meta = ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(ns.to_string()),
        uid: Some(stored.uid.clone()),
        resource_version: ns_meta.resource_version().map(str::to_string),
        creation_timestamp: created.clone(),
        deletion_timestamp: ns_meta.deletion_timestamp().cloned(),
        generation: Some(kstatus::GENERATION),
        ..Default::default()
    };
    stored.meta.fill(&mut meta);
    Some(HierarchicalResourceQuota {
        metadata: meta,
        spec: HierarchicalResourceQuotaSpec { hard: stored.hard.clone() },
        status: Some(HierarchicalResourceQuotaStatus {
            hard: stored.hard.clone(),
            used: quantity::to_list(&used, &hard),
            conditions: exceeded_condition(&used, &hard, created.clone())
                .into_iter()
                .chain([kstatus::quota(name, ns, created.as_ref())])
                .collect(),
            observed_generation: Some(kstatus::GENERATION),
        }),
    })
}

/// [`quota`] as JSON, with its type fields.
pub fn quota_value(forest: &Forest, ns: &str, name: &str) -> Option<Value> {
    quota(forest, ns, name).and_then(|q| serde_json::to_value(q).ok())
}

/// The quotas of namespace `ns`, by name.
pub fn quotas_in(forest: &Forest, ns: &str) -> Vec<HierarchicalResourceQuota> {
    let Some(node) = forest.get(ns) else { return Vec::new() };
    node.quotas().keys().filter_map(|q| quota(forest, ns, q)).collect()
}

/// The `spec.hard` hns's ResourceQuota in a namespace should have: for each resource, the
/// smallest limit of the quotas `covering` it ([`Forest::quotas_covering`]); `None` when none do.
pub fn resource_quota_hard(covering: &[(&str, &str, &StoredQuota)]) -> Option<BTreeMap<String, Quantity>> {
    if covering.is_empty() {
        return None;
    }
    let mut smallest: Amounts = BTreeMap::new();
    for (_, _, q) in covering {
        for (name, limit) in amounts(&q.hard) {
            let entry = smallest.entry(name).or_insert(limit);
            if entry.exceeds(limit) {
                *entry = limit;
            }
        }
    }
    Some(quantity::to_list(&smallest, &smallest))
}

/// The resources a ResourceQuota makes every container of a pod declare: Kubernetes' quota
/// admission refuses a pod with a container that does not ("must specify requests.cpu"), for
/// these six only.
pub const DECLARED_BY_EVERY_CONTAINER: [&str; 6] =
    ["cpu", "limits.cpu", "limits.memory", "memory", "requests.cpu", "requests.memory"];

/// For each of [`DECLARED_BY_EVERY_CONTAINER`] that a quota `covering` a namespace limits
/// ([`Forest::quotas_covering`]), the nearest such quota as `NAMESPACE/NAME`: the one a pod's
/// author should be told about.
pub fn required_by(covering: &[(&str, &str, &StoredQuota)]) -> BTreeMap<String, String> {
    let mut nearest = BTreeMap::new();
    // Nearest first, so the first quota that names a resource is the one kept.
    for (quota_ns, name, q) in covering {
        for resource in q.hard.keys().filter(|r| DECLARED_BY_EVERY_CONTAINER.contains(&r.as_str())) {
            nearest.entry(resource.clone()).or_insert_with(|| format!("{quota_ns}/{name}"));
        }
    }
    nearest
}

/// [`required_by`] as the annotations of hns's ResourceQuota.
pub fn required_by_annotations(required_by: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    required_by
        .iter()
        .map(|(r, q)| (format!("{}{r}", hns_api::keys::REQUIRED_BY_PREFIX), q.clone()))
        .collect()
}

/// hns's ResourceQuota for `ns` with `hard` (labelled, so Kubernetes' quota admission sends its
/// updates to hns's webhook), annotated with who requires what ([`required_by`]).
pub fn resource_quota(
    ns: &str,
    hard: BTreeMap<String, Quantity>,
    required_by: &BTreeMap<String, String>,
) -> ResourceQuota {
    ResourceQuota {
        metadata: ObjectMeta {
            name: Some(RESOURCE_QUOTA_NAME.to_string()),
            namespace: Some(ns.to_string()),
            labels: Some(BTreeMap::from([(hns_api::keys::HRQ_LABEL.to_string(), "true".to_string())])),
            annotations: Some(required_by_annotations(required_by)).filter(|a| !a.is_empty()),
            ..Default::default()
        },
        spec: Some(ResourceQuotaSpec { hard: Some(hard), ..Default::default() }),
        ..Default::default()
    }
}

/// The quotas (namespace, name) covering `ns` if its parent were `parent`: its own and those of
/// the new ancestry.
fn covering_under(forest: &Forest, ns: &str, parent: Option<&str>) -> Vec<(String, String)> {
    let own = forest.get(ns).into_iter().flat_map(|n| n.quotas().keys().map(|q| (ns.to_string(), q.clone())));
    let above =
        parent.into_iter().flat_map(|p| forest.quotas_covering(p)).map(|(n, q, _)| (n.into(), q.into()));
    own.chain(above).collect()
}

/// Whether moving `ns` under `parent` puts it in the subtree of a quota that does not cover it
/// now: then it enters pending, in the same write that moves it.
pub fn enters_quota(forest: &Forest, ns: &str, parent: Option<&str>) -> bool {
    let now: Vec<(String, String)> =
        forest.quotas_covering(ns).into_iter().map(|(n, q, _)| (n.to_string(), q.to_string())).collect();
    covering_under(forest, ns, parent).iter().any(|c| !now.contains(c))
}

/// Whether `ns` should be pending: a quota covers it and hns's ResourceQuota there, through
/// which Kubernetes counts its usage, has not been observed yet. A terminating namespace is
/// not: its ResourceQuota goes with its other objects, and nothing new is made in it.
pub fn pending(lineage: &Lineage) -> bool {
    let (forest, ns) = (lineage.forest(), lineage.name());
    let terminating = forest.get(ns).is_some_and(|n| n.is_terminating());
    !terminating && forest.observed_quota(ns).is_none() && lineage.under_quota()
}

/// A new quota as stored: a fresh uid, created now.
pub fn new_stored(
    hard: BTreeMap<String, Quantity>,
    meta: crate::hierarchy::forest::ObjectLabels,
) -> StoredQuota {
    let now = jiff::Timestamp::now();
    let now = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    StoredQuota { uid: new_uid(), creation_timestamp: now.to_string(), hard, meta }
}

/// A random version 4 UUID.
fn new_uid() -> String {
    let mut b = [0u8; 16];
    openssl::rand::rand_bytes(&mut b).expect("the system's random source works");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// The REQUEST and LIMIT cells of a quota as served ([`hns_api::quota::summary`]).
pub fn summary(obj: &Value) -> (String, String) {
    let status: HierarchicalResourceQuotaStatus =
        serde_json::from_value(obj["status"].clone()).unwrap_or_default();
    hns_api::quota::summary(&status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::hierarchy::forest::ObservedQuota;
    use serde_json::json;

    fn with_quota(f: &mut Forest, ns: &str, name: &str, hard: Value) {
        crate::hierarchy::forest::testing::with_quota(f, ns, name, &hard.to_string());
    }

    fn used(f: &mut Forest, ns: &str, used: &[(&str, &str)]) {
        let used = used.iter().map(|(n, q)| (n.to_string(), Amount::parse(q).unwrap())).collect();
        f.observe_quota(ns, Some(ObservedQuota { used, ..Default::default() }));
    }

    #[test]
    fn status_sums_the_usage_of_the_whole_subtree() {
        let mut f = forest("acme team-a:~acme dev:~team-a other");
        with_quota(&mut f, "acme", "budget", json!({"requests.cpu": "2", "pods": "3"}));
        used(&mut f, "acme", &[("pods", "1")]);
        used(&mut f, "dev", &[("pods", "1"), ("requests.cpu", "1500m"), ("services", "9")]);
        used(&mut f, "other", &[("pods", "5")]);
        let q = quota_value(&f, "acme", "budget").unwrap();
        assert_eq!(q["status"]["used"], json!({"pods": "2", "requests.cpu": "1500m"}));
        assert_eq!(q["status"]["hard"], json!({"pods": "3", "requests.cpu": "2"}));
        let types: Vec<&str> = q["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Ready"], "under the limits, nothing Exceeded: {q}");
        assert_eq!(q["status"]["observedGeneration"], q["metadata"]["generation"]);
        assert_eq!(summary(&q), ("pods: 2/3, requests.cpu: 1500m/2".into(), String::new()));
    }

    #[test]
    fn a_subtree_over_a_limit_is_exceeded_and_says_by_what() {
        let mut f = forest("acme team-a:~acme");
        with_quota(&mut f, "acme", "budget", json!({"pods": "1", "limits.memory": "1Gi"}));
        used(&mut f, "team-a", &[("pods", "2")]);
        let q = quota_value(&f, "acme", "budget").unwrap();
        let c = &q["status"]["conditions"][0];
        assert_eq!((c["type"].as_str(), c["reason"].as_str()), (Some("Exceeded"), Some("Exceeded")));
        assert!(c["message"].as_str().unwrap().contains("pods: 2 used of 1"), "{c}");
        assert_eq!(summary(&q), ("pods: 2/1".into(), "limits.memory: 0/1Gi".into()));
    }

    #[test]
    fn the_resource_quota_takes_the_smallest_limit_of_the_quotas_above() {
        let mut f = forest("acme team-a:~acme dev:~team-a other");
        with_quota(&mut f, "acme", "org", json!({"pods": "10", "requests.cpu": "1"}));
        with_quota(&mut f, "team-a", "team", json!({"pods": "4", "services": "2"}));
        let hard = resource_quota_hard(&f.quotas_covering("dev")).unwrap();
        let hard: BTreeMap<&str, &str> = hard.iter().map(|(k, v)| (k.as_str(), v.0.as_str())).collect();
        assert_eq!(hard, BTreeMap::from([("pods", "4"), ("requests.cpu", "1"), ("services", "2")]));
        assert_eq!(resource_quota_hard(&f.quotas_covering("acme")).unwrap()["pods"].0, "10");
        assert!(resource_quota_hard(&f.quotas_covering("other")).is_none());
    }

    #[test]
    fn a_namespace_is_pending_from_entering_a_quota_until_its_resource_quota_is_seen() {
        let mut f = forest("acme team-a:~acme other");
        with_quota(&mut f, "acme", "org", json!({"pods": "10"}));
        assert!(enters_quota(&f, "other", Some("team-a")));
        assert!(!enters_quota(&f, "other", None));
        assert!(!enters_quota(&f, "team-a", Some("acme")), "already covered by it");
        assert!(pending(&Lineage::of(&f, "team-a")));
        used(&mut f, "team-a", &[]);
        assert!(!pending(&Lineage::of(&f, "team-a")));
        assert!(!pending(&Lineage::of(&f, "other")), "not covered");
    }

    #[test]
    fn new_quotas_get_fresh_uids() {
        let (a, b) = (
            new_stored(BTreeMap::new(), Default::default()),
            new_stored(BTreeMap::new(), Default::default()),
        );
        assert_ne!(a.uid, b.uid);
        assert_eq!(a.uid.len(), 36);
        assert!(a.creation_timestamp.ends_with('Z'));
    }
}
