//! The condition types GitOps tools judge an object's health by (kstatus, the library of Flux,
//! kpt and cli-utils; Argo CD needs a health check reading them, docs/gitops.md): `Ready` says the object is what
//! its spec asks, `Reconciling` that hns is still getting there, `Stalled` that it cannot get
//! there without someone's help. Each object's `status.observedGeneration` is its generation:
//! hns computes the status when the object is read, so it has always seen the current spec.
//!
//! Served on Subnamespace and SubnamespaceAnchor (`Ready`, with `Stalled` or `Reconciling`),
//! HierarchicalResourceQuota (`Ready`), and on a HierarchyConfiguration only while it has
//! problems (`Stalled`): HNC's tools print every condition of a HierarchyConfiguration as a
//! problem, so a healthy one keeps none, which kstatus reads as current.

/// The object is what its spec asks for.
pub const READY: &str = "Ready";
/// hns is still making the object what its spec asks for.
pub const RECONCILING: &str = "Reconciling";
/// hns cannot make the object what its spec asks for without someone changing something.
pub const STALLED: &str = "Stalled";

/// Whether `type_` is one of these, not one of HNC's own conditions.
pub fn is_kstatus(type_: &str) -> bool {
    [READY, RECONCILING, STALLED].contains(&type_)
}
