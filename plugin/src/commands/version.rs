//! `kubectl hns version [-o json|yaml]`: the plugin's version, and what the cluster serves.

use std::process::ExitCode;

use hns_api::API_VERSION;
use serde::Serialize;

use crate::client::KubeFlags;
use crate::hns::Hns;
use crate::output::{self, DataFormat};
use crate::{out, outln};

/// Print the plugin's version and whether the cluster serves the hns API.
///
/// hns-apiserver publishes no version of its own through kube-apiserver, so the server side
/// shown is kube-apiserver's version and the hns resources the cluster serves.
#[derive(clap::Args, Debug)]
pub struct VersionArgs {
    /// Print the versions as data.
    #[arg(short = 'o', long, value_enum)]
    output: Option<DataFormat>,
}

/// What `version` reports.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Versions {
    client_version: String,
    kubernetes_version: Option<String>,
    hns_api: HnsApi,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct HnsApi {
    group_version: &'static str,
    served: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resources: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs `version`: exit code 1 when the cluster does not serve the hns API.
pub async fn run(kube: &KubeFlags, args: VersionArgs) -> anyhow::Result<ExitCode> {
    let client_version = format!("v{}", env!("CARGO_PKG_VERSION"));
    if args.output.is_none() {
        // First, so it shows even when the cluster cannot be reached.
        outln!("kubectl-hns version {client_version}")?;
    }
    let hns = Hns::new(kube.client().await?);
    let kubernetes_version = hns.kubernetes_version().await.ok();
    let (resources, error) = match hns.served_resources().await {
        Ok(r) => (r, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let served = error.is_none();
    let v = Versions {
        client_version,
        kubernetes_version,
        hns_api: HnsApi { group_version: API_VERSION, served, resources, error },
    };
    match args.output {
        Some(format) => out!("{}", output::data(&v, format)?)?,
        None => {
            outln!("Kubernetes version {}", v.kubernetes_version.as_deref().unwrap_or("unknown"))?;
            match &v.hns_api.error {
                None => outln!("hns API {API_VERSION} served: {}", v.hns_api.resources.join(", "))?,
                Some(e) => eprintln!("Error: {e}"),
            }
        }
    }
    Ok(if served { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
