//! `kubectl hns version`.

use std::process::ExitCode;

use hns_api::API_VERSION;

use crate::client::KubeFlags;

/// Prints the client version, then whether the cluster serves `hnc.x-k8s.io/v1alpha2`.
pub async fn run(kube: &KubeFlags) -> anyhow::Result<ExitCode> {
    println!("kubectl-hns version v{}", env!("CARGO_PKG_VERSION"));
    let client = kube.client().await?;
    match client.list_api_group_resources(API_VERSION).await {
        Ok(_) => {
            println!("Server: the cluster serves {API_VERSION}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!(
                "Server: {API_VERSION} is not available ({e}).\nIs hns installed and healthy? Check with: kubectl get apiservice v1alpha2.hnc.x-k8s.io"
            );
            Ok(ExitCode::from(1))
        }
    }
}
