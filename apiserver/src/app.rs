//! The composition root: builds the caches, the controller and the shared state from the flags,
//! starts the background tasks and serves until told to stop.

use std::net::SocketAddr;
use std::sync::Arc;

use actix_web::{web, HttpServer};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

use crate::admission::namespace_labels::LabelPolicy;
use crate::auth::authn::{self, AuthnState};
use crate::auth::authz::Authorizer;
use crate::auth::certs::{self, SelfManaged, ServingCert, Source};
use crate::auth::rbac_cache::{self, RbacCache};
use crate::auth::tls;
use crate::auth::view::Views;
use crate::controller::events::Events;
use crate::controller::quota_ledger::LedgerReconciler;
use crate::controller::Controller;
use crate::hierarchy::policy::{label_pair, KeyList, Policy, DEFAULT_EXCLUDED};
use crate::metrics::{self, Metrics, Sources};
use crate::options::Args;
use crate::propagation::Propagation;
use crate::replicas::{leader, peers};
use crate::server;
use crate::shutdown::Shutdown;
use crate::state::AppState;
use crate::store::cache::{self, Cache};
use crate::store::config_store::{self, ConfigStore};
use crate::store::parent_lock::ParentLock;
use crate::store::quota_ledgers::LedgerStore;
use crate::store::writer::Writer;

/// The Lease the controller replicas compete for.
const LEASE: &str = "hns-controller";

/// How long an idle client connection stays open: longer than the 90 s kube-apiserver's HTTP
/// client keeps one, so kube-apiserver always closes first.
const KEEP_ALIVE_SECONDS: u64 = 120;

async fn client(args: &Args) -> anyhow::Result<Client> {
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    // Long watches (crate::watching) bring a bookmark a minute: silence this long is a dead
    // connection, for a watch as for any other request.
    config.read_timeout = Some(crate::watching::READ_TIMEOUT);
    Ok(Client::try_from(config)?)
}

/// Where the other replicas can connect to this one: its pod's address (`POD_IP`), or else
/// the one address it listens on. None when it listens on every address outside a pod, or in a
/// pod without `POD_IP`: another replica may have the same, and must not take it for its own.
fn reachable_at(args: &Args, pod: Option<&peers::Me>) -> Option<std::net::SocketAddr> {
    let ip = match pod {
        Some(pod) => pod.ip?,
        None => Some(args.bind_address).filter(|ip| !ip.is_unspecified())?,
    };
    Some(std::net::SocketAddr::new(ip, args.secure_port))
}

fn cert_source(args: &Args) -> Source {
    if let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_private_key_file) {
        return Source::Files { cert: cert.clone(), key: key.clone() };
    }
    if !args.self_managed_certs {
        return Source::Generated;
    }
    let service = format!("hns-apiserver.{}.svc", args.namespace);
    let mut names = vec![service.clone(), format!("{service}.cluster.local")];
    names.extend(args.cert_names.iter().cloned());
    Source::SelfManaged(SelfManaged {
        namespace: args.namespace.clone(),
        secret: args.cert_secret_name.clone(),
        names,
        apiservice: args.apiservice_name.clone(),
        webhook: args.webhook_name.clone(),
    })
}

/// Starts the caches and serves until SIGTERM or SIGINT, then drains (see [`crate::shutdown`]).
pub async fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = Arc::new(Shutdown::default());
    shutdown.listen();
    let client = client(&args).await?;
    let serving = ServingCert::empty();
    tokio::spawn(certs::run(client.clone(), cert_source(&args), serving.clone()));
    let tls = tls::acceptor(serving.clone())?;
    let excluded = if args.excluded_namespaces.is_empty() {
        DEFAULT_EXCLUDED.iter().map(|s| s.to_string()).collect()
    } else {
        args.excluded_namespaces.clone()
    };
    let unpropagated =
        |flag: &str, keys: &[String]| KeyList::new(keys).map_err(|e| anyhow::anyhow!("--{flag}: {e}"));
    let policy = Policy::new(&excluded, &args.managed_labels, &args.managed_annotations, &args.hns_identity)
        .map_err(|e| anyhow::anyhow!("--managed-namespace-label/--managed-namespace-annotation: {e}"))?
        .with_included(&args.included_namespace_regex)
        .map_err(|e| anyhow::anyhow!("--included-namespace-regex: {e}"))?
        .with_lone_namespace_labels(args.label_lone_namespaces)
        .with_unpropagated(
            unpropagated("unpropagated-label", &args.unpropagated_labels)?,
            unpropagated("unpropagated-annotation", &args.unpropagated_annotations)?,
        )
        .with_no_propagation_labels(
            args.no_propagation_labels
                .iter()
                .filter(|l| !l.is_empty())
                .map(|l| label_pair(l))
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow::anyhow!("--nopropagation-label: {e}"))?,
        );
    // The key comes before the forest: no replica judges hierarchy state without it.
    // Waits for the key as long as it takes, so a stop asked for meanwhile ends the wait.
    let sealer = tokio::select! {
        sealer = crate::store::seal_key::load(client.clone(), &args.namespace) => sealer,
        () = shutdown.told() => {
            tracing::info!("told to stop while starting");
            return Ok(());
        }
    };
    let cache = Arc::new(Cache::new(policy.clone(), sealer));
    let authn_state = Arc::new(AuthnState::default());
    tokio::spawn(cache::run(client.clone(), cache.clone()));
    tokio::spawn(crate::store::quota_usage::run(client.clone(), cache.clone()));
    tokio::spawn(authn::watch_config(client.clone(), authn_state.clone()));
    let rbac = Arc::new(RbacCache::default());
    if args.view_authorization != crate::auth::view::Mode::Review {
        tokio::spawn(rbac_cache::run(client.clone(), rbac.clone()));
    }
    let config = Arc::new(ConfigStore::default());
    tokio::spawn(config_store::run(client.clone(), args.namespace.clone(), config.clone(), cache.clone()));
    let identity = format!(
        "{}_{}",
        std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "hns-apiserver".into()),
        std::process::id()
    );
    let pod = peers::Me::from_env();
    let candidate =
        leader::Candidate { identity: identity.clone(), address: reachable_at(&args, pod.as_ref()) };
    let leading = leader::run(client.clone(), &args.namespace, LEASE, candidate);
    if let Some(me) = pod.filter(|_| !args.peer_selector.is_empty()) {
        tokio::spawn(peers::run(client.clone(), me, args.peer_selector.clone(), args.secure_port));
    }
    let propagation = Arc::new(Propagation::new(client.clone(), cache.changes.clone()));
    let metrics = Arc::new(Metrics::default());
    let ledgers = Arc::new(LedgerStore::new(client.clone(), &args.namespace));
    tokio::spawn(ledgers.clone().run());
    let sources = Arc::new(Sources {
        cache: cache.clone(),
        policy: policy.clone(),
        propagation: propagation.clone(),
        metrics: metrics.clone(),
        serving: serving.clone(),
        ledgers: ledgers.clone(),
    });
    if !args.metrics_bind_address.is_empty() {
        let addr: SocketAddr = args
            .metrics_bind_address
            .parse()
            .map_err(|e| anyhow::anyhow!("--metrics-bind-address {}: {e}", args.metrics_bind_address))?;
        let sources = sources.clone();
        tokio::spawn(async move {
            if let Err(error) = metrics::serve(addr, sources).await {
                tracing::error!(%error, %addr, "metrics endpoint failed");
            }
        });
    }
    tokio::spawn(follow_config(propagation.clone(), config.spec.subscribe()));
    tokio::spawn(crate::admission::sources::keep_rules(
        client.clone(),
        args.webhook_name.clone(),
        config.clone(),
    ));
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
    tokio::spawn(controller.run(leading.clone()));
    let reconciler =
        Arc::new(LedgerReconciler { cache: cache.clone(), store: ledgers.clone(), client: client.clone() });
    tokio::spawn(reconciler.run(leading.clone()));
    let label_policy = LabelPolicy {
        client: client.clone(),
        policy: policy.clone(),
        webhook: args.webhook_name.clone(),
        reserved: cache.reserved_names(),
    };
    tokio::spawn(label_policy.run(leading));
    let (release_client, release_identity) = (client.clone(), identity.clone());
    let parent_lock = Arc::new(ParentLock::new(client.clone(), &args.namespace, identity.clone()));
    let authz = Authorizer::new(client.clone());
    let state = web::Data::new(AppState {
        cache,
        authn: authn_state,
        authz: authz.clone(),
        views: Views::new(rbac, authz, args.view_authorization),
        policy,
        writer: Writer::new(client.clone()),
        config,
        client,
        namespace: args.namespace.clone(),
        serving,
        propagation,
        parent_lock,
        ledgers,
        shutdown: shutdown.clone(),
    });

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let sources = web::Data::new(sources);
    let mut http = HttpServer::new(move || {
        server::app(state.clone()).app_data(sources.clone()).service(server::only(
            web::get(),
            "/metrics",
            metrics::secure,
        ))
    })
    .on_connect(tls::record_peer_certificates)
    // kube-apiserver keeps idle connections to us for up to 90 s (Go's IdleConnTimeout) and
    // does not retry a webhook POST on a connection we closed under it ("EOF"); so the
    // client, not us, must be the one to close idle connections.
    .keep_alive(std::time::Duration::from_secs(KEEP_ALIVE_SECONDS))
    // SIGTERM drains first (crate::shutdown), then stops the server; requests in flight then
    // get this long.
    .disable_signals()
    .shutdown_timeout(10);
    if args.workers > 0 {
        http = http.workers(args.workers);
    }
    let http = http.bind_openssl(addr, tls).map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "serving");
    let server = http.run();
    let handle = server.handle();
    let delay = args.shutdown_delay_duration;
    tokio::spawn(async move { shutdown.on_signal(delay, handle).await });
    server.await?;
    leader::release(release_client, &args.namespace, LEASE, &release_identity).await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts and stops propagation syncers as the HNCConfiguration changes, and looks the
/// configured kinds up again when one may have come or gone ([`Propagation::relook`]).
async fn follow_config(
    propagation: Arc<Propagation>,
    mut spec: tokio::sync::watch::Receiver<hns_api::HNCConfigurationSpec>,
) {
    loop {
        let current = spec.borrow_and_update().clone();
        propagation.configure(&current).await;
        tokio::select! {
            changed = spec.changed() => if changed.is_err() { return },
            _ = propagation.relook() => {}
        }
    }
}
