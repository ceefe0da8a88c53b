//! The API of hns: group `hnc.x-k8s.io`, version `v1alpha2`.
//!
//! These are the types the aggregated API server serves and the plugin reads. Field names and
//! JSON keys are HNC's, so HNC manifests and tools keep working. The crate is plain data: no
//! client, no server, so the plugin can share it without linking the server.
//!
//! Every type implements [`k8s_openapi::Resource`], so `kube::Api<HierarchyConfiguration>`
//! works like it does for built-in kinds.

pub mod config;
pub mod duration;
pub mod hierarchy;
pub mod keys;
pub mod kstatus;
pub mod quota;
pub mod subnamespace;

pub use config::{
    HNCConfiguration, HNCConfigurationSpec, HNCConfigurationStatus, ResourceSpec, ResourceStatus,
};
pub use hierarchy::{
    HierarchyConfiguration, HierarchyConfigurationSpec, HierarchyConfigurationStatus, HierarchyTreeEntry,
    MetaKvp,
};
pub use quota::{HierarchicalResourceQuota, HierarchicalResourceQuotaSpec, HierarchicalResourceQuotaStatus};
pub use subnamespace::{
    Subnamespace, SubnamespaceAnchor, SubnamespaceAnchorSpec, SubnamespaceSpec, SubnamespaceState,
    SubnamespaceStatus,
};

/// The component hns reports Kubernetes Events under (`reportingController`).
pub const EVENT_COMPONENT: &str = "hns.hnc.x-k8s.io";

/// The API group hns serves.
pub const GROUP: &str = "hnc.x-k8s.io";
/// The only version of the group.
pub const VERSION: &str = "v1alpha2";
/// `group/version`, as written in `apiVersion`.
pub const API_VERSION: &str = "hnc.x-k8s.io/v1alpha2";
