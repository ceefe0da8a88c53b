//! hns-apiserver: serves the hierarchy of namespaces as Kubernetes API resources.
//!
//! ```text
//!  kube-apiserver ──(front-proxy cert + X-Remote-*)──► server (TLS, authn, authz, routes)
//!                                                        │
//!                        discovery · openapi · health    ▼
//!                                      resources ──reads──► cache ◄──watch── Namespaces
//!                                                           (forest)
//! ```
//!
//! The binary is a thin wrapper over [`options::Args::run`].

pub mod admission;
pub mod authn;
pub mod authz;
pub mod body;
pub mod cache;
pub mod certs;
pub mod conditions;
pub mod config_store;
pub mod controller;
pub mod discovery;
pub mod forest;
pub mod health;
pub mod leader;
pub mod list;
pub mod metrics;
pub mod negotiation;
pub mod openapi;
pub mod options;
pub mod parent_lock;
pub mod patch;
pub mod pki;
pub mod plan;
pub mod policy;
pub mod propagation;
pub mod render;
pub mod request_info;
pub mod resources;
pub mod rules;
pub mod seal;
pub mod seal_key;
pub mod selector;
pub mod server;
pub mod ssa;
pub mod status;
pub mod tls;
pub mod watch;
pub mod writer;
