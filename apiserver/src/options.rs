//! Command-line flags of `hns-apiserver`, in Kubernetes style, and start-up.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use actix_web::{web, HttpServer};
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

use crate::auth::authn::{self, AuthnState};
use crate::auth::authz::Authorizer;
use crate::auth::certs::{self, SelfManaged, ServingCert, Source};
use crate::auth::tls;
use crate::controller::events::Events;
use crate::controller::Controller;
use crate::hierarchy::policy::{Policy, DEFAULT_EXCLUDED};
use crate::leader;
use crate::metrics::{self, Metrics, Sources};
use crate::propagation::Propagation;
use crate::server::{self, AppState};
use crate::store::cache::{self, Cache};
use crate::store::config_store::{self, ConfigStore};
use crate::store::parent_lock::ParentLock;
use crate::store::writer::Writer;

/// The Lease the controller replicas compete for.
const LEASE: &str = "hns-controller";

/// How long an idle client connection stays open: longer than the 90 s kube-apiserver's HTTP
/// client keeps one, so kube-apiserver always closes first.
const KEEP_ALIVE_SECONDS: u64 = 120;

/// hns-apiserver serves the hierarchical-namespace API (group hnc.x-k8s.io) behind
/// kube-apiserver's aggregation layer.
#[derive(Parser, Debug)]
#[command(name = "hns-apiserver", version, about)]
pub struct Args {
    /// kubeconfig of the cluster to serve; in-cluster configuration when absent.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Port to serve HTTPS on.
    #[arg(long, default_value_t = 8443)]
    pub secure_port: u16,

    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    /// Serving certificate (PEM, may include intermediates), re-read when it changes (e.g.
    /// mounted from a cert-manager Secret).
    #[arg(long, requires = "tls_private_key_file", conflicts_with = "self_managed_certs")]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key of --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Let hns manage its serving certificate: a CA and certificate in Secret
    /// --cert-secret-name of --namespace, renewed before expiry, with the caBundle of the
    /// APIService and the webhook kept equal to the CA. Without this or --tls-cert-file, a
    /// throw-away self-signed certificate is served (development only).
    #[arg(long)]
    pub self_managed_certs: bool,

    /// Namespace hns runs in (its certificate Secret lives there).
    #[arg(long, env = "POD_NAMESPACE", default_value = "hns-system")]
    pub namespace: String,

    /// Secret holding the self-managed certificates.
    #[arg(long, default_value = "hns-serving-cert")]
    pub cert_secret_name: String,

    /// Extra DNS names or IP addresses for the self-managed serving certificate (repeatable);
    /// hns-apiserver.<namespace>.svc is always included.
    #[arg(long = "cert-dns-name", value_name = "NAME")]
    pub cert_names: Vec<String>,

    /// APIService whose caBundle hns keeps current with self-managed certificates.
    #[arg(long, default_value = "v1alpha2.hnc.x-k8s.io")]
    pub apiservice_name: String,

    /// ValidatingWebhookConfiguration whose caBundles hns keeps current.
    #[arg(long, default_value = "hns")]
    pub webhook_name: String,

    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Namespaces that never take part in a hierarchy (repeatable; replaces the default list:
    /// kube-system, kube-public, kube-node-lease, hns-system).
    #[arg(long = "excluded-namespace", value_name = "NS")]
    pub excluded_namespaces: Vec<String>,

    /// Regular expression (matching a whole key) of labels that may be managed through the
    /// hierarchy with spec.labels (repeatable). None by default, as in HNC.
    #[arg(long = "managed-namespace-label", value_name = "REGEX")]
    pub managed_labels: Vec<String>,

    /// Regular expression of annotations that may be managed with spec.annotations (repeatable).
    #[arg(long = "managed-namespace-annotation", value_name = "REGEX")]
    pub managed_annotations: Vec<String>,

    /// The user hns-apiserver authenticates as; only it may write hns's labels and annotations
    /// on namespaces.
    #[arg(long, default_value = "system:serviceaccount:hns-system:hns-apiserver")]
    pub hns_identity: String,

    /// Address of an extra plain-HTTP `/metrics` endpoint without authentication, for local
    /// debugging (e.g. 127.0.0.1:8080); empty (the default) disables it. The secure port serves
    /// `/metrics` to clients allowed `get` on that non-resource URL.
    #[arg(long, default_value = "")]
    pub metrics_bind_address: String,

    /// HTTP worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
}

/// How logs are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl Args {
    /// Sets up logging: `RUST_LOG` filters (default `info`).
    pub fn init_logging(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let builder =
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
        match self.log_format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().init(),
        }
    }

    async fn client(&self) -> anyhow::Result<Client> {
        let config = match &self.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
            }
            None => kube::Config::infer().await?,
        };
        Ok(Client::try_from(config)?)
    }

    fn cert_source(&self) -> Source {
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_private_key_file) {
            return Source::Files { cert: cert.clone(), key: key.clone() };
        }
        if !self.self_managed_certs {
            return Source::Generated;
        }
        let service = format!("hns-apiserver.{}.svc", self.namespace);
        let mut names = vec![service.clone(), format!("{service}.cluster.local")];
        names.extend(self.cert_names.iter().cloned());
        Source::SelfManaged(SelfManaged {
            namespace: self.namespace.clone(),
            secret: self.cert_secret_name.clone(),
            names,
            apiservice: self.apiservice_name.clone(),
            webhook: self.webhook_name.clone(),
        })
    }

    /// Starts the caches and serves until SIGTERM or SIGINT, then drains in-flight requests.
    pub async fn run(self) -> anyhow::Result<()> {
        let client = self.client().await?;
        let serving = ServingCert::empty();
        tokio::spawn(certs::run(client.clone(), self.cert_source(), serving.clone()));
        let tls = tls::acceptor(serving.clone())?;
        let excluded = if self.excluded_namespaces.is_empty() {
            DEFAULT_EXCLUDED.iter().map(|s| s.to_string()).collect()
        } else {
            self.excluded_namespaces.clone()
        };
        let policy =
            Policy::new(&excluded, &self.managed_labels, &self.managed_annotations, &self.hns_identity)
                .map_err(|e| {
                    anyhow::anyhow!("--managed-namespace-label/--managed-namespace-annotation: {e}")
                })?;
        // The key comes before the forest: no replica judges hierarchy state without it.
        let sealer = crate::store::seal_key::load(client.clone(), &self.namespace).await;
        let cache = Arc::new(Cache::new(policy.clone(), sealer));
        let authn_state = Arc::new(AuthnState::default());
        tokio::spawn(cache::run(client.clone(), cache.clone()));
        tokio::spawn(authn::watch_config(client.clone(), authn_state.clone()));
        let config = Arc::new(ConfigStore::default());
        tokio::spawn(config_store::run(
            client.clone(),
            self.namespace.clone(),
            config.clone(),
            cache.clone(),
        ));
        let identity = format!(
            "{}_{}",
            std::env::var("POD_NAME")
                .or_else(|_| std::env::var("HOSTNAME"))
                .unwrap_or_else(|_| "hns-apiserver".into()),
            std::process::id()
        );
        let leading = leader::run(client.clone(), &self.namespace, LEASE, identity.clone());
        let propagation = Arc::new(Propagation::new(client.clone(), cache.changes.clone()));
        let metrics = Arc::new(Metrics::default());
        let sources = Arc::new(Sources {
            cache: cache.clone(),
            policy: policy.clone(),
            propagation: propagation.clone(),
            metrics: metrics.clone(),
        });
        if !self.metrics_bind_address.is_empty() {
            let addr: SocketAddr = self
                .metrics_bind_address
                .parse()
                .map_err(|e| anyhow::anyhow!("--metrics-bind-address {}: {e}", self.metrics_bind_address))?;
            let sources = sources.clone();
            tokio::spawn(async move {
                if let Err(error) = metrics::serve(addr, sources).await {
                    tracing::error!(%error, %addr, "metrics endpoint failed");
                }
            });
        }
        tokio::spawn(follow_config(propagation.clone(), config.spec.subscribe()));
        let controller = Arc::new(Controller {
            cache: cache.clone(),
            policy: policy.clone(),
            writer: Writer::new(client.clone()),
            queue: Arc::default(),
            propagation: propagation.clone(),
            client: client.clone(),
            metrics: metrics.clone(),
            events: Events::new(client.clone(), identity.clone()),
        });
        tokio::spawn(controller.run(leading));
        let (release_client, release_identity) = (client.clone(), identity.clone());
        let parent_lock = Arc::new(ParentLock::new(client.clone(), &self.namespace, identity.clone()));
        let state = web::Data::new(AppState {
            cache,
            authn: authn_state,
            authz: Authorizer::new(client.clone()),
            policy,
            writer: Writer::new(client.clone()),
            config,
            client,
            namespace: self.namespace.clone(),
            serving,
            propagation,
            parent_lock,
        });

        let addr = SocketAddr::new(self.bind_address, self.secure_port);
        let sources = web::Data::new(sources);
        let mut http = HttpServer::new(move || {
            server::app(state.clone())
                .app_data(sources.clone())
                .service(server::get_only("/metrics", metrics::secure))
        })
        .on_connect(tls::record_peer_certificates)
        // kube-apiserver keeps idle connections to us for up to 90 s (Go's IdleConnTimeout) and
        // does not retry a webhook POST on a connection we closed under it ("EOF"); so the
        // client, not us, must be the one to close idle connections.
        .keep_alive(std::time::Duration::from_secs(KEEP_ALIVE_SECONDS))
        .shutdown_timeout(10);
        if self.workers > 0 {
            http = http.workers(self.workers);
        }
        let http =
            http.bind_openssl(addr, tls).map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        tracing::info!(%addr, "serving");
        http.run().await?;
        leader::release(release_client, &self.namespace, LEASE, &release_identity).await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Starts and stops propagation syncers as the HNCConfiguration changes, and looks the
/// configured kinds up again every [`crate::propagation::REFRESH`] (a CRD deleted or restored).
async fn follow_config(
    propagation: Arc<Propagation>,
    mut spec: tokio::sync::watch::Receiver<hns_api::HNCConfigurationSpec>,
) {
    loop {
        let current = spec.borrow_and_update().clone();
        propagation.configure(&current).await;
        tokio::select! {
            changed = spec.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(crate::propagation::REFRESH) => {}
        }
    }
}
