//! `kubectl-hns`: the kubectl plugin for hierarchical namespaces. Run as `kubectl hns …`; run
//! as `kubectl_complete-hns` (a symlink to it), it completes `kubectl hns …` for kubectl.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use kubectl_hns::cli::Cli;
use kubectl_hns::{complete, stdout};

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    if complete::invoked_as_completer(args.next().as_deref()) {
        return complete::run(Cli::command(), args.collect());
    }
    run()
}

#[tokio::main]
async fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.run().await {
        Ok(code) => code,
        // Its reader has all it wanted (`kubectl hns tree -A | head`): nothing to say to anyone.
        Err(e) if stdout::closed(&e) => ExitCode::from(stdout::EXIT_CLOSED),
        Err(e) => {
            // The error's own words: each of ours already says its cause, and the chain would
            // add kube's rendering of API errors, which carries their Debug form.
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}
