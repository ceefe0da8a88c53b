//! `HierarchyConfiguration`: the singleton `hierarchy` in every namespace, saying who its parent
//! is and whether cascading deletion is allowed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only name a HierarchyConfiguration may have.
pub const HIERARCHY_SINGLETON: &str = "hierarchy";

/// The desired place of a namespace in the hierarchy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hnc.x-k8s.io",
    version = "v1alpha2",
    kind = "HierarchyConfiguration",
    plural = "hierarchyconfigurations",
    namespaced,
    status = "HierarchyConfigurationStatus",
    doc = "The hierarchical configuration of a namespace: its parent and related settings. \
           Every namespace has exactly one, named `hierarchy`."
)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.HierarchyConfigurationSpec")]
pub struct HierarchyConfigurationSpec {
    /// The parent namespace, if any. A namespace without a parent is a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,

    /// Whether deleting this namespace (or its subnamespace) may delete its subnamespaces too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_cascading_deletion: bool,

    /// Labels set on this namespace and all its descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub labels: Vec<MetaKvp>,

    /// Annotations set on this namespace and all its descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub annotations: Vec<MetaKvp>,
}

/// A label or annotation, as HNC writes them: a list of key/value pairs rather than a map.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.MetaKVP")]
pub struct MetaKvp {
    /// The label or annotation key.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// What hns observes about a namespace's place in the hierarchy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.HierarchyConfigurationStatus")]
pub struct HierarchyConfigurationStatus {
    /// The namespaces whose parent is this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,

    /// Problems with this namespace's place in the hierarchy (HNC's `ActivitiesHalted` and
    /// `BadConfiguration`), and `Stalled` while there are any (see [`crate::kstatus`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The generation this status describes: always the object's own (hns computes the status
    /// when the object is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl HierarchyConfigurationStatus {
    /// HNC's conditions, the problems themselves, without the [`crate::kstatus`] summary of them.
    pub fn problems(&self) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(|c| !crate::kstatus::is_kstatus(&c.type_))
    }
}

/// The kind of a list of hierarchy configurations asked for as each namespace's place in the
/// hierarchy only (`Accept: application/json;as=HierarchyTree;g=hnc.x-k8s.io;v=v1alpha2`), what
/// `kubectl hns tree` reads: `{"kind": "HierarchyTree", "apiVersion": ..., "metadata":
/// {"resourceVersion": ...}, "namespaces": [HierarchyTreeEntry, ...]}`.
pub const HIERARCHY_TREE_KIND: &str = "HierarchyTree";

/// One namespace of a `HierarchyTree`. `S` is how names are held: the server writes them
/// borrowed from its forest (`&str`), clients read them owned (`String`, the default).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HierarchyTreeEntry<S = String> {
    /// The namespace.
    pub name: S,
    /// Its parent, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<S>,
    /// Whether it is a subnamespace of its parent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subnamespace: bool,
    /// Whether it is being deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminating: bool,
    /// Its `allowCascadingDeletion`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_cascading_deletion: bool,
    /// Problems with its place in the hierarchy, as its configuration has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The names of its children the requester may not see.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_children: Vec<S>,
    /// Those of `hidden_children` that are subnamespaces: a view may hide a namespace, but what
    /// it shows must be true, and a hidden subnamespace is no full namespace (whoever may list
    /// the Subnamespaces in this namespace sees it as one anyway).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_subnamespaces: Vec<S>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tree_entry_written_borrowed_reads_back_owned() {
        let written = HierarchyTreeEntry {
            name: "dev",
            parent: Some("team-a"),
            subnamespace: true,
            terminating: false,
            allow_cascading_deletion: false,
            conditions: vec![],
            hidden_children: vec!["svc-1", "svc-2"],
            hidden_subnamespaces: vec!["svc-1"],
        };
        let v = serde_json::to_value(&written).unwrap();
        assert_eq!(
            v,
            json!({"name": "dev", "parent": "team-a", "subnamespace": true, "hiddenChildren": ["svc-1", "svc-2"], "hiddenSubnamespaces": ["svc-1"]})
        );
        let read: HierarchyTreeEntry = serde_json::from_value(v).unwrap();
        assert_eq!(read.name, "dev");
        assert_eq!(read.parent.as_deref(), Some("team-a"));
        assert_eq!(read.hidden_children, ["svc-1", "svc-2"]);
        assert_eq!(read.hidden_subnamespaces, ["svc-1"]);
        assert!(read.subnamespace && !read.terminating && !read.allow_cascading_deletion);
    }

    #[test]
    fn serializes_with_hnc_field_names() {
        let mut hc = HierarchyConfiguration::new(
            HIERARCHY_SINGLETON,
            HierarchyConfigurationSpec {
                parent: Some("acme-org".into()),
                allow_cascading_deletion: true,
                ..Default::default()
            },
        );
        hc.status =
            Some(HierarchyConfigurationStatus { children: vec!["svc-1".into()], ..Default::default() });
        let v = serde_json::to_value(&hc).unwrap();
        assert_eq!(v["apiVersion"], "hnc.x-k8s.io/v1alpha2");
        assert_eq!(v["kind"], "HierarchyConfiguration");
        assert_eq!(v["spec"], json!({"parent": "acme-org", "allowCascadingDeletion": true}));
        assert_eq!(v["status"], json!({"children": ["svc-1"]}));
    }

    #[test]
    fn reads_an_hnc_manifest() {
        let hc: HierarchyConfiguration = serde_json::from_value(json!({
            "apiVersion": "hnc.x-k8s.io/v1alpha2",
            "kind": "HierarchyConfiguration",
            "metadata": {"name": "hierarchy", "namespace": "team-a"},
            "spec": {"parent": "acme-org", "labels": [{"key": "env", "value": "prod"}]}
        }))
        .unwrap();
        assert_eq!(hc.spec.parent.as_deref(), Some("acme-org"));
        assert!(!hc.spec.allow_cascading_deletion);
        assert_eq!(hc.spec.labels, vec![MetaKvp { key: "env".into(), value: "prod".into() }]);
    }
}
