//! `kubectl hns completion bash|zsh|fish`: shell completion scripts.

use std::process::ExitCode;

use clap_complete::Shell;

use crate::out;

/// Print a shell completion script for kubectl-hns.
///
/// The script completes the `kubectl-hns` command, e.g. for bash:
///   kubectl hns completion bash > /etc/bash_completion.d/kubectl-hns
#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_parser = ["bash", "zsh", "fish"])]
    shell: String,
}

/// Runs `completion`: prints the script that completes `cli`, which the dispatcher passes in so
/// that imports point one way (cli → commands).
pub fn run(args: CompletionArgs, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    let shell: Shell = args.shell.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    // Written whole into memory first: `generate` panics when its writer fails, as standard
    // output does when its reader goes away.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "kubectl-hns", &mut script);
    out!("{}", String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}
