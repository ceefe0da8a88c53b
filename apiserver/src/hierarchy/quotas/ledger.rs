//! The quota ledger of one tree: the budget of every hierarchical quota, shared out among the
//! namespaces under it, so that no subtree can spend more than its quotas allow however many
//! admissions race. Pure logic, no I/O; `store::quota_ledgers` reads and writes it,
//! `store::quota_allocations` lowers grants, `admission` and the ledger reconciler decide with
//! it. Why it cannot be overspent is in `docs/quotas.md`.
//!
//! One ledger per tree (per root namespace of the forest), in the ConfigMap
//! `hns-system/hrq-ledger-<root>`, labelled `hnc.x-k8s.io/hrq-ledger`, under the data key
//! `ledger.json`:
//!
//! ```json
//! {
//!   "quotas": { "acme/budget": { "pods": "10", "requests.cpu": "4" } },
//!   "namespaces": {
//!     "acme":   { "chain": ["acme/budget"], "granted": { "pods": "3", "requests.cpu": "1" }, "approvals": 7 },
//!     "team-a": { "chain": ["acme/budget"] }
//!   }
//! }
//! ```
//!
//! - `quotas`: each hierarchical quota of the tree, as `<namespace>/<name>`, with its limits
//!   (`spec.hard`), copied from the forest by the reconciler.
//! - `namespaces`: each namespace at least one quota covers: `chain`, the quotas covering it
//!   (nearest first); `granted`, what it may use: an upper bound of its ResourceQuota's
//!   `status.used` in every state that may still commit, and never below the allocation
//!   annotation on that ResourceQuota; `approvals`, how many approvals have granted or confirmed
//!   it. A namespace without `granted` has no known usage yet: increases anywhere under its quotas
//!   are refused with "try again" until the reconciler fills it.
//!
//! The grants of a quota's namespaces never sum above its limits (unless a move or a lowered
//! limit put them there), and each namespace's ResourceQuota carries its grant as the annotation
//! [`ALLOCATION_ANNOTATION`]: an update of its usage within it is admitted by kube-apiserver
//! without asking hns (the webhook's matchConditions), one beyond it is sent to [`approve`].
//!
//! The rules (each a function below): [`approve`] a status update, [`membership`] from the
//! forest, [`reclaims`] of grants held beyond the usage, [`apply`] reclaims once their
//! ResourceQuotas are lowered.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::quantity::{self, Amount, Amounts};
use crate::hierarchy::forest::Forest;

/// The prefix of a ledger ConfigMap's name; the tree's root namespace follows.
pub const CONFIGMAP_PREFIX: &str = "hrq-ledger-";

/// The label on every ledger ConfigMap (value: the root namespace), which hns watches.
pub const CONFIGMAP_LABEL: &str = "hnc.x-k8s.io/hrq-ledger";

/// The ConfigMap data key holding the ledger's JSON.
pub const DATA_KEY: &str = "ledger.json";

/// The annotation on hns's ResourceQuota holding what kube-apiserver may admit there without
/// asking hns: `pods=5,requests.cpu=2` (never above the namespace's grant). The webhook's
/// matchConditions parse it, so resource names and quantities are joined with `=` and `,`,
/// which neither may contain.
pub const ALLOCATION_ANNOTATION: &str = "hnc.x-k8s.io/hrq-allocation";

/// The annotation a reclaim sets to the resourceVersion it lowered the allocation from, so that
/// the write always moves the ResourceQuota to a new version (even when the allocation stays)
/// and every update from an older one fails.
pub const RECLAIM_ANNOTATION: &str = "hnc.x-k8s.io/hrq-reclaimed-from";

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
    /// What it may use; absent while its usage is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<ResourceList>,
    /// How many approvals have raised or confirmed `granted`, or let its usage rise while unknown:
    /// a reclaim lowers the grant only if none happened since it planned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub approvals: u64,
}

impl Ledger {
    /// How many covered namespaces have no known usage yet (no `granted`): increases of usage
    /// under their quotas are refused with "try again" until the reconciler fills them in, so
    /// a count that stays above zero means the ledger lags behind the forest.
    pub fn unknown_usage(&self) -> usize {
        self.namespaces.values().filter(|e| e.granted.is_none()).count()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// An allocation as the annotation writes it: `pods=5,requests.cpu=2`.
pub fn allocation_text(list: &ResourceList) -> String {
    list.iter().map(|(r, q)| format!("{r}={}", q.0)).collect::<Vec<_>>().join(",")
}

/// An update of a ResourceQuota's `status.used` that goes beyond its allocation, as the webhook
/// sees it.
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
        quantity::grew(&self.old_used, &self.new_used)
    }
}

/// An approval to record before answering: the ledger to write (compare-and-swap), and the
/// allocation to set on the ResourceQuota in the same update, if it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The ledger with the approval counted.
    pub next: Ledger,
    /// The namespace's new allocation.
    pub allocation: Option<ResourceList>,
}

/// The answer to a [`StatusUpdate`].
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Allowed, recording the grant first if there is one.
    Allow(Option<Grant>),
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

/// Decides a status update against `ledger`: an increase by quota admission is granted only if
/// the namespace's grant, raised to the new usage, keeps every quota of its chain within its
/// limits counting the other namespaces' grants; it comes with headroom ([`headroom`]) so that
/// the next admissions stay within the allocation. Every allowed increase is counted in
/// `approvals`, which is what makes [`apply`] safe.
pub fn approve(ledger: &Ledger, update: &StatusUpdate) -> Verdict {
    match approve_checked(ledger, update) {
        Ok(grant) => Verdict::Allow(grant),
        Err(refusal) => Verdict::Deny(refusal),
    }
}

fn approve_checked(ledger: &Ledger, update: &StatusUpdate) -> Result<Option<Grant>, Refusal> {
    let n = update.namespace.as_str();
    let increases = increases(&update.old_used, &update.new_used);
    let Some(entry) = ledger.namespaces.get(n) else {
        return if increases.is_empty() || !update.from_admission {
            Ok(None)
        } else {
            Err(not_ready(n, "it is not in its tree's ledger yet"))
        };
    };
    let mut next = ledger.clone();
    let Some(prior) = known_grant(ledger, n, entry)? else {
        if increases.is_empty() {
            return Ok(None);
        }
        if update.from_admission {
            return Err(not_ready(n, "its usage is not known yet"));
        }
        // A recalculation while unknown: allowed, and counted so that a reclaim filling the
        // entry from an older usage starts over.
        next.namespaces.get_mut(n).expect("entry read above").approvals += 1;
        return Ok(Some(Grant { next, allocation: None }));
    };
    let need = quantity::max(&prior, &update.new_used);
    let mut grant = need.clone();
    if update.from_admission && !increases.is_empty() {
        check_chain(ledger, n, &entry.chain, &prior, &need, &increases)?;
        grant = quantity::add(&need, &headroom(ledger, n, &entry.chain, &need)?);
    }
    let granted = quantity::to_list(&grant, &update.new_used);
    let e = next.namespaces.get_mut(n).expect("entry read above");
    e.granted = Some(granted.clone());
    e.approvals += 1;
    Ok(Some(Grant { next, allocation: Some(granted) }))
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

/// Refuses the update if, with `n` granted `need`, an increased resource goes over a quota of
/// `chain`.
fn check_chain(
    ledger: &Ledger,
    n: &str,
    chain: &[String],
    prior: &Amounts,
    need: &Amounts,
    increases: &Amounts,
) -> Result<(), Refusal> {
    for key in chain {
        let limits = limits(ledger, n, key)?;
        let others = others_sum(ledger, n, key)?;
        let used = quantity::add(&others, prior);
        let proposed = quantity::add(&others, need);
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

/// How many parts of a quota's free budget a grant's headroom takes at most, per namespace
/// under the quota: a quarter of its share, so that the grants together leave most of the
/// budget free for whichever namespace needs it next, and nothing when little is left.
const HEADROOM_PARTS: u64 = 4;

/// What a namespace granted `need` gets on top, for each resource of `need`: the least, over the
/// quotas of `chain` limiting it, of the quota's free budget (after `need`) divided by
/// [`HEADROOM_PARTS`] times its number of namespaces, in whole units (thousandths for CPU, which
/// pods request in millicores): a fraction of a pod would only split the budget.
fn headroom(ledger: &Ledger, n: &str, chain: &[String], need: &Amounts) -> Result<Amounts, Refusal> {
    headroom_with(ledger, n, chain, need, |key| {
        Ok((others_sum(ledger, n, key)?, members(ledger, key).count() as u64))
    })
}

/// [`headroom`], with the other members' grants and the number of members of each quota from
/// `others` (computed once per ledger by [`reclaims`], which asks for every namespace).
fn headroom_with(
    ledger: &Ledger,
    n: &str,
    chain: &[String],
    need: &Amounts,
    others: impl Fn(&str) -> Result<(Amounts, u64), Refusal>,
) -> Result<Amounts, Refusal> {
    let mut room: Amounts = need.keys().map(|r| (r.clone(), Amount::ZERO)).collect();
    let mut limited = BTreeSet::new();
    for key in chain {
        let limits = limits(ledger, n, key)?;
        let (others, members) = others(key)?;
        for (r, limit) in &limits {
            let Some(wanted) = need.get(r) else { continue };
            let taken = others.get(r).copied().unwrap_or(Amount::ZERO).plus(*wanted);
            let parts = HEADROOM_PARTS * members.max(1);
            let share = limit.minus(taken).share(parts, r.ends_with("cpu")).written_as(*wanted);
            let slot = room.get_mut(r).expect("room has every resource of need");
            *slot = if limited.insert(r.clone()) { share } else { (*slot).min(share) };
        }
    }
    Ok(room)
}

/// The members of quota `key`: the namespaces whose chain holds it.
fn members<'a>(ledger: &'a Ledger, key: &'a str) -> impl Iterator<Item = (&'a String, &'a Entry)> + 'a {
    ledger.namespaces.iter().filter(move |(_, e)| e.chain.iter().any(|k| k == key))
}

fn limits(ledger: &Ledger, n: &str, key: &str) -> Result<Amounts, Refusal> {
    let limits =
        ledger.quotas.get(key).ok_or_else(|| not_ready(n, &format!("quota {key} is not in its ledger")))?;
    read(n, limits)
}

/// The grants of the members of quota `key` other than `n`, for the resources `key` limits;
/// refused while one of those is unknown. Nothing else of theirs is asked for: a quota a tenant
/// puts on their own subtree, limiting other resources, never holds up the quotas above it.
fn others_sum(ledger: &Ledger, n: &str, key: &str) -> Result<Amounts, Refusal> {
    let mut sum = Amounts::new();
    for (member, entry) in members(ledger, key) {
        if member == n {
            continue;
        }
        let Some(granted) = grant_under(ledger, n, entry, key)? else {
            return Err(not_ready(n, &format!("the usage of namespace {member} is not known yet")));
        };
        sum = quantity::add(&sum, &granted);
    }
    Ok(sum)
}

/// An entry's grant of the resources quota `key` limits, if it is known for each of them.
fn grant_under(ledger: &Ledger, n: &str, entry: &Entry, key: &str) -> Result<Option<Amounts>, Refusal> {
    let Some(granted) = &entry.granted else { return Ok(None) };
    let Some(limits) = ledger.quotas.get(key) else { return Ok(None) };
    let mut under = ResourceList::new();
    for r in limits.keys() {
        let Some(q) = granted.get(r) else { return Ok(None) };
        under.insert(r.clone(), q.clone());
    }
    read(n, &under).map(Some)
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

/// An entry's grant, if it is known for every resource a quota of its chain limits (a quota
/// that starts limiting a new resource makes its namespaces unknown until they are filled).
fn known_grant(ledger: &Ledger, n: &str, entry: &Entry) -> Result<Option<Amounts>, Refusal> {
    let Some(granted) = &entry.granted else { return Ok(None) };
    let limited = entry.chain.iter().filter_map(|k| ledger.quotas.get(k)).flat_map(|l| l.keys());
    let complete = limited.into_iter().all(|r| granted.contains_key(r));
    Ok(if complete { Some(read(n, granted)?) } else { None })
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
/// tree with its limits, every covered namespace with its chain. The grants of namespaces that
/// stay covered are kept; entries of namespaces that left the tree or every quota are dropped.
pub fn membership(forest: &Forest, root: &str, previous: &Ledger) -> Ledger {
    keep_grants(skeleton(forest, root), previous)
}

/// The quotas and chains of the tree rooted at `root`, with no usage known.
pub fn skeleton(forest: &Forest, root: &str) -> Ledger {
    let mut next = Ledger::default();
    for node in forest.iter().filter(|node| root_of(forest, node.name()) == root) {
        for (name, quota) in node.quotas() {
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

/// `skeleton` with the grants and approvals `previous` has of the namespaces in both.
pub fn keep_grants(mut skeleton: Ledger, previous: &Ledger) -> Ledger {
    for (ns, entry) in &mut skeleton.namespaces {
        if let Some(old) = previous.namespaces.get(ns) {
            entry.granted = old.granted.clone();
            entry.approvals = old.approvals;
        }
    }
    skeleton
}

/// The most a ledger may hold, written: a ConfigMap holds 1 MiB, less room for its metadata.
pub const LIMIT_BYTES: usize = (1 << 20) - (16 << 10);

/// The most a ledger may be projected to hold ([`projected_size`]) after a quota is created or
/// changed: what lies between this and [`LIMIT_BYTES`] is room for namespaces that join the
/// tree later and for grants whose quantities grow longer.
pub const BUDGET_BYTES: usize = 896 << 10;

/// The most resources one hierarchical quota may limit. Each is copied into the ledger with the
/// quota and into the grant of every namespace under it, so a quota of thousands would fill its
/// tree's ledger; Kubernetes' ResourceQuotas in practice limit a dozen or two.
pub const MAX_RESOURCES_PER_QUOTA: usize = 64;

/// How many bytes `ledger` will take once every grant it does not know yet is filled, each
/// counted as long as a limit over it (grants sit at or below their limits). This is what decides
/// whether a tree has room for a quota before the quota exists.
pub fn projected_size(ledger: &Ledger) -> usize {
    written_size(&filled(ledger))
}

/// `ledger` with every grant it does not know yet set to a limit over it.
fn filled(ledger: &Ledger) -> Ledger {
    let mut filled = ledger.clone();
    for entry in filled.namespaces.values_mut() {
        let granted = entry.granted.get_or_insert_with(ResourceList::new);
        for (r, limit) in entry.chain.iter().filter_map(|key| ledger.quotas.get(key)).flatten() {
            granted.entry(r.clone()).or_insert_with(|| limit.clone());
        }
    }
    filled
}

fn written_size(value: &impl Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len())
}

/// The skeleton of the tree rooted at `root` as it would be if namespace `ns` held exactly the
/// quotas `quotas` (name → limits): the quotas `ns` holds now replaced, and every namespace from
/// `ns` down covered by the new ones.
pub fn skeleton_with(
    forest: &Forest,
    root: &str,
    ns: &str,
    quotas: &BTreeMap<String, ResourceList>,
) -> Ledger {
    let mut next = skeleton(forest, root);
    let prefix = format!("{ns}/");
    next.quotas.retain(|key, _| !key.starts_with(&prefix));
    for entry in next.namespaces.values_mut() {
        entry.chain.retain(|key| !key.starts_with(&prefix));
    }
    next.namespaces.retain(|_, entry| !entry.chain.is_empty());
    // A chain lists the nearest quotas first: `ns`'s go before those of its ancestors.
    let ancestors: BTreeSet<String> = forest.ancestry_names(ns).into_iter().filter(|a| a != ns).collect();
    let keys: Vec<String> = quotas.keys().map(|name| quota_key(ns, name)).collect();
    for (key, hard) in keys.iter().zip(quotas.values()) {
        next.quotas.insert(key.clone(), hard.clone());
    }
    for covered in std::iter::once(ns.to_string()).chain(forest.descendant_names(ns)) {
        let chain = &mut next.namespaces.entry(covered).or_default().chain;
        let at = chain
            .iter()
            .position(|key| key.split_once('/').is_some_and(|(owner, _)| ancestors.contains(owner)))
            .unwrap_or(chain.len());
        chain.splice(at..at, keys.iter().cloned());
    }
    next.namespaces.retain(|_, entry| !entry.chain.is_empty());
    next
}

/// `next`, the ledger a pass would write, kept within [`LIMIT_BYTES`]: if it does not fit, the
/// namespaces it would add to `current` (those joining the tree's quotas) are left out, last
/// name first, until it does; they stay pending, refused nothing but creations of their own
/// until there is room, while every namespace already in the ledger keeps its grants. Returns
/// the ledger to write and the namespaces left out.
pub fn fit(next: Ledger, current: &Ledger) -> (Ledger, Vec<String>) {
    let mut next = next;
    let projected = filled(&next);
    let mut size = written_size(&projected);
    let joining = projected.namespaces.iter().filter(|(ns, _)| !current.namespaces.contains_key(*ns)).rev();
    let mut left_out = Vec::new();
    for (ns, entry) in joining {
        if size <= LIMIT_BYTES {
            break;
        }
        // `"name":{…}` and the comma before it.
        size -= written_size(&(ns, entry)) + 1;
        next.namespaces.remove(ns);
        left_out.push(ns.clone());
    }
    (next, left_out)
}

/// Whether any namespace has a hierarchical quota: [`trees`] is empty exactly when this is
/// false. It stops at the first quota, where `trees` walks the whole forest.
pub fn any_quota(forest: &Forest) -> bool {
    forest.iter().any(|node| !node.quotas().is_empty())
}

/// The roots of every tree that has a quota.
pub fn trees(forest: &Forest) -> BTreeSet<String> {
    forest.iter().filter(|node| !node.quotas().is_empty()).map(|node| root_of(forest, node.name())).collect()
}

/// A ResourceQuota as observed (listed or watched): a committed state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// Its resourceVersion.
    pub version: u64,
    /// Its `status.used`, once Kubernetes has computed it.
    pub used: Option<Amounts>,
    /// Its allocation annotation, read.
    pub allocation: Option<Amounts>,
}

/// The usage of a ResourceQuota as the ledger knows it: its `status.used`, and zero for each
/// resource of its `status.hard` that `status.used` leaves out. Kubernetes' quota controller
/// writes `status.hard` and `status.used` together, with a usage for every resource it can
/// count; one it leaves out is counted by nothing (`count/widgets.example.com` where the cluster
/// serves no widgets), and quota admission never charges it, so its usage is zero, not unknown.
/// `None` until Kubernetes has counted at all.
pub fn counted_usage(hard: Option<&ResourceList>, used: Option<&ResourceList>) -> Option<Amounts> {
    let mut usage = quantity::parse_list(used?).ok()?;
    for r in hard.into_iter().flat_map(|h| h.keys()) {
        usage.entry(r.clone()).or_insert(Amount::ZERO);
    }
    Some(usage)
}

/// An allocation annotation read back (`None` if absent or unreadable).
pub fn parse_allocation(text: &str) -> Option<Amounts> {
    text.split(',')
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (r, q) = e.split_once('=')?;
            Some((r.to_string(), Amount::parse(q).ok()?))
        })
        .collect()
}

/// The namespaces whose grant is not (yet) the allocation on their ResourceQuota, with its
/// resourceVersion: an approval raised the grant and its update has not committed, or never
/// will (another webhook refused the object). Taking such a grant back at once would make the
/// update in flight fail; one still there a pass later was abandoned.
pub fn in_flight(ledger: &Ledger, observed: &BTreeMap<String, Observed>) -> BTreeSet<(String, u64)> {
    ledger
        .namespaces
        .iter()
        .filter_map(|(ns, entry)| {
            let seen = observed.get(ns)?;
            let granted = quantity::parse_list(entry.granted.as_ref()?).ok()?;
            let same = seen.allocation.as_ref().is_some_and(|a| quantity::same(a, &granted));
            (!same).then(|| (ns.clone(), seen.version))
        })
        .collect()
}

/// A grant to lower to `target`, planned from a namespace's ResourceQuota at `version` and from
/// its entry at `approvals`. Carried out by `store::quota_allocations`: the ResourceQuota's
/// allocation is set to `target` by a compare-and-swap on `version`, or on a later version
/// where the reclaim [still holds](Reclaim::still_holds) (so no update from that version or
/// older can commit any more, and none from a newer one may go beyond `target` without an
/// approval), then [`apply`] lowers the grant if no approval happened since.
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaim {
    /// The namespace.
    pub namespace: String,
    /// The ResourceQuota's resourceVersion the plan was made from.
    pub version: u64,
    /// The entry's approvals when planned.
    pub approvals: u64,
    /// The new grant and allocation: at least the usage at `version`.
    pub target: ResourceList,
    /// The usage at `version` the plan was made from.
    pub used: Amounts,
}

impl Reclaim {
    /// Whether the reclaim still holds at a later version of its ResourceQuota, observed as
    /// `later`: the usage of the resources it sets has not moved (only the limits or
    /// annotations did, or a recount found the same; a resource limited since is left for a
    /// later plan), and its target is still within what [`capped`] allows there (no allocation
    /// lowered since is raised back). Written there, the reclaim keeps what makes it safe: its
    /// target is at least the usage and at most the allocation it replaces, and the grant is
    /// lowered only if no approval happened since the plan ([`apply`]). A pass at that version
    /// might plan otherwise (from a newer ledger), but giving up instead, under a burst of
    /// ResourceQuota writes (a tenant's quotas rewriting every ResourceQuota of a subtree),
    /// would leave a namespace's usage unknown, and every increase under its quotas refused,
    /// until the burst ends.
    pub fn still_holds(&self, later: &Observed) -> bool {
        let (Some(used), Ok(target)) = (&later.used, quantity::parse_list(&self.target)) else {
            return false;
        };
        let usage = |list: &Amounts, r: &str| list.get(r).copied().unwrap_or(Amount::ZERO);
        let moved = target.keys().any(|r| usage(used, r) != usage(&self.used, r));
        !moved && quantity::same(&capped(&target, used, later.allocation.as_ref()), &target)
    }
}

/// The reconciler's reclaims: unknown entries are filled with their observed usage; a known one
/// holding more than twice the headroom a fresh grant would give on top of its usage is brought
/// down to its usage plus that headroom. So near a limit (no headroom) nothing is held beyond
/// the usage, and far from it grants are not taken back and given again at every pass.
///
/// Grants [`in_flight`] are left alone unless they were already at the same resourceVersion in
/// `in_flight_before` (the previous pass's).
pub fn reclaims(
    ledger: &Ledger,
    observed: &BTreeMap<String, Observed>,
    in_flight_before: &BTreeSet<(String, u64)>,
) -> Vec<Reclaim> {
    let fresh: BTreeSet<_> = in_flight(ledger, observed).difference(in_flight_before).cloned().collect();
    let totals = Totals::of(ledger);
    ledger
        .namespaces
        .iter()
        .filter_map(|(ns, entry)| {
            let seen = observed.get(ns)?;
            let (version, used) = (seen.version, seen.used.as_ref()?);
            let plan = |target: Amounts| Reclaim {
                namespace: ns.clone(),
                version,
                approvals: entry.approvals,
                target: quantity::to_list(&capped(&target, used, seen.allocation.as_ref()), used),
                used: used.clone(),
            };
            let Some(granted) = known_grant(ledger, ns, entry).ok()? else { return Some(plan(used.clone())) };
            if fresh.contains(&(ns.clone(), version)) {
                return None;
            }
            // No headroom while another namespace's usage is unknown: keep nothing spare.
            let room = headroom_with(ledger, ns, &entry.chain, used, |key| totals.others(ns, &granted, key))
                .unwrap_or_default();
            let keep = quantity::add(used, &room);
            let twice = quantity::add(&keep, &room);
            let over = granted.iter().any(|(r, g)| g.exceeds(twice.get(r).copied().unwrap_or(Amount::ZERO)));
            over.then(|| plan(lowered(&granted, used, &keep)))
        })
        .collect()
}

/// Each quota's members' grants summed, and how many members it has: computed once so that
/// [`reclaims`] is linear in the namespaces of a tree, not quadratic.
struct Totals {
    /// Per quota: the sum of the grants, `None` while a member's is unknown.
    sums: BTreeMap<String, Option<Amounts>>,
    /// Per quota: its number of members.
    members: BTreeMap<String, u64>,
}

impl Totals {
    fn of(ledger: &Ledger) -> Totals {
        let mut totals = Totals { sums: BTreeMap::new(), members: BTreeMap::new() };
        for (ns, entry) in &ledger.namespaces {
            for key in &entry.chain {
                let granted = grant_under(ledger, ns, entry, key).ok().flatten();
                *totals.members.entry(key.clone()).or_default() += 1;
                let sum = totals.sums.entry(key.clone()).or_insert_with(|| Some(Amounts::new()));
                *sum = match (sum.take(), &granted) {
                    (Some(s), Some(g)) => Some(quantity::add(&s, g)),
                    _ => None,
                };
            }
        }
        totals
    }

    /// The grants of `key`'s members other than `n` (granted `own`), for the resources `key`
    /// limits, and its number of members.
    fn others(&self, n: &str, own: &Amounts, key: &str) -> Result<(Amounts, u64), Refusal> {
        let sum =
            self.sums.get(key).cloned().flatten().ok_or_else(|| not_ready(n, "a usage is not known yet"))?;
        let others =
            sum.iter().map(|(r, a)| (r.clone(), a.minus(own.get(r).copied().unwrap_or(Amount::ZERO))));
        Ok((others.collect(), self.members.get(key).copied().unwrap_or(0)))
    }
}

/// A reclaim's target, never above the allocation it replaces (the reclaim's write may land
/// after another's lowered it, and must not raise it back: it is at most the grant only as it
/// was), nor below the usage. Without an allocation, the usage.
fn capped(target: &Amounts, used: &Amounts, allocation: Option<&Amounts>) -> Amounts {
    target
        .iter()
        .map(|(r, t)| {
            let floor = used.get(r).copied().unwrap_or(Amount::ZERO);
            let cap = allocation.and_then(|a| a.get(r)).copied().unwrap_or(floor);
            (r.clone(), (*t).min(cap).max(floor))
        })
        .collect()
}

/// A grant brought down to `keep`, never below the usage.
fn lowered(granted: &Amounts, used: &Amounts, keep: &Amounts) -> Amounts {
    granted
        .iter()
        .map(|(r, g)| {
            let floor = used.get(r).copied().unwrap_or(Amount::ZERO);
            let to = keep.get(r).map_or(*g, |k| (*g).min(*k));
            (r.clone(), to.max(floor))
        })
        .collect()
}

/// The reclaims that free what the members of `quotas` other than `except` hold beyond their
/// observed usage: what the webhook does before refusing an increase that the usage would allow.
/// Grants [`in_flight`] are left alone: their updates are about to commit.
pub fn slack(
    ledger: &Ledger,
    observed: &BTreeMap<String, Observed>,
    quotas: &[String],
    except: &str,
) -> Vec<Reclaim> {
    ledger
        .namespaces
        .iter()
        .filter(|(ns, entry)| *ns != except && entry.chain.iter().any(|k| quotas.contains(k)))
        .filter_map(|(ns, entry)| {
            let Observed { version, used: Some(used), allocation: Some(allocation) } = observed.get(ns)?
            else {
                return None;
            };
            let granted = known_grant(ledger, ns, entry).ok()??;
            if !quantity::same(allocation, &granted) {
                return None;
            }
            let spare = granted.iter().any(|(r, g)| g.exceeds(used.get(r).copied().unwrap_or(Amount::ZERO)));
            spare.then(|| Reclaim {
                namespace: ns.clone(),
                version: *version,
                approvals: entry.approvals,
                target: quantity::to_list(
                    &capped(&lowered(&granted, used, used), used, Some(allocation)),
                    used,
                ),
                used: used.clone(),
            })
        })
        .collect()
}

/// Whether `update` fits every quota of its namespace's chain counting the other namespaces'
/// observed usage instead of their grants. An update refused over a quota that fits by usage is
/// refused only by grants still held above it (an approval in flight, a reclaim half done): it
/// is answered "try again", not "exceeded".
pub fn fits_by_usage(ledger: &Ledger, observed: &BTreeMap<String, Observed>, update: &StatusUpdate) -> bool {
    let n = update.namespace.as_str();
    let Some(entry) = ledger.namespaces.get(n) else { return false };
    let increased = increases(&update.old_used, &update.new_used);
    entry.chain.iter().all(|key| {
        let Ok(limits) = limits(ledger, n, key) else { return false };
        let mut sum = update.new_used.clone();
        for (member, _) in members(ledger, key).filter(|(m, _)| *m != n) {
            let Some(used) = observed.get(member).and_then(|o| o.used.as_ref()) else { return false };
            sum = quantity::add(&sum, used);
        }
        quantity::exceeded(&sum, &limits).iter().all(|r| !increased.contains_key(*r))
    })
}

/// `ledger` with the grants of `done` (reclaims whose ResourceQuota write succeeded) lowered to
/// their targets (never raised: another reclaim may have gone lower since), those of entries
/// approved since their plan excepted: that approval may stand on the old grant. An unknown
/// grant is filled with the target.
pub fn apply(ledger: &Ledger, done: &[Reclaim]) -> Ledger {
    let mut next = ledger.clone();
    for reclaim in done {
        let Some(entry) = next.namespaces.get_mut(&reclaim.namespace) else { continue };
        if entry.approvals != reclaim.approvals {
            continue;
        }
        let mut granted = reclaim.target.clone();
        let old = entry.granted.as_ref().and_then(|g| quantity::parse_list(g).ok()).unwrap_or_default();
        for (r, q) in &mut granted {
            let (Some(before), Ok(target)) = (old.get(r), Amount::parse(&q.0)) else { continue };
            if target.exceeds(*before) {
                *q = before.to_quantity();
            }
        }
        entry.granted = Some(granted);
    }
    next
}

/// Whether the ledger knows `namespace`'s usage (what a namespace joining a quota waits for).
pub fn knows(ledger: &Ledger, namespace: &str) -> bool {
    ledger.namespaces.get(namespace).is_some_and(|e| matches!(known_grant(ledger, namespace, e), Ok(Some(_))))
}

#[cfg(test)]
mod model_check;

#[cfg(test)]
mod tests;
