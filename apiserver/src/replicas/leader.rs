//! Leader election with a `coordination.k8s.io` Lease, quiet while nothing happens.
//!
//! Every replica serves the API; only the holder of the Lease writes (the controller).
//!
//! client-go's leader election renews every 2 s so that the others can see a dead holder by its
//! Lease going stale: 60 requests a minute to kube-apiserver, forever. hns renews every
//! [`RENEW_EVERY`], and the others learn that the holder is gone without asking anyone:
//!
//! - the Lease names the holder's address (annotation [`ADDRESS_ANNOTATION`]), and every other
//!   replica connects to it every [`PROBE_EVERY`] ([`super::probe`]); a holder nothing can
//!   connect to for [`HOLDER_LOST`] is gone (killed, or its node lost);
//! - a replica that finds its own address in the Lease under another identity was restarted in
//!   the holder's place (a container restart): the holder is gone;
//! - a holder that stops cleanly releases the Lease ([`release`]);
//! - and, the last resort, a Lease not renewed for its duration has expired.
//!
//! Every replica watches the Lease (one long watch), so a release or a takeover is seen at once,
//! and a holder that sees another name in the Lease stops leading at once. A takeover replaces
//! the Lease as it was last seen (its resourceVersion): of two replicas taking it at once, one
//! gets a conflict.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;

use super::probe::{self, Reached};

/// How long a Lease is valid without renewal.
const LEASE_SECONDS: i32 = 300;
/// How often the holder renews (one request; with the watches, hns's whole cost at idle).
const RENEW_EVERY: Duration = Duration::from_secs(120);
/// How soon a failed renewal or takeover is tried again.
const RETRY: Duration = Duration::from_secs(2);
/// How often the others connect to the holder.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long the holder may be unreachable before another replica takes over.
pub const HOLDER_LOST: Duration = Duration::from_secs(3);
/// How long before the Lease expires a holder that could not renew stops leading, so that it
/// has stopped before anyone else can start.
const MARGIN: Duration = Duration::from_secs(15);
/// Where the holder can be reached: `<identity>@<address>:<port>`.
pub const ADDRESS_ANNOTATION: &str = "hnc.x-k8s.io/holder-address";

/// This replica, as a candidate.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Unique to this process (`<pod or host>_<pid>`).
    pub identity: String,
    /// Where the other replicas can connect to this one, if it can say (otherwise the others
    /// judge its Lease by expiry alone).
    pub address: Option<SocketAddr>,
}

/// Why the Lease's holder is gone, if it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// There is no Lease yet.
    NoLease,
    /// The holder released it.
    Released,
    /// This replica was started at the holder's address: the holder's process is no more.
    Replaced,
    /// The holder's address refused connections, or answered nothing for [`HOLDER_LOST`].
    Unreachable,
    /// The Lease was not renewed for its duration.
    Expired,
}

/// What a replica knows of the Lease: as last seen, and when it last changed (this replica's
/// clock).
#[derive(Debug, Default)]
struct Seen {
    lease: Option<Lease>,
    changed_at: Option<Instant>,
}

impl Seen {
    fn set(&mut self, lease: Option<Lease>, now: Instant) {
        let version = |l: &Option<Lease>| l.as_ref().and_then(|l| l.metadata.resource_version.clone());
        if version(&lease) != version(&self.lease) || self.changed_at.is_none() {
            self.changed_at = Some(now);
        }
        self.lease = lease;
    }

    fn spec(&self) -> Option<&LeaseSpec> {
        self.lease.as_ref().and_then(|l| l.spec.as_ref())
    }

    fn holder(&self) -> Option<&str> {
        self.spec().and_then(|s| s.holder_identity.as_deref()).filter(|h| !h.is_empty())
    }

    /// The holder's address, if the Lease gives one for this holder (a version of hns from
    /// before addresses keeps the annotation of the last holder that wrote one).
    fn holder_address(&self) -> Option<SocketAddr> {
        let annotations = self.lease.as_ref()?.metadata.annotations.as_ref()?;
        let (identity, address) = annotations.get(ADDRESS_ANNOTATION)?.split_once('@')?;
        (Some(identity) == self.holder()).then(|| address.parse().ok()).flatten()
    }
}

/// Whether another replica's Lease is gone, and why; `None` while its holder is there.
/// `unreachable` says whether the holder's address is gone ([`Reached::gone`]).
fn gone(seen: &Seen, me: &Candidate, unreachable: bool, now: Instant) -> Option<Gone> {
    if seen.lease.is_none() {
        return Some(Gone::NoLease);
    }
    if seen.holder().is_none() {
        return Some(Gone::Released);
    }
    if seen.holder_address().is_some() && seen.holder_address() == me.address {
        return Some(Gone::Replaced);
    }
    if unreachable && seen.holder_address().is_some() {
        return Some(Gone::Unreachable);
    }
    let duration = Duration::from_secs(
        seen.spec().and_then(|s| s.lease_duration_seconds).unwrap_or(LEASE_SECONDS).max(1) as u64,
    );
    seen.changed_at.is_some_and(|at| now.duration_since(at) >= duration).then_some(Gone::Expired)
}

/// Competes for Lease `name` in `namespace` as `me`; the receiver says whether we lead.
pub fn run(client: Client, namespace: &str, name: &str, me: Candidate) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let api: Api<Lease> = Api::namespaced(client, namespace);
    tokio::spawn(compete(api, name.to_string(), me, tx));
    rx
}

/// The election, until shutdown: the Lease's watch and a tick every [`PROBE_EVERY`].
async fn compete(api: Api<Lease>, name: String, me: Candidate, tx: watch::Sender<bool>) {
    let config = crate::watching::config().fields(&format!("metadata.name={name}"));
    let mut lease_events = watcher::watcher(api.clone(), config).default_backoff().boxed();
    let mut ticker = tokio::time::interval(PROBE_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = Seen::default();
    let mut listed = false;
    let mut initial: Option<Lease> = None;
    let mut reached = Reached::default();
    // When this replica last renewed the Lease, and when it may next try to write it.
    let mut renewed: Option<Instant> = None;
    let mut next_write = Instant::now();
    loop {
        tokio::select! {
            event = lease_events.next() => match event {
                Some(Ok(Event::Init)) => initial = None,
                Some(Ok(Event::InitApply(lease))) => initial = Some(lease),
                Some(Ok(Event::InitDone)) => {
                    seen.set(initial.take(), Instant::now());
                    listed = true;
                }
                Some(Ok(Event::Apply(lease))) => seen.set(Some(lease), Instant::now()),
                Some(Ok(Event::Delete(_))) => seen.set(None, Instant::now()),
                Some(Err(error)) => tracing::warn!(%error, lease = %name, "lease watch failed; retrying"),
                None => return,
            },
            _ = ticker.tick() => {}
        }
        if !listed {
            continue;
        }
        let now = Instant::now();
        let mine = seen.holder() == Some(me.identity.as_str());
        if mine {
            reached = Reached::default();
        } else if let Some(address) = seen.holder_address().filter(|a| Some(*a) != me.address) {
            reached.retain(|a| *a == address);
            reached.record(&address, probe::knock(address).await, now);
        }
        let now = Instant::now();
        let due = now >= next_write
            && if mine {
                renewed.is_none_or(|at| now.duration_since(at) >= RENEW_EVERY)
            } else {
                let unreachable = seen.holder_address().is_some_and(|a| reached.gone(&a, HOLDER_LOST, now));
                match gone(&seen, &me, unreachable, now) {
                    Some(why) => {
                        tracing::info!(lease = %name, holder = ?seen.holder(), ?why, "taking the lease over");
                        true
                    }
                    None => false,
                }
            };
        if due {
            match write(&api, &name, &me, &seen).await {
                Ok(lease) => {
                    renewed = Some(Instant::now());
                    seen.set(Some(lease), Instant::now());
                }
                Err(error) => {
                    renewed = renewed.filter(|_| mine);
                    next_write = Instant::now() + RETRY;
                    tracing::debug!(%error, lease = %name, "cannot write the lease");
                }
            }
        }
        // Leadership lapses on our side before the Lease can expire on anyone else's, and at
        // once when the Lease names someone else.
        let validity = Duration::from_secs(LEASE_SECONDS as u64) - MARGIN;
        let leading =
            seen.holder() == Some(me.identity.as_str()) && renewed.is_some_and(|at| at.elapsed() < validity);
        if *tx.borrow() != leading {
            tracing::info!(lease = %name, identity = %me.identity, leading, "leadership changed");
            let _ = tx.send(leading);
        }
    }
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// Takes or renews the Lease, replacing it as `seen` has it (compare-and-swap), or creating it.
async fn write(api: &Api<Lease>, name: &str, me: &Candidate, seen: &Seen) -> Result<Lease, kube::Error> {
    let mut lease = seen.lease.clone().unwrap_or_else(|| Lease {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(LeaseSpec { lease_transitions: Some(0), ..Default::default() }),
    });
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(me.identity.as_str()) {
        if spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty()) {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(me.identity.clone());
        spec.acquire_time = Some(now());
    }
    spec.lease_duration_seconds = Some(LEASE_SECONDS);
    spec.renew_time = Some(now());
    let annotations = lease.metadata.annotations.get_or_insert_with(Default::default);
    match me.address {
        Some(address) => annotations.insert(ADDRESS_ANNOTATION.into(), format!("{}@{address}", me.identity)),
        None => annotations.remove(ADDRESS_ANNOTATION),
    };
    if seen.lease.is_none() {
        api.create(&PostParams::default(), &lease).await
    } else {
        api.replace(name, &PostParams::default(), &lease).await
    }
}

/// Gives the Lease up if we hold it, so that another replica takes over at once (a rolling
/// update, a clean shutdown).
pub async fn release(client: Client, namespace: &str, name: &str, identity: &str) {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let Ok(Some(mut lease)) = api.get_opt(name).await else { return };
    let Some(spec) = lease.spec.as_mut().filter(|s| s.holder_identity.as_deref() == Some(identity)) else {
        return;
    };
    spec.holder_identity = None;
    spec.renew_time = None;
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => tracing::info!(lease = %name, "leadership released"),
        Err(error) => tracing::warn!(%error, lease = %name, "cannot release the lease; it expires by itself"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Candidate {
        Candidate { identity: "b_2".into(), address: Some("10.0.0.2:8443".parse().unwrap()) }
    }

    fn held_by(holder: Option<&str>, address: Option<&str>, version: &str) -> Lease {
        let annotation = |a: &str| format!("{}@{a}", holder.unwrap_or("a_1"));
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.into()),
                annotations: address.map(|a| [(ADDRESS_ANNOTATION.to_string(), annotation(a))].into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                lease_duration_seconds: Some(LEASE_SECONDS),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_live_holder_keeps_the_lease_and_a_gone_one_loses_it() {
        let t0 = Instant::now();
        let me = me();
        let mut seen = Seen::default();
        seen.set(None, t0);
        assert_eq!(gone(&seen, &me, false, t0), Some(Gone::NoLease));
        seen.set(Some(held_by(Some("a_1"), Some("10.0.0.1:8443"), "1")), t0);
        assert_eq!(gone(&seen, &me, false, t0 + Duration::from_secs(60)), None, "there, and answering");
        assert_eq!(gone(&seen, &me, true, t0), Some(Gone::Unreachable));
        let expiry = Duration::from_secs(LEASE_SECONDS as u64);
        assert_eq!(gone(&seen, &me, false, t0 + expiry), Some(Gone::Expired), "not renewed");
        seen.set(Some(held_by(Some("a_1"), Some("10.0.0.1:8443"), "2")), t0 + expiry);
        assert_eq!(gone(&seen, &me, false, t0 + expiry), None, "renewed: counted from the change");
        seen.set(Some(held_by(None, Some("10.0.0.1:8443"), "3")), t0);
        assert_eq!(gone(&seen, &me, false, t0), Some(Gone::Released));
        seen.set(Some(held_by(Some("b_1"), Some("10.0.0.2:8443"), "4")), t0);
        assert_eq!(gone(&seen, &me, false, t0), Some(Gone::Replaced), "my address, my predecessor");
    }

    #[test]
    fn a_holder_without_an_address_is_judged_by_expiry_alone() {
        // A Lease written by a version of hns from before addresses (during an upgrade).
        let t0 = Instant::now();
        let mut seen = Seen::default();
        seen.set(Some(held_by(Some("a_1"), None, "1")), t0);
        assert_eq!(gone(&seen, &me(), true, t0), None);
        assert_eq!(
            gone(&seen, &me(), true, t0 + Duration::from_secs(LEASE_SECONDS as u64)),
            Some(Gone::Expired)
        );
        // ... which keeps the annotation of the last holder that wrote one: not this holder's.
        let mut lease = held_by(Some("old_7"), None, "2");
        lease.metadata.annotations =
            Some([(ADDRESS_ANNOTATION.to_string(), "b_1@10.0.0.2:8443".into())].into());
        seen.set(Some(lease), t0);
        assert_eq!(gone(&seen, &me(), true, t0), None, "neither unreachable nor replaced");
    }
}
