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
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
