//! The HTTPS listener's TLS settings (openssl).

use std::path::Path;

use openssl::ssl::{SslAcceptor, SslAcceptorBuilder, SslFiletype, SslMethod, SslVerifyMode};

use crate::authn::PeerCertificates;
use crate::pki;

/// DNS names of the generated serving certificate: the in-cluster Service that kube-apiserver
/// dials (it checks `<service>.<namespace>.svc`) and loopback for local use.
const SELF_SIGNED_NAMES: &[&str] =
    &["hns-apiserver.hns-system.svc", "hns-apiserver.hns-system.svc.cluster.local", "localhost"];

/// Serving certificate from files, or a generated self-signed one when no files are given.
///
/// The client certificate is **requested, not required**: probes and direct clients connect
/// without one. Any certificate is accepted during the handshake because the CAs it must chain
/// to come from a ConfigMap that can change at any time; [`crate::authn`] verifies the chain on
/// every request against the current ones.
pub fn acceptor(cert_file: Option<&Path>, key_file: Option<&Path>) -> anyhow::Result<SslAcceptorBuilder> {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
    match (cert_file, key_file) {
        (Some(cert), Some(key)) => {
            b.set_certificate_chain_file(cert)
                .map_err(|e| anyhow::anyhow!("--tls-cert-file {}: {e}", cert.display()))?;
            b.set_private_key_file(key, SslFiletype::PEM)
                .map_err(|e| anyhow::anyhow!("--tls-private-key-file {}: {e}", key.display()))?;
        }
        (None, None) => {
            tracing::warn!(names = ?SELF_SIGNED_NAMES, "no --tls-cert-file given; serving a generated self-signed certificate");
            let kp = pki::self_signed_serving("hns-apiserver", SELF_SIGNED_NAMES)?;
            b.set_certificate(&kp.cert)?;
            b.set_private_key(&kp.key)?;
        }
        _ => anyhow::bail!("--tls-cert-file and --tls-private-key-file must be given together"),
    }
    b.check_private_key()
        .map_err(|e| anyhow::anyhow!("the serving key does not match the certificate: {e}"))?;
    b.set_verify_callback(SslVerifyMode::PEER, |_, _| true);
    // Needed for session resumption once client certificates are requested.
    b.set_session_id_context(b"hns-apiserver")?;
    Ok(b)
}

/// Records the client certificates of a new TLS connection in its extensions, where
/// [`crate::authn`] finds them.
pub fn record_peer_certificates(conn: &dyn std::any::Any, ext: &mut actix_web::dev::Extensions) {
    type Tls = actix_tls::accept::openssl::TlsStream<actix_web::rt::net::TcpStream>;
    let Some(tls) = conn.downcast_ref::<Tls>() else {
        return;
    };
    let ssl = tls.ssl();
    let mut chain: Vec<_> = ssl.peer_certificate().into_iter().collect();
    // On a server, OpenSSL's peer chain omits the leaf: these are the intermediates.
    if let Some(rest) = ssl.peer_cert_chain() {
        chain.extend(rest.iter().map(|c| c.to_owned()));
    }
    ext.insert(PeerCertificates(chain));
}
