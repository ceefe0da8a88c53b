//! Who is calling and what they may do: TLS and the serving certificate, front-proxy and
//! client-certificate authentication, SubjectAccessReview authorization, and per-user views from
//! the cluster's RBAC.

pub mod authn;
pub mod authz;
pub mod certs;
pub mod pki;
pub mod rbac;
pub mod rbac_cache;
pub mod tls;
pub mod tls_settings;
pub mod view;
