//! `kubectl hns completion bash|zsh|fish`: shell completion scripts.

use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

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

/// Runs `completion`.
pub fn run(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    let shell: Shell = args.shell.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    clap_complete::generate(shell, &mut Cli::command(), "kubectl-hns", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
