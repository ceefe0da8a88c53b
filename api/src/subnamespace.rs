//! Subnamespaces: a namespace created and owned through its parent.
//!
//! The object lives in the parent namespace and is named after the child namespace. hns serves
//! it under two kinds: `Subnamespace` (`subnamespaces`, short `subns`) and HNC's
//! `SubnamespaceAnchor` (`subnamespaceanchors`), so HNC manifests and tools keep working. Both
//! are views of the same fact: the child namespace's `hnc.x-k8s.io/subnamespace-of` annotation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hierarchy::MetaKvp;

/// A subnamespace of the namespace it is created in.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hnc.x-k8s.io",
    version = "v1alpha2",
    kind = "Subnamespace",
    plural = "subnamespaces",
    shortname = "subns",
    namespaced,
    status = "SubnamespaceStatus",
    doc = "A namespace created under the namespace this object lives in; the object's name is the new namespace's name."
)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.SubnamespaceSpec")]
pub struct SubnamespaceSpec {
    /// Labels set on the subnamespace and its descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub labels: Vec<MetaKvp>,
    /// Annotations set on the subnamespace and its descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub annotations: Vec<MetaKvp>,
}

/// HNC's name for a [`Subnamespace`]: the same object under the kind HNC users know.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hnc.x-k8s.io",
    version = "v1alpha2",
    kind = "SubnamespaceAnchor",
    plural = "subnamespaceanchors",
    namespaced,
    status = "SubnamespaceStatus",
    doc = "HNC's name for a Subnamespace: the anchor of a subnamespace in its parent namespace."
)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.SubnamespaceAnchorSpec")]
pub struct SubnamespaceAnchorSpec {
    /// Labels set on the subnamespace and its descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub labels: Vec<MetaKvp>,
    /// Annotations set on the subnamespace and its descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub annotations: Vec<MetaKvp>,
}

/// Observed state of a subnamespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.SubnamespaceStatus")]
pub struct SubnamespaceStatus {
    /// The state: Ok, Missing, Conflict, Forbidden or Terminating.
    /// The JSON key really is `status`, as in HNC.
    #[serde(rename = "status", default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SubnamespaceState>,
    /// The generation this status describes: always the object's own (hns computes the status
    /// when the object is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, and `Stalled` (the parent may not have subnamespaces) or `Reconciling` (the
    /// namespace is being deleted): what GitOps tools judge health by (see [`crate::kstatus`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// States of a subnamespace (HNC's anchor states): `Ok`, the namespace exists and is this
/// object's subnamespace; `Missing`, it does not exist (yet); `Conflict`, a namespace of that name
/// exists but is not this object's subnamespace; `Forbidden`, the parent may not have
/// subnamespaces (it is excluded from hierarchies); `Terminating`, the namespace is being deleted
/// (hns's addition: HNC went on saying `Ok` until the namespace was gone).
// No doc comments on the variants: schemars would describe each in a `oneOf`, which OpenAPI v2
// (and so kube-apiserver's merged document) cannot hold; a plain string enum is what it needs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.SubnamespaceState")]
#[allow(missing_docs)]
pub enum SubnamespaceState {
    Ok,
    Missing,
    Conflict,
    Forbidden,
    Terminating,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_hnc_anchor_manifest() {
        let a: SubnamespaceAnchor = serde_json::from_value(json!({
            "apiVersion": "hnc.x-k8s.io/v1alpha2",
            "kind": "SubnamespaceAnchor",
            "metadata": {"name": "team-a-dev", "namespace": "team-a"},
            "spec": {"labels": [{"key": "env", "value": "dev"}]},
            "status": {"status": "Ok"}
        }))
        .unwrap();
        assert_eq!(a.spec.labels[0].value, "dev");
        assert_eq!(a.status.unwrap().state, Some(SubnamespaceState::Ok));
    }

    #[test]
    fn state_key_is_status() {
        let s = SubnamespaceStatus { state: Some(SubnamespaceState::Forbidden), ..Default::default() };
        assert_eq!(serde_json::to_value(s).unwrap(), json!({"status": "Forbidden"}));
        let s = SubnamespaceStatus { state: Some(SubnamespaceState::Terminating), ..Default::default() };
        assert_eq!(serde_json::to_value(s).unwrap(), json!({"status": "Terminating"}));
    }
}
