//! `HNCConfiguration`: the cluster-wide singleton `config` saying which kinds propagate down
//! the hierarchy, and how.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only name an HNCConfiguration may have.
pub const CONFIG_SINGLETON: &str = "config";

/// The propagation modes HNC defines: `Propagate` (copy to every descendant; also what an empty
/// mode means), `Remove` (delete existing copies and stop), `Ignore` (leave copies alone, make
/// none), `AllowPropagate` (copy only objects that ask for it with a selector annotation).
pub const MODES: &[&str] = &["Propagate", "Remove", "Ignore", "AllowPropagate"];

/// Cluster-wide configuration of hns.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hnc.x-k8s.io",
    version = "v1alpha2",
    kind = "HNCConfiguration",
    plural = "hncconfigurations",
    status = "HNCConfigurationStatus",
    doc = "The cluster-wide configuration of hns: which kinds are propagated down the hierarchy. One object, named `config`."
)]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.HNCConfigurationSpec")]
pub struct HNCConfigurationSpec {
    /// Kinds to propagate (or not), besides Roles and RoleBindings, which always propagate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub resources: Vec<ResourceSpec>,
}

/// How one kind is propagated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.ResourceSpec")]
pub struct ResourceSpec {
    /// API group of the kind; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Plural resource name, e.g. `secrets`.
    pub resource: String,
    /// Propagate (the default), Remove, Ignore or AllowPropagate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// What hns observes about propagation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.HNCConfigurationStatus")]
pub struct HNCConfigurationStatus {
    /// Every kind hns synchronizes, with its effective mode and counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// Problems with the configuration or the hierarchy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The state of one synchronized kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.ResourceStatus")]
pub struct ResourceStatus {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The version hns uses.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
    /// The effective mode.
    pub mode: String,
    /// Copies hns has made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_propagated_objects: Option<i32>,
    /// Objects copies are made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_source_objects: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_hnc_config() {
        let c: HNCConfiguration = serde_json::from_value(json!({
            "apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HNCConfiguration",
            "metadata": {"name": "config"},
            "spec": {"resources": [{"resource": "secrets", "mode": "Propagate"}, {"group": "networking.k8s.io", "resource": "networkpolicies"}]}
        }))
        .unwrap();
        assert_eq!(c.spec.resources[0].group, "");
        assert_eq!(c.spec.resources[1].mode, None);
    }
}
