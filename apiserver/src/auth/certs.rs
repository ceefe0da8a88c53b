//! Serving certificates that can change while serving, from files or managed by hns itself.
//!
//! - **Files** (`--tls-cert-file`, e.g. mounted from a cert-manager Secret): re-read when they
//!   change, so a renewal needs no restart.
//! - **Self-managed** (`--self-managed-certs`): hns keeps a CA and a serving certificate in a
//!   Secret, renews them before they expire, and keeps the `caBundle` of its APIService and
//!   webhook configurations (validating and mutating) equal to that CA. It watches the four
//!   objects, so it asks kube-apiserver nothing while none of them changes. Every replica converges
//!   on the same Secret: writes are guarded by resourceVersion, and the loser of a race simply
//!   reads the winner's certificate.
//!
//! The TLS listener asks [`ServingCert`] for the current certificate on every handshake.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use openssl::asn1::Asn1Time;
use openssl::pkey::PKey;
use openssl::ssl::{SslAcceptor, SslContext, SslMethod};
use openssl::x509::X509;
use serde_json::json;

use crate::auth::pki;

/// How long before expiry a certificate is renewed.
const RENEW_BEFORE_DAYS: u32 = 30;
/// How often the certificate files are checked; how soon a failed check of the Secret and the
/// caBundles is tried again (at least as long between two looks when nothing fails).
const CHECK_EVERY: Duration = Duration::from_secs(30);
/// How long a burst of changes (hns's own writes among them) is left to settle.
const SETTLE: Duration = Duration::from_millis(500);

/// The certificate served now; replaced in place on renewal.
pub struct ServingCert {
    current: RwLock<Option<SslContext>>,
    /// When the served certificate (the leaf) expires, in seconds since the Unix epoch; 0 before
    /// one is served. For the metric an alert on a near expiry reads.
    not_after: AtomicI64,
}

impl ServingCert {
    /// No certificate yet; handshakes fail until one is set.
    pub fn empty() -> Arc<Self> {
        Arc::new(ServingCert { current: RwLock::new(None), not_after: AtomicI64::new(0) })
    }

    /// Serves `chain_pem` (leaf first) with `key_pem` from the next handshake on.
    pub fn set(&self, chain_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<()> {
        let chain = X509::stack_from_pem(chain_pem)?;
        let (leaf, rest) =
            chain.split_first().ok_or_else(|| anyhow::anyhow!("no certificate in the PEM data"))?;
        let key = PKey::private_key_from_pem(key_pem)?;
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
        crate::auth::tls_settings::configure(&mut b)?;
        b.set_certificate(leaf)?;
        for c in rest {
            b.add_extra_chain_cert(c.clone())?;
        }
        b.set_private_key(&key)?;
        b.check_private_key().map_err(|e| anyhow::anyhow!("the key does not match the certificate: {e}"))?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(b.build().into_context());
        self.not_after.store(unix_seconds(leaf.not_after())?, Ordering::Relaxed);
        Ok(())
    }

    /// When the served certificate expires (seconds since the Unix epoch); 0 before one is served.
    pub fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Relaxed)
    }

    /// The current certificate's context, if any.
    pub fn context(&self) -> Option<SslContext> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether a certificate is being served (a readiness check).
    pub fn is_loaded(&self) -> bool {
        self.context().is_some()
    }
}

/// `time` in seconds since the Unix epoch.
fn unix_seconds(time: &openssl::asn1::Asn1TimeRef) -> anyhow::Result<i64> {
    let diff = Asn1Time::from_unix(0)?.diff(time)?;
    Ok(i64::from(diff.days) * 86_400 + i64::from(diff.secs))
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// PEM files, re-read when they change.
    Files {
        /// Certificate chain.
        cert: PathBuf,
        /// Private key.
        key: PathBuf,
    },
    /// Managed by hns in a Secret.
    SelfManaged(SelfManaged),
    /// Generated once at start, self-signed (development only).
    Generated,
}

/// Settings of self-managed certificates.
#[derive(Debug, Clone)]
pub struct SelfManaged {
    /// Namespace of the Secret (hns's own).
    pub namespace: String,
    /// Name of the Secret.
    pub secret: String,
    /// DNS names and IP addresses the serving certificate is for.
    pub names: Vec<String>,
    /// APIService whose caBundle to keep current.
    pub apiservice: String,
    /// Name of the webhook configurations (validating and mutating) whose caBundles to keep
    /// current.
    pub webhook: String,
}

/// Keeps `serving` current from `source` until shutdown.
pub async fn run(client: Client, source: Source, serving: Arc<ServingCert>) {
    match source {
        Source::Files { cert, key } => watch_files(cert, key, serving).await,
        Source::SelfManaged(cfg) => self_managed(client, cfg, serving).await,
        Source::Generated => {
            let names = ["hns-apiserver.hns-system.svc", "localhost"];
            tracing::warn!(?names, "no certificate configured; serving a generated self-signed one");
            let loaded = pki::self_signed_serving("hns-apiserver", &names)
                .map_err(anyhow::Error::from)
                .and_then(|kp| serving.set(&kp.cert.to_pem()?, &kp.key.private_key_to_pem_pkcs8()?));
            if let Err(error) = loaded {
                tracing::error!(%error, "cannot generate a serving certificate");
            }
        }
    }
}

async fn watch_files(cert: PathBuf, key: PathBuf, serving: Arc<ServingCert>) {
    let mut seen: Option<(Vec<u8>, Vec<u8>)> = None;
    loop {
        match (std::fs::read(&cert), std::fs::read(&key)) {
            (Ok(c), Ok(k)) if seen.as_ref() != Some(&(c.clone(), k.clone())) => match serving.set(&c, &k) {
                Ok(()) => {
                    tracing::info!(cert = %cert.display(), "serving certificate loaded");
                    seen = Some((c, k));
                }
                Err(error) => {
                    tracing::error!(%error, cert = %cert.display(), "cannot load the serving certificate")
                }
            },
            (Err(error), _) | (_, Err(error)) => {
                tracing::error!(%error, cert = %cert.display(), key = %key.display(), "cannot read the serving certificate")
            }
            _ => {}
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}

async fn self_managed(client: Client, cfg: SelfManaged, serving: Arc<ServingCert>) {
    let mut served: Option<BTreeMap<String, ByteString>> = None;
    let mut changes = changes(&client, &cfg);
    loop {
        let mut next_look = CHECK_EVERY;
        match ensure_secret(&client, &cfg).await {
            Ok(data) => {
                if served.as_ref() != Some(&data) {
                    match serving.set(&data["tls.crt"].0, &data["tls.key"].0) {
                        Ok(()) => {
                            tracing::info!(secret = %cfg.secret, "serving certificate loaded");
                            served = Some(data.clone());
                        }
                        Err(error) => {
                            tracing::error!(%error, secret = %cfg.secret, "cannot load the serving certificate")
                        }
                    }
                }
                match inject_ca(&client, &cfg, &data["ca.crt"].0).await {
                    Ok(()) => next_look = renewal_due_in(&data),
                    Err(error) => tracing::warn!(%error, "cannot update caBundle; retrying"),
                }
            }
            Err(error) => {
                tracing::warn!(%error, secret = %cfg.secret, "cannot read or write the certificate Secret; retrying")
            }
        }
        // Quiet until one of the objects changes (someone re-applied the APIService without its
        // caBundle, deleted the Secret...), a renewal is due, or, after a failure, CHECK_EVERY.
        tokio::select! {
            _ = changes.next() => {}
            _ = tokio::time::sleep(next_look) => {}
        }
        tokio::time::sleep(SETTLE).await;
        while changes.next().now_or_never().flatten().is_some() {}
    }
}

/// Something happened to the Secret, the APIService or a webhook configuration: their watches,
/// by name, merged.
fn changes(client: &Client, cfg: &SelfManaged) -> BoxStream<'static, ()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
    let (group, hooks) = ("admissionregistration.k8s.io", &cfg.webhook);
    futures::stream::select_all([
        crate::watching::by_name(secrets, &cfg.secret),
        crate::watching::by_name(
            dynamic_api(client, "apiregistration.k8s.io", "APIService", "apiservices"),
            &cfg.apiservice,
        ),
        crate::watching::by_name(
            dynamic_api(client, group, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
            hooks,
        ),
        crate::watching::by_name(
            dynamic_api(client, group, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
            hooks,
        ),
    ])
    .boxed()
}

/// How long until the Secret's certificates need renewing (at least [`CHECK_EVERY`], at most a
/// day: a clock that jumps is caught within one).
fn renewal_due_in(data: &BTreeMap<String, ByteString>) -> Duration {
    let seconds_left = |key: &str| -> Option<i64> {
        let cert = X509::from_pem(&data.get(key)?.0).ok()?;
        let diff = Asn1Time::days_from_now(RENEW_BEFORE_DAYS).ok()?.diff(cert.not_after()).ok()?;
        Some(i64::from(diff.days) * 86_400 + i64::from(diff.secs))
    };
    let left = seconds_left("tls.crt").into_iter().chain(seconds_left("ca.crt")).min().unwrap_or(0);
    Duration::from_secs(left.clamp(0, 86_400) as u64).max(CHECK_EVERY)
}

/// Reads the Secret, renewing what is missing, invalid or close to expiry; returns its data.
async fn ensure_secret(client: &Client, cfg: &SelfManaged) -> anyhow::Result<BTreeMap<String, ByteString>> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
    for _ in 0..5 {
        let existing = api.get_opt(&cfg.secret).await?;
        let data = existing.as_ref().and_then(|s| s.data.clone()).unwrap_or_default();
        let Some(renewed) = renew(&data, &cfg.names)? else { return Ok(data) };
        let mut secret = Secret {
            metadata: kube::api::ObjectMeta { name: Some(cfg.secret.clone()), ..Default::default() },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(renewed.clone()),
            ..Default::default()
        };
        let written = match existing {
            None => api.create(&PostParams::default(), &secret).await,
            Some(old) => {
                secret.metadata.resource_version = old.metadata.resource_version;
                api.replace(&cfg.secret, &PostParams::default(), &secret).await
            }
        };
        match written {
            Ok(_) => {
                tracing::info!(secret = %cfg.secret, "wrote a new serving certificate");
                return Ok(renewed);
            }
            // Another replica wrote first: take its certificate.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("the certificate Secret kept changing under us")
}

/// New Secret data if `data` lacks a valid CA or serving certificate for `names`.
fn renew(
    data: &BTreeMap<String, ByteString>,
    names: &[String],
) -> anyhow::Result<Option<BTreeMap<String, ByteString>>> {
    let get = |k: &str| data.get(k).map(|b| b.0.as_slice());
    let ca = get("ca.crt")
        .zip(get("ca.key"))
        .and_then(|(c, k)| Some((X509::from_pem(c).ok()?, PKey::private_key_from_pem(k).ok()?)));
    let ca = match ca {
        Some((cert, key)) if fresh(&cert) => pki::KeyPair { cert, key },
        _ => pki::ca("hns-apiserver-ca", 3650)?,
    };
    let ca_key = ca.cert.public_key()?;
    let leaf_ok = get("tls.crt")
        .and_then(|c| X509::from_pem(c).ok())
        .is_some_and(|leaf| fresh(&leaf) && leaf.verify(&ca_key).unwrap_or(false) && covers(&leaf, names));
    if leaf_ok && data.contains_key("tls.key") && get("ca.crt") == Some(ca.cert.to_pem()?.as_slice()) {
        return Ok(None);
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let leaf = pki::signed_serving("hns-apiserver", &names, &ca, 365)?;
    Ok(Some(BTreeMap::from([
        ("ca.crt".to_string(), ByteString(ca.cert.to_pem()?)),
        ("ca.key".to_string(), ByteString(ca.key.private_key_to_pem_pkcs8()?)),
        ("tls.crt".to_string(), ByteString(leaf.cert.to_pem()?)),
        ("tls.key".to_string(), ByteString(leaf.key.private_key_to_pem_pkcs8()?)),
    ])))
}

fn fresh(cert: &X509) -> bool {
    Asn1Time::days_from_now(RENEW_BEFORE_DAYS).is_ok_and(|limit| cert.not_after() > limit)
}

fn covers(cert: &X509, names: &[String]) -> bool {
    let sans: Vec<String> = cert
        .subject_alt_names()
        .map(|s| {
            s.iter()
                .filter_map(|n| {
                    n.dnsname().map(str::to_string).or_else(|| {
                        n.ipaddress().and_then(|ip| match ip.len() {
                            4 => Some(std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]).to_string()),
                            _ => None,
                        })
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    names.iter().all(|n| sans.contains(n))
}

/// Sets `caBundle` on the APIService and on every webhook of the webhook configurations, where
/// different.
async fn inject_ca(client: &Client, cfg: &SelfManaged, ca_pem: &[u8]) -> anyhow::Result<()> {
    let bundle = openssl::base64::encode_block(ca_pem);
    let apiservices = dynamic_api(client, "apiregistration.k8s.io", "APIService", "apiservices");
    let svc = apiservices.get(&cfg.apiservice).await?;
    if svc.data["spec"]["caBundle"].as_str() != Some(bundle.as_str()) {
        let patch = json!({"spec": {"caBundle": bundle}});
        apiservices.patch(&cfg.apiservice, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        tracing::info!(apiservice = %cfg.apiservice, "caBundle updated");
    }
    let validating = dynamic_api(
        client,
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    );
    inject_webhooks_ca(&validating, &cfg.webhook, &bundle).await?;
    let mutating = dynamic_api(
        client,
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    );
    match inject_webhooks_ca(&mutating, &cfg.webhook, &bundle).await {
        // An install from before hns had a mutating webhook has no such configuration.
        Err(kube::Error::Api(s)) if s.code == 404 => {
            tracing::debug!(webhook = %cfg.webhook, "no MutatingWebhookConfiguration; skipped")
        }
        result => result?,
    }
    Ok(())
}

/// A cluster-scoped API of `kind`, read untyped so that a replace keeps every field, including
/// those newer than the k8s-openapi version hns is built with.
pub fn dynamic_api(client: &Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// Sets `caBundle` (base64, as in JSON) on every webhook of the webhook configuration `name`,
/// where different; the replace carries the resourceVersion read, so a concurrent edit is not lost.
async fn inject_webhooks_ca(api: &Api<DynamicObject>, name: &str, bundle: &str) -> kube::Result<()> {
    let mut whc = api.get(name).await?;
    let mut changed = false;
    for w in whc.data["webhooks"].as_array_mut().into_iter().flatten() {
        if w["clientConfig"]["caBundle"].as_str() != Some(bundle) {
            w["clientConfig"]["caBundle"] = bundle.into();
            changed = true;
        }
    }
    if changed {
        api.replace(name, &PostParams::default(), &whc).await?;
        tracing::info!(resource = %api.resource_url(), webhook = %name, "caBundle updated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["hns-apiserver.hns-system.svc".into(), "localhost".into(), "127.0.0.1".into()]
    }

    #[test]
    fn the_served_certificates_expiry_is_known() {
        let serving = ServingCert::empty();
        assert_eq!(serving.not_after(), 0, "none served yet");
        let ca = pki::ca("test-ca", 3650).unwrap();
        let leaf = pki::signed_serving("hns-apiserver", &["localhost"], &ca, 365).unwrap();
        serving.set(&leaf.cert.to_pem().unwrap(), &leaf.key.private_key_to_pem_pkcs8().unwrap()).unwrap();
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let in_365_days = now + 365 * 86_400;
        assert!(
            (serving.not_after() - in_365_days).abs() < 3_600,
            "{} vs {in_365_days}",
            serving.not_after()
        );
    }

    #[test]
    fn renews_only_what_needs_it() {
        let first = renew(&BTreeMap::new(), &names()).unwrap().expect("an empty Secret gets certificates");
        assert!(renew(&first, &names()).unwrap().is_none(), "valid certificates are kept");
        let mut more = names();
        more.push("extra.example.com".into());
        let second = renew(&first, &more).unwrap().expect("a new name needs a new serving certificate");
        assert_eq!(second["ca.crt"], first["ca.crt"], "the CA, and so the caBundle, stays");
        assert_ne!(second["tls.crt"], first["tls.crt"]);
        let leaf = X509::from_pem(&second["tls.crt"].0).unwrap();
        assert!(covers(&leaf, &more));
    }

    #[test]
    fn a_broken_secret_is_replaced() {
        let broken = BTreeMap::from([("ca.crt".to_string(), ByteString(b"junk".to_vec()))]);
        assert!(renew(&broken, &names()).unwrap().is_some());
    }

    #[test]
    fn serving_cert_swaps_in_place() {
        let serving = ServingCert::empty();
        assert!(!serving.is_loaded());
        let data = renew(&BTreeMap::new(), &names()).unwrap().unwrap();
        serving.set(&data["tls.crt"].0, &data["tls.key"].0).unwrap();
        assert!(serving.is_loaded());
        assert!(serving.set(&data["tls.crt"].0, &data["ca.key"].0).is_err(), "a mismatched key is refused");
    }
}
