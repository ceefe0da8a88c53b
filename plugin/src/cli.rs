//! Command-line interface, with kubectl's global flags.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::client::KubeFlags;
use crate::commands;

/// What scripts can rely on; `diagnose` documents its own.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: refused by the server (its message is printed), hns not installed or unavailable,
     not confirmed, or a confirmation needed without a terminal (add --yes)
  2  invalid command line";

/// Manage hierarchical namespaces (hns).
#[derive(Parser, Debug)]
#[command(name = "kubectl-hns", bin_name = "kubectl hns", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(flatten)]
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
    /// Print the plugin's version and whether the cluster serves the hns API.
    Version(commands::version::VersionArgs),
    /// Print a shell completion script.
    Completion(commands::completion::CompletionArgs),
    /// Find why namespaces are stuck in Terminating, and fix it safely.
    Diagnose(commands::diagnose::DiagnoseArgs),
    /// Print the hierarchy as manifests, for HNC or for hns (migration, backup).
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
        assert!(help.contains("Exit codes:") && help.contains("2  invalid command line"), "{help}");
    }
}
