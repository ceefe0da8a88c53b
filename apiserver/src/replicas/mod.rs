//! hns-apiserver's replicas and each other: which one leads, and taking a lost one out of
//! service, at no cost to kube-apiserver while nothing happens.
//!
//! Replicas learn that a peer is gone by connecting to it ([`probe`]), not by renewing Leases
//! every second or two as client-go does: a process killed refuses connections at once, and a
//! lost node answers nothing. kube-apiserver hears from hns only when something changes (and
//! when the leader renews its Lease, every few minutes).

pub mod leader;
pub mod peers;
pub mod probe;
