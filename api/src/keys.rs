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
}
