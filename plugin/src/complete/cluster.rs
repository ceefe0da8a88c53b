//! Namespaces and kinds for completion, read from the cluster the command line names: one list
//! call (namespaces; for a user who may not list them, hns's view of the hierarchy instead) or
//! one aggregated discovery (kinds), each bounded by a short timeout, since
//! the user is waiting at their prompt. Failures complete nothing.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::discovery::{Discovery, Scope};

use super::{Lookup, Resource};
use crate::hns::Hns;
use crate::kube_flags::KubeFlags;

/// How long a lookup may take, connecting included, unless `--request-timeout` says less.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Why a lookup gave nothing (never shown: kubectl would print it in the user's command line).
#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error("no runtime: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("cannot connect: {0}")]
    Connect(#[from] anyhow::Error),
    #[error("the cluster did not answer in time")]
    Timeout(#[from] tokio::time::error::Elapsed),
    #[error("the request failed: {0}")]
    Api(#[from] kube::Error),
}

/// The cluster that kubectl's flags on the line choose.
pub struct Cluster {
    flags: KubeFlags,
}

impl Cluster {
    /// The cluster `flags` choose.
    pub fn new(mut flags: KubeFlags) -> Self {
        let timeout = flags.request_timeout.filter(|t| !t.is_zero()).map_or(TIMEOUT, |t| t.min(TIMEOUT));
        flags.request_timeout = Some(timeout);
        Cluster { flags }
    }

    /// Runs `read` with a client, on a runtime of its own (clap's completers are synchronous),
    /// within the timeout.
    fn read<T, F, Fut>(&self, read: F) -> Result<T, LookupError>
    where
        F: FnOnce(kube::Client) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let timeout = self.flags.request_timeout.unwrap_or(TIMEOUT);
        runtime.block_on(async {
            tokio::time::timeout(timeout, async {
                let client = self.flags.client().await?;
                Ok::<T, LookupError>(read(client).await?)
            })
            .await?
        })
    }
}

impl Cluster {
    /// The namespaces in the user's view of the hierarchy (none if hns does not answer).
    async fn viewed(client: kube::Client) -> Vec<String> {
        let tree = Hns::new(client).tree().await;
        tree.map(|entries| entries.into_iter().map(|e| e.name).collect()).unwrap_or_default()
    }
}

impl Lookup for Cluster {
    /// Every namespace, for those who may list them; for the others (a team's admins, most
    /// often), the namespaces hns shows them in their view of the hierarchy, as `tree -A` does.
    fn namespaces(&self) -> Vec<String> {
        let list = self.read(|client| async move {
            match Api::<Namespace>::all(client.clone()).list_metadata(&ListParams::default()).await {
                Ok(list) => Ok(list.items.into_iter().filter_map(|ns| ns.metadata.name).collect()),
                Err(kube::Error::Api(s)) if s.code == 403 => Ok(Self::viewed(client).await),
                Err(e) => Err(e),
            }
        });
        list.unwrap_or_default()
    }

    fn resources(&self) -> Vec<Resource> {
        let discovery = self.read(|client| Discovery::new(client).run_aggregated());
        let Ok(discovery) = discovery else { return Vec::new() };
        discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .filter(|(_, caps)| caps.scope == Scope::Namespaced)
            .map(|(r, _)| Resource { group: r.group, plural: r.plural, kind: r.kind })
            .collect()
    }
}
