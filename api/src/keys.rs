//! Labels and annotations hns reads and writes on Namespace objects.
//!
//! All hierarchy state lives on the cluster's Namespace objects; these keys are its schema.
//! Where HNC has a key for the same fact, hns uses HNC's exact key.

/// Suffix of a tree label: `<ancestor>.tree.hnc.x-k8s.io/depth: "<n>"` (HNC).
pub const TREE_LABEL_SUFFIX: &str = ".tree.hnc.x-k8s.io/depth";

/// Annotation marking a subnamespace; its value is the parent namespace (HNC).
pub const SUBNAMESPACE_OF: &str = "hnc.x-k8s.io/subnamespace-of";

/// Annotation holding the parent of a full (non-sub) namespace.
///
/// HNC keeps this in a HierarchyConfiguration custom resource; hns keeps no objects of its own,
/// so the fact moves onto the namespace.
pub const PARENT: &str = "hnc.x-k8s.io/parent";

/// Annotation holding `spec.allowCascadingDeletion` of the namespace's hierarchy configuration.
pub const ALLOW_CASCADING_DELETION: &str = "hnc.x-k8s.io/allow-cascading-deletion";

/// Label on every namespace that takes part in a hierarchy (has a parent or children).
///
/// The fail-closed part of hns's namespace webhook selects namespaces by this label, so an hns
/// outage never blocks namespaces outside hierarchies.
pub const HIERARCHY_MEMBER: &str = "hnc.x-k8s.io/hierarchy-member";

/// Label on every namespace hns manages (every one not excluded), hierarchy or not: `"true"`
/// (HNC's key). Webhooks and policies written for HNC select managed namespaces by it.
pub const INCLUDED_NAMESPACE: &str = "hnc.x-k8s.io/included-namespace";

/// Annotation holding `spec.labels` (managed labels) as a JSON list of `{key, value}`.
pub const MANAGED_LABELS: &str = "hnc.x-k8s.io/managed-labels";

/// Annotation holding `spec.annotations` (managed annotations) as a JSON list of `{key, value}`.
pub const MANAGED_ANNOTATIONS: &str = "hnc.x-k8s.io/managed-annotations";

/// Annotation holding the labels and annotations users set on the namespace's
/// HierarchyConfiguration object itself (e.g. kubectl's last-applied-configuration), as JSON.
pub const HIERARCHY_OBJECT_META: &str = "hnc.x-k8s.io/hierarchy-object-meta";

/// Annotation holding the labels and annotations users set on the Subnamespace (anchor) object
/// of this namespace, as JSON.
pub const SUBNAMESPACE_OBJECT_META: &str = "hnc.x-k8s.io/subnamespace-object-meta";

/// Annotation holding the namespace's conditions (JSON list of `metav1.Condition`), recorded by
/// hns's controller and shown in its HierarchyConfiguration's status.
pub const CONDITIONS: &str = "hnc.x-k8s.io/conditions";

/// Annotation holding hns's seal over the hierarchy annotations: an HMAC, under a key only hns
/// holds, that lets hns tell state it wrote from state written while its webhook was skipped.
pub const SEAL: &str = "hnc.x-k8s.io/seal";

/// Annotation holding the namespace's HierarchicalResourceQuotas (JSON: name to stored quota),
/// written by hns only.
pub const RESOURCE_QUOTAS: &str = "hnc.x-k8s.io/hierarchical-resource-quotas";

/// Label on the ResourceQuota hns keeps in each namespace a hierarchical quota covers (HNC's).
pub const HRQ_LABEL: &str = "hnc.x-k8s.io/hrq";

/// Prefix of the annotations on hns's ResourceQuota that name, for each compute resource every
/// container must then declare (`requests.cpu`, `limits.memory`, …), the nearest
/// HierarchicalResourceQuota that limits it, as `NAMESPACE/NAME`. The admission policy
/// `hns-hrq-required-resources` reads them to name that quota when a pod lacks the resource;
/// Kubernetes' own refusal can only name the ResourceQuota.
pub const REQUIRED_BY_PREFIX: &str = "required-by.hrq.hnc.x-k8s.io/";

/// Label on a namespace that entered a hierarchical quota's subtree and whose usage hns does not
/// count yet: objects may not be created in it until hns removes the label.
pub const HRQ_PENDING_LABEL: &str = "hnc.x-k8s.io/hrq-pending";

/// Finalizer on a namespace while it has subnamespaces (HNC's name; HNC put it on the
/// namespace's HierarchyConfiguration): a namespace is not gone before its subnamespaces are.
pub const HAS_SUBNAMESPACE_FINALIZER: &str = "hnc.x-k8s.io/hasSubnamespace";

/// Annotation written with [`HAS_SUBNAMESPACE_FINALIZER`] just before a namespace is deleted:
/// when (RFC 3339). A hold still on a namespace that is not being deleted a while later was made
/// for a deletion that never happened (refused after, or a forged admission review), and hns
/// takes it back.
pub const HELD_AT: &str = "hnc.x-k8s.io/held-for-subnamespaces-at";

/// Annotation written with [`HIERARCHY_MEMBER`] on a namespace about to gain its first child,
/// when (RFC 3339): hns marks a parent a member before it creates or moves the child, and its
/// controller keeps the mark for a while although the namespace has no child yet, rather than
/// taking it back and writing it again once the child comes. Removed once the child comes, or
/// with the mark once that while is over.
pub const MARKED_AT: &str = "hnc.x-k8s.io/member-marked-at";

/// Annotation by which a tool outside hns (Config Sync, Anthos Config Management) says that it
/// manages a root namespace's place in a hierarchy of its own (HNC's key): hns then keeps the
/// tree labels that tool gives the namespace, and gives them to the namespace's descendants in
/// hns, one deeper for each level. Its value names the tool; [`MANAGED_BY_HNC`] or an empty
/// value means hns itself, as no annotation does. Not hns's to write: the tool sets it.
pub const MANAGED_BY: &str = "hnc.x-k8s.io/managed-by";

/// The value of [`MANAGED_BY`] that names HNC (and hns) itself.
pub const MANAGED_BY_HNC: &str = "hnc.x-k8s.io";

/// The tool a [`MANAGED_BY`] value names, if it is one other than hns.
pub fn external_manager(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty() && *v != MANAGED_BY_HNC)
}

/// Every annotation only hns may write.
pub const HNS_ANNOTATIONS: &[&str] = &[
    CONDITIONS,
    HELD_AT,
    MARKED_AT,
    SUBNAMESPACE_OF,
    PARENT,
    ALLOW_CASCADING_DELETION,
    MANAGED_LABELS,
    MANAGED_ANNOTATIONS,
    HIERARCHY_OBJECT_META,
    SUBNAMESPACE_OBJECT_META,
    RESOURCE_QUOTAS,
    SEAL,
];

/// Whether hns maintains the label `key`: it sets and removes it, and users may not change it
/// (`included-namespace` may also be written as `"true"` by users, as HNC allows).
pub fn is_hns_label(key: &str) -> bool {
    key == HIERARCHY_MEMBER
        || key == INCLUDED_NAMESPACE
        || key == HRQ_PENDING_LABEL
        || tree_label_ancestor(key).is_some()
}

/// The tree label of `ancestor`, e.g. `acme-org.tree.hnc.x-k8s.io/depth`.
pub fn tree_label(ancestor: &str) -> String {
    format!("{ancestor}{TREE_LABEL_SUFFIX}")
}

/// The ancestor named by a tree label key, if `key` is one.
pub fn tree_label_ancestor(key: &str) -> Option<&str> {
    key.strip_suffix(TREE_LABEL_SUFFIX).filter(|a| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_label_round_trips() {
        assert_eq!(tree_label("acme-org"), "acme-org.tree.hnc.x-k8s.io/depth");
        assert_eq!(tree_label_ancestor("acme-org.tree.hnc.x-k8s.io/depth"), Some("acme-org"));
        assert_eq!(tree_label_ancestor(".tree.hnc.x-k8s.io/depth"), None);
        assert_eq!(tree_label_ancestor("app.kubernetes.io/name"), None);
    }

    #[test]
    fn only_another_tools_name_makes_a_namespace_external() {
        assert_eq!(external_manager(Some("configmanagement.gke.io")), Some("configmanagement.gke.io"));
        assert_eq!(external_manager(Some(MANAGED_BY_HNC)), None);
        assert_eq!(external_manager(Some("")), None);
        assert_eq!(external_manager(None), None);
    }

    #[test]
    fn hns_labels() {
        assert!(is_hns_label("a.tree.hnc.x-k8s.io/depth"));
        assert!(is_hns_label(HIERARCHY_MEMBER));
        assert!(is_hns_label(INCLUDED_NAMESPACE));
        assert!(!is_hns_label("team"));
    }
}
