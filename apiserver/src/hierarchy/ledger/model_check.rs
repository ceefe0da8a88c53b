//! Model checking: many random interleavings of what happens concurrently on a cluster —
//! quota admissions in sibling namespaces (read the ResourceQuota, approve against the ledger
//! with compare-and-swap retries, commit the ResourceQuota with compare-and-swap on its
//! resourceVersion), kube-controller-manager recalculating after deletions, approvals refused
//! later in admission, a namespace joining the tree, and hns's reconciler (membership, observe,
//! releasing held entries) — checking after every step that committed usage never exceeds a
//! quota, and at the end that every admission finished, that no refusal was unjustified, and
//! that nothing stays held once the cluster is quiet.

use super::tests::with_quota;
use super::*;
use crate::hierarchy::forest::testing::forest;

/// A small deterministic generator (xorshift64*), so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A ResourceQuota: its resourceVersion and `status.used` pods.
#[derive(Clone, Copy, Debug)]
struct Rq {
    version: u64,
    used: i64,
}

/// Where one pod creation is.
#[derive(Clone, Debug)]
enum Admission {
    Read,
    Approve { version: u64, used: i64, target: i64 },
    WriteLedger { version: u64, used: i64, target: i64, seen: u64, next: Box<Ledger> },
    Commit { version: u64, target: i64 },
    Admitted,
    Refused,
    Abandoned,
}

/// The reconciler's progress through one pass.
enum Pass {
    Idle,
    Write { seen: u64, next: Box<Ledger>, observed: BTreeMap<String, Observed> },
}

struct World {
    rng: Rng,
    revision: u64,
    rqs: BTreeMap<String, Rq>,
    pods: BTreeMap<String, i64>,
    ledger: Ledger,
    ledger_version: u64,
    forest: Forest,
    joined: bool,
    /// Each creation: its namespace, how much it counts (1 or 2 pods' worth) and where it is.
    admissions: Vec<(String, i64, Admission)>,
    recalculations: Vec<(String, Option<Rq>)>,
    pass: Pass,
    abandon: bool,
}

const NAMESPACES: [&str; 6] = ["root", "a", "a1", "a2", "b", "c"];

fn pods(n: i64) -> Amounts {
    [("pods".to_string(), Amount::parse(&n.to_string()).unwrap())].into()
}

fn pods_of(list: &ResourceList) -> i64 {
    list.get("pods").map_or(0, |q| q.0.parse().unwrap())
}

impl World {
    fn new(seed: u64, abandon: bool, mixed: bool) -> World {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut forest = forest("root a:~root a1:~a a2:~a b:~root c:~root");
        with_quota(&mut forest, "root", "budget", 5);
        with_quota(&mut forest, "a", "team", 3);
        let mut admissions = Vec::new();
        for ns in NAMESPACES.iter().chain(["d"].iter()) {
            for _ in 0..rng.below(3) + 1 {
                let inc = if mixed { rng.below(2) as i64 + 1 } else { 1 };
                admissions.push((ns.to_string(), inc, Admission::Read));
            }
        }
        let rqs = NAMESPACES
            .iter()
            .chain(["d"].iter())
            .map(|ns| (ns.to_string(), Rq { version: 1, used: 0 }))
            .collect();
        World {
            rng,
            revision: 1,
            rqs,
            pods: BTreeMap::new(),
            ledger: Ledger::default(),
            ledger_version: 0,
            forest,
            joined: false,
            admissions,
            recalculations: Vec::new(),
            pass: Pass::Idle,
            abandon,
        }
    }

    fn bump(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    /// One random step of one actor.
    fn step(&mut self) {
        match self.rng.below(10) {
            0..=5 => {
                let i = self.rng.below(self.admissions.len());
                self.step_admission(i);
            }
            6 => self.step_reconciler(),
            7 => self.step_recalculation(),
            8 if self.abandon => self.delete_pod(),
            _ if !self.joined && self.rng.chance(5) => {
                // d joins (a move): hns created its ResourceQuota; pending keeps creations out
                // until the ledger knows it, which "no entry" also does here.
                self.forest.upsert(crate::hierarchy::forest::testing::namespace("d", Some("b"), false));
                self.joined = true;
            }
            _ => self.step_reconciler(),
        }
    }

    fn step_admission(&mut self, i: usize) {
        let (ns, inc, state) = self.admissions[i].clone();
        let next = match state {
            Admission::Read => {
                let rq = self.rqs[&ns];
                Admission::Approve { version: rq.version, used: rq.used, target: rq.used + inc }
            }
            Admission::Approve { version, used, target } => {
                let update = StatusUpdate {
                    namespace: ns.clone(),
                    old_version: version,
                    old_used: pods(used),
                    new_used: pods(target),
                    from_admission: true,
                };
                match approve(&self.ledger, &update) {
                    Verdict::Allow(None) => Admission::Commit { version, target },
                    Verdict::Allow(Some(next)) => Admission::WriteLedger {
                        version,
                        used,
                        target,
                        seen: self.ledger_version,
                        next: Box::new(next),
                    },
                    Verdict::Deny(Refusal::Exceeded(_)) => Admission::Refused,
                    Verdict::Deny(_) => Admission::Read,
                }
            }
            Admission::WriteLedger { version, used, target, seen, next } => {
                if seen != self.ledger_version {
                    Admission::Approve { version, used, target }
                } else {
                    self.ledger = *next;
                    self.ledger_version += 1;
                    if self.abandon && self.rng.chance(15) {
                        Admission::Abandoned
                    } else {
                        Admission::Commit { version, target }
                    }
                }
            }
            Admission::Commit { version, target, .. } => {
                if self.rqs[&ns].version != version {
                    Admission::Read
                } else {
                    let v = self.bump();
                    self.rqs.insert(ns.clone(), Rq { version: v, used: target });
                    *self.pods.entry(ns.clone()).or_default() += inc;
                    Admission::Admitted
                }
            }
            done => done,
        };
        self.admissions[i].2 = next;
    }

    /// kube-controller-manager: read the ResourceQuota and count the pods, then write the count
    /// through the webhook (always allowed, recorded) with compare-and-swap.
    fn step_recalculation(&mut self) {
        let ns = NAMESPACES[self.rng.below(NAMESPACES.len())].to_string();
        match self.recalculations.iter().position(|(n, _)| *n == ns) {
            None => self.recalculations.push((ns.clone(), Some(self.rqs[&ns]))),
            Some(i) => {
                let (_, read) = self.recalculations.remove(i);
                let Some(read) = read else { return };
                let truth = self.pods.get(&ns).copied().unwrap_or(0);
                if read.version != self.rqs[&ns].version || truth == read.used {
                    return;
                }
                let update = StatusUpdate {
                    namespace: ns.clone(),
                    old_version: read.version,
                    old_used: pods(read.used),
                    new_used: pods(truth),
                    from_admission: false,
                };
                match approve(&self.ledger, &update) {
                    Verdict::Allow(next) => {
                        if let Some(next) = next {
                            self.ledger = next;
                            self.ledger_version += 1;
                        }
                        let v = self.bump();
                        self.rqs.insert(ns, Rq { version: v, used: truth });
                    }
                    Verdict::Deny(r) => panic!("a recalculation was refused: {r}"),
                }
            }
        }
    }

    fn delete_pod(&mut self) {
        let ns = NAMESPACES[self.rng.below(NAMESPACES.len())];
        if let Some(n) = self.pods.get_mut(ns).filter(|n| **n > 0) {
            *n -= 1;
        }
    }

    /// hns's reconciler: read, compute membership and observe, write with compare-and-swap;
    /// then move held ResourceQuotas past their basis.
    fn step_reconciler(&mut self) {
        match std::mem::replace(&mut self.pass, Pass::Idle) {
            Pass::Idle => {
                let observed = self.observed();
                let next = observe(&membership(&self.forest, "root", &self.ledger), &observed);
                self.pass = Pass::Write { seen: self.ledger_version, next: Box::new(next), observed };
            }
            Pass::Write { seen, next, observed } => {
                if seen == self.ledger_version {
                    if *next != self.ledger {
                        self.ledger = *next;
                        self.ledger_version += 1;
                    }
                    for ns in held(&self.ledger, &observed) {
                        if self.rqs[&ns].version == observed[&ns].version {
                            let v = self.bump();
                            self.rqs.get_mut(&ns).unwrap().version = v;
                        }
                    }
                }
            }
        }
    }

    fn observed(&self) -> BTreeMap<String, Observed> {
        self.rqs
            .iter()
            .map(|(ns, rq)| (ns.clone(), Observed { version: rq.version, used: Some(pods(rq.used)) }))
            .collect()
    }

    /// Each quota's members, by the forest.
    fn members(&self) -> Vec<(String, i64, Vec<String>)> {
        let tree = membership(&self.forest, "root", &Ledger::default());
        tree.quotas
            .iter()
            .map(|(key, limits)| {
                let members =
                    tree.namespaces.iter().filter(|(_, e)| e.chain.contains(key)).map(|(n, _)| n.clone());
                (key.clone(), pods_of(limits), members.collect())
            })
            .collect()
    }

    fn check_safety(&self, seed: u64) {
        for (key, limit, members) in self.members() {
            let committed: i64 = members.iter().map(|n| self.rqs[n].used).sum();
            let real: i64 = members.iter().map(|n| self.pods.get(n).copied().unwrap_or(0)).sum();
            assert!(committed <= limit, "seed {seed}: {key} committed {committed} > {limit}: {:?}", self.rqs);
            assert!(real <= limit, "seed {seed}: {key} holds {real} pods > {limit}");
        }
    }

    fn done(&self) -> bool {
        self.admissions
            .iter()
            .all(|(_, _, a)| matches!(a, Admission::Admitted | Admission::Refused | Admission::Abandoned))
    }
}

/// One random run. `abandon` adds approvals refused later in admission, pod deletions and
/// recalculations; `mixed` makes creations count 1 or 2. Refusals are checked for being
/// justified only without either: the ledger counts approvals in flight, so with either a
/// refusal may rest on usage that never commits.
fn run(seed: u64, abandon: bool, mixed: bool) {
    let mut world = World::new(seed, abandon, mixed);
    let mut steps = 0;
    while !world.done() {
        world.step();
        world.check_safety(seed);
        steps += 1;
        assert!(steps < 200_000, "seed {seed}: admissions never finished: {:?}", world.admissions);
    }
    if !abandon && !mixed {
        // Every refusal is justified by committed usage: a quota above it has no room for it.
        for (ns, inc, a) in &world.admissions {
            if matches!(a, Admission::Refused) {
                let full = world
                    .members()
                    .into_iter()
                    .filter(|(_, _, m)| m.contains(ns))
                    .any(|(_, limit, m)| m.iter().map(|n| world.rqs[n].used).sum::<i64>() + inc > limit);
                assert!(full, "seed {seed}: {ns} refused with room left: {:?}", world.rqs);
            }
        }
    }
    // Once quiet, passes of the reconciler release everything held: the ledger is the truth.
    for _ in 0..8 {
        world.step_reconciler();
    }
    for (ns, entry) in &world.ledger.namespaces {
        assert_eq!(entry.basis, Some(world.rqs[ns].version), "seed {seed}: {ns}");
        assert_eq!(pods_of(&entry.used), world.rqs[ns].used, "seed {seed}: {ns} still held");
    }
}

#[test]
fn concurrent_admissions_never_overspend_and_nothing_stays_held() {
    for seed in 0..250 {
        run(seed, false, false);
        run(seed, false, true);
        run(seed, true, true);
    }
}
