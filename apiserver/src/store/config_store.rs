//! The HNC configuration's storage: one ConfigMap in hns's namespace, cached by a watch.
//!
//! Like the hierarchy on Namespace objects, the configuration lives in the cluster and every
//! replica serves it from a cache; its resourceVersion is the ConfigMap's, so a stale update is
//! a conflict. The ConfigMap is made with the default configuration when there is none (as HNC
//! made its `config` object at start), so the HNCConfiguration has a uid, creation time and
//! resourceVersion before anyone writes it, the same on every replica and in its watch events.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::{StreamExt, TryStreamExt};
use hns_api::config::CONFIG_SINGLETON;
use hns_api::{HNCConfiguration, HNCConfigurationSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use serde_json::Value;

use crate::hierarchy::forest::ObjectLabels;
use crate::hierarchy::identity::{self, Derived};
use crate::http::status::ApiError;
use crate::resource_version;
use crate::store::hub::{Event, Hub};
use crate::store::reached::Reached;

/// Name of the ConfigMap.
pub const CONFIGMAP: &str = "hns-config";
/// Key holding `spec` as JSON.
const SPEC_KEY: &str = "spec.json";
/// Key holding the configuration's labels, annotations and managedFields as JSON (absent when
/// it has none).
const META_KEY: &str = "meta.json";

/// The cached ConfigMap.
pub struct ConfigStore {
    current: RwLock<Option<ConfigMap>>,
    synced: AtomicBool,
    /// The current spec, for the propagation syncers.
    pub spec: tokio::sync::watch::Sender<HNCConfigurationSpec>,
    /// The ConfigMap's resourceVersion as the watch last brought it, for writers waiting on it.
    reached: Reached,
}

/// How long a writer waits for the watch to bring the ConfigMap's version it read.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for ConfigStore {
    fn default() -> Self {
        ConfigStore {
            current: RwLock::default(),
            synced: AtomicBool::new(false),
            spec: tokio::sync::watch::channel(Default::default()).0,
            reached: Reached::default(),
        }
    }
}

impl ConfigStore {
    fn get(&self) -> Option<ConfigMap> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the first read finished (a readiness check).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// The configuration: the stored spec, or the default when nothing is stored.
    pub fn object(&self) -> HNCConfiguration {
        to_object(self.get().as_ref())
    }

    /// The ConfigMap's resourceVersion the store holds.
    pub fn resource_version(&self) -> u64 {
        self.reached.at()
    }

    /// Waits up to `within` for the store to hold the ConfigMap at resourceVersion `rv` or
    /// later; false if the watch did not get there in time.
    pub async fn reaches(&self, rv: u64, within: std::time::Duration) -> bool {
        self.reached.wait(rv, within).await
    }

    /// Waits until the store holds the ConfigMap at resourceVersion `rv` or later; false if the
    /// watch did not get there in time.
    pub async fn caught_up(&self, rv: u64) -> bool {
        self.reached.wait(rv, CATCH_UP).await
    }

    /// Stores `cm` (`None`: there is none), and tells watchers of the configuration it serves,
    /// at `cm`'s resourceVersion, or at `gone_at`, the deleted ConfigMap's, when there is none.
    /// Every watch event carries a resourceVersion (kube-runtime's watcher fails on one without):
    /// with neither, watchers learn of the change when hns makes the ConfigMap again.
    fn set(&self, cm: Option<ConfigMap>, gone_at: Option<&ConfigMap>, hub: &Hub) {
        let before = serde_json::to_value(self.object()).unwrap_or_default();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = cm.clone();
        let mut obj = self.object();
        self.spec.send_if_modified(|s| {
            let changed = *s != obj.spec;
            *s = obj.spec.clone();
            changed
        });
        let rv = cm.as_ref().or(gone_at).map_or(0, |c| resource_version::number(&c.metadata));
        if rv > 0 {
            obj.metadata.resource_version = Some(rv.to_string());
        }
        let after = serde_json::to_value(obj).unwrap_or_default();
        if rv == 0 {
            // Gone with no version to tell (deleted while the watch was down): the store stays
            // at the last version it reached, so that waiters and resumed watches of the
            // configuration are not sent back to the start.
            return;
        }
        if before != after {
            hub.publish(vec![Event::new("MODIFIED", Derived::HncConfiguration, after, rv)]);
        }
        self.reached.set(rv);
    }

    /// Writes `spec` and `meta` over the stored configuration, guarded by the stored
    /// resourceVersion.
    pub async fn write(
        &self,
        client: &Client,
        namespace: &str,
        spec: &HNCConfigurationSpec,
        meta: &ObjectLabels,
        dry_run: bool,
    ) -> Result<HNCConfiguration, ApiError> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let json = serde_json::to_string(spec).map_err(ApiError::internal)?;
        let mut data = BTreeMap::from([(SPEC_KEY.to_string(), json)]);
        if let Some(meta) = meta.to_annotation() {
            data.insert(META_KEY.to_string(), meta);
        }
        let pp = PostParams { dry_run, field_manager: Some(crate::store::writer::FIELD_MANAGER.into()) };
        let stored = self.get();
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(CONFIGMAP.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        let written = match stored {
            None => api.create(&pp, &cm).await,
            Some(old) => {
                cm.metadata.resource_version = old.metadata.resource_version;
                api.replace(CONFIGMAP, &pp, &cm).await
            }
        }
        .map_err(ApiError::from_kube)?;
        // Read-your-writes: a GET right after this answer is served from the store, which must
        // hold what was just written (namespace writes wait for their watch the same way).
        if !dry_run && !self.caught_up(resource_version::number(&written.metadata)).await {
            tracing::warn!(
                configmap = CONFIGMAP,
                "the configuration watch has not brought hns's own write yet"
            );
        }
        Ok(to_object(Some(&written)))
    }
}

fn to_object(cm: Option<&ConfigMap>) -> HNCConfiguration {
    let data = |key: &str| cm.and_then(|c| c.data.as_ref()).and_then(|d| d.get(key));
    let spec = data(SPEC_KEY).and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
    let meta: ObjectLabels = data(META_KEY).and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
    let mut obj = HNCConfiguration::new(CONFIG_SINGLETON, spec);
    meta.fill(&mut obj.metadata);
    if let Some(cm) = cm {
        obj.metadata.uid = identity::uid_of(cm.metadata.uid.as_deref(), Derived::HncConfiguration);
        obj.metadata.resource_version = cm.metadata.resource_version.clone();
        obj.metadata.creation_timestamp = cm.metadata.creation_timestamp.clone();
    }
    obj.metadata.generation = Some(1);
    obj
}

/// The ConfigMap's resourceVersion as kube-apiserver has it now (0 when there is none).
pub async fn stored_resource_version(client: &Client, namespace: &str) -> Result<u64, ApiError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = api.get_opt(CONFIGMAP).await.map_err(ApiError::from_kube)?;
    Ok(cm.map_or(0, |c| resource_version::number(&c.metadata)))
}

/// The configuration as JSON.
pub fn value(store: &ConfigStore) -> Value {
    serde_json::to_value(store.object()).unwrap_or_default()
}

/// Follows the ConfigMap into `store` until shutdown, making it whenever there is none. The
/// store counts as synced once it holds the ConfigMap, so no replica serves the configuration
/// without its identity.
pub async fn run(
    client: Client,
    namespace: String,
    store: Arc<ConfigStore>,
    hub: Arc<crate::store::cache::Cache>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let cfg = crate::watching::config().fields(&format!("metadata.name={CONFIGMAP}"));
    let mut stream = watcher(api.clone(), cfg).default_backoff().boxed();
    let (mut listed, mut init_done) = (false, false);
    loop {
        match stream.try_next().await {
            Ok(Some(watcher::Event::InitApply(cm))) => {
                listed = true;
                store.set(Some(cm), None, &hub.hub);
            }
            Ok(Some(watcher::Event::Apply(cm))) => {
                store.set(Some(cm), None, &hub.hub);
                if init_done {
                    mark_synced(&store);
                }
            }
            Ok(Some(watcher::Event::Delete(cm))) => {
                store.set(None, Some(&cm), &hub.hub);
                tokio::spawn(create_default(api.clone(), store.clone()));
            }
            Ok(Some(watcher::Event::Init)) => listed = false,
            Ok(Some(watcher::Event::InitDone)) => {
                init_done = true;
                if listed {
                    mark_synced(&store);
                } else {
                    store.set(None, None, &hub.hub); // deleted while we were not watching
                    tokio::spawn(create_default(api.clone(), store.clone()));
                }
            }
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, configmap = CONFIGMAP, "configuration watch failed; retrying")
            }
        }
    }
}

fn mark_synced(store: &ConfigStore) {
    if !store.is_synced() {
        tracing::info!(configmap = CONFIGMAP, "configuration loaded");
    }
    store.synced.store(true, Ordering::Release);
}

/// The ConfigMap of the default configuration.
fn default_configmap() -> ConfigMap {
    let spec = serde_json::to_string(&HNCConfigurationSpec::default()).unwrap_or_default();
    ConfigMap {
        metadata: ObjectMeta { name: Some(CONFIGMAP.into()), ..Default::default() },
        data: Some(BTreeMap::from([(SPEC_KEY.to_string(), spec)])),
        ..Default::default()
    }
}

/// Makes the ConfigMap with the default configuration, retrying until it exists: made here or by
/// another replica (AlreadyExists), or brought by the watch.
async fn create_default(api: Api<ConfigMap>, store: Arc<ConfigStore>) {
    let pp = PostParams { dry_run: false, field_manager: Some(crate::store::writer::FIELD_MANAGER.into()) };
    let mut pause = std::time::Duration::from_millis(500);
    while store.get().is_none() {
        match api.create(&pp, &default_configmap()).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            Err(error) => tracing::warn!(
                %error,
                configmap = CONFIGMAP,
                "cannot create the configuration's ConfigMap; hns-apiserver needs `create configmaps` in its namespace; retrying"
            ),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(30));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_annotations_and_managed_fields_are_kept_beside_the_spec() {
        let meta = ObjectLabels {
            labels: BTreeMap::from([("team".into(), "platform".into())]),
            managed_fields: vec![crate::ssa::Entry {
                manager: "flux".into(),
                operation: crate::ssa::Operation::Apply,
                time: None,
                fields: crate::ssa::FieldSet::from_fields_v1(
                    &serde_json::json!({"f:metadata": {"f:labels": {"f:team": {}}}}),
                )
                .unwrap(),
            }],
            ..Default::default()
        };
        let cm = ConfigMap {
            data: Some(BTreeMap::from([
                (SPEC_KEY.to_string(), r#"{"resources":[{"resource":"secrets"}]}"#.to_string()),
                (META_KEY.to_string(), meta.to_annotation().unwrap()),
            ])),
            ..Default::default()
        };
        let obj = to_object(Some(&cm));
        assert_eq!(obj.spec.resources[0].resource, "secrets");
        assert_eq!(ObjectLabels::of(&obj.metadata), meta);
        assert_eq!(to_object(None).metadata.managed_fields, None);
    }

    #[test]
    fn watchers_learn_of_a_deleted_configmap_at_its_deletion_resource_version() {
        let (store, hub) = (ConfigStore::default(), Hub::default());
        let mut rx = hub.subscribe();
        let mut cm = default_configmap();
        cm.metadata.resource_version = Some("7".into());
        store.set(Some(cm.clone()), None, &hub);
        cm.data = Some(BTreeMap::from([(SPEC_KEY.to_string(), r#"{"resources":[]}"#.to_string())]));
        cm.metadata.resource_version = Some("9".into());
        store.set(None, Some(&cm), &hub);
        store.set(Some(cm.clone()), None, &hub);
        store.set(None, None, &hub); // gone while hns was not watching: no version to tell
        let mut rvs = Vec::new();
        while let Ok(crate::store::hub::Message::Events(events)) = rx.try_recv() {
            for (_, e) in events.iter() {
                assert_eq!(e.object["metadata"]["resourceVersion"], e.rv.to_string(), "{:?}", e.object);
                rvs.push(e.rv);
            }
        }
        assert_eq!(rvs, [7, 9, 9]);
        assert_eq!(store.resource_version(), 9, "the store stays at the last version it reached");
    }

    #[test]
    fn the_default_configmap_holds_the_default_configuration_under_a_uid_of_its_own() {
        let mut cm = default_configmap();
        cm.metadata.uid = Some("0b6c9e43-6a3e-4b8f-9d6c-3f1e2a7b5c10".into());
        let obj = to_object(Some(&cm));
        assert_eq!(obj.spec, HNCConfigurationSpec::default());
        let uid = obj.metadata.uid.unwrap();
        assert_ne!(uid, "0b6c9e43-6a3e-4b8f-9d6c-3f1e2a7b5c10");
        assert_eq!(Some(uid), to_object(Some(&cm)).metadata.uid, "the same every time");
    }
}
