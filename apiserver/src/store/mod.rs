//! State that lives in the cluster, cached here: the namespace cache (the forest) and the change
//! events it publishes, the HNC configuration, the quota ledgers and
//! the allocations on hns's ResourceQuotas, the sealing key, hns's own writes and the parent
//! lock. Every replica holds the same caches; none holds state of its own.

pub mod allocations;
pub mod cache;
pub mod changes;
pub mod config_store;
pub mod hub;
pub mod ledger;
pub mod parent_lock;
pub mod reached;
pub mod resource_quotas;
pub mod seal_key;
pub mod writer;
