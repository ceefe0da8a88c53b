use clap::{CommandFactory, Parser, Subcommand};

use super::*;

/// A small command line shaped like kubectl-hns's.
#[derive(Parser)]
#[command(name = "kubectl-hns")]
struct Cli {
    /// The namespace to work in.
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// Path to the kubeconfig file to use.
    #[arg(long, global = true, value_hint = clap::ValueHint::FilePath)]
    kubeconfig: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Display the trees.
    Tree {
        /// Namespaces.
        namespaces: Vec<String>,
        /// Every tree.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
    },
    /// Configure kinds.
    Config {
        #[command(subcommand)]
        command: Config,
    },
}

#[derive(Subcommand)]
enum Config {
    /// Set a kind's mode.
    SetResource {
        /// Plural name.
        resource: String,
        /// API group.
        #[arg(long)]
        group: Option<String>,
        /// The mode.
        #[arg(long, value_parser = ["Propagate", "Remove"])]
        mode: String,
    },
}

struct Fake;

impl Lookup for Fake {
    fn namespaces(&self) -> Vec<String> {
        vec!["team".into(), "team-a".into(), "other".into()]
    }
    fn resources(&self) -> Vec<Resource> {
        let r = |group: &str, plural: &str, kind: &str| Resource {
            group: group.into(),
            plural: plural.into(),
            kind: kind.into(),
        };
        vec![
            r("events.k8s.io", "events", "Event"),
            r("", "events", "Event"),
            r("", "secrets", "Secret"),
            r("stable.example.com", "crontabs", "CronTab"),
        ]
    }
}

fn reply(line: &str) -> Reply {
    let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
    if line.is_empty() {
        words = vec![String::new()];
    }
    complete(Cli::command(), &words, Arc::new(Fake))
}

fn values(line: &str) -> Vec<String> {
    reply(line).candidates.into_iter().map(|(v, _)| v).collect()
}

#[test]
fn subcommands_with_their_descriptions_and_no_files() {
    let r = reply("");
    assert_eq!(r.directive, DIRECTIVE_NO_FILES);
    assert!(r.candidates.contains(&("tree".into(), Some("Display the trees".into()))), "{r:?}");
    assert!(values("").contains(&"config".to_string()));
    assert_eq!(values("con"), ["config"]);
    assert_eq!(values("config "), ["set-resource", "help"]);
}

#[test]
fn flags_once_a_dash_is_typed() {
    assert!(!values("tree ").iter().any(|v| v.starts_with('-')));
    let flags = values("tree -");
    for flag in ["--all-namespaces", "--namespace", "-A", "-n"] {
        assert!(flags.contains(&flag.to_string()), "{flag}: {flags:?}");
    }
    assert_eq!(values("tree --all"), ["--all-namespaces"]);
}

#[test]
fn namespaces_where_a_namespace_is_taken() {
    assert_eq!(values("tree "), ["team", "team-a", "other"]);
    assert_eq!(values("tree te"), ["team", "team-a"]);
    assert_eq!(values("tree -n t"), ["team", "team-a"]);
    assert_eq!(values("config set-resource secrets -n "), ["team", "team-a", "other"]);
}

#[test]
fn plural_names_once_each_with_kind_and_group() {
    let r = reply("config set-resource ");
    assert_eq!(
        r.candidates,
        [
            ("crontabs".into(), Some("CronTab (stable.example.com)".into())),
            ("events".into(), Some("Event".into())),
            ("secrets".into(), Some("Secret".into())),
        ]
    );
    assert_eq!(values("config set-resource --group events.k8s.io "), ["events"]);
    let events = reply("config set-resource --group=events.k8s.io e");
    assert_eq!(events.candidates, [("events".into(), Some("Event (events.k8s.io)".into()))]);
    assert_eq!(values("config set-resource x --group "), ["events.k8s.io", "stable.example.com"]);
}

#[test]
fn modes_for_mode() {
    assert_eq!(values("config set-resource secrets --mode "), ["Propagate", "Remove"]);
    assert_eq!(values("config set-resource secrets --mode R"), ["Remove"]);
}

#[test]
fn files_for_kubeconfig() {
    let r = reply("tree --kubeconfig ");
    assert_eq!(r, Reply { candidates: vec![], directive: DIRECTIVE_FILES });
}

#[test]
fn cobra_format() {
    let r = Reply { candidates: vec![("a".into(), Some("The a".into())), ("b".into(), None)], directive: 4 };
    assert_eq!(r.render(), "a\tThe a\nb\n:4\n");
    assert_eq!(Reply { candidates: vec![], directive: 4 }.render(), ":4\n");
}

#[test]
fn the_completer_is_known_by_its_name() {
    assert!(invoked_as_completer(Some(OsStr::new("/home/u/.krew/bin/kubectl_complete-hns"))));
    assert!(!invoked_as_completer(Some(OsStr::new("/usr/bin/kubectl-hns"))));
    assert!(!invoked_as_completer(None));
}
