//! The HTTPS listener's TLS settings (openssl).

use std::sync::Arc;

use openssl::ssl::{SniError, SslAcceptor, SslAcceptorBuilder, SslMethod};

use crate::auth::authn::PeerCertificates;
use crate::auth::certs::ServingCert;
use crate::auth::tls_settings::configure;

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
/// [`crate::auth::authn`] finds them, and a [`PeerSocket`]; turns Nagle's algorithm off.
pub fn record_peer_certificates(conn: &dyn std::any::Any, ext: &mut actix_web::dev::Extensions) {
    use std::os::fd::AsFd;
    type Tls = actix_tls::accept::openssl::TlsStream<actix_web::rt::net::TcpStream>;
    let Some(tls) = conn.downcast_ref::<Tls>() else {
        return;
    };
    // Answers go out as soon as they are written: with Nagle's algorithm the last segment of a
    // response waits for the client's delayed ACK (40 ms on Linux), which a 30 KB list through
    // kube-apiserver's proxy paid on most requests. Go's clients and servers do the same.
    if let Err(error) = tls.get_ref().set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set");
    }
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
    ext.insert(PeerCertificates::new(chain));
}
