//! Command-line interface, with kubectl's global flags.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::client::KubeFlags;
use crate::commands;

/// Manage hierarchical namespaces (hns).
#[derive(Parser, Debug)]
#[command(name = "kubectl-hns", bin_name = "kubectl hns", version)]
pub struct Cli {
    #[command(flatten)]
    kube: KubeFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the plugin's version and whether the cluster serves the hns API.
    Version,
    /// Find why namespaces are stuck in Terminating, and fix it safely.
    Diagnose(commands::diagnose::DiagnoseArgs),
}

impl Cli {
    /// Runs the chosen command.
    pub async fn run(self) -> anyhow::Result<ExitCode> {
        let Cli { kube, command } = self;
        match command {
            Command::Version => commands::version::run(&kube).await,
            Command::Diagnose(args) => commands::diagnose::run(&kube, args).await,
        }
    }
}
