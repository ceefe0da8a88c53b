//! Replicas that watch each other, so that a lost node costs seconds instead of a minute.
//!
//! kube-apiserver sends hns's requests and webhook calls to every ready endpoint of its Service.
//! When a replica's node is lost (powered off, partitioned), nothing tells the cluster for
//! kube-controller-manager's node-monitor grace period (50 s by default): the replica's pod stays
//! Ready, its endpoint stays in the EndpointSlices, and the requests sent there fail. So every
//! replica connects to its peers every [`PROBE_EVERY`] ([`super::probe`]), at the pod addresses
//! its watch of their pods gives. A peer that refuses connections (twice in a row: its process
//! is gone) or that nothing could connect to for [`STALE_AFTER`] while its pod still shows Ready
//! is evicted: a pod being deleted leaves the Service's ready
//! endpoints at once, the ReplicaSet makes a replacement at once, and kube-apiserver sends
//! nothing more to it.
//!
//! Eviction, not deletion, so that the PodDisruptionBudget decides: replicas cut off from each
//! other but not from kube-apiserver (a partition between their nodes) would each take the
//! other out; the budget lets one of them. A peer whose container merely restarted is left
//! alone: its pod turns not Ready within a second or two, before [`STALE_AFTER`]. Nothing here
//! asks kube-apiserver anything while every peer answers.
//!
//! Off outside a pod (no `POD_NAME`, `POD_NAMESPACE`, `POD_UID`): the loopback replicas of the
//! local scripts have no pods.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, EvictParams, Preconditions};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::time::Instant;

use super::probe::{self, Reached};

/// How often a replica connects to its peers (no request to kube-apiserver).
const PROBE_EVERY: Duration = Duration::from_millis(250);
/// How long a Ready peer may not be reached before it counts as lost. Every request
/// kube-apiserver sends a lost peer fails until it is taken out, so this is short: a refused or
/// unanswered connection is the peer's kernel, not a slow process, and a node whose kernel
/// cannot accept a connection for this long is not serving anyone. Taking out a peer wrongly
/// costs little: its pod is evicted gracefully, so it drains (see shutdown.rs) while the
/// ReplicaSet starts its replacement.
pub const STALE_AFTER: Duration = Duration::from_millis(1500);

/// This replica's pod, from the downward API.
#[derive(Debug, Clone)]
pub struct Me {
    pub pod: String,
    pub uid: String,
    pub namespace: String,
    /// The pod's address, where the others reach this replica (`POD_IP`; none before a
    /// Deployment that gives it).
    pub ip: Option<IpAddr>,
}

impl Me {
    /// This replica's pod, if it runs in one.
    pub fn from_env() -> Option<Me> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Some(Me {
            pod: var("POD_NAME")?,
            uid: var("POD_UID")?,
            namespace: var("POD_NAMESPACE")?,
            ip: var("POD_IP").and_then(|ip| ip.parse().ok()),
        })
    }
}

/// A peer as its pod shows it: where it listens, and whether it is Ready and not being deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub pod: String,
    pub uid: String,
    pub address: Option<SocketAddr>,
    pub serving: bool,
}

/// The peers to take out of service: Ready, and refusing connections or not reached for
/// [`STALE_AFTER`].
pub fn lost<'p>(me: &str, peers: &'p [Peer], reached: &Reached<String>, now: Instant) -> Vec<&'p Peer> {
    peers.iter().filter(|p| p.pod != me && p.serving && reached.gone(&p.uid, STALE_AFTER, now)).collect()
}

/// Connects to the peers and takes lost ones out of service, until shutdown. The peers' pods
/// come from a watch, so looking costs no request.
pub async fn run(client: Client, me: Me, selector: String, port: u16) {
    let pods: Api<Pod> = Api::namespaced(client, &me.namespace);
    let (pod_store, pod_writer) = reflector::store();
    let pod_config = crate::watching::config().labels(&selector);
    tokio::spawn(drain(reflector::reflector(
        pod_writer,
        watcher::watcher(pods.clone(), pod_config).default_backoff(),
    )));
    let mut reached = Reached::default();
    let mut ticker = tokio::time::interval(PROBE_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if pod_store.wait_until_ready().await.is_err() {
            return;
        }
        let peers: Vec<Peer> = pod_store.state().iter().map(|p| peer(p, port)).collect();
        let probed: Vec<&Peer> = peers.iter().filter(|p| p.pod != me.pod && p.serving).collect();
        // A peer without an address yet cannot be judged: it counts as answering.
        let answers = futures::future::join_all(probed.iter().map(|p| async {
            match p.address {
                Some(address) => probe::knock(address).await,
                None => probe::Answer::Accepted,
            }
        }))
        .await;
        let now = Instant::now();
        reached.retain(|uid| probed.iter().any(|p| p.uid == *uid));
        for (peer, answered) in probed.iter().zip(answers) {
            reached.record(&peer.uid, answered, now);
        }
        for lost in lost(&me.pod, &peers, &reached, now) {
            take_out(&pods, lost).await;
            // Evicted or refused by the budget: looked at again only after another STALE_AFTER.
            reached.reset(&lost.uid, now);
        }
    }
}

/// Runs a reflector's stream (which fills its store) until it ends.
async fn drain<S: futures::Stream + Send>(stream: S) {
    use futures::StreamExt;
    stream.for_each(|_| std::future::ready(())).await;
}

fn peer(pod: &Pod, port: u16) -> Peer {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Peer {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        address: status
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, port)),
        serving: ready && pod.metadata.deletion_timestamp.is_none(),
    }
}

/// Evicts a lost peer's pod, if it is still the pod that was judged (its uid).
async fn take_out(pods: &Api<Pod>, lost: &Peer) {
    tracing::warn!(
        pod = %lost.pod,
        unreachable_for = ?STALE_AFTER,
        "a replica answers no connection while its pod shows Ready (its node lost?): evicting the pod, so that kube-apiserver stops sending it requests"
    );
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: Some(Preconditions { uid: Some(lost.uid.clone()), resource_version: None }),
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Err(error) = pods.evict(&lost.pod, &params).await {
        tracing::warn!(%error, pod = %lost.pod, "cannot evict a lost replica's pod");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::replicas::probe;

    fn peer(pod: &str, serving: bool) -> Peer {
        Peer { pod: pod.into(), uid: format!("uid-{pod}"), address: None, serving }
    }

    #[test]
    fn a_ready_peer_that_answers_nothing_is_lost() {
        let mut reached = Reached::default();
        let peers = [peer("me", true), peer("b", true), peer("c", false)];
        let t0 = Instant::now();
        for p in &peers {
            reached.record(&p.uid, probe::Answer::Silent, t0);
        }
        assert!(lost("me", &peers, &reached, t0 + STALE_AFTER / 2).is_empty(), "not yet");
        let later = t0 + STALE_AFTER;
        let judged: Vec<&str> = lost("me", &peers, &reached, later).iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(judged, ["b"], "c is not Ready (its container restarts): left alone; me never");
        reached.record(&"uid-b".to_string(), probe::Answer::Accepted, later);
        assert!(lost("me", &peers, &reached, later).is_empty(), "b answered");
        assert!(
            lost("me", &[peer("d", true)], &reached, later + STALE_AFTER * 2).is_empty(),
            "never probed: starting"
        );
    }
}
