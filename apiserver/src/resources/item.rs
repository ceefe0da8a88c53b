//! The objects of hns's resources as the forest gives them: typed. A list across 100,000
//! namespaces renders each straight into its answer (building a `serde_json::Value` per object
//! first, then serializing it, was most of such a list's cost), and Table cells read fields.
//! Reads of one object and writes' replies still handle JSON, which an [`Item`] becomes on
//! demand.

use std::borrow::Cow;
use std::collections::BTreeMap;

use hns_api::{
    HNCConfiguration, HierarchicalResourceQuota, HierarchyConfiguration, Subnamespace, SubnamespaceAnchor,
    SubnamespaceAnchorSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;
use serde_json::Value;

use crate::http::list::Selectable;
use crate::http::status::ApiError;

/// One object of one of hns's resources.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Item {
    /// A namespace's `HierarchyConfiguration`.
    Hierarchy(HierarchyConfiguration),
    /// A subnamespace, as kind `Subnamespace`.
    Subnamespace(Subnamespace),
    /// A subnamespace, as HNC's kind `SubnamespaceAnchor`.
    Anchor(SubnamespaceAnchor),
    /// A `HierarchicalResourceQuota`.
    Quota(HierarchicalResourceQuota),
    /// The `HNCConfiguration`.
    Config(HNCConfiguration),
}

impl Item {
    /// Its metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Item::Hierarchy(o) => &o.metadata,
            Item::Subnamespace(o) => &o.metadata,
            Item::Anchor(o) => &o.metadata,
            Item::Quota(o) => &o.metadata,
            Item::Config(o) => &o.metadata,
        }
    }

    /// Subnamespace `sub` as an object of kind `kind` (`Subnamespace`, or HNC's
    /// `SubnamespaceAnchor`: the same object).
    pub fn subnamespace(sub: Subnamespace, kind: &str) -> Item {
        if kind != SubnamespaceAnchor::kind(&()) {
            return Item::Subnamespace(sub);
        }
        let spec = SubnamespaceAnchorSpec { labels: sub.spec.labels, annotations: sub.spec.annotations };
        Item::Anchor(SubnamespaceAnchor { metadata: sub.metadata, spec, status: sub.status })
    }

    /// The object reduced to its kind, name and namespace, at `resource_version`: what a watch
    /// tells a user who may no longer see it that it left their view. The resourceVersion is the
    /// watch's, not the object's: watch clients (client-go's reflector, kube-runtime's watcher)
    /// resume from the last event's, and kube-runtime's fails on an event without one.
    pub fn tombstone(&self, resource_version: u64) -> Item {
        let name = self.name();
        let mut item = match self {
            Item::Hierarchy(_) => Item::Hierarchy(HierarchyConfiguration::new(name, Default::default())),
            Item::Subnamespace(_) => Item::Subnamespace(Subnamespace::new(name, Default::default())),
            Item::Anchor(_) => Item::Anchor(SubnamespaceAnchor::new(name, Default::default())),
            Item::Quota(_) => Item::Quota(HierarchicalResourceQuota::new(name, Default::default())),
            Item::Config(_) => Item::Config(HNCConfiguration::new(name, Default::default())),
        };
        let meta = item.metadata_mut();
        meta.namespace = self.metadata().namespace.clone();
        meta.resource_version = Some(resource_version.to_string());
        item
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Item::Hierarchy(o) => &mut o.metadata,
            Item::Subnamespace(o) => &mut o.metadata,
            Item::Anchor(o) => &mut o.metadata,
            Item::Quota(o) => &mut o.metadata,
            Item::Config(o) => &mut o.metadata,
        }
    }

    /// Its JSON, type fields included.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The object of kind `value["kind"]` that `value` holds: JSON rendered by hns, read back
    /// for what needs fields (a Table's cells).
    pub fn from_value(value: Value) -> Result<Item, ApiError> {
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let typed = match kind.as_str() {
            "HierarchyConfiguration" => serde_json::from_value(value).map(Item::Hierarchy),
            "Subnamespace" => serde_json::from_value(value).map(Item::Subnamespace),
            "SubnamespaceAnchor" => serde_json::from_value(value).map(Item::Anchor),
            "HierarchicalResourceQuota" => serde_json::from_value(value).map(Item::Quota),
            "HNCConfiguration" => serde_json::from_value(value).map(Item::Config),
            _ => return Err(ApiError::internal(format!("no object of hns's kinds is of kind {kind:?}"))),
        };
        typed.map_err(|e| ApiError::internal(format!("a {kind} rendered by hns does not read back: {e}")))
    }
}

impl Selectable for Item {
    fn namespace(&self) -> &str {
        self.metadata().namespace.as_deref().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    fn labels(&self) -> Option<Cow<'_, BTreeMap<String, String>>> {
        self.metadata().labels.as_ref().map(Cow::Borrowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hns_api::HierarchyConfigurationSpec;

    #[test]
    fn reads_back_what_it_renders() {
        let mut hc = HierarchyConfiguration::new("hierarchy", HierarchyConfigurationSpec::default());
        hc.metadata.namespace = Some("team-a".into());
        hc.spec.parent = Some("acme".into());
        let item = Item::Hierarchy(hc);
        let value = item.to_value();
        assert_eq!(value["kind"], "HierarchyConfiguration");
        assert_eq!(value["apiVersion"], hns_api::API_VERSION);
        assert_eq!(Item::from_value(value.clone()).unwrap().to_value(), value);
        assert!(Item::from_value(serde_json::json!({"kind": "Pod"})).is_err());
        assert_eq!((item.namespace(), item.name()), ("team-a", "hierarchy"));
    }
}
