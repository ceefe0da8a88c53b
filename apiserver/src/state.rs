//! What every request handler shares: the caches, the clients and the settings, built once by
//! [`crate::app`].

use std::sync::Arc;

use crate::auth::authn::AuthnState;
use crate::auth::authz::Authorizer;
use crate::auth::certs::ServingCert;
use crate::auth::view::Views;
use crate::hierarchy::policy::Policy;
use crate::propagation::Propagation;
use crate::shutdown::Shutdown;
use crate::store::cache::Cache;
use crate::store::config_store::ConfigStore;
use crate::store::parent_lock::ParentLock;
use crate::store::quota_ledgers::LedgerStore;
use crate::store::writer::Writer;

/// What every handler shares.
pub struct AppState {
    /// The namespace cache and its forest.
    pub cache: Arc<Cache>,
    /// The authentication configuration.
    pub authn: Arc<AuthnState>,
    /// Delegated authorization.
    pub authz: Authorizer,
    /// Per-user views of lists across all namespaces.
    pub views: Views,
    /// The administrator's settings.
    pub policy: Policy,
    /// hns's own writes to Namespace objects.
    pub writer: Writer,
    /// The HNC configuration.
    pub config: Arc<ConfigStore>,
    /// The kube client, for discovery during configuration changes.
    pub client: kube::Client,
    /// hns's own namespace.
    pub namespace: String,
    /// The serving certificate.
    pub serving: Arc<ServingCert>,
    /// The propagated kinds.
    pub propagation: Arc<Propagation>,
    /// Takes parent changes one at a time across replicas.
    pub parent_lock: Arc<ParentLock>,
    /// The hierarchical quotas' ledgers.
    pub ledgers: Arc<LedgerStore>,
    /// Whether the replica was told to stop, and how far it got.
    pub shutdown: Arc<Shutdown>,
}

/// A narrow view of the state: the parts one resource (or one piece of the generic machinery)
/// touches, as metrics-server hands its API layer a narrow storage interface rather than the
/// whole server. A resource declares its own, and its handlers reach the state only through it
/// ([`crate::resources::def::Call::context`]: a [`crate::resources::def::Call`] gives nothing
/// else of the state), so what a resource may touch is written in one place, its context's
/// [`Context::of`], where a reviewer sees it.
pub trait Context<'a> {
    /// The parts of `state` this context holds.
    fn of(state: &'a AppState) -> Self;
}
