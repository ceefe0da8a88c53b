//! Fixing: remedies applied in rounds, in the order the causes must be fixed, each confirmed,
//! checked for rights and guarded by preconditions, with a fresh scan after every round. A round
//! takes each pending namespace's next remedy, a remedy shared by several (one dead APIService
//! blocking them all) once: with 1,000 namespaces stuck for 1,000 different reasons, a scan after
//! every single remedy made the fix quadratic. A namespace counts as fixed only when a GET of it
//! returns 404. What to do at each step
//! is [`super::plan`]'s to decide; this module does the reading, asking and writing.
//!
//! When no remedy is left the namespace controller is given time to finish; only if it still
//! does not, the last resort (finalizing by hand) is offered, and refused while content remains
//! unless forced.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use serde::Serialize;

use super::access::check_remedy;
use super::apply::Applied;
use super::causes::{diagnose, Cause, Diagnosis};
use super::error::{Error, Result};
use super::evidence::Evidence;
use super::plan::{self, History, Next, Outcome};
use super::remedy::{Action, RemedyId};
use super::scan::{scan, Progress, Target};

/// At most this many rounds of remedies in one run, so a controller that keeps undoing them
/// cannot keep the fix going forever (each remedy is also tried at most a few times: see
/// [`History`]).
const MAX_ROUNDS: usize = 50;
/// Namespaces read at once while waiting for the namespace controller.
const READS_AT_ONCE: usize = 16;

/// How long content left after a remedy is left to the namespace controller before it is
/// deleted by hand: the controller retries a namespace with a backoff that grows with its
/// failures (seconds, after a blocker held it for a while), and deleting what it would delete
/// anyway is one write too many.
const CONTROLLER_GRACE: Duration = Duration::from_secs(30);

/// How to fix.
#[derive(Debug, Clone)]
pub struct FixOptions {
    /// Allow the last resort while content remains.
    pub force: bool,
    /// How long to wait for the namespace controller once no remedy is left.
    pub timeout: Duration,
    /// How often to look while waiting.
    pub poll: Duration,
}

/// The operator's side of a fix: confirmation, and what to show as it goes.
pub trait FixUi {
    /// Whether to apply `cause`'s remedy in `namespace`.
    fn confirm(&mut self, namespace: &str, cause: &Cause) -> bool;
    /// Something happened.
    fn event(&mut self, event: FixEvent<'_>);
}

/// What the fix is doing.
#[derive(Debug)]
pub enum FixEvent<'a> {
    /// About to apply the remedy of a cause.
    Step {
        /// The namespace.
        namespace: &'a str,
        /// The cause.
        cause: &'a Cause,
    },
    /// The last resort is applied with content left, because `--force` was given.
    Forced {
        /// The namespace.
        namespace: &'a str,
        /// What remains.
        remains: &'a str,
    },
    /// An API call succeeded (or its target was already gone).
    Applied {
        /// The call.
        action: &'a Action,
        /// Whether the target was already gone.
        already_gone: bool,
    },
    /// The target changed since it was diagnosed; the state is read again.
    Changed {
        /// The call that was not made.
        action: &'a Action,
    },
    /// Waiting for the namespace controller.
    Waiting {
        /// The namespaces still there.
        namespaces: &'a [String],
        /// For at most this long.
        seconds: u64,
    },
    /// A namespace reached its outcome.
    Settled {
        /// The namespace.
        namespace: &'a str,
        /// Its outcome.
        outcome: &'a Outcome,
    },
}

/// The outcome of every namespace the fix worked on.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixReport {
    /// Outcome per namespace.
    pub namespaces: BTreeMap<String, Outcome>,
}

impl FixReport {
    /// Whether every namespace is gone.
    pub fn fixed(&self) -> bool {
        self.namespaces.values().all(|o| *o == Outcome::Fixed)
    }
}

/// Fixes the stuck namespaces `names`.
pub async fn fix(
    client: &Client,
    names: &[String],
    options: &FixOptions,
    ui: &mut dyn FixUi,
    progress: &dyn Progress,
) -> Result<FixReport> {
    let mut run = Run {
        client,
        options,
        ui,
        pending: names.to_vec(),
        report: FixReport::default(),
        history: History::default(),
        versions: HashMap::new(),
    };
    run.go(progress).await?;
    Ok(run.report)
}

/// The state of one fix.
struct Run<'a> {
    client: &'a Client,
    options: &'a FixOptions,
    ui: &'a mut dyn FixUi,
    /// Namespaces without an outcome yet.
    pending: Vec<String>,
    report: FixReport,
    /// The remedies applied or declined so far.
    history: History,
    /// resourceVersion of each pending namespace and each below one at the last scan, to
    /// notice progress.
    versions: HashMap<String, String>,
}

impl Run<'_> {
    async fn go(&mut self, progress: &dyn Progress) -> Result<()> {
        let mut deadline = Instant::now() + self.options.timeout;
        let mut last_resort_offered = false;
        let mut rounds = 0;
        let mut grace_until = Instant::now();
        loop {
            let target = Target::Named(self.pending.clone());
            let evidence = scan(self.client, &target, progress).await?;
            self.versions = watched(&evidence, &self.pending);
            let diagnosis = diagnose(&evidence);
            self.settle_gone(&diagnosis).await?;
            if self.pending.is_empty() {
                return Ok(());
            }
            if rounds >= MAX_ROUNDS {
                self.give_up("too many rounds of remedies; the causes keep coming back");
                return Ok(());
            }
            let mut round = self.next_steps(&diagnosis);
            if !round.is_empty() {
                // Content the namespace controller would delete itself is left to it for a
                // while after the last remedy.
                if Instant::now() < grace_until {
                    round.retain(|(_, cause)| !deletes_content(cause));
                    if round.is_empty() {
                        self.wait_for_change(grace_until.min(deadline)).await?;
                        grace_until = Instant::now();
                        continue;
                    }
                }
                rounds += 1;
                for (ns, cause) in &round {
                    self.step(ns, cause).await;
                }
                grace_until = Instant::now() + CONTROLLER_GRACE;
                continue;
            }
            if Instant::now() < deadline {
                self.wait_for_change(deadline).await?;
                continue;
            }
            if last_resort_offered {
                for ns in self.pending.clone() {
                    let n = diagnosis.namespaces.iter().find(|n| n.name == ns);
                    self.settle(&ns, Outcome::StillStuck(n.map(plan::remaining).unwrap_or_default()));
                }
                return Ok(());
            }
            last_resort_offered = true;
            for n in &diagnosis.namespaces {
                match &n.last_resort {
                    Some(cause) if self.pending.contains(&n.name) => self.step(&n.name, cause).await,
                    _ => {}
                }
            }
            deadline = Instant::now() + self.options.timeout;
        }
    }

    /// Marks namespaces the scan no longer finds as fixed, once a GET confirms it.
    async fn settle_gone(&mut self, diagnosis: &Diagnosis) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        for n in &diagnosis.namespaces {
            if n.stuck() || !self.pending.contains(&n.name) {
                continue;
            }
            let still_there = api
                .get_opt(&n.name)
                .await
                .map_err(|source| Error::Read { what: format!("reading namespace {}", n.name), source })?;
            if still_there.is_none() {
                self.settle(&n.name, Outcome::Fixed);
            }
        }
        Ok(())
    }

    /// The round of remedies to apply: each pending namespace's next one, in the diagnosis'
    /// order, a remedy several namespaces share only once. Namespaces whose next remedy was
    /// declined or does not work are settled here.
    fn next_steps(&mut self, diagnosis: &Diagnosis) -> Vec<(String, Cause)> {
        let mut round: Vec<(String, Cause)> = Vec::new();
        let mut taken: HashSet<RemedyId> = HashSet::new();
        for n in &diagnosis.namespaces {
            if !self.pending.contains(&n.name) {
                continue;
            }
            match self.history.next(n) {
                Some(Next::Apply(cause))
                    if cause.remedy.as_ref().is_some_and(|r| taken.insert(r.id.clone())) =>
                {
                    round.push((n.name.clone(), cause.clone()));
                }
                Some(Next::Apply(_)) => {} // shared with a namespace earlier in the round
                Some(Next::Settle(outcome)) => self.settle(&n.name, outcome),
                None => {}
            }
        }
        round
    }

    /// Applies one cause's remedy, after the checks; settles the namespace when it cannot.
    async fn step(&mut self, ns: &str, cause: &Cause) {
        let Some(mut remedy) = cause.remedy.clone() else {
            return;
        };
        self.ui.event(FixEvent::Step { namespace: ns, cause });
        check_remedy(self.client, &mut remedy).await;
        if let Some(refused) = plan::refusal(&remedy, self.options.force) {
            self.settle(ns, refused);
            return;
        }
        if let Some(remains) = &remedy.needs_force {
            self.ui.event(FixEvent::Forced { namespace: ns, remains });
        }
        if !self.ui.confirm(ns, cause) {
            let declined = self.history.decline(&remedy);
            self.settle(ns, declined);
            return;
        }
        self.history.attempt(&remedy);
        for action in &remedy.actions {
            match action.apply(self.client).await {
                Ok(applied) => {
                    self.ui.event(FixEvent::Applied { action, already_gone: applied == Applied::AlreadyGone })
                }
                // Read the state again and decide anew; the attempt counts.
                Err(Error::Changed { .. }) => {
                    self.ui.event(FixEvent::Changed { action });
                    return;
                }
                Err(e) => {
                    self.settle(ns, Outcome::Failed(e.to_string()));
                    return;
                }
            }
        }
    }

    /// Waits until a namespace of the last scan (a pending one or one below it) is gone or
    /// changes (the controller wrote to it), or the deadline passes.
    async fn wait_for_change(&mut self, deadline: Instant) -> Result<()> {
        let seconds = deadline.saturating_duration_since(Instant::now()).as_secs();
        self.ui.event(FixEvent::Waiting { namespaces: &self.pending, seconds });
        let api: Api<Namespace> = Api::all(self.client.clone());
        while Instant::now() < deadline {
            tokio::time::sleep(self.options.poll).await;
            // A few at a time: a fix of 1,000 namespaces looks at each.
            let mut reads = futures::stream::iter(self.versions.iter())
                .map(|(name, version)| {
                    let api = &api;
                    async move {
                        let now = api.get_opt(name).await.map_err(|source| Error::Read {
                            what: format!("reading namespace {name}"),
                            source,
                        })?;
                        Ok::<bool, Error>(
                            now.and_then(|n| n.metadata.resource_version).as_ref() != Some(version),
                        )
                    }
                })
                .buffer_unordered(READS_AT_ONCE);
            while let Some(changed) = reads.next().await {
                if changed? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self, ns: &str, outcome: Outcome) {
        self.pending.retain(|p| p != ns);
        self.ui.event(FixEvent::Settled { namespace: ns, outcome: &outcome });
        self.report.namespaces.insert(ns.to_string(), outcome);
    }

    fn give_up(&mut self, why: &str) {
        for ns in self.pending.clone() {
            self.settle(&ns, Outcome::Failed(why.to_string()));
        }
    }
}

/// The resourceVersions of the namespaces a fix of `pending` waits on: each pending namespace
/// and the namespaces below it (whose deletion may be what holds it).
fn watched(evidence: &Evidence, pending: &[String]) -> HashMap<String, String> {
    pending
        .iter()
        .flat_map(|p| evidence.namespace(p).into_iter().chain(evidence.below(p)))
        .map(|n| (n.name.clone(), n.resource_version.clone()))
        .collect()
}

/// Whether `cause`'s remedy deletes a namespace's content (what the namespace controller does
/// itself once nothing blocks it).
fn deletes_content(cause: &Cause) -> bool {
    cause.remedy.as_ref().is_some_and(|r| matches!(r.id, RemedyId::DeleteContent { .. }))
}
