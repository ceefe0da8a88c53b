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
//! The binary is a thin wrapper over [`app::run`], the composition root. Imports point one way,
//! from the top of this list down (none back up, none in a loop; `make lint` checks it with
//! `hack/check-layers.sh`, which holds the same list):
//!
//! | layer | what |
//! |---|---|
//! | [`app`], [`options`] | building the state and starting the tasks; the flags they come from |
//! | [`server`] | routes, the authentication and authorization filter |
//! | [`discovery`], [`openapi`], [`health`], [`admission`] | what an aggregated API server serves besides resources; the webhooks |
//! | [`resources`], [`controller`] | the API resources, one file each, and the table of them; the controller |
//! | [`state`], [`metrics`] | what handlers share; the metrics |
//! | [`propagation`] | copying objects down the tree |
//! | [`store`], [`auth`] | caches of cluster state and hns's writes; TLS, authentication, authorization |
//! | [`hierarchy`], [`http`] | the hierarchy as pure logic; Kubernetes API conventions |
//! | [`ssa`], [`resource_version`], [`replicas`], [`shutdown`] | server-side apply's field sets; resourceVersions as numbers; the controller's Lease and replicas watching each other; stopping without failing anyone |
//! | [`watching`] | how hns watches kube-apiserver |
//!
//! A new resource is one file in `resources/` that fills in a [`resources::ResourceDef`]
//! (names, columns, schemas and a handler per verb it serves) and one line in
//! [`resources::ALL`]; if it is derived from namespaces, its objects go in
//! [`hierarchy::objects`] and its kind in [`hierarchy::identity::Derived`], the one list of
//! derived kinds (uid space, watch events, how one stands in the forest).

pub mod admission;
pub mod app;
pub mod auth;
pub mod controller;
pub mod discovery;
pub mod health;
pub mod hierarchy;
pub mod http;
pub mod metrics;
pub mod openapi;
pub mod options;
pub mod propagation;
pub mod replicas;
pub mod resource_version;
pub mod resources;
pub mod server;
pub mod shutdown;
pub mod ssa;
pub mod state;
pub mod store;
pub mod watching;
