//! The namespace cache: one watch on Namespaces feeding the [`Forest`].
//!
//! Reads never call the API server; they read the forest, which this watch keeps current. Until
//! the first full list has been applied the cache is not synced and `/readyz` says so, so no
//! replica answers from a partial picture.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::forest::Forest;

/// The forest and whether it has been filled.
#[derive(Default)]
pub struct Cache {
    forest: RwLock<Forest>,
    synced: AtomicBool,
}

impl Cache {
    /// Read access to the forest. Hold it briefly and never across an `.await`.
    pub fn read(&self) -> RwLockReadGuard<'_, Forest> {
        self.forest.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Forest> {
        self.forest.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the first full list has been applied (a readiness check).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Applies one watch event.
    fn apply(&self, event: Event<Namespace>, relist: &mut Vec<Namespace>) {
        match event {
            Event::Init => relist.clear(),
            Event::InitApply(ns) => relist.push(ns),
            Event::InitDone => {
                self.write().replace_all(relist.drain(..));
                self.synced.store(true, Ordering::Release);
                tracing::info!(namespaces = self.read().len(), "namespace cache synced");
            }
            Event::Apply(ns) => self.write().upsert(ns),
            Event::Delete(ns) => self.write().remove(&ns),
        }
    }
}

/// Watches Namespaces into `cache` until shutdown. Errors are retried with backoff; a re-list
/// replaces the forest whole, so nothing missed during an outage lingers.
pub async fn run(client: Client, cache: Arc<Cache>) {
    let api: Api<Namespace> = Api::all(client);
    let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut relist = Vec::new();
    loop {
        match stream.try_next().await {
            Ok(Some(event)) => cache.apply(event, &mut relist),
            Ok(None) => return,
            Err(error) => tracing::warn!(%error, "namespace watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::testing::namespace;

    #[test]
    fn synced_only_after_the_first_full_list() {
        let cache = Cache::default();
        let mut buf = Vec::new();
        cache.apply(Event::Init, &mut buf);
        cache.apply(Event::InitApply(namespace("a", None, false)), &mut buf);
        assert!(!cache.is_synced());
        assert!(cache.read().is_empty(), "a partial list is not served");
        cache.apply(Event::InitDone, &mut buf);
        assert!(cache.is_synced());
        cache.apply(Event::Apply(namespace("b", Some("a"), true)), &mut buf);
        assert_eq!(cache.read().children("a").collect::<Vec<_>>(), ["b"]);
        cache.apply(Event::Delete(namespace("b", Some("a"), true)), &mut buf);
        assert_eq!(cache.read().len(), 1);
    }

    #[test]
    fn a_relist_replaces_everything() {
        let cache = Cache::default();
        let mut buf = Vec::new();
        for e in [Event::Init, Event::InitApply(namespace("old", None, false)), Event::InitDone] {
            cache.apply(e, &mut buf);
        }
        for e in [Event::Init, Event::InitApply(namespace("new", None, false)), Event::InitDone] {
            cache.apply(e, &mut buf);
        }
        assert!(cache.read().get("old").is_none());
        assert!(cache.read().get("new").is_some());
    }
}
