//! State that lives in the cluster, cached here: the namespace cache (the forest) and the change
//! events it publishes, the HNC configuration, the quota ledgers and
//! the allocations on hns's ResourceQuotas, the sealing key, hns's own writes and the parent
//! lock. Every replica holds the same caches; none holds state of its own.

pub mod cache;
pub mod changes;
pub mod config_store;
pub mod hub;
pub mod parent_lock;
pub mod quota_allocations;
pub mod quota_ledgers;
pub mod quota_usage;
pub mod reached;
pub mod seal_key;
pub mod writer;
