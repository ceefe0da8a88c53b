//! The TLS settings every context of the listener shares: the listener's own and the
//! per-certificate ones a handshake switches to ([`crate::auth::certs`]), kept in one place so
//! the two cannot drift apart.

use openssl::ssl::{select_next_proto, AlpnError, SslContextBuilder, SslMode, SslVerifyMode};

/// Applies the shared settings to `b`.
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
