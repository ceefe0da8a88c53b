//! Who is calling and what they may do: TLS and the serving certificate, front-proxy and
//! client-certificate authentication, SubjectAccessReview authorization.

pub mod authn;
pub mod authz;
pub mod certs;
pub mod pki;
pub mod tls;
pub mod tls_settings;
