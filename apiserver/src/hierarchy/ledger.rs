//! The quota ledger of one tree: what hns approves ResourceQuota usage against, so that no
//! subtree can spend more than its hierarchical quotas allow, however many admissions race.
//! Pure logic, no I/O; `store::ledger` reads and writes it, `admission` and the ledger
//! reconciler decide with it. Why it cannot be overspent is in `docs/quotas.md`.
//!
//! One ledger per tree (per root namespace of the forest), in the ConfigMap
//! `hns-system/hrq-ledger-<root>`, labelled `hnc.x-k8s.io/hrq-ledger`, under the data key
//! `ledger.json`:
//!
//! ```json
//! {
//!   "quotas": { "acme/budget": { "pods": "10", "requests.cpu": "4" } },
//!   "namespaces": {
//!     "acme":   { "chain": ["acme/budget"], "basis": 812, "used": { "pods": "3" } },
//!     "team-a": { "chain": ["acme/budget"] }
//!   }
//! }
//! ```
//!
//! - `quotas`: each hierarchical quota of the tree, as `<namespace>/<name>`, with its limits
//!   (`spec.hard`), copied from the forest by the reconciler.
//! - `namespaces`: each namespace at least one quota covers: `chain`, the quotas covering it
//!   (nearest first), and, once known, `used`, an upper bound of its ResourceQuota's
//!   `status.used`, valid from the ResourceQuota's resourceVersion `basis` on. A namespace
//!   without `basis` has no known usage yet: increases anywhere under its quotas are refused
//!   with "try again" until the reconciler fills it.
//!
//! The rules (each a function below): [`approve`] a status update, [`membership`] from the
//! forest, [`observe`] ResourceQuotas as listed, and [`held`] entries an abandoned approval
//! keeps above the truth.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::forest::Forest;
use super::quantity::{self, Amount, Amounts};

/// The prefix of a ledger ConfigMap's name; the tree's root namespace follows.
pub const CONFIGMAP_PREFIX: &str = "hrq-ledger-";

/// The label on every ledger ConfigMap (value: the root namespace), which hns watches.
pub const CONFIGMAP_LABEL: &str = "hnc.x-k8s.io/hrq-ledger";

/// The ConfigMap data key holding the ledger's JSON.
pub const DATA_KEY: &str = "ledger.json";

/// A ResourceList as stored: resource name to quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The ledger of one tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Each quota of the tree (`<namespace>/<name>`) and its limits.
    #[serde(default)]
    pub quotas: BTreeMap<String, ResourceList>,
    /// Each covered namespace's entry.
    #[serde(default)]
    pub namespaces: BTreeMap<String, Entry>,
}

/// What the ledger knows of one covered namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The quotas covering it, nearest first.
    #[serde(default)]
    pub chain: Vec<String>,
    /// The ResourceQuota resourceVersion `used` holds from; absent while the usage is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<u64>,
    /// An upper bound of the ResourceQuota's `status.used` at `basis` and of any update from
    /// `basis` that may still commit.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub used: ResourceList,
}

/// The name of a tree's ledger ConfigMap.
pub fn configmap_name(root: &str) -> String {
    format!("{CONFIGMAP_PREFIX}{root}")
}

/// How a quota is named in a ledger.
pub fn quota_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The root of the tree `namespace` is in (itself, if it has no parent).
pub fn root_of(forest: &Forest, namespace: &str) -> String {
    forest.ancestry_names(namespace).into_iter().next().unwrap_or_else(|| namespace.to_string())
}

/// An update of a ResourceQuota's `status.used`, as the webhook sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// The ResourceQuota's namespace.
    pub namespace: String,
    /// oldObject's resourceVersion: the committed state the update applies to.
    pub old_version: u64,
    /// oldObject's `status.used`.
    pub old_used: Amounts,
    /// The update's `status.used`.
    pub new_used: Amounts,
    /// Whether Kubernetes' quota admission sends it (to admit an object), rather than a
    /// recalculation by kube-controller-manager, which is always allowed.
    pub from_admission: bool,
}

impl StatusUpdate {
    /// Whether it increases any resource.
    pub fn increases(&self) -> bool {
        !increases(&self.old_used, &self.new_used).is_empty()
    }
}

/// The answer to a [`StatusUpdate`].
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Allowed; the ledger to write first (compare-and-swap), if it changes.
    Allow(Option<Ledger>),
    /// Refused.
    Deny(Refusal),
}

/// Why an update is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// It would take a subtree over a quota (HNC's message).
    #[error("{0}")]
    Exceeded(String),
    /// The ledger does not know enough yet; the same update may pass in a moment.
    #[error("hierarchical quotas covering namespace {namespace:?} are being set up ({why}): try again in a moment")]
    NotReady {
        /// The namespace whose update is refused.
        namespace: String,
        /// What is missing.
        why: String,
    },
    /// A stored quantity could not be read (hns wrote it, so this is a bug or tampering).
    #[error("the quota ledger of namespace {namespace:?} holds an unreadable quantity for {resource}: {error}; hns's controller rewrites it from the quotas")]
    Unreadable {
        /// The namespace whose update is refused.
        namespace: String,
        /// The resource.
        resource: String,
        /// What is wrong with it.
        error: quantity::QuantityError,
    },
}

/// Decides a status update against `ledger` (rule (a) of `docs/quotas.md`).
pub fn approve(ledger: &Ledger, update: &StatusUpdate) -> Verdict {
    match approve_checked(ledger, update) {
        Ok(next) => Verdict::Allow(next.filter(|n| n != ledger)),
        Err(refusal) => Verdict::Deny(refusal),
    }
}

fn approve_checked(ledger: &Ledger, update: &StatusUpdate) -> Result<Option<Ledger>, Refusal> {
    let n = update.namespace.as_str();
    let mut next = ledger.clone();
    let recorded =
        next.namespaces.get_mut(n).map(|entry| catch_up(entry, update.old_version, &update.old_used));
    let increases = increases(&update.old_used, &update.new_used);
    // Stale: an update from before the entry's basis cannot commit.
    if recorded == Some(Catch::Stale) {
        return Ok(None);
    }
    let known = recorded.is_some_and(|c| c == Catch::Known);
    if !known {
        // Unknown usage: a decrease or a recalculation passes and waits for the reconciler.
        if increases.is_empty() || !update.from_admission {
            return Ok(Some(next));
        }
        return Err(not_ready(n, "its usage is not known yet"));
    }
    let entry = &next.namespaces[n];
    let prior = read(n, &entry.used)?;
    let value = quantity::max(&prior, &update.new_used);
    if update.from_admission && !increases.is_empty() {
        check_chain(&next, n, &entry.chain, &prior, &value, &increases)?;
    }
    let stored = quantity::to_list(&value, &update.new_used);
    next.namespaces.get_mut(n).expect("entry checked above").used = stored;
    Ok(Some(next))
}

/// Where an entry stands against an update from `version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Catch {
    /// The entry's usage holds at `version` (possibly just caught up to it).
    Known,
    /// The entry's usage is unknown.
    Unknown,
    /// The entry is newer than `version`.
    Stale,
}

/// Brings `entry` up to the committed state (`version`, `used`) if it is older; a committed
/// state newer than the basis means every approval on the old basis committed or never will.
fn catch_up(entry: &mut Entry, version: u64, used: &Amounts) -> Catch {
    match entry.basis {
        None => Catch::Unknown,
        Some(b) if b > version => Catch::Stale,
        Some(b) if b == version => Catch::Known,
        Some(_) => {
            entry.basis = Some(version);
            entry.used = quantity::to_list(used, used);
            Catch::Known
        }
    }
}

/// The resources `new` holds more of than `old`, with the increase.
fn increases(old: &Amounts, new: &Amounts) -> Amounts {
    new.iter()
        .filter_map(|(r, a)| {
            let before = old.get(r).copied().unwrap_or(Amount::ZERO);
            a.exceeds(before).then(|| (r.clone(), a.minus(before)))
        })
        .collect()
}

/// Refuses the update if, with `n` at `value`, an increased resource goes over a quota of
/// `chain`.
fn check_chain(
    ledger: &Ledger,
    n: &str,
    chain: &[String],
    prior: &Amounts,
    value: &Amounts,
    increases: &Amounts,
) -> Result<(), Refusal> {
    for key in chain {
        let limits = ledger
            .quotas
            .get(key)
            .ok_or_else(|| not_ready(n, &format!("quota {key} is not in its ledger")))?;
        let limits = read(n, limits)?;
        let others = others_sum(ledger, n, key)?;
        let used = quantity::add(&others, prior);
        let proposed = quantity::add(&others, value);
        let over: Vec<&str> = quantity::exceeded(&proposed, &limits)
            .into_iter()
            .filter(|r| increases.contains_key(*r))
            .collect();
        if !over.is_empty() {
            return Err(Refusal::Exceeded(exceeded_message(key, &over, increases, &used, &limits)));
        }
    }
    Ok(())
}

/// The usage of the members of quota `key` other than `n`; refused while one is unknown.
fn others_sum(ledger: &Ledger, n: &str, key: &str) -> Result<Amounts, Refusal> {
    let mut sum = Amounts::new();
    for (member, entry) in &ledger.namespaces {
        if member == n || !entry.chain.iter().any(|k| k == key) {
            continue;
        }
        if entry.basis.is_none() {
            return Err(not_ready(n, &format!("the usage of namespace {member} is not known yet")));
        }
        sum = quantity::add(&sum, &read(n, &entry.used)?);
    }
    Ok(sum)
}

/// HNC's message: `exceeded hierarchical quota in namespace "NS": "NAME", requested: R=…,
/// used: R=…, limited: R=…`, one triple per resource over.
fn exceeded_message(
    key: &str,
    over: &[&str],
    increases: &Amounts,
    used: &Amounts,
    limits: &Amounts,
) -> String {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let mut msg = format!("exceeded hierarchical quota in namespace {ns:?}: {name:?}");
    for r in over {
        let get = |list: &Amounts| list.get(*r).copied().unwrap_or(Amount::ZERO);
        let limit = get(limits);
        msg += &format!(
            ", requested: {r}={}, used: {r}={}, limited: {r}={}",
            get(increases).written_as(limit),
            get(used).written_as(limit),
            limit
        );
    }
    msg
}

fn not_ready(namespace: &str, why: &str) -> Refusal {
    Refusal::NotReady { namespace: namespace.to_string(), why: why.to_string() }
}

fn read(namespace: &str, list: &ResourceList) -> Result<Amounts, Refusal> {
    quantity::parse_list(list).map_err(|(resource, error)| Refusal::Unreadable {
        namespace: namespace.to_string(),
        resource,
        error,
    })
}

/// The ledger of the tree rooted at `root` as the forest says it should be: every quota of the
/// tree with its limits, every covered namespace with its chain. Usage of namespaces that stay
/// covered is kept; entries of namespaces that left the tree or every quota are dropped.
pub fn membership(forest: &Forest, root: &str, previous: &Ledger) -> Ledger {
    keep_usage(skeleton(forest, root), previous)
}

/// The quotas and chains of the tree rooted at `root`, with no usage known.
pub fn skeleton(forest: &Forest, root: &str) -> Ledger {
    let mut next = Ledger::default();
    for node in forest.iter().filter(|node| root_of(forest, node.name()) == root) {
        for (name, quota) in &node.quotas {
            next.quotas.insert(quota_key(node.name(), name), quota.hard.clone());
        }
        let chain: Vec<String> =
            forest.quotas_covering(node.name()).into_iter().map(|(ns, q, _)| quota_key(ns, q)).collect();
        if !chain.is_empty() {
            next.namespaces.insert(node.name().to_string(), Entry { chain, ..Default::default() });
        }
    }
    next
}

/// `skeleton` with the usage `previous` knows of the namespaces in both.
pub fn keep_usage(mut skeleton: Ledger, previous: &Ledger) -> Ledger {
    for (ns, entry) in &mut skeleton.namespaces {
        if let Some(old) = previous.namespaces.get(ns) {
            entry.basis = old.basis;
            entry.used = old.used.clone();
        }
    }
    skeleton
}

/// The roots of every tree that has a quota.
pub fn trees(forest: &Forest) -> BTreeSet<String> {
    forest.iter().filter(|node| !node.quotas.is_empty()).map(|node| root_of(forest, node.name())).collect()
}

/// A ResourceQuota as observed (listed or watched): a committed state.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Its resourceVersion.
    pub version: u64,
    /// Its `status.used`, once Kubernetes has computed it.
    pub used: Option<Amounts>,
}

/// Fills unknown usage from the observed ResourceQuotas, and brings known entries up to a
/// newer observed state (safe for the same reason as in [`approve`]); an entry is never
/// lowered on its own basis or an older one, where an approval may still commit.
pub fn observe(ledger: &Ledger, observed: &BTreeMap<String, Observed>) -> Ledger {
    let mut next = ledger.clone();
    for (ns, entry) in &mut next.namespaces {
        let Some(Observed { version, used: Some(used) }) = observed.get(ns) else { continue };
        if entry.basis.is_none_or(|b| b < *version) {
            entry.basis = Some(*version);
            entry.used = quantity::to_list(used, used);
        }
    }
    next
}

/// The namespaces whose entry stands above their ResourceQuota at the entry's own basis: an
/// approval there was abandoned (refused later in admission) or is still in flight. Moving the
/// ResourceQuota past that basis (any write to it) lets [`observe`] release the difference.
pub fn held(ledger: &Ledger, observed: &BTreeMap<String, Observed>) -> Vec<String> {
    ledger
        .namespaces
        .iter()
        .filter(|(ns, entry)| {
            let Some(Observed { version, used: Some(used) }) = observed.get(*ns) else { return false };
            let Ok(recorded) = quantity::parse_list(&entry.used) else { return false };
            entry.basis == Some(*version) && !increases(used, &recorded).is_empty()
        })
        .map(|(ns, _)| ns.clone())
        .collect()
}

/// Whether the ledger knows `namespace`'s usage (what a namespace joining a quota waits for).
pub fn knows(ledger: &Ledger, namespace: &str) -> bool {
    ledger.namespaces.get(namespace).is_some_and(|e| e.basis.is_some())
}

#[cfg(test)]
mod model_check;

#[cfg(test)]
mod tests;
