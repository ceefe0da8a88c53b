//! The HTTPS listener's TLS settings (openssl).

use std::sync::Arc;

use openssl::ssl::{
    select_next_proto, AlpnError, SniError, SslAcceptor, SslAcceptorBuilder, SslContextBuilder, SslMethod,
    SslMode, SslVerifyMode,
};

use crate::auth::authn::PeerCertificates;
use crate::auth::certs::ServingCert;

/// Settings every TLS context of the listener shares, including the per-certificate contexts a
/// handshake switches to.
///
/// The client certificate is **requested, not required**: probes and direct clients connect
/// without one. Any certificate is accepted during the handshake because the CAs it must chain
/// to come from a ConfigMap that can change at any time; [`crate::auth::authn`] verifies the chain on
/// every request against the current ones.
pub fn configure(b: &mut SslContextBuilder) -> Result<(), openssl::error::ErrorStack> {
    b.set_verify_callback(SslVerifyMode::PEER, |_, _| true);
    // Idle connections (watches waiting for events) give their read and write buffers back.
    b.set_mode(SslMode::RELEASE_BUFFERS);
    // Needed for session resumption once client certificates are requested.
    b.set_session_id_context(b"hns-apiserver")?;
    // kube-apiserver resumes a handful of sessions; OpenSSL's default cache holds 20,480, each
    // with its client's certificate chain, for anyone who connects.
    b.set_session_cache_size(1_024);
    // HTTP/1.1 only. kube-apiserver's proxy and webhook calls work over it, and HTTP/2 brought
    // only risk: its stream resets answered oversized bodies instead of a 413, and its frame
    // handling (the h2 crate, RUSTSEC-2026-0258) could be flooded by anyone reaching the port.
    b.set_alpn_select_callback(|_, offered| {
        select_next_proto(b"\x08http/1.1", offered).ok_or(AlpnError::NOACK)
    });
    Ok(())
}

/// The listener's TLS settings: every handshake is served with the certificate `serving`
/// holds at that moment, so renewals take effect without a restart.
pub fn acceptor(serving: Arc<ServingCert>) -> anyhow::Result<SslAcceptorBuilder> {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
    configure(&mut b)?;
    b.set_servername_callback(move |ssl, _alert| {
        let ctx = serving.context().ok_or(SniError::ALERT_FATAL)?;
        ssl.set_ssl_context(&ctx).map_err(|_| SniError::ALERT_FATAL)
    });
    Ok(b)
}

/// A second handle on a connection's socket, for long-running answers (watches) to notice that
/// the client has gone: actix-web learns it only when a write fails, and a quiet watch may not
/// write for half an hour, holding its connection's memory all that time.
#[derive(Clone)]
pub struct PeerSocket(Arc<std::net::TcpStream>);

impl PeerSocket {
    /// Whether the client has closed the connection (or sent anything: a client waiting for a
    /// streamed answer sends nothing more over HTTP/1.1, so bytes are its TLS close_notify).
    pub fn is_closed(&self) -> bool {
        let mut byte = [0u8; 1];
        match self.0.peek(&mut byte) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

/// Records the client certificates of a new TLS connection in its extensions, where
/// [`crate::auth::authn`] finds them, and a [`PeerSocket`].
pub fn record_peer_certificates(conn: &dyn std::any::Any, ext: &mut actix_web::dev::Extensions) {
    use std::os::fd::AsFd;
    type Tls = actix_tls::accept::openssl::TlsStream<actix_web::rt::net::TcpStream>;
    let Some(tls) = conn.downcast_ref::<Tls>() else {
        return;
    };
    // The duplicate shares the socket's non-blocking mode, so peeking never waits.
    if let Ok(fd) = tls.get_ref().as_fd().try_clone_to_owned() {
        ext.insert(PeerSocket(Arc::new(std::net::TcpStream::from(fd))));
    }
    let ssl = tls.ssl();
    let mut chain: Vec<_> = ssl.peer_certificate().into_iter().collect();
    // On a server, OpenSSL's peer chain omits the leaf: these are the intermediates.
    if let Some(rest) = ssl.peer_cert_chain() {
        chain.extend(rest.iter().map(|c| c.to_owned()));
    }
    ext.insert(PeerCertificates(chain));
}
