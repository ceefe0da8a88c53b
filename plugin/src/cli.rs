//! Command-line interface, with kubectl's global flags.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::client::KubeFlags;
use crate::commands;

/// Examples, and what scripts can rely on; `diagnose` documents its own exit codes.
const ROOT_HELP: &str = "\
Examples:
  # Create subnamespace \"kid\" of \"team\", and show the tree
  kubectl hns create kid -n team
  kubectl hns tree team

  # What does user \"dev-user\" see? (kubectl's flags work on every command)
  kubectl hns tree team --as=dev-user

  # Why is namespace \"old\" stuck in Terminating?
  kubectl hns diagnose old

Exit codes:
  0    success
  1    error: refused by the server (its message is printed), hns not installed or unavailable,
       a bad kubeconfig, context or flag value, or not confirmed on the terminal
  2    invalid command line
  141  the reader of the output went away (`| head`): nothing is said, as for kubectl

Confirmations: commands that ask first do so on a terminal only. Without one (scripts), those
HNC's plugin had (config set-resource, config delete-type) go ahead as HNC's did and say so on
stderr (--yes silences that); delete --allowCascadingDeletion and diagnose --fix, which HNC's
plugin did not have, need --yes.";

/// Manage hierarchical namespaces (hns).
#[derive(Parser, Debug)]
#[command(name = "kubectl-hns", bin_name = "kubectl hns", version, after_help = ROOT_HELP)]
pub struct Cli {
    #[command(flatten, next_help_heading = "Kubectl configuration flags")]
    kube: KubeFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a subnamespace of the namespace given with -n.
    Create(commands::create::CreateArgs),
    /// Delete a subnamespace of the namespace given with -n.
    Delete(commands::delete::DeleteArgs),
    /// Set a namespace's parent, or make it a root, and allow or forbid cascading deletion.
    Set(commands::set::SetArgs),
    /// Display the trees below the given namespaces, or every tree with -A.
    Tree(commands::tree::TreeArgs),
    /// Describe a namespace's place in the hierarchy.
    Describe(commands::describe::DescribeArgs),
    /// View or change which kinds propagate down the hierarchy.
    Config(commands::config::ConfigArgs),
    /// List hierarchical resource quotas and the usage of their subtrees.
    Hrq(commands::hrq::HrqArgs),
    /// List objects of any kind in a namespace and all its descendants.
    Get(commands::get::GetArgs),
    /// Print the plugin's version and whether the cluster serves the hns API.
    #[command(after_help = "\
Examples:
  # The plugin's version and the hns API the cluster serves
  kubectl hns version

  # The same as JSON
  kubectl hns version -o json")]
    Version(commands::version::VersionArgs),
    /// Print a shell completion script.
    #[command(after_help = "\
Examples:
  # Install completion for bash
  kubectl hns completion bash > /etc/bash_completion.d/kubectl-hns

The script completes the kubectl-hns command. kubectl itself (1.26+) completes `kubectl hns`
by running kubectl_complete-hns from PATH: link it to kubectl-hns once, beside it, e.g. with krew:
  ln -s kubectl-hns ~/.krew/bin/kubectl_complete-hns")]
    Completion(commands::completion::CompletionArgs),
    /// Find why namespaces are stuck in Terminating, and fix it safely.
    #[command(after_help = "\
Examples:
  # Why is namespace \"old\" stuck? (changes nothing)
  kubectl hns diagnose old

  # Every namespace stuck in Terminating, as JSON
  kubectl hns diagnose -A -o json

  # Apply the remedies, asking before each
  kubectl hns diagnose old --fix

Exit codes:
  0    nothing is stuck (or --fix fixed it)
  1    error, or a namespace named that does not exist (and nothing stuck below it)
  2    stuck namespaces found (without --fix)
  3    a fix was refused or failed, or --fix had no terminal to ask on and no --yes")]
    Diagnose(commands::diagnose::DiagnoseArgs),
    /// Print the hierarchy as manifests, for HNC or for hns (migration, backup).
    #[command(after_help = "\
Examples:
  # Back up the hierarchy as HNC's objects
  kubectl hns export > hierarchy.yaml

  # Print it as the Namespace annotations hns reads, to move from HNC to hns
  kubectl hns export --for hns > namespaces.yaml")]
    Export(commands::export::ExportArgs),
}

impl Cli {
    /// Runs the chosen command.
    pub async fn run(self) -> anyhow::Result<ExitCode> {
        let Cli { kube, command } = self;
        match command {
            Command::Create(args) => commands::create::run(&kube, args).await,
            Command::Delete(args) => commands::delete::run(&kube, args).await,
            Command::Set(args) => commands::set::run(&kube, args).await,
            Command::Tree(args) => commands::tree::run(&kube, args).await,
            Command::Describe(args) => commands::describe::run(&kube, args).await,
            Command::Config(args) => commands::config::run(&kube, args).await,
            Command::Version(args) => commands::version::run(&kube, args).await,
            Command::Completion(args) => commands::completion::run(args, Cli::command()),
            Command::Diagnose(args) => commands::diagnose::run(&kube, args).await,
            Command::Export(args) => commands::export::run(&kube, args).await,
            Command::Hrq(args) => commands::hrq::run(&kube, args).await,
            Command::Get(args) => commands::get::run(&kube, args).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap_complete::Shell;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn kubectl_flags_work_after_any_subcommand() {
        let cli = Cli::try_parse_from([
            "kubectl-hns",
            "create",
            "kid",
            "-n",
            "team",
            "--context",
            "c",
            "--kubeconfig",
            "k",
        ])
        .unwrap();
        assert_eq!(cli.kube.namespace.as_deref(), Some("team"));
        assert_eq!(cli.kube.context.as_deref(), Some("c"));
        assert!(
            Cli::try_parse_from(["kubectl-hns", "tree", "a", "-A"]).is_err(),
            "namespaces or -A, not both"
        );
        assert!(Cli::try_parse_from(["kubectl-hns", "tree", "-A", "-o", "yaml"]).is_ok());
        for get in [&["get", "--subtree", "pods"][..], &["get", "pods", "--subtree=false", "-o", "name"]] {
            let argv = std::iter::once("kubectl-hns").chain(get.iter().copied());
            assert!(Cli::try_parse_from(argv).is_ok(), "{get:?}: --subtree takes its value after =");
        }
        assert!(Cli::try_parse_from(["kubectl-hns", "get", "pods", "--subtree=no"]).is_err());
        assert!(Cli::try_parse_from([
            "kubectl-hns",
            "config",
            "set-resource",
            "secrets",
            "--mode",
            "remove"
        ])
        .is_ok());
    }

    #[test]
    fn every_shell_gets_a_script_naming_the_commands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kubectl-hns", &mut out);
            let script = String::from_utf8(out).unwrap();
            for word in ["kubectl-hns", "tree", "set-resource", "allowCascadingDeletion"] {
                assert!(script.contains(word), "{shell}: no {word}");
            }
        }
    }

    #[test]
    fn help_documents_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes:") && help.contains("2    invalid command line"), "{help}");
    }

    /// Every command, at every depth, with its path.
    fn all_commands(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = format!("{path} {}", sub.get_name());
            all_commands(sub, name.clone(), out);
            out.push((name, sub.clone()));
        }
    }

    #[test]
    fn every_help_has_examples_and_kubectl_flags() {
        let mut root = Cli::command();
        // Global flags reach subcommands when the command is built.
        root.build();
        let mut commands = vec![("kubectl hns".to_string(), root.clone())];
        all_commands(&root, "kubectl hns".into(), &mut commands);
        assert!(commands.len() >= 13, "{}", commands.len());
        for (name, mut cmd) in commands {
            let help = cmd.render_long_help().to_string();
            assert!(help.contains("Examples:\n  # "), "{name}: no examples");
            assert!(help.contains(&format!("\n  {name}")), "{name}: no example runs it:\n{help}");
            for flag in ["--as <USER>", "--as-group <GROUP>", "--request-timeout", "-s, --server"] {
                assert!(help.contains(flag), "{name}: no {flag}");
            }
        }
    }

    /// Namespaces from the cluster, for the completion tests.
    struct Namespaces;

    impl crate::complete::Lookup for Namespaces {
        fn namespaces(&self) -> Vec<String> {
            vec!["team".into()]
        }
        fn resources(&self) -> Vec<crate::complete::Resource> {
            let r = |plural: &str| crate::complete::Resource {
                group: "g.io".into(),
                plural: plural.into(),
                kind: "K".into(),
            };
            vec![r("ks")]
        }
    }

    #[test]
    fn completion_knows_where_namespaces_and_kinds_go() {
        let values = |line: &str| {
            let words: Vec<String> = line.split(' ').map(str::to_string).collect();
            let reply = crate::complete::complete(Cli::command(), &words, std::sync::Arc::new(Namespaces));
            reply.candidates.into_iter().map(|(v, _)| v).collect::<Vec<_>>()
        };
        for line in [
            "tree ",
            "describe ",
            "set ",
            "set x --parent ",
            "set x -p ",
            "diagnose ",
            "create kid -n ",
            "version --namespace ",
        ] {
            assert_eq!(values(line), ["team"], "{line:?}");
        }
        assert_eq!(values("config set-resource "), ["ks"]);
        assert_eq!(values("get "), ["ks"]);
        assert_eq!(values("config delete-type --resource "), ["ks"]);
        assert_eq!(values("config delete-type --group "), ["g.io"]);
        assert!(values("config set-resource ks --mode ").contains(&"Propagate".to_string()));
        assert!(values("tree -").contains(&"--context".to_string()));
        assert_eq!(values("create "), Vec::<String>::new(), "a new name is not offered");
    }

    #[test]
    fn kubectl_flags_and_kebab_case_anywhere() {
        for argv in [
            &["kubectl-hns", "tree", "x", "--as=dev-user", "--as-group=a", "--as-group=b"][..],
            &["kubectl-hns", "describe", "-n", "x", "--request-timeout=5s", "-v=6"],
            &["kubectl-hns", "set", "x", "--allow-cascading-deletion", "--token", "t"],
            &["kubectl-hns", "delete", "kid", "-n", "x", "--allow-cascading-deletion"],
            &["kubectl-hns", "config", "describe", "--insecure-skip-tls-verify", "--user=u"],
            &["kubectl-hns", "--context", "c", "version"],
        ] {
            Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
    }
}
