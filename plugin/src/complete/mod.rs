//! `kubectl_complete-hns`: completes `kubectl hns …` for kubectl's shell completion.
//!
//! kubectl (1.26+) completes a plugin's arguments by running `kubectl_complete-<plugin>` from
//! PATH with the words typed after the plugin's name, the word being completed last (`""` for a
//! new word), and reads Cobra's `__complete` answer: one candidate a line, optionally
//! `candidate<TAB>description`, then `:<directive>`. kubectl-hns answers when it is run under
//! that name (a symlink), so there is one binary to ship and a link survives upgrades.
//!
//! Subcommands, flags and fixed values come from the clap `Command` the caller passes in, through
//! clap_complete's engine; namespaces, kinds and API groups from the cluster ([`cluster`]), with
//! the kubectl flags already typed on the line ([`line`]). Nothing goes to stderr: kubectl shows
//! it to the user in the middle of their command line.

mod cluster;
mod line;

use std::ffi::{OsStr, OsString};
use std::process::ExitCode;
use std::sync::Arc;

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};

pub use cluster::Cluster;

/// The name kubectl looks for on PATH to complete `kubectl hns`.
pub const COMPLETER_NAME: &str = "kubectl_complete-hns";

/// Cobra's `ShellCompDirectiveDefault`: the shell may complete file names.
const DIRECTIVE_FILES: u8 = 0;
/// Cobra's `ShellCompDirectiveNoFileComp`: only our candidates.
const DIRECTIVE_NO_FILES: u8 = 4;

/// A kind the cluster serves, as `config set-resource` takes it: plural name and group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name, e.g. `secrets`.
    pub plural: String,
    /// Kind, e.g. `Secret`.
    pub kind: String,
}

/// Where values that only the cluster knows come from (a fake in tests). Lookups that fail
/// return nothing: a completion never reports errors.
pub trait Lookup: Send + Sync {
    /// The names of the namespaces.
    fn namespaces(&self) -> Vec<String>;
    /// The namespaced kinds the cluster serves.
    fn resources(&self) -> Vec<Resource>;
}

/// What the shell is offered.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    /// Candidates, each with its description.
    pub candidates: Vec<(String, Option<String>)>,
    /// Cobra's directive.
    pub directive: u8,
}

impl Reply {
    /// The answer in Cobra's `__complete` format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (value, help) in &self.candidates {
            out.push_str(value);
            if let Some(help) = help {
                out.push('\t');
                out.push_str(help);
            }
            out.push('\n');
        }
        out + &format!(":{}\n", self.directive)
    }
}

/// Whether the program was started as the completer (its file name is [`COMPLETER_NAME`]).
pub fn invoked_as_completer(argv0: Option<&OsStr>) -> bool {
    argv0.map(std::path::Path::new).and_then(|p| p.file_stem()).is_some_and(|name| name == COMPLETER_NAME)
}

/// Runs the completer: prints the candidates for `words` (the arguments kubectl passed) of `cmd`.
pub fn run(cmd: clap::Command, words: Vec<OsString>) -> ExitCode {
    let words: Vec<String> = words.into_iter().map(|w| w.to_string_lossy().into_owned()).collect();
    let typed = words.split_last().map_or(&[][..], |(_, typed)| typed);
    let cluster = Cluster::new(line::kube_flags(typed));
    let reply = complete(cmd, &words, Arc::new(cluster)).render();
    // A closed stdout (the shell gave up waiting) is no error worth a trace on the prompt.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), reply.as_bytes());
    ExitCode::SUCCESS
}

/// The candidates for the last of `words`, the arguments after `kubectl hns`.
pub fn complete(cmd: clap::Command, words: &[String], lookup: Arc<dyn Lookup>) -> Reply {
    let (current, typed) = match words.split_last() {
        Some((current, typed)) => (current.as_str(), typed),
        None => ("", words),
    };
    if line::completes_file(&cmd, typed, current) {
        return Reply { candidates: Vec::new(), directive: DIRECTIVE_FILES };
    }
    let group = line::value_of(typed, "group");
    let mut cmd = with_completers(cmd, &lookup, group.as_deref());
    let mut found = engine(&mut cmd, typed, current);
    if current == "-" {
        // The engine offers one form of each flag, the short one after a single dash; kubectl
        // offers both.
        found.extend(engine(&mut cmd, typed, "--"));
    }
    let mut seen = std::collections::HashSet::new();
    let candidates = found
        .iter()
        .filter(|c| seen.insert(c.get_value().to_owned()))
        .map(|c| (c.get_value().to_string_lossy().into_owned(), summary(c)))
        // Flags only once a dash is typed, as kubectl does: they would bury the values.
        .filter(|(value, _)| current.starts_with('-') || !value.starts_with('-'))
        .collect();
    Reply { candidates, directive: DIRECTIVE_NO_FILES }
}

/// clap_complete's candidates for `current` after `typed`; none when it finds the line wrong.
fn engine(cmd: &mut clap::Command, typed: &[String], current: &str) -> Vec<CompletionCandidate> {
    let args: Vec<OsString> = std::iter::once(OsString::from("kubectl-hns"))
        .chain(typed.iter().map(OsString::from))
        .chain(std::iter::once(OsString::from(current)))
        .collect();
    let index = args.len() - 1;
    clap_complete::engine::complete(cmd, args, index, None).unwrap_or_default()
}

/// A candidate's description: the first line of its help.
fn summary(c: &CompletionCandidate) -> Option<String> {
    let help = c.get_help()?.to_string();
    help.lines().next().map(|l| l.trim_end_matches('.').to_string()).filter(|l| !l.is_empty())
}

/// What an argument's values name, by the argument's id (the field names of the commands'
/// arguments; the CLI's tests complete each place, so a renamed field is caught).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A namespace: `-n`, and the namespaces of tree, describe, set (and its --parent), diagnose.
    Namespace,
    /// A plural resource name: `config set-resource RESOURCE`, `delete-type --resource`,
    /// `get KIND`.
    Resource,
    /// An API group: `config … --group`.
    Group,
}

/// The argument ids whose values the cluster completes.
pub const VALUE_IDS: [(&str, ValueKind); 6] = [
    ("namespace", ValueKind::Namespace),
    ("namespaces", ValueKind::Namespace),
    ("ns", ValueKind::Namespace),
    ("parent", ValueKind::Namespace),
    ("resource", ValueKind::Resource),
    ("group", ValueKind::Group),
];

fn value_kind(id: &str) -> Option<ValueKind> {
    VALUE_IDS.iter().find(|(known, _)| *known == id).map(|(_, kind)| *kind)
}

/// `cmd` with a cluster completer on every argument that [`VALUE_IDS`] names, at every depth.
fn with_completers(cmd: clap::Command, lookup: &Arc<dyn Lookup>, group: Option<&str>) -> clap::Command {
    cmd.mut_args(|arg| match value_kind(arg.get_id().as_str()) {
        Some(kind) => {
            let (lookup, group) = (lookup.clone(), group.map(str::to_string));
            arg.add(ArgValueCompleter::new(move |current: &OsStr| {
                let current = current.to_string_lossy();
                values(kind, lookup.as_ref(), group.as_deref())
                    .into_iter()
                    .filter(|c| c.get_value().to_string_lossy().starts_with(current.as_ref()))
                    .collect()
            }))
        }
        None => arg,
    })
    .mut_subcommands(|sub| with_completers(sub, lookup, group))
}

/// Every value of `kind`; resources only of `group` when the line names one.
fn values(kind: ValueKind, lookup: &dyn Lookup, group: Option<&str>) -> Vec<CompletionCandidate> {
    match kind {
        ValueKind::Namespace => lookup.namespaces().into_iter().map(CompletionCandidate::new).collect(),
        ValueKind::Resource => resources(lookup.resources(), group),
        ValueKind::Group => {
            let mut groups: Vec<String> =
                lookup.resources().into_iter().map(|r| r.group).filter(|g| !g.is_empty()).collect();
            groups.sort();
            groups.dedup();
            groups.into_iter().map(CompletionCandidate::new).collect()
        }
    }
}

/// Plural names, once each (the core group's first: `events` is also events.k8s.io's), described
/// by kind and group.
fn resources(mut all: Vec<Resource>, group: Option<&str>) -> Vec<CompletionCandidate> {
    all.retain(|r| group.is_none_or(|g| r.group == g));
    all.sort_by(|a, b| {
        (&a.plural, !a.group.is_empty(), &a.group).cmp(&(&b.plural, !b.group.is_empty(), &b.group))
    });
    all.dedup_by(|b, a| a.plural == b.plural);
    all.into_iter()
        .map(|r| {
            let help = if r.group.is_empty() { r.kind } else { format!("{} ({})", r.kind, r.group) };
            CompletionCandidate::new(r.plural).help(Some(help.into()))
        })
        .collect()
}

#[cfg(test)]
mod tests;
