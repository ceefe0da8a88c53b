//! `kubectl hns diagnose [NS…] [-n NS] [-A] [--fix [--yes] [--force]] [-o json]`: why namespaces are
//! stuck in Terminating, and the safe way out. This layer parses, prompts and prints; the
//! library, [`namespace_diagnose`], decides.

use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use clap::{ArgGroup, ValueEnum};
use hns_api::duration::human_duration;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use namespace_diagnose::report::{self, Detail};
use namespace_diagnose::{
    access, diagnose, fix, scan, Cause, FixEvent, FixOptions, FixUi, NamespaceStatus, Outcome, Progress,
    Target,
};

use crate::client::KubeFlags;
use crate::paint::{Paint, Styles as _};
use crate::prompt;
use crate::{out, outln};

/// Exit code: a stuck namespace was found.
const EXIT_STUCK: u8 = 2;
/// Exit code: a fix was refused or failed.
const EXIT_REFUSED: u8 = 3;

/// Find why namespaces are stuck in Terminating, and fix it safely.
///
/// Reads the namespace controller's conditions, unavailable APIServices, leftover objects and
/// their finalizers, deleted pods whose node is NotReady or gone, finalizers on the namespace,
/// and admission webhooks whose backend is gone; prints the root causes in the order to fix
/// them, each with its safest fix and what --fix would do. --details adds each namespace's
/// conditions, the evidence of each cause, the exact API calls of its remedy and their risk.
/// Changes nothing unless --fix is given.
///
/// hns deletes a namespace's subnamespaces with it: the Terminating namespaces below a named
/// namespace are diagnosed too, even once it is gone, and each is reported on the way down to
/// it, with its own remedy. Finalizing a namespace while namespaces below it exist would orphan
/// them, and needs --force.
///
/// Name the namespaces as arguments or with -n, or give -A for every Terminating one. With more
/// than one Terminating namespace the report gives each root cause once, with the namespaces
/// it blocks, in the order to fix them (with --details, each namespace's details follow).
///
/// Exit codes: 0 nothing stuck, 2 stuck namespaces found, 3 a fix was refused or failed.
#[derive(clap::Args, Debug)]
// Not required here: `-n` is kubectl's global flag, so `target` checks that one is given.
#[command(group(ArgGroup::new("which").args(["namespaces", "all_namespaces"])))]
pub struct DiagnoseArgs {
    /// Namespaces to diagnose.
    namespaces: Vec<String>,
    /// Diagnose every namespace in Terminating.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Apply the remedies one at a time, asking before each (without it: a dry run that
    /// prints the exact API calls).
    #[arg(long)]
    fix: bool,
    /// Apply without asking (for scripts).
    #[arg(short = 'y', long, requires = "fix")]
    yes: bool,
    /// Allow the last resort, finalizing a namespace, even while content remains (that content
    /// is orphaned in etcd).
    #[arg(long, requires = "fix")]
    force: bool,
    /// Also print each namespace's conditions, the evidence of each cause, the exact API calls
    /// of each remedy and their risk (no -v: that is kubectl's log level).
    #[arg(long)]
    details: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
    /// How long --fix waits for the namespace controller once no remedy is left (e.g. 90s,
    /// 5m); the controller retries at least every 5 minutes.
    #[arg(long, default_value = "5m30s", value_parser = parse_duration)]
    timeout: Duration,
}

/// Output formats.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// For people.
    Text,
    /// For tools.
    Json,
}

/// Runs `diagnose`.
pub async fn run(kube: &KubeFlags, args: DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let target = target(&args, kube.namespace.as_deref())?;
    let client = kube.client().await?;
    let progress = Spinner::default();
    let evidence = scan(&client, &target, &progress).await?;
    let mut diagnosis = diagnose(&evidence);
    access::check_diagnosis(&client, &mut diagnosis).await;
    let paint = Paint::for_stream(&std::io::stdout());
    let text = args.output == Format::Text;
    if text {
        let detail = if args.details { Detail::Full } else { Detail::Brief };
        out!("{}", report::text(&diagnosis, &paint, detail))?;
    }
    let stuck: Vec<String> =
        diagnosis.namespaces.iter().filter(|n| n.stuck()).map(|n| n.name.clone()).collect();
    if !args.fix || stuck.is_empty() {
        if text && !stuck.is_empty() {
            outln!(
                "Dry run: nothing was changed. To apply the remedies, asking before each: {}",
                fix_command(kube, &target)
            )?;
            if !args.details {
                outln!("For the evidence, the exact API calls and their risks: add --details.")?;
            }
        }
        if !text {
            outln!("{}", report::json(&diagnosis, None))?;
        }
        if !stuck.is_empty() {
            return Ok(ExitCode::from(EXIT_STUCK));
        }
        // A name that is nowhere, with nothing stuck below it, is most likely mistyped: an
        // error, as kubectl get makes it.
        let missing: Vec<&str> = diagnosis
            .namespaces
            .iter()
            .filter(|n| n.path.is_empty() && n.status == NamespaceStatus::NotFound)
            .map(|n| n.name.as_str())
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "Error: namespace(s) not found: {} (check the name: kubectl get namespaces)",
                missing.join(", ")
            );
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes && !prompt::can_ask() {
        eprintln!("--fix asks before each remedy, but there is no terminal to ask on: add --yes to apply them without asking.");
        return Ok(ExitCode::from(EXIT_REFUSED));
    }
    let options = FixOptions { force: args.force, timeout: args.timeout, poll: Duration::from_secs(2) };
    let mut ui = Console { yes: args.yes, paint: Paint::for_stream(&std::io::stderr()) };
    let outcome = fix(&client, &stuck, &options, &mut ui, &progress).await?;
    if !text {
        outln!("{}", report::json(&diagnosis, Some(&outcome)))?;
    }
    Ok(if outcome.fixed() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_REFUSED) })
}

/// The command that applies the remedies of what was diagnosed, on the same cluster as the
/// same user.
fn fix_command(kube: &KubeFlags, target: &Target) -> String {
    let which = match target {
        Target::AllTerminating => vec!["-A".to_string()],
        Target::Named(names) => names.clone(),
    };
    let words: Vec<String> = ["kubectl", "hns", "diagnose"]
        .into_iter()
        .map(String::from)
        .chain(which)
        .chain(["--fix".to_string()])
        .chain(kube.repeated())
        .collect();
    words.join(" ")
}

/// `diagnose` was given no namespace.
#[derive(Debug, thiserror::Error)]
#[error("name the namespaces to diagnose (kubectl hns diagnose NS…, or -n NS), or give --all-namespaces (-A) for every Terminating one")]
struct NoTarget;

/// What to diagnose: every Terminating namespace with -A (which, as in kubectl, outweighs -n),
/// else the named ones and the one `-n` names.
fn target(args: &DiagnoseArgs, namespace: Option<&str>) -> Result<Target, NoTarget> {
    if args.all_namespaces {
        return Ok(Target::AllTerminating);
    }
    let mut names = args.namespaces.clone();
    if let Some(ns) = namespace.filter(|ns| !names.iter().any(|n| n == ns)) {
        names.push(ns.to_string());
    }
    if names.is_empty() {
        return Err(NoTarget);
    }
    Ok(Target::Named(names))
}

/// Prompts and narrates the fix on stderr, so stdout stays the report (or JSON).
struct Console {
    yes: bool,
    paint: Paint,
}

impl FixUi for Console {
    fn confirm(&mut self, namespace: &str, cause: &Cause) -> bool {
        let Some(remedy) = &cause.remedy else {
            return false;
        };
        self.yes || prompt::ask(&format!("In {namespace}: {}?", remedy.summary))
    }

    fn event(&mut self, event: FixEvent<'_>) {
        let p = &self.paint;
        match event {
            FixEvent::Step { namespace, cause } => {
                eprintln!("\n{} {}", p.head(&format!("[{namespace}]")), cause.summary);
                if let Some(r) = &cause.remedy {
                    eprintln!("  remedy: {}", r.summary);
                    for a in &r.actions {
                        eprintln!("    {}", p.dim(&a.describe()));
                    }
                }
                eprintln!("  risk: {}", p.warn(&cause.risk));
            }
            FixEvent::Forced { namespace, remains } => eprintln!(
                "  {} finalizing {namespace} while content may remain ({remains}). Whatever is left stays in etcd, orphaned.",
                p.bad("WARNING (--force):")
            ),
            FixEvent::Applied { action, already_gone } => {
                let done = if already_gone { "already gone:" } else { "done:" };
                // The whole call was shown with the remedy, before it was made.
                eprintln!("  {} {}", p.good(done), action.request_line());
            }
            FixEvent::Changed { action } => eprintln!(
                "  {} {}",
                p.warn("changed since diagnosed, looking again:"),
                action.describe()
            ),
            FixEvent::Waiting { namespaces, seconds } => eprintln!(
                "\nWaiting up to {} for the namespace controller to remove {}…",
                human_duration(seconds as i64),
                namespaces.join(", ")
            ),
            FixEvent::Settled { namespace, outcome } => {
                let line = match outcome {
                    Outcome::Fixed => p.good("fixed: the namespace is gone"),
                    Outcome::Refused(why) => p.bad(&format!("refused: {why}")),
                    Outcome::Failed(why) => p.bad(&format!("failed: {why}")),
                    Outcome::StillStuck(why) => p.bad(&format!("still Terminating: {why}")),
                };
                eprintln!("{} {line}", p.head(&format!("[{namespace}]")));
            }
        }
    }
}

/// A progress indicator on stderr while scanning; invisible when stderr is not a terminal.
#[derive(Default)]
struct Spinner(Mutex<Option<ProgressBar>>);

impl Progress for Spinner {
    fn phase(&self, message: &str, total: u64) {
        let mut current = self.bar();
        // Clear the old bar before the new one draws, or its last frame stays on screen.
        if let Some(old) = current.take() {
            old.finish_and_clear();
        }
        let bar = if total == 0 {
            ProgressBar::new_spinner()
        } else {
            ProgressBar::new(total).with_style(
                ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            )
        };
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        *current = Some(bar);
    }

    fn advance(&self) {
        if let Some(bar) = self.bar().as_ref() {
            bar.inc(1);
        }
    }

    fn done(&self) {
        if let Some(bar) = self.bar().take() {
            bar.finish_and_clear();
        }
    }
}

impl Spinner {
    fn bar(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        // A panic while holding the lock leaves only a progress bar behind: keep going.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Parses `90`, `90s`, `5m`, `5m30s`, `1h`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let mut total = 0u64;
    let mut number = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("invalid duration {s:?}: use e.g. 90s, 5m or 1h30m")),
        };
        let n: u64 =
            number.parse().map_err(|_| format!("invalid duration {s:?}: a number must come before {c:?}"))?;
        total += n * unit;
        number.clear();
    }
    if !number.is_empty() {
        total += number.parse::<u64>().map_err(|e| format!("invalid duration {s:?}: {e}"))?;
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        args: DiagnoseArgs,
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m30s"), Ok(Duration::from_secs(330)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn needs_namespaces_or_all_but_not_both() {
        let none = Wrapper::try_parse_from(["x"]).unwrap();
        let err = target(&none.args, None).unwrap_err().to_string();
        assert!(err.contains("--all-namespaces"), "{err}");
        assert!(Wrapper::try_parse_from(["x", "-A", "ns"]).is_err());
        let w = Wrapper::try_parse_from(["x", "a", "b", "--fix", "--yes"]).unwrap();
        assert_eq!(w.args.namespaces, ["a", "b"]);
        assert!(w.args.fix && w.args.yes);
        assert!(Wrapper::try_parse_from(["x", "-A", "--yes"]).is_err(), "--yes needs --fix");
        let j = Wrapper::try_parse_from(["x", "-A", "-o", "json"]).unwrap();
        assert_eq!(j.args.output, Format::Json);
    }

    #[test]
    fn the_suggested_fix_runs_against_the_same_cluster() {
        let kube = KubeFlags { context: Some("prod".into()), ..Default::default() };
        let target = Target::Named(vec!["a".into(), "b".into()]);
        assert_eq!(fix_command(&kube, &target), "kubectl hns diagnose a b --fix --context=prod");
        let all = fix_command(&KubeFlags::default(), &Target::AllTerminating);
        assert_eq!(all, "kubectl hns diagnose -A --fix");
    }

    #[test]
    fn dash_n_names_a_namespace_as_kubectl_users_expect() {
        let parse = |argv: &[&str]| Wrapper::try_parse_from(argv).unwrap().args;
        let named = |t: Target| match t {
            Target::Named(names) => names,
            Target::AllTerminating => vec!["-A".to_string()],
        };
        assert_eq!(named(target(&parse(&["x"]), Some("foo")).unwrap()), ["foo"]);
        assert_eq!(named(target(&parse(&["x", "a"]), Some("foo")).unwrap()), ["a", "foo"]);
        assert_eq!(named(target(&parse(&["x", "foo"]), Some("foo")).unwrap()), ["foo"], "once");
        assert_eq!(named(target(&parse(&["x", "-A"]), Some("foo")).unwrap()), ["-A"], "-A outweighs -n");
    }
}
