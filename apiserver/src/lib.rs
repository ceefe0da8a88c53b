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
//! | `test_support` | helpers for unit tests only |
//!
//! A new resource is one file in `resources/` and one line in [`resources::ALL`]:
//!
//! 1. its API type in `api/` (the second file, shared with the plugin);
//! 2. in its file, a [`resources::ResourceDef`]: names, columns, schemas, and a handler per verb
//!    it serves (a verb without one is neither listed nor routed; a list of the objects its
//!    watch starts from is `List::Current` and needs no handler);
//! 3. its context, a [`state::Context`]: the parts of the server's state it touches, which is
//!    all its handlers can reach (`call.context()`), so what it may touch is written in one place;
//! 4. for writes, a [`resources::write::Strategy`] over that context: where its objects are
//!    stored, what a write starts from, its own validation and its store; create, update and
//!    patch then route to `write::handler::<ItsStrategy>`, which runs the sequence every resource
//!    shares (managed fields, decoding, metadata, resourceVersion, retries);
//! 5. if it is derived from namespaces, its kind in [`hierarchy::identity::Derived`], the one
//!    list of derived kinds (uid space, watch events, how one stands in the forest), and its
//!    objects in [`hierarchy::objects`];
//! 6. its RBAC rule in `config/base/rbac.yaml` (and the chart's), if hns needs new rights.
//!
//! `resources/hierarchicalresourcequotas.rs` is the example that uses every step.

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
#[cfg(test)]
pub mod test_support;
pub mod watching;
