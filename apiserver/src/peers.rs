//! Replicas that watch each other, so that a lost node costs seconds instead of a minute.
//!
//! kube-apiserver sends hns's requests and webhook calls to every ready endpoint of its Service.
//! When a replica's node is lost (powered off, partitioned), nothing tells the cluster for
//! kube-controller-manager's node-monitor grace period (50 s by default): the replica's pod stays
//! Ready, its endpoint stays in the EndpointSlices, and the requests sent there fail. So every
//! replica renews a Lease of its own every second (`hns-apiserver-replica-<pod>`, owned by its
//! pod, so it goes with it), and looks at its peers' every second. A peer whose Lease has not
//! moved for [`STALE_AFTER`] while its pod still shows Ready has stopped answering anyone: its
//! pod is deleted. A pod being deleted leaves the Service's ready endpoints at once, the
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
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{Api, Client};
use tokio::time::Instant;

/// How often a replica renews its Lease and looks at its peers'.
const EVERY: Duration = Duration::from_secs(1);
/// How long a peer's Lease may stand still before the peer counts as lost: three renewals
/// missed. Every request kube-apiserver sends the peer meanwhile fails, so this is short; a
/// replica that merely answers slowly still renews (it has no CPU limit to be throttled by), and
/// one judged lost wrongly is only restarted elsewhere.
pub const STALE_AFTER: Duration = Duration::from_secs(3);
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

/// Renews this replica's Lease and takes lost peers out of service, until shutdown.
pub async fn run(client: Client, me: Me, selector: String) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &me.namespace);
    let pods: Api<Pod> = Api::namespaced(client, &me.namespace);
    let mut sightings = Sightings::default();
    let mut renewed: Option<Instant> = None;
    let mut ticker = tokio::time::interval(EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match renew(&leases, &me).await {
            Ok(()) => renewed = Some(Instant::now()),
            Err(error) => tracing::debug!(%error, "cannot renew this replica's lease"),
        }
        let fresh = renewed.is_some_and(|t| t.elapsed() < SELF_FRESH);
        let (Ok(listed), Ok(running)) = (
            leases.list(&ListParams::default().labels(LEASE_LABEL)).await,
            pods.list(&ListParams::default().labels(&selector)).await,
        ) else {
            continue;
        };
        let versions = listed
            .items
            .iter()
            .filter_map(|l| {
                Some((l.spec.as_ref()?.holder_identity.clone()?, l.metadata.resource_version.clone()?))
            })
            .collect();
        let now = Instant::now();
        sightings.observe(&versions, now);
        let peers: Vec<Peer> = running.items.iter().map(peer).collect();
        for lost in sightings.lost(&me.pod, &peers, now, fresh) {
            take_out(&pods, lost).await;
        }
    }
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

/// Creates or renews this replica's Lease, owned by its pod.
async fn renew(leases: &Api<Lease>, me: &Me) -> Result<(), kube::Error> {
    let name = format!("hns-apiserver-replica-{}", me.pod);
    let now = MicroTime(jiff::Timestamp::now());
    match leases.get_opt(&name).await? {
        Some(mut lease) => {
            lease.spec.get_or_insert_with(Default::default).renew_time = Some(now);
            leases.replace(&name, &PostParams::default(), &lease).await?;
        }
        None => {
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
                    lease_duration_seconds: Some(STALE_AFTER.as_secs() as i32),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            leases.create(&PostParams::default(), &lease).await?;
        }
    }
    Ok(())
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
