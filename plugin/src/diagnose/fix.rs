//! Applying remedies: one at a time, in the order the causes must be fixed, each confirmed,
//! checked for rights and guarded by preconditions, with a fresh scan after every step. A
//! namespace counts as fixed only when a GET of it returns 404.
//!
//! When no remedy is left the namespace controller is given time to finish; only if it still
//! does not, the last resort (finalizing by hand) is offered, and refused while content remains
//! unless forced.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use serde::Serialize;

use super::access::check_remedy;
use super::causes::{diagnose, Cause, Diagnosis};
use super::remedy::{Action, Applied};
use super::scan::{scan, Progress, Target};
use super::{Error, Result};

/// At most this many remedies in one run, so a controller that keeps undoing them cannot keep
/// the fix going forever.
const MAX_STEPS: usize = 50;
/// A remedy applied this often whose cause is still there does not work.
const MAX_ATTEMPTS: u32 = 2;

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

/// How the fix of one namespace ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "outcome", content = "detail")]
pub enum Outcome {
    /// The namespace is gone (GET returned 404).
    Fixed,
    /// A remedy was declined, lacked rights, or needs `--force`.
    Refused(String),
    /// A remedy failed.
    Failed(String),
    /// No remedy is left and the namespace is still there.
    StillStuck(String),
}

/// The outcome of every namespace the fix worked on.
#[derive(Debug, Clone, Default, Serialize)]
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
        attempts: HashMap::new(),
        declined: HashSet::new(),
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
    /// How often each remedy (by summary) was applied.
    attempts: HashMap<String, u32>,
    /// Remedies the operator declined.
    declined: HashSet<String>,
    /// resourceVersion of each pending namespace at the last scan, to notice progress.
    versions: HashMap<String, String>,
}

impl Run<'_> {
    async fn go(&mut self, progress: &dyn Progress) -> Result<()> {
        let mut deadline = Instant::now() + self.options.timeout;
        let mut last_resort_offered = false;
        let mut steps = 0;
        loop {
            let target = Target::Named(self.pending.clone());
            let evidence = scan(self.client, &target, progress).await?;
            self.versions =
                evidence.namespaces.iter().map(|n| (n.name.clone(), n.resource_version.clone())).collect();
            let diagnosis = diagnose(&evidence);
            self.settle_gone(&diagnosis).await?;
            if self.pending.is_empty() {
                return Ok(());
            }
            if steps >= MAX_STEPS {
                self.give_up("too many steps; the causes keep coming back");
                return Ok(());
            }
            if let Some((ns, cause)) = self.next_step(&diagnosis) {
                steps += 1;
                self.step(&ns, &cause).await;
                continue;
            }
            if Instant::now() < deadline {
                self.wait_for_change(deadline).await?;
                continue;
            }
            if last_resort_offered {
                let remaining = remaining_causes(&diagnosis);
                for ns in self.pending.clone() {
                    let why = remaining.get(&ns).cloned().unwrap_or_default();
                    self.settle(&ns, Outcome::StillStuck(why));
                }
                return Ok(());
            }
            last_resort_offered = true;
            for n in &diagnosis.namespaces {
                match &n.last_resort {
                    Some(cause) if self.pending.contains(&n.name) => {
                        steps += 1;
                        self.step(&n.name, cause).await;
                    }
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

    /// The first remedy to apply: the first cause with one, in the first pending namespace that
    /// has any. Namespaces whose next remedy was declined or does not work are settled here.
    fn next_step(&mut self, diagnosis: &Diagnosis) -> Option<(String, Cause)> {
        for n in &diagnosis.namespaces {
            if !self.pending.contains(&n.name) {
                continue;
            }
            let Some(cause) = n.causes.iter().find(|c| c.remedy.is_some()) else {
                continue;
            };
            let summary = cause.remedy.as_ref().map(|r| r.summary.clone()).unwrap_or_default();
            if self.declined.contains(&summary) {
                self.settle(&n.name, Outcome::Refused(format!("declined: {summary}")));
            } else if self.attempts.get(&summary).copied().unwrap_or(0) >= MAX_ATTEMPTS {
                self.settle(
                    &n.name,
                    Outcome::Failed(format!("{}: still there after: {summary}", cause.summary)),
                );
            } else {
                return Some((n.name.clone(), cause.clone()));
            }
        }
        None
    }

    /// Applies one cause's remedy, after the checks; settles the namespace when it cannot.
    async fn step(&mut self, ns: &str, cause: &Cause) {
        let Some(mut remedy) = cause.remedy.clone() else {
            return;
        };
        self.ui.event(FixEvent::Step { namespace: ns, cause });
        check_remedy(self.client, &mut remedy).await;
        if !remedy.missing_rights.is_empty() {
            let lacking = remedy.missing_rights.join(", ");
            self.settle(
                ns,
                Outcome::Refused(format!("{}: you lack the rights to {lacking}", remedy.summary)),
            );
            return;
        }
        if let Some(remains) = &remedy.needs_force {
            if !self.options.force {
                self.settle(
                    ns,
                    Outcome::Refused(format!(
                        "{}: refused while content may remain ({remains}); --force finalizes anyway",
                        remedy.summary
                    )),
                );
                return;
            }
            self.ui.event(FixEvent::Forced { namespace: ns, remains });
        }
        if !self.ui.confirm(ns, cause) {
            self.declined.insert(remedy.summary.clone());
            self.settle(ns, Outcome::Refused(format!("declined: {}", remedy.summary)));
            return;
        }
        *self.attempts.entry(remedy.summary.clone()).or_default() += 1;
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

    /// Waits until a pending namespace is gone or changes (the controller wrote to it), or the
    /// deadline passes.
    async fn wait_for_change(&mut self, deadline: Instant) -> Result<()> {
        let seconds = deadline.saturating_duration_since(Instant::now()).as_secs();
        self.ui.event(FixEvent::Waiting { namespaces: &self.pending, seconds });
        let api: Api<Namespace> = Api::all(self.client.clone());
        while Instant::now() < deadline {
            tokio::time::sleep(self.options.poll).await;
            for name in &self.pending {
                let now = api
                    .get_opt(name)
                    .await
                    .map_err(|source| Error::Read { what: format!("reading namespace {name}"), source })?;
                let version = now.and_then(|n| n.metadata.resource_version);
                if version.as_ref() != self.versions.get(name) {
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

/// The summaries of the causes left, per namespace.
fn remaining_causes(diagnosis: &Diagnosis) -> HashMap<String, String> {
    diagnosis
        .namespaces
        .iter()
        .map(|n| {
            let causes: Vec<&str> = n.causes.iter().map(|c| c.summary.as_str()).collect();
            let why = if causes.is_empty() {
                "no cause found; the namespace controller has not finished".to_string()
            } else {
                causes.join("; ")
            };
            (n.name.clone(), why)
        })
        .collect()
}
