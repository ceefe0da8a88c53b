//! The objects hns derives from the forest: a namespace's HierarchyConfiguration and a
//! subnamespace's Subnamespace (or SubnamespaceAnchor). Reads, watch events and writes' replies
//! all build them here, so every view of one namespace agrees.

use hns_api::hierarchy::HIERARCHY_SINGLETON;
use hns_api::{
    HierarchyConfiguration, HierarchyConfigurationSpec, HierarchyConfigurationStatus, Subnamespace,
    SubnamespaceSpec, SubnamespaceState, SubnamespaceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::hierarchy::forest::{Forest, Node};
use crate::hierarchy::policy::Policy;

/// The hierarchy configuration of namespace `node`.
///
/// Its identity follows the namespace: same uid and creation time, and a resourceVersion that
/// moves with the namespace and with its children, so a stale update is refused.
pub fn hierarchy_configuration(forest: &Forest, node: &Node) -> HierarchyConfiguration {
    let ns = &node.object.metadata;
    let mut hc = HierarchyConfiguration {
        metadata: ObjectMeta {
            name: Some(HIERARCHY_SINGLETON.to_string()),
            namespace: ns.name.clone(),
            uid: ns.uid.clone(),
            resource_version: Some(node.hierarchy_resource_version().to_string()),
            creation_timestamp: ns.creation_timestamp.clone(),
            deletion_timestamp: ns.deletion_timestamp.clone(),
            generation: Some(1),
            ..Default::default()
        },
        spec: HierarchyConfigurationSpec {
            parent: node.parent.clone(),
            allow_cascading_deletion: node.allow_cascading_deletion,
            labels: node.managed_labels.clone(),
            annotations: node.managed_annotations.clone(),
        },
        status: Some(HierarchyConfigurationStatus {
            children: forest.children(node.name()).map(str::to_string).collect(),
            conditions: crate::hierarchy::conditions::recorded(ns.annotations.as_ref()),
        }),
    };
    node.hierarchy_meta.fill(&mut hc.metadata);
    hc
}

/// The JSON of namespace `ns`'s configuration, if the namespace exists.
pub fn hierarchy_configuration_value(forest: &Forest, ns: &str) -> Option<Value> {
    forest.get(ns).map(|n| serde_json::to_value(hierarchy_configuration(forest, n)).unwrap_or_default())
}

/// The object for subnamespace `node`, as kind `kind`.
pub fn subnamespace(policy: &Policy, node: &Node, kind: &str) -> Value {
    let ns = &node.object.metadata;
    let parent = node.parent.clone().unwrap_or_default();
    let state =
        if policy.is_excluded(&parent) { SubnamespaceState::Forbidden } else { SubnamespaceState::Ok };
    let mut obj = Subnamespace {
        metadata: ObjectMeta {
            name: ns.name.clone(),
            namespace: Some(parent),
            uid: ns.uid.clone(),
            resource_version: ns.resource_version.clone(),
            creation_timestamp: ns.creation_timestamp.clone(),
            deletion_timestamp: ns.deletion_timestamp.clone(),
            generation: Some(1),
            ..Default::default()
        },
        spec: SubnamespaceSpec {
            labels: node.managed_labels.clone(),
            annotations: node.managed_annotations.clone(),
        },
        status: Some(SubnamespaceStatus { state: Some(state) }),
    };
    node.subnamespace_meta.fill(&mut obj.metadata);
    let mut v = serde_json::to_value(obj).unwrap_or_default();
    v["kind"] = kind.into();
    v
}
