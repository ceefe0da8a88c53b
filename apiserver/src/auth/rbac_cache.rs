//! The cluster's Roles, ClusterRoles and their bindings, watched into an [`Rbac`] index on every
//! replica (any replica answers a user's list), with a generation that moves on each change so
//! open watches can re-evaluate what their user sees.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::auth::rbac::Rbac;

/// The four kinds watched.
const KINDS: usize = 4;

/// The index, and whether it holds the whole cluster yet.
pub struct RbacCache {
    rbac: RwLock<Rbac>,
    /// How many of the four kinds have been listed once.
    listed: AtomicUsize,
    /// Moves on every change.
    generation: tokio::sync::watch::Sender<u64>,
}

impl Default for RbacCache {
    fn default() -> Self {
        RbacCache {
            rbac: RwLock::default(),
            listed: AtomicUsize::new(0),
            generation: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl RbacCache {
    /// The index, to read.
    pub fn read(&self) -> RwLockReadGuard<'_, Rbac> {
        // A panic while holding the lock leaves the index as consistent as any single change.
        self.rbac.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether every kind has been listed: before that, the index would hide what it has not
    /// read yet.
    pub fn is_synced(&self) -> bool {
        self.listed.load(Ordering::Acquire) >= KINDS
    }

    /// Wakes on every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn change(&self, f: impl FnOnce(&mut Rbac)) {
        self.change_quietly(f);
        self.generation.send_modify(|g| *g += 1);
    }

    /// A change watchers are told of later, with others (a re-list's, at its end).
    fn change_quietly(&self, f: impl FnOnce(&mut Rbac)) {
        f(&mut self.rbac.write().unwrap_or_else(std::sync::PoisonError::into_inner));
    }
}

/// Watches the four kinds into `cache` until shutdown.
pub async fn run(client: Client, cache: Arc<RbacCache>) {
    tokio::join!(
        follow::<ClusterRole>(
            client.clone(),
            cache.clone(),
            (Rbac::apply_cluster_role, Rbac::delete_cluster_role, Rbac::cluster_role_keys),
        ),
        follow::<Role>(client.clone(), cache.clone(), (Rbac::apply_role, Rbac::delete_role, Rbac::role_keys)),
        follow::<ClusterRoleBinding>(
            client.clone(),
            cache.clone(),
            (Rbac::apply_cluster_binding, Rbac::delete_cluster_binding, Rbac::cluster_binding_keys),
        ),
        follow::<RoleBinding>(client, cache, (Rbac::apply_binding, Rbac::delete_binding, Rbac::binding_keys)),
    );
}

/// Where an object lives: (namespace, name).
type Key = (String, String);

/// How the index takes in one kind: records an object, forgets one by key, lists the keys it
/// holds.
type Handling<K> = (fn(&mut Rbac, &K), fn(&mut Rbac, &Key), fn(&Rbac) -> Vec<Key>);

/// Watches one kind. A re-list applies each object as it arrives and, at its end, forgets what
/// the index holds and it did not list, so the index never passes through an emptier state
/// that would hide rows from watchers, and the objects are not buffered (31,000 RoleBindings
/// were some 40 MB at every start); watchers are told once, at the end.
async fn follow<K>(client: Client, cache: Arc<RbacCache>, (apply, delete, keys): Handling<K>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::Scope: Send,
{
    let api: Api<K> = Api::all(client);
    let mut stream = watcher::watcher(api, crate::watching::config()).default_backoff().boxed();
    let mut listed: HashSet<Key> = HashSet::new();
    let mut listed_once = false;
    let key =
        |o: &K| (o.meta().namespace.clone().unwrap_or_default(), o.meta().name.clone().unwrap_or_default());
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => listed.clear(),
            Ok(Some(Event::InitApply(o))) => {
                listed.insert(key(&o));
                cache.change_quietly(|rbac| apply(rbac, &o));
            }
            Ok(Some(Event::InitDone)) => {
                cache.change(|rbac| {
                    let gone: Vec<Key> = keys(rbac).into_iter().filter(|k| !listed.contains(k)).collect();
                    gone.iter().for_each(|k| delete(rbac, k));
                });
                listed = HashSet::new();
                if !listed_once {
                    listed_once = true;
                    cache.listed.fetch_add(1, Ordering::AcqRel);
                }
            }
            Ok(Some(Event::Apply(o))) => cache.change(|rbac| apply(rbac, &o)),
            Ok(Some(Event::Delete(o))) => cache.change(|rbac| delete(rbac, &key(&o))),
            Ok(None) => return,
            Err(error) => tracing::warn!(%error, kind = %K::kind(&()), "RBAC watch failed; retrying"),
        }
    }
}
