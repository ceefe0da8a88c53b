//! The hierarchy as pure logic, no I/O: the forest of namespaces, the administrator's policy,
//! the rules a change must keep, the conditions and the tree labels a namespace should carry,
//! the identities of derived objects, exact quantities for hierarchical quotas and the ledger their usage is approved against, and the seal that tells hns's own hierarchy state from forged state.

pub mod children;
pub mod conditions;
pub mod forest;
pub mod identity;
pub mod kstatus;
pub mod lineage;
pub mod namespace_meta;
pub mod objects;
pub mod plan;
pub mod policy;
pub mod quotas;
pub mod rules;
pub mod seal;
pub mod tree_labels;
