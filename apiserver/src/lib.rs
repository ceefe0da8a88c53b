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
//! The binary is a thin wrapper over [`app::run`].

pub mod admission;
pub mod app;
pub mod auth;
pub mod controller;
pub mod discovery;
pub mod health;
pub mod hierarchy;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod openapi;
pub mod options;
pub mod propagation;
pub mod resource_version;
pub mod resources;
pub mod server;
pub mod ssa;
pub mod state;
pub mod store;
