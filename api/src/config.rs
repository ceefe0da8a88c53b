//! `HNCConfiguration`: the cluster-wide singleton `config` saying which kinds propagate down
//! the hierarchy, and how.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only name an HNCConfiguration may have.
pub const CONFIG_SINGLETON: &str = "config";

/// How a kind propagates down the hierarchy: HNC's modes, spelled as HNC spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Copy to every descendant (also what an empty mode means).
    Propagate,
    /// Delete existing copies; make none.
    Remove,
    /// Leave copies alone; make none.
    Ignore,
    /// Copy only objects that ask for it with an exception annotation.
    AllowPropagate,
}

impl Mode {
    /// Every mode, in the order HNC documents them.
    pub const ALL: [Mode; 4] = [Mode::Propagate, Mode::Remove, Mode::Ignore, Mode::AllowPropagate];

    /// The name HNC shows and accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Propagate => "Propagate",
            Mode::Remove => "Remove",
            Mode::Ignore => "Ignore",
            Mode::AllowPropagate => "AllowPropagate",
        }
    }

    /// HNC's reading of a stored mode: empty is Propagate, anything unknown is Ignore (an
    /// object written before validation existed must not make hns copy or delete anything).
    pub fn effective(s: Option<&str>) -> Mode {
        match s.unwrap_or("") {
            "" => Mode::Propagate,
            s => s.parse().unwrap_or(Mode::Ignore),
        }
    }

    /// The accepted names, quoted and comma-separated, for error messages.
    pub fn supported_values() -> String {
        Mode::ALL.iter().map(|m| format!("\"{}\"", m.as_str())).collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is none of HNC's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl std::fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Unsupported value: \"{}\": supported values: {}", self.0, Mode::supported_values())
    }
}

impl std::error::Error for UnknownMode {}

impl std::str::FromStr for Mode {
    type Err = UnknownMode;

    /// Exactly one of HNC's names (case matters, as in HNC's validation).
    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| UnknownMode(s.to_string()))
    }
}

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

    #[test]
    fn modes_read_as_hnc_reads_them() {
        assert_eq!(Mode::effective(None), Mode::Propagate);
        assert_eq!(Mode::effective(Some("")), Mode::Propagate);
        assert_eq!(Mode::effective(Some("Often")), Mode::Ignore);
        assert_eq!(Mode::effective(Some("AllowPropagate")), Mode::AllowPropagate);
        assert_eq!("remove".parse::<Mode>(), Err(UnknownMode("remove".into())));
        assert_eq!(
            UnknownMode("x".into()).to_string(),
            "Unsupported value: \"x\": supported values: \"Propagate\", \"Remove\", \"Ignore\", \"AllowPropagate\""
        );
        assert!(Mode::ALL.iter().all(|m| m.as_str().parse::<Mode>() == Ok(*m)));
    }
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
