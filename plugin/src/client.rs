//! Connecting to the cluster the way kubectl does: `--kubeconfig`, `--context`, `KUBECONFIG`.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// kubectl's connection flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeFlags {
    /// Path to the kubeconfig file to use.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

impl KubeFlags {
    /// A client for the chosen cluster and context.
    pub async fn client(&self) -> anyhow::Result<Client> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                Config::from_custom_kubeconfig(kc, &options).await?
            }
            None => Config::from_kubeconfig(&options)
                .await
                .or_else(|_| Config::incluster())?,
        };
        Ok(Client::try_from(config)?)
    }
}
