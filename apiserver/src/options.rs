//! Command-line flags of `hns-apiserver`, in Kubernetes style. What they start is [`crate::app`].

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::hierarchy::policy::{
    DEFAULT_NO_PROPAGATION_LABELS, DEFAULT_UNPROPAGATED_ANNOTATIONS, DEFAULT_UNPROPAGATED_LABELS,
};

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
    /// `hns-apiserver.<namespace>.svc` is always included.
    #[arg(long = "cert-dns-name", value_name = "NAME")]
    pub cert_names: Vec<String>,

    /// APIService whose caBundle hns keeps current with self-managed certificates.
    #[arg(long, default_value = "v1alpha2.hnc.x-k8s.io")]
    pub apiservice_name: String,

    /// Name of the webhook configurations (validating and mutating) whose caBundles hns keeps
    /// current.
    #[arg(long, default_value = "hns")]
    pub webhook_name: String,

    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Namespaces that never take part in a hierarchy (repeatable; replaces the default list:
    /// kube-system, kube-public, kube-node-lease, hns-system).
    #[arg(long = "excluded-namespace", value_name = "NS")]
    pub excluded_namespaces: Vec<String>,

    /// Only namespaces whose whole name matches this regular expression take part in
    /// hierarchies (HNC's flag of that name); the others are treated as excluded. Every
    /// namespace by default.
    #[arg(long, value_name = "REGEX", default_value = ".*")]
    pub included_namespace_regex: String,

    /// Whether a namespace outside every hierarchy carries its own tree label
    /// (`<ns>.tree.hnc.x-k8s.io/depth: "0"`) and `hnc.x-k8s.io/included-namespace`, as under
    /// HNC. Setting them costs kube-apiserver about 0.6 ms of CPU per namespace created;
    /// `--label-lone-namespaces=false` leaves lone namespaces untouched (namespaces labelled
    /// before lose the labels once), for clusters that create many namespaces and select none
    /// of the lone ones by these labels. Install with the component
    /// config/components/unlabelled-lone-namespaces, which also keeps kube-apiserver from
    /// calling hns for them.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub label_lone_namespaces: bool,

    /// Regular expression (matching a whole key) of labels that may be managed through the
    /// hierarchy with spec.labels (repeatable). None by default, as in HNC.
    #[arg(long = "managed-namespace-label", value_name = "REGEX")]
    pub managed_labels: Vec<String>,

    /// Regular expression of annotations that may be managed with spec.annotations (repeatable).
    #[arg(long = "managed-namespace-annotation", value_name = "REGEX")]
    pub managed_annotations: Vec<String>,

    /// A label key propagated copies leave out (repeatable; an entry ending in `*` is a
    /// prefix). HNC's flag of that name. Replaces the default list, the labels by which GitOps
    /// tools claim objects: app.kubernetes.io/instance (Argo CD), kustomize.toolkit.fluxcd.io/*
    /// and helm.toolkit.fluxcd.io/* (Flux); `--unpropagated-label=` alone copies every label.
    #[arg(long = "unpropagated-label", value_name = "KEY", default_values = DEFAULT_UNPROPAGATED_LABELS)]
    pub unpropagated_labels: Vec<String>,

    /// An annotation key propagated copies leave out (repeatable; `*` at the end for a prefix).
    /// HNC's flag of that name. Replaces the default list: argocd.argoproj.io/tracking-id (Argo
    /// CD). kubectl's last-applied-configuration is never copied.
    #[arg(long = "unpropagated-annotation", value_name = "KEY", default_values = DEFAULT_UNPROPAGATED_ANNOTATIONS)]
    pub unpropagated_annotations: Vec<String>,

    /// A label (`key=value`) whose objects never propagate (repeatable). HNC's flag of that
    /// name. Replaces the default, HNC's: cattle.io/creator=norman (Rancher's own objects);
    /// `--nopropagation-label=` alone leaves none.
    #[arg(long = "nopropagation-label", value_name = "KEY=VALUE", default_values = DEFAULT_NO_PROPAGATION_LABELS)]
    pub no_propagation_labels: Vec<String>,

    /// The user hns-apiserver authenticates as; only it may write hns's labels and annotations
    /// on namespaces.
    #[arg(long, default_value = "system:serviceaccount:hns-system:hns-apiserver")]
    pub hns_identity: String,

    /// Address of an extra plain-HTTP `/metrics` endpoint without authentication, for local
    /// debugging (e.g. 127.0.0.1:8080); empty (the default) disables it. The secure port serves
    /// `/metrics` to clients allowed `get` on that non-resource URL.
    #[arg(long, default_value = "")]
    pub metrics_bind_address: String,

    /// How a user who may not list hns's resources across all namespaces is shown those they
    /// may get (docs/access.md): `rbac` evaluates the cluster's RBAC objects, exact where RBAC
    /// is the authorizer that grants; `rbac-then-review` also asks a SubjectAccessReview for
    /// each namespace RBAC does not grant (authorizer webhooks that allow); `review` asks one
    /// for every namespace (any authorizer chain; a few hundred namespaces at most).
    #[arg(long, env = "HNS_VIEW_AUTHORIZATION", value_enum, default_value = "rbac")]
    pub view_authorization: crate::auth::view::Mode,

    /// HTTP worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,

    /// How long to keep serving after SIGTERM, not ready, before refusing connections: long
    /// enough for this replica's endpoint to leave its Service's EndpointSlices and for
    /// kube-apiserver and kube-proxy to stop sending to it (see shutdown.rs). As
    /// kube-apiserver's flag of the same name. The pod's terminationGracePeriodSeconds must
    /// exceed it by the time requests in flight take (10 s).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub shutdown_delay_duration: std::time::Duration,

    /// The labels of hns's pods (in its namespace): replicas that run in pods connect to each
    /// other and take a peer whose node was lost out of service (see replicas/peers.rs). Empty:
    /// off.
    #[arg(long, default_value = "app.kubernetes.io/name=hns-apiserver")]
    pub peer_selector: String,
}

/// A duration as Kubernetes flags write them (`15s`, `1m30s`, `500ms`).
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let parsed: jiff::SignedDuration =
        text.parse().map_err(|e| format!("{text:?} is not a duration such as 15s or 1m30s: {e}"))?;
    std::time::Duration::try_from(parsed).map_err(|_| format!("{text:?}: a duration may not be negative"))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_kubernetes_flags_write_them() {
        assert_eq!(parse_duration("15s"), Ok(std::time::Duration::from_secs(15)));
        assert_eq!(parse_duration("1m30s"), Ok(std::time::Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(std::time::Duration::from_millis(500)));
        assert!(parse_duration("soon").is_err() && parse_duration("-1s").is_err());
    }
}
