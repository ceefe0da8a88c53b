//! Connecting to the cluster the way kubectl does: `--kubeconfig`, `--context`, `KUBECONFIG`,
//! and `-n/--namespace` defaulting to the context's namespace, then `default`.

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
    /// The namespace to work in (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

/// A client and the namespace commands work in.
pub struct Connection {
    /// The client.
    pub client: Client,
    /// `-n`, or the context's namespace, or `default`.
    pub namespace: String,
}

impl KubeFlags {
    /// A client for the chosen cluster and context.
    ///
    /// It does not retry 503s, as kubectl does not: an unavailable APIService (hns's own, or the
    /// one a stuck namespace waits on) answers every request with 503, and kube's default retry
    /// (15 attempts, backing off up to 1000 s) would stall a command for minutes instead of
    /// saying what is wrong.
    pub async fn client(&self) -> anyhow::Result<Client> {
        Ok(self.connect().await?.client)
    }

    /// A client, and the namespace to work in.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let mut config = match &self.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                Config::from_custom_kubeconfig(kc, &options).await?
            }
            None => Config::from_kubeconfig(&options).await.or_else(|_| Config::incluster())?,
        };
        config.default_retry = false;
        let namespace = self.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        Ok(Connection { client: Client::try_from(config)?, namespace })
    }
}
