//! `HierarchicalResourceQuota` (short name `hrq`): a budget for a whole subtree. The usage of
//! every namespace below (and in) the quota's namespace counts against `spec.hard`; several
//! quotas may stand in one subtree, and each applies, so the most restrictive wins.
//!
//! HNC's API, with one difference in what is accepted: a quantity may be a string or a JSON
//! integer (as HNC's CRD allowed), but a JSON number with a fraction is refused rather than
//! rounded (HNC #292), since `1.5` and `"1.5"` would otherwise mean different things.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// The name of the ResourceQuota hns keeps in every namespace a hierarchical quota covers
/// (HNC's name), through which Kubernetes counts the namespace's usage.
pub const RESOURCE_QUOTA_NAME: &str = "hrq.hnc.x-k8s.io";

/// The condition type set while a quota's subtree uses more than `spec.hard` allows (it came
/// in over budget through a move or a lowered limit): new usage is refused until it is back
/// under.
pub const CONDITION_EXCEEDED: &str = "Exceeded";

/// A hard limit on the total usage of a subtree.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hnc.x-k8s.io",
    version = "v1alpha2",
    kind = "HierarchicalResourceQuota",
    plural = "hierarchicalresourcequotas",
    shortname = "hrq",
    namespaced,
    status = "HierarchicalResourceQuotaStatus",
    doc = "A hard limit on the usage of the namespace it lives in and all namespaces below it, \
           together. The names of spec.hard are ResourceQuota's (pods, requests.cpu, \
           limits.memory, count/deployments.apps, ...)."
)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.HierarchicalResourceQuotaSpec")]
pub struct HierarchicalResourceQuotaSpec {
    /// The limit for each named resource, over the whole subtree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "resource_list")]
    pub hard: BTreeMap<String, Quantity>,
}

/// What is enforced and what the subtree uses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.x-k8s.hnc.v1alpha2.HierarchicalResourceQuotaStatus")]
pub struct HierarchicalResourceQuotaStatus {
    /// The limits enforced, for each named resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hard: BTreeMap<String, Quantity>,
    /// The total usage of the subtree, for each resource in `hard`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub used: BTreeMap<String, Quantity>,
    /// `Exceeded` while the subtree uses more than a limit, and `Ready` (see [`crate::kstatus`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation this status describes: always the object's own (hns computes the status
    /// when the object is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The REQUEST and LIMIT cells of a quota, as HNC's plugin prints them: `name: used/hard` for
/// each resource of `status.hard` in name order (unused ones as `0`), those named `limits.…`
/// in LIMIT, all others in REQUEST. Served by `kubectl get hrq` and printed by `kubectl hns hrq`.
pub fn summary(status: &HierarchicalResourceQuotaStatus) -> (String, String) {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for (name, hard) in &status.hard {
        let used = status.used.get(name).map_or("0", |q| q.0.as_str());
        let cell = format!("{name}: {used}/{}", hard.0);
        if name.split_once('.').is_some_and(|(first, _)| first == "limits") {
            limits.push(cell);
        } else {
            requests.push(cell);
        }
    }
    (requests.join(", "), limits.join(", "))
}

/// A ResourceList whose values may be strings or JSON integers, but not fractions.
fn resource_list<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Quantity>, D::Error> {
    let raw = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
    raw.into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::String(s) => Ok((name, Quantity(s))),
            serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Ok((name, Quantity(n.to_string()))),
            serde_json::Value::Number(n) => Err(serde::de::Error::custom(format!(
                "{name}: {n} is a JSON number with a fraction; write the quantity as a string (\"{n}\")"
            ))),
            other => Err(serde::de::Error::custom(format!(
                "{name}: a quantity is a string such as \"10\", \"500m\" or \"2Gi\", not {other}"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_hnc_manifest_with_integers_and_strings() {
        let q: HierarchicalResourceQuota = serde_json::from_value(json!({
            "apiVersion": "hnc.x-k8s.io/v1alpha2",
            "kind": "HierarchicalResourceQuota",
            "metadata": {"name": "team-budget", "namespace": "team-a"},
            "spec": {"hard": {"pods": 10, "requests.cpu": "1500m"}}
        }))
        .unwrap();
        assert_eq!(q.spec.hard["pods"], Quantity("10".into()));
        assert_eq!(q.spec.hard["requests.cpu"], Quantity("1500m".into()));
        assert_eq!(
            serde_json::to_value(&q.spec).unwrap(),
            json!({"hard": {"pods": "10", "requests.cpu": "1500m"}})
        );
    }

    #[test]
    fn summaries_split_requests_and_limits_in_name_order() {
        let status: HierarchicalResourceQuotaStatus = serde_json::from_value(json!({
            "hard": {"requests.cpu": "20", "pods": "100", "limits.cpu": "40", "limitsx": "1"},
            "used": {"requests.cpu": "1500m", "pods": "3"}
        }))
        .unwrap();
        assert_eq!(
            summary(&status),
            ("limitsx: 0/1, pods: 3/100, requests.cpu: 1500m/20".to_string(), "limits.cpu: 0/40".to_string())
        );
    }

    #[test]
    fn a_fraction_as_a_json_number_is_refused_with_what_to_write() {
        let err =
            serde_json::from_value::<HierarchicalResourceQuotaSpec>(json!({"hard": {"requests.cpu": 1.5}}))
                .unwrap_err()
                .to_string();
        assert!(err.contains("requests.cpu: 1.5 is a JSON number with a fraction"), "{err}");
        assert!(err.contains("(\"1.5\")"), "{err}");
    }
}
