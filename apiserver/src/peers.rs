//! Replicas that watch each other, so that a lost node costs seconds instead of a minute.
//!
//! kube-apiserver sends hns's requests and webhook calls to every ready endpoint of its Service.
//! When a replica's node is lost (powered off, partitioned), nothing tells the cluster for
//! kube-controller-manager's node-monitor grace period (50 s by default): the replica's pod stays
//! Ready, its endpoint stays in the EndpointSlices, and the requests sent there fail. So every
//! replica renews a Lease of its own every second (`hns-apiserver-replica-<pod>`, owned by its
//! pod, so it goes with it), and watches its peers'. A peer whose Lease has not moved for
//! [`STALE_AFTER`] while its pod still shows Ready has stopped answering anyone: its pod is
//! deleted. A pod being deleted leaves the Service's ready endpoints at once, the
//! ReplicaSet makes a replacement at once, and kube-apiserver sends nothing more to it.
//!
//! Only a replica that renewed its own Lease within [`SELF_FRESH`] judges others: one cut off
//! from kube-apiserver decides nothing (and could not delete anyway). A peer whose container
//! merely restarted is left alone: its pod turns not Ready within a second or two, before its
//! Lease is stale. Staleness is measured on this replica's own clock, from when it last saw the
//! peer's Lease change, so clocks that differ between nodes cannot make a live peer look dead.
//!
//! Off outside a pod (no `POD_NAME`, `POD_NAMESPACE`, `POD_UID`): the loopback replicas of the
//! local scripts have no pods.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::time::Instant;

/// How often a replica renews its Lease (one PATCH: the cost of this at idle).
const RENEW_EVERY: Duration = Duration::from_secs(1);
/// How often a replica looks at its peers' Leases, as its watches have them (no request).
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// How long a peer's Lease may stand still before the peer counts as lost: two renewals missed,
/// and a half. Every request kube-apiserver sends a lost peer fails until it is taken out, so
/// this is short; and taking out a peer that was only slow costs little: its pod is deleted
/// gracefully, so it drains (see shutdown.rs) while the ReplicaSet starts its replacement.
pub const STALE_AFTER: Duration = Duration::from_millis(2500);
/// How recently this replica must have renewed its own Lease to judge others.
const SELF_FRESH: Duration = Duration::from_secs(2);
/// The label on every replica's Lease.
const LEASE_LABEL: &str = "hnc.x-k8s.io/replica-lease";

/// This replica's pod, from the downward API.
#[derive(Debug, Clone)]
pub struct Me {
    pub pod: String,
    pub uid: String,
    pub namespace: String,
}

impl Me {
    /// This replica's pod, if it runs in one.
    pub fn from_env() -> Option<Me> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Some(Me { pod: var("POD_NAME")?, uid: var("POD_UID")?, namespace: var("POD_NAMESPACE")? })
    }
}

/// A peer as its pod shows it: whether it is Ready and not being deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub pod: String,
    pub uid: String,
    pub serving: bool,
}

/// When each peer's Lease was last seen to change, on this replica's clock.
#[derive(Debug, Default)]
pub struct Sightings {
    seen: HashMap<String, (String, Instant)>,
}

impl Sightings {
    /// Records the Leases as listed now: a resourceVersion not seen before is a renewal.
    pub fn observe(&mut self, leases: &BTreeMap<String, String>, now: Instant) {
        self.seen.retain(|pod, _| leases.contains_key(pod));
        for (pod, version) in leases {
            match self.seen.get(pod) {
                Some((seen, _)) if seen == version => {}
                _ => {
                    self.seen.insert(pod.clone(), (version.clone(), now));
                }
            }
        }
    }

    /// The peers to take out of service: Ready, with a Lease that has stood still for
    /// [`STALE_AFTER`]. Nothing when this replica's own Lease is not fresh.
    pub fn lost<'p>(&self, me: &str, peers: &'p [Peer], now: Instant, fresh: bool) -> Vec<&'p Peer> {
        if !fresh {
            return Vec::new();
        }
        peers
            .iter()
            .filter(|p| p.pod != me && p.serving)
            .filter(|p| self.seen.get(&p.pod).is_some_and(|(_, at)| now.duration_since(*at) >= STALE_AFTER))
            .collect()
    }
}

/// Renews this replica's Lease and takes lost peers out of service, until shutdown. The peers'
/// Leases and pods come from watches, so looking costs no request.
pub async fn run(client: Client, me: Me, selector: String) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &me.namespace);
    let pods: Api<Pod> = Api::namespaced(client, &me.namespace);
    let renewed = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
    tokio::spawn(renew_forever(leases.clone(), me.clone(), renewed.clone()));
    let (lease_store, lease_writer) = reflector::store();
    let (pod_store, pod_writer) = reflector::store();
    let lease_config = watcher::Config::default().labels(LEASE_LABEL);
    tokio::spawn(drain(reflector::reflector(
        lease_writer,
        watcher::watcher(leases, lease_config).default_backoff(),
    )));
    let pod_config = watcher::Config::default().labels(&selector);
    tokio::spawn(drain(reflector::reflector(
        pod_writer,
        watcher::watcher(pods.clone(), pod_config).default_backoff(),
    )));
    let mut sightings = Sightings::default();
    let mut ticker = tokio::time::interval(LOOK_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if lease_store.wait_until_ready().await.is_err() || pod_store.wait_until_ready().await.is_err() {
            return;
        }
        let versions = lease_store
            .state()
            .iter()
            .filter_map(|l| {
                Some((l.spec.as_ref()?.holder_identity.clone()?, l.metadata.resource_version.clone()?))
            })
            .collect();
        let now = Instant::now();
        sightings.observe(&versions, now);
        let fresh =
            renewed.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|t| t.elapsed() < SELF_FRESH);
        let peers: Vec<Peer> = pod_store.state().iter().map(|p| peer(p)).collect();
        for lost in sightings.lost(&me.pod, &peers, now, fresh) {
            take_out(&pods, lost).await;
        }
    }
}

/// Renews this replica's Lease every [`RENEW_EVERY`], recording when it last succeeded.
async fn renew_forever(
    leases: Api<Lease>,
    me: Me,
    renewed: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
) {
    let mut ticker = tokio::time::interval(RENEW_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match renew(&leases, &me).await {
            Ok(()) => *renewed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now()),
            Err(error) => tracing::debug!(%error, "cannot renew this replica's lease"),
        }
    }
}

/// Runs a reflector's stream (which fills its store) until it ends.
async fn drain<S: futures::Stream + Send>(stream: S) {
    use futures::StreamExt;
    stream.for_each(|_| std::future::ready(())).await;
}

fn peer(pod: &Pod) -> Peer {
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Peer {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        serving: ready && pod.metadata.deletion_timestamp.is_none(),
    }
}

/// Deletes a lost peer's pod, if it is still the pod that was judged (its uid).
async fn take_out(pods: &Api<Pod>, lost: &Peer) {
    tracing::warn!(
        pod = %lost.pod,
        stale_seconds = STALE_AFTER.as_secs(),
        "a replica stopped renewing its lease while its pod shows Ready (its node lost?): deleting the pod, so that kube-apiserver stops sending it requests"
    );
    let dp = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(lost.uid.clone()), resource_version: None }),
        ..Default::default()
    };
    if let Err(error) = pods.delete(&lost.pod, &dp).await {
        tracing::warn!(%error, pod = %lost.pod, "cannot delete a lost replica's pod");
    }
}

/// Renews this replica's Lease (a merge patch of its renewal time), creating it, owned by its
/// pod, the first time.
async fn renew(leases: &Api<Lease>, me: &Me) -> Result<(), kube::Error> {
    let name = format!("hns-apiserver-replica-{}", me.pod);
    let now = MicroTime(jiff::Timestamp::now());
    let patch = serde_json::json!({"spec": {"renewTime": now}});
    match leases.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        other => return other.map(|_| ()),
    }
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some([(LEASE_LABEL.to_string(), "true".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: me.pod.clone(),
                uid: me.uid.clone(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.pod.clone()),
            lease_duration_seconds: Some(STALE_AFTER.as_secs().max(1) as i32),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..Default::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(pod: &str, serving: bool) -> Peer {
        Peer { pod: pod.into(), uid: format!("uid-{pod}"), serving }
    }

    fn versions(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(p, v)| (p.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_ready_peer_whose_lease_stands_still_is_lost() {
        let mut s = Sightings::default();
        let peers = [peer("me", true), peer("b", true), peer("c", false)];
        let t0 = Instant::now();
        s.observe(&versions(&[("me", "1"), ("b", "5"), ("c", "9")]), t0);
        assert!(s.lost("me", &peers, t0 + STALE_AFTER / 2, true).is_empty(), "not yet");
        let later = t0 + STALE_AFTER;
        let lost: Vec<&str> = s.lost("me", &peers, later, true).iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(lost, ["b"], "c is not Ready (its container restarts): left alone; me never");
        assert!(s.lost("me", &peers, later, false).is_empty(), "a replica cut off judges no one");
        s.observe(&versions(&[("me", "2"), ("b", "6"), ("c", "9")]), later);
        assert!(s.lost("me", &peers, later, true).is_empty(), "b renewed");
        assert!(
            s.lost("me", &[peer("d", true)], later + STALE_AFTER * 2, true).is_empty(),
            "no lease yet: starting"
        );
    }
}
