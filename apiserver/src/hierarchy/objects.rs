//! The objects hns derives from the forest: a namespace's HierarchyConfiguration and a
//! subnamespace's Subnamespace (or SubnamespaceAnchor), and, through [`value`], any kind of
//! [`Derived`] object (HierarchicalResourceQuotas are built in `quotas`). Reads, watch events
//! and writes' replies all build them here, so every view of one namespace agrees.

use hns_api::hierarchy::HIERARCHY_SINGLETON;
use hns_api::{
    HierarchyConfiguration, HierarchyConfigurationSpec, HierarchyConfigurationStatus, Subnamespace,
    SubnamespaceSpec, SubnamespaceState, SubnamespaceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde_json::Value;

use crate::hierarchy::forest::{Forest, Node};
use crate::hierarchy::identity::{self, Derived};
use crate::hierarchy::kstatus;
use crate::hierarchy::policy::Policy;
use crate::hierarchy::quotas;

// resourceVersions: both objects keep the namespace's numbers (the configuration also moves with
// its children's), as two objects written in one etcd transaction share a revision. A
// resourceVersion is compared for equality per object (an update's precondition, `kubectl
// apply`, server-side apply) and ordered per collection (a watch resumes, a list with
// `resourceVersionMatch` is served, from the one sequence of namespace changes both collections
// are projections of), so a number shared across the two kinds is never compared with itself in
// another kind's role. Distinct numbers would need a mapping that replicas cannot agree on
// without storing it, or a second sequence that a watch resumed on another replica could not
// place.

/// The `derived` object `name` in namespace `ns` as it stands in `forest`, as JSON; `None` if
/// there is none, and for the HNCConfiguration, which comes from its ConfigMap instead.
pub fn value(derived: Derived, forest: &Forest, policy: &Policy, ns: &str, name: &str) -> Option<Value> {
    match derived {
        Derived::HierarchyConfiguration => hierarchy_configuration_value(forest, ns),
        Derived::HncConfiguration => None,
        Derived::HierarchicalResourceQuota => quotas::quota_value(forest, ns, name),
        Derived::Subnamespace => forest
            .get(name)
            .filter(|n| n.is_subnamespace && n.parent.as_deref() == Some(ns))
            .filter(|n| forest.anchor_exists(n))
            .map(|n| subnamespace_value(policy, n, "Subnamespace")),
    }
}

/// The hierarchy configuration of namespace `node`.
///
/// Its identity follows the namespace: a uid of its own derived from the namespace's (see
/// [`identity`]), the same creation time, and a resourceVersion that moves with the namespace and
/// with its children, so a stale update is refused.
pub fn hierarchy_configuration(forest: &Forest, node: &Node) -> HierarchyConfiguration {
    let ns = &node.meta;
    let mut hc = HierarchyConfiguration {
        metadata: ObjectMeta {
            name: Some(HIERARCHY_SINGLETON.to_string()),
            namespace: Some(node.name().to_string()),
            uid: identity::uid_of(ns.uid(), Derived::HierarchyConfiguration),
            resource_version: Some(node.hierarchy_resource_version().to_string()),
            creation_timestamp: ns.creation_timestamp().cloned(),
            deletion_timestamp: ns.deletion_timestamp().cloned(),
            generation: Some(kstatus::GENERATION),
            ..Default::default()
        },
        spec: HierarchyConfigurationSpec {
            parent: node.parent.clone(),
            allow_cascading_deletion: node.allow_cascading_deletion,
            labels: node.managed_labels().to_vec(),
            annotations: node.managed_annotations().to_vec(),
        },
        status: Some(HierarchyConfigurationStatus {
            children: forest.children(node.name()).map(str::to_string).collect(),
            conditions: hierarchy_conditions(ns.annotation(hns_api::keys::CONDITIONS)),
            observed_generation: Some(kstatus::GENERATION),
        }),
    };
    node.hierarchy_meta().fill(&mut hc.metadata);
    hc
}

/// HNC's conditions as recorded on the namespace, and `Stalled` when there are any.
fn hierarchy_conditions(recorded: Option<&str>) -> Vec<Condition> {
    let mut conditions = crate::hierarchy::conditions::recorded(recorded);
    conditions.extend(kstatus::hierarchy_configuration(&conditions));
    conditions
}

/// The JSON of namespace `ns`'s configuration, if the namespace exists.
pub fn hierarchy_configuration_value(forest: &Forest, ns: &str) -> Option<Value> {
    forest.get(ns).map(|n| serde_json::to_value(hierarchy_configuration(forest, n)).unwrap_or_default())
}

/// The JSON of subnamespace `node` as kind `kind` (`Subnamespace` or HNC's
/// `SubnamespaceAnchor`: the same object).
pub fn subnamespace_value(policy: &Policy, node: &Node, kind: &str) -> Value {
    let mut v = serde_json::to_value(subnamespace(policy, node)).unwrap_or_default();
    v["kind"] = kind.into();
    v
}

/// The object for subnamespace `node`: a uid of its own derived from the namespace's, and the
/// namespace's resourceVersion.
pub fn subnamespace(policy: &Policy, node: &Node) -> Subnamespace {
    let ns = &node.meta;
    let parent = node.parent.clone().unwrap_or_default();
    let state = subnamespace_state(policy, node, &parent);
    let parent_name = parent.clone();
    let since = if state == SubnamespaceState::Terminating {
        ns.deletion_timestamp()
    } else {
        ns.creation_timestamp()
    };
    let mut obj = Subnamespace {
        metadata: ObjectMeta {
            name: Some(node.name().to_string()),
            namespace: Some(parent),
            uid: identity::uid_of(ns.uid(), Derived::Subnamespace),
            resource_version: ns.resource_version().map(str::to_string),
            creation_timestamp: ns.creation_timestamp().cloned(),
            deletion_timestamp: ns.deletion_timestamp().cloned(),
            generation: Some(kstatus::GENERATION),
            ..Default::default()
        },
        spec: SubnamespaceSpec {
            labels: node.managed_labels().to_vec(),
            annotations: node.managed_annotations().to_vec(),
        },
        status: Some(SubnamespaceStatus {
            state: Some(state),
            observed_generation: Some(kstatus::GENERATION),
            conditions: kstatus::subnamespace(state, node.name(), &parent_name, since),
        }),
    };
    node.subnamespace_meta().fill(&mut obj.metadata);
    obj
}

/// HNC's anchor state, and `Terminating` while the namespace is being deleted: what an operator
/// watching a deletion needs to see first, whatever else is true of it.
fn subnamespace_state(policy: &Policy, node: &Node, parent: &str) -> SubnamespaceState {
    if node.is_terminating() {
        SubnamespaceState::Terminating
    } else if policy.is_excluded(parent) {
        SubnamespaceState::Forbidden
    } else {
        SubnamespaceState::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::{forest, namespace};
    use crate::hierarchy::policy::testing::policy;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn a_subnamespace_and_its_configuration_have_uids_of_their_own() {
        let mut f = forest("team-a");
        let mut ns = namespace("dev", Some("team-a"), true);
        ns.metadata.uid = Some("0b6c9e43-6a3e-4b8f-9d6c-3f1e2a7b5c10".into());
        f.upsert(ns);
        let node = f.get("dev").unwrap();
        let hc = hierarchy_configuration(&f, node).metadata.uid.unwrap();
        let sub = subnamespace_value(&policy(), node, "Subnamespace")["metadata"]["uid"].clone();
        let anchor = subnamespace_value(&policy(), node, "SubnamespaceAnchor")["metadata"]["uid"].clone();
        assert_ne!(sub, hc.as_str());
        assert_ne!(hc, "0b6c9e43-6a3e-4b8f-9d6c-3f1e2a7b5c10");
        assert_eq!(sub, anchor, "one object under two resources");
    }

    #[test]
    fn a_terminating_subnamespace_says_so() {
        let mut f = forest("kube-system team-a");
        for parent in ["team-a", "kube-system"] {
            let mut ns = namespace(&format!("dev-{parent}"), Some(parent), true);
            ns.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
            f.upsert(ns);
            let v = subnamespace_value(&policy(), f.get(&format!("dev-{parent}")).unwrap(), "Subnamespace");
            assert_eq!(v["status"]["status"], "Terminating", "in {parent}");
        }
    }
}
