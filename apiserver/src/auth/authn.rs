//! Authentication, as k8s.io/apiserver does it for an aggregated API server.
//!
//! kube-apiserver authenticates the real client and forwards the request with its front-proxy
//! client certificate and the identity in `X-Remote-User` / `X-Remote-Group` /
//! `X-Remote-Extra-*` headers. Those headers are trusted **only** on a connection whose client
//! certificate chains to the request-header CA and whose CN is allowed; on any other connection
//! they are ignored. A client certificate signed by the cluster's client CA authenticates as its
//! CN (user) and O (groups). Everything else is anonymous, and anonymous requests are refused.
//!
//! The CAs and header names come from ConfigMap `kube-system/extension-apiserver-authentication`,
//! which kube-apiserver keeps current; [`watch_config`] follows it so a rotated front-proxy CA
//! takes effect without a restart.
//!
//! Checking a chain against a CA is most of what authenticating a request costs (a signature
//! verification, twice per request: once to tell a cluster peer from a stranger, once to
//! authenticate), and kube-apiserver sends every request over a few long-lived connections with
//! the same certificate. So each configuration remembers, for [`VERDICT_TTL`], which CAs a chain
//! (named by the digest of its certificates) verified against. A rotated CA is a new
//! configuration with nothing remembered; a certificate that expires is honoured at most that
//! long after, as kube-apiserver's own authentication and authorization caches do.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actix_web::http::header::HeaderMap;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use openssl::nid::Nid;
use openssl::stack::Stack;
use openssl::x509::store::{X509Store, X509StoreBuilder};
use openssl::x509::{X509PurposeId, X509StoreContext, X509};

/// Namespace of the authentication ConfigMap.
pub const CONFIG_NAMESPACE: &str = "kube-system";
/// Name of the authentication ConfigMap.
pub const CONFIG_NAME: &str = "extension-apiserver-authentication";

/// Group every authenticated user belongs to.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// User name.
    pub user: String,
    /// Groups, including `system:authenticated`.
    pub groups: Vec<String>,
    /// Extra attributes (e.g. scopes), keys lower-case.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Identity {
    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// How long a configuration remembers which CAs a peer's chain verified against.
const VERDICT_TTL: Duration = Duration::from_secs(10);

/// Chains whose verdicts a configuration remembers at most: kube-apiserver's front-proxy and
/// webhook certificates and a few clients with certificates of their own.
const VERDICTS: u64 = 1_024;

/// The client certificates a TLS peer presented, leaf first, and the SHA-256 digest of their DER
/// encodings, which names the chain among remembered verdicts. Stored per connection.
#[derive(Clone)]
pub struct PeerCertificates {
    chain: Vec<X509>,
    digest: Option<[u8; 32]>,
}

impl PeerCertificates {
    /// The chain a peer presented, leaf first.
    pub fn new(chain: Vec<X509>) -> Self {
        let digest = (!chain.is_empty())
            .then(|| {
                let mut hasher = openssl::sha::Sha256::new();
                for cert in &chain {
                    let der = cert.to_der().ok()?;
                    // Length-prefixed, so that no two chains share an encoding.
                    hasher.update(&(der.len() as u64).to_be_bytes());
                    hasher.update(&der);
                }
                Some(hasher.finish())
            })
            .flatten();
        PeerCertificates { chain, digest }
    }
}

/// Which CAs a chain verified against.
#[derive(Debug, Clone, Copy)]
struct Trust {
    /// The request-header (front-proxy) CA.
    proxy: bool,
    /// The cluster's client CA.
    client: bool,
}

/// Errors reading the authentication configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A CA bundle could not be parsed.
    #[error("key {key}: not a PEM certificate bundle: {source}")]
    BadCa {
        /// The ConfigMap key.
        key: &'static str,
        /// The parse error.
        #[source]
        source: openssl::error::ErrorStack,
    },
    /// A CA bundle held no certificate.
    #[error("key {key}: no PEM certificate found")]
    EmptyCa {
        /// The ConfigMap key.
        key: &'static str,
    },
    /// A list value was not a JSON array of strings.
    #[error("key {key}: expected a JSON array of strings: {source}")]
    BadList {
        /// The ConfigMap key.
        key: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// How to trust the front proxy (kube-apiserver's aggregator).
pub struct RequestHeaderConfig {
    ca: X509Store,
    /// Allowed CNs of the proxy's certificate; empty means any CN signed by the CA.
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_prefixes: Vec<String>,
}

/// The whole authentication configuration.
pub struct AuthnConfig {
    request_header: Option<RequestHeaderConfig>,
    client_ca: Option<X509Store>,
    /// Which CAs recent chains verified against, by the chains' digests.
    verdicts: moka::sync::Cache<[u8; 32], Trust>,
}

impl Default for AuthnConfig {
    fn default() -> Self {
        AuthnConfig { request_header: None, client_ca: None, verdicts: verdicts() }
    }
}

fn verdicts() -> moka::sync::Cache<[u8; 32], Trust> {
    moka::sync::Cache::builder().max_capacity(VERDICTS).time_to_live(VERDICT_TTL).build()
}

impl AuthnConfig {
    /// Reads the keys kube-apiserver writes into `extension-apiserver-authentication`.
    pub fn from_configmap_data(data: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let list = |key: &'static str| -> Result<Vec<String>, ConfigError> {
            match data.get(key) {
                None => Ok(Vec::new()),
                Some(s) if s.trim().is_empty() => Ok(Vec::new()),
                Some(s) => serde_json::from_str(s).map_err(|source| ConfigError::BadList { key, source }),
            }
        };
        let request_header = match data.get("requestheader-client-ca-file") {
            Some(pem) if !pem.trim().is_empty() => Some(RequestHeaderConfig {
                ca: ca_store("requestheader-client-ca-file", pem)?,
                allowed_names: list("requestheader-allowed-names")?,
                username_headers: lower(list("requestheader-username-headers")?),
                group_headers: lower(list("requestheader-group-headers")?),
                extra_prefixes: lower(list("requestheader-extra-headers-prefix")?),
            }),
            _ => None,
        };
        let client_ca = match data.get("client-ca-file") {
            Some(pem) if !pem.trim().is_empty() => Some(ca_store("client-ca-file", pem)?),
            _ => None,
        };
        Ok(AuthnConfig { request_header, client_ca, verdicts: verdicts() })
    }

    /// Which CAs the peer's chain verifies against, remembered for [`VERDICT_TTL`].
    fn trust(&self, peer: &PeerCertificates) -> Trust {
        let check = || Trust {
            proxy: self.request_header.as_ref().is_some_and(|rh| verify_chain(&rh.ca, &peer.chain)),
            client: self.client_ca.as_ref().is_some_and(|ca| verify_chain(ca, &peer.chain)),
        };
        match peer.digest {
            Some(digest) => self.verdicts.get_with(digest, check),
            None => check(),
        }
    }

    /// Whether the peer presented a certificate of the cluster's: the front proxy's (an allowed
    /// CN) or a client certificate. kube-apiserver presents one to webhooks only when its
    /// admission configuration names one, so webhook answers use this to decide how much to say.
    pub fn is_cluster_peer(&self, peer: Option<&PeerCertificates>) -> bool {
        let Some(peer) = peer.filter(|p| !p.chain.is_empty()) else { return false };
        let trust = self.trust(peer);
        let proxy = trust.proxy && self.request_header.as_ref().is_some_and(|rh| rh.allows(&peer.chain[0]));
        proxy || trust.client
    }

    /// The identity of a request, or `None` when nothing trustworthy came with it.
    pub fn authenticate(&self, peer: Option<&PeerCertificates>, headers: &HeaderMap) -> Option<Identity> {
        let peer = peer.filter(|p| !p.chain.is_empty())?;
        let trust = self.trust(peer);
        // The front proxy first, as k8s.io/apiserver orders it: a proxy certificate must never
        // be taken for a user of its own.
        if let Some(rh) = self.request_header.as_ref().filter(|_| trust.proxy) {
            if !rh.allows(&peer.chain[0]) {
                return None;
            }
            return rh.identity_from_headers(headers);
        }
        if !trust.client {
            return None;
        }
        let leaf = &peer.chain[0];
        let user = common_name(leaf).filter(|u| !u.is_empty())?;
        let mut groups = names(leaf, Nid::ORGANIZATIONNAME);
        groups.push(AUTHENTICATED_GROUP.to_string());
        Some(Identity { user, groups, extra: BTreeMap::new() })
    }
}

impl RequestHeaderConfig {
    /// Whether `leaf`, a certificate of the request-header CA, is the front proxy's: its CN is
    /// allowed.
    fn allows(&self, leaf: &X509) -> bool {
        self.allowed_names.is_empty() || self.allowed_names.contains(&common_name(leaf).unwrap_or_default())
    }

    fn identity_from_headers(&self, headers: &HeaderMap) -> Option<Identity> {
        let user = self
            .username_headers
            .iter()
            .find_map(|h| headers.get(h.as_str()).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()))?
            .to_string();
        let mut groups: Vec<String> = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect();
        if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            groups.push(AUTHENTICATED_GROUP.to_string());
        }
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers.iter() {
            let name = name.as_str(); // header names are lower-case here
            let Some(key) = self.extra_prefixes.iter().find_map(|p| name.strip_prefix(p.as_str())) else {
                continue;
            };
            // The proxy escapes extra keys (headerKeyEscape); undo it.
            let key = percent_encoding::percent_decode_str(key).decode_utf8_lossy().to_lowercase();
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
        Some(Identity { user, groups, extra })
    }
}

fn lower(v: Vec<String>) -> Vec<String> {
    v.into_iter().map(|s| s.to_ascii_lowercase()).collect()
}

fn ca_store(key: &'static str, pem: &str) -> Result<X509Store, ConfigError> {
    let bad = |source| ConfigError::BadCa { key, source };
    let certs = X509::stack_from_pem(pem.as_bytes()).map_err(bad)?;
    if certs.is_empty() {
        return Err(ConfigError::EmptyCa { key });
    }
    let mut b = X509StoreBuilder::new().map_err(bad)?;
    for c in certs {
        b.add_cert(c).map_err(bad)?;
    }
    // Only certificates usable for TLS client authentication count.
    b.set_purpose(X509PurposeId::SSL_CLIENT).map_err(bad)?;
    Ok(b.build())
}

fn verify_chain(store: &X509Store, chain: &[X509]) -> bool {
    let Some((leaf, intermediates)) = chain.split_first() else {
        return false;
    };
    let verify = || -> Result<bool, openssl::error::ErrorStack> {
        let mut stack = Stack::new()?;
        for c in intermediates {
            stack.push(c.clone())?;
        }
        let mut ctx = X509StoreContext::new()?;
        ctx.init(store, leaf, &stack, |c| c.verify_cert())
    };
    verify().unwrap_or(false)
}

fn names(cert: &X509, nid: Nid) -> Vec<String> {
    cert.subject_name().entries_by_nid(nid).filter_map(|e| e.data().to_string().ok()).collect()
}

fn common_name(cert: &X509) -> Option<String> {
    names(cert, Nid::COMMONNAME).into_iter().next()
}

/// The current configuration, shared by request handlers and replaced by [`watch_config`].
#[derive(Default)]
pub struct AuthnState(RwLock<Option<Arc<AuthnConfig>>>);

impl AuthnState {
    /// The configuration, once it has been read.
    pub fn current(&self) -> Option<Arc<AuthnConfig>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Installs a new configuration.
    pub fn set(&self, config: AuthnConfig) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(config));
    }

    /// Whether a configuration has been read (a readiness check).
    pub fn is_loaded(&self) -> bool {
        self.current().is_some()
    }
}

/// Follows the authentication ConfigMap until the stream ends (it does not, short of shutdown).
/// A malformed update is logged and the previous configuration stays in force.
pub async fn watch_config(client: Client, state: Arc<AuthnState>) {
    let api: Api<ConfigMap> = Api::namespaced(client, CONFIG_NAMESPACE);
    let cfg = crate::watching::config().fields(&format!("metadata.name={CONFIG_NAME}"));
    let mut stream = watcher(api, cfg).default_backoff().applied_objects().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(cm)) => match AuthnConfig::from_configmap_data(&cm.data.unwrap_or_default()) {
                Ok(config) => {
                    tracing::info!(configmap = CONFIG_NAME, "loaded authentication configuration");
                    state.set(config);
                }
                Err(error) => {
                    tracing::error!(%error, configmap = CONFIG_NAME, "ignoring bad authentication configuration")
                }
            },
            Ok(None) => return,
            Err(error) => tracing::warn!(%error, configmap = CONFIG_NAME, "watch failed; retrying"),
        }
    }
}

/// Whether the request came with a certificate of the cluster's (the front proxy's or a client
/// certificate), as the server's connection filter found ([`AuthnConfig::is_cluster_peer`]); left
/// in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct ClusterPeer(pub bool);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::pki::testing::{ca, leaf};
    use actix_web::http::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    struct Fixture {
        config: AuthnConfig,
        proxy: PeerCertificates,
        other_proxy: PeerCertificates,
        admin: PeerCertificates,
        stranger: PeerCertificates,
    }

    fn fixture() -> Fixture {
        let (front_ca, front_key) = ca("front-proxy-ca");
        let (client_ca, client_key) = ca("client-ca");
        let (rogue_ca, rogue_key) = ca("rogue-ca");
        let data = BTreeMap::from([
            ("client-ca-file".to_string(), String::from_utf8(client_ca.to_pem().unwrap()).unwrap()),
            (
                "requestheader-client-ca-file".to_string(),
                String::from_utf8(front_ca.to_pem().unwrap()).unwrap(),
            ),
            ("requestheader-allowed-names".to_string(), r#"["front-proxy-client"]"#.to_string()),
            ("requestheader-username-headers".to_string(), r#"["X-Remote-User"]"#.to_string()),
            ("requestheader-group-headers".to_string(), r#"["X-Remote-Group"]"#.to_string()),
            ("requestheader-extra-headers-prefix".to_string(), r#"["X-Remote-Extra-"]"#.to_string()),
        ]);
        Fixture {
            config: AuthnConfig::from_configmap_data(&data).unwrap(),
            proxy: PeerCertificates::new(vec![leaf(&front_ca, &front_key, "front-proxy-client", &[])]),
            other_proxy: PeerCertificates::new(vec![leaf(&front_ca, &front_key, "someone-else", &[])]),
            admin: PeerCertificates::new(vec![leaf(&client_ca, &client_key, "admin", &["system:masters"])]),
            stranger: PeerCertificates::new(vec![leaf(&rogue_ca, &rogue_key, "front-proxy-client", &[])]),
        }
    }

    const FORGED: &[(&str, &str)] = &[("X-Remote-User", "alice"), ("X-Remote-Group", "team-a")];

    #[test]
    fn trusts_headers_from_the_front_proxy() {
        let f = fixture();
        let h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "team-a"),
            ("X-Remote-Group", "dev"),
            ("X-Remote-Extra-Scopes", "read"),
            ("X-Remote-Extra-Acme.com%2fProject", "p1"),
        ]);
        let id = f.config.authenticate(Some(&f.proxy), &h).unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, ["team-a", "dev", AUTHENTICATED_GROUP]);
        assert_eq!(id.extra["scopes"], ["read"]);
        assert_eq!(id.extra["acme.com/project"], ["p1"]);
    }

    #[test]
    fn ignores_headers_without_a_trusted_proxy_certificate() {
        let f = fixture();
        assert_eq!(f.config.authenticate(None, &headers(FORGED)), None, "no certificate");
        assert_eq!(f.config.authenticate(Some(&f.stranger), &headers(FORGED)), None, "another CA");
        assert_eq!(f.config.authenticate(Some(&f.other_proxy), &headers(FORGED)), None, "CN not allowed");
    }

    #[test]
    fn a_remembered_verdict_is_its_chains_not_its_names() {
        let f = fixture();
        for _ in 0..2 {
            assert!(f.config.authenticate(Some(&f.proxy), &headers(FORGED)).is_some());
            assert!(f.config.is_cluster_peer(Some(&f.proxy)));
            // Another CA's certificate with the proxy's CN, after the proxy's was remembered.
            assert_eq!(f.config.authenticate(Some(&f.stranger), &headers(FORGED)), None);
            assert!(!f.config.is_cluster_peer(Some(&f.stranger)));
        }
    }

    #[test]
    fn proxy_without_user_header_is_anonymous() {
        let f = fixture();
        assert_eq!(f.config.authenticate(Some(&f.proxy), &headers(&[])), None);
    }

    #[test]
    fn client_certificate_authenticates_as_cn_and_o_ignoring_headers() {
        let f = fixture();
        let id = f.config.authenticate(Some(&f.admin), &headers(FORGED)).unwrap();
        assert_eq!(id.user, "admin");
        assert_eq!(id.groups, ["system:masters", AUTHENTICATED_GROUP]);
    }

    #[test]
    fn empty_allowed_names_accepts_any_cn_from_the_proxy_ca() {
        let f = fixture();
        let mut config = f.config;
        config.request_header.as_mut().unwrap().allowed_names.clear();
        assert!(config.authenticate(Some(&f.other_proxy), &headers(FORGED)).is_some());
    }

    #[test]
    fn malformed_configuration_is_an_error() {
        let data = BTreeMap::from([("requestheader-client-ca-file".to_string(), "not pem".to_string())]);
        assert!(AuthnConfig::from_configmap_data(&data).is_err());
        let data =
            BTreeMap::from([("requestheader-allowed-names".to_string(), "front-proxy-client".to_string())]);
        assert!(AuthnConfig::from_configmap_data(&data).is_ok(), "lists are read only with a CA");
    }
}
