//! `kubectl-hns`: the kubectl plugin for hierarchical namespaces. Run as `kubectl hns …`.

use std::process::ExitCode;

use clap::Parser;
use kubectl_hns::cli::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.run().await {
        Ok(code) => code,
        Err(e) => {
            // The error's own words: each of ours already says its cause, and the chain would
            // add kube's rendering of API errors, which carries their Debug form.
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}
