//! Parent changes, one at a time across every replica: no interleaving of writers can make a
//! cycle.
//!
//! The cycle check reads the forest, and a parent change writes one namespace. Two writers
//! moving `x` under `y` and `y` under `x` at the same moment each see no cycle and write
//! different objects, so neither write conflicts with the other: both land, and the cycle stays.
//! A resourceVersion precondition on the moved namespace cannot prevent it; only ordering the
//! changes can.
//!
//! The argument: every write that gives an existing namespace a new parent runs inside
//! [`ParentLock::serialized`], which
//! 1. takes an in-process mutex, then a `coordination.k8s.io` Lease (compare-and-swap on its
//!    resourceVersion), so at most one such write is in flight in the whole cluster;
//! 2. walks the new parent's ancestry **from kube-apiserver** (quorum reads), not from the
//!    cache, which may not yet hold the previous holder's write;
//! 3. writes, and releases the Lease only after the write has returned.
//!
//! So each check sees every parent change that came before it, and a change that would close a
//! cycle is refused. A new subnamespace needs no turn: nothing can name it as a parent before
//! it exists (a parent change to a missing namespace is refused, and a name that a namespace
//! whose parent was deleted still points at is refused by [`crate::hierarchy::rules`]), so its only edge
//! cannot close a cycle. A holder that dies keeps the Lease until it expires (`LEASE_SECONDS`);
//! a holder that has held it for half of that does not start its write (it fails with 503 and
//! the client retries), so no write lands after its Lease could have passed to someone else.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::hierarchy::rules::Refusal;
use crate::http::status::ApiError;
use crate::store::cache::Cache;
use crate::store::writer::Writer;

/// The Lease, in hns's namespace.
pub const LEASE: &str = "hns-hierarchy";
/// How long the Lease is valid: far longer than a check and a write take.
const LEASE_SECONDS: i32 = 10;
/// How long a writer waits for the Lease before answering 503.
const WAIT: Duration = Duration::from_secs(LEASE_SECONDS as u64 + 5);
/// The longest ancestry walked; deeper than any real hierarchy.
const MAX_DEPTH: usize = 10_000;

/// Serializes parent changes across replicas.
pub struct ParentLock {
    leases: Api<Lease>,
    identity: String,
    local: tokio::sync::Mutex<()>,
}

impl ParentLock {
    /// A lock on Lease [`LEASE`] in `namespace`, held as `identity`.
    pub fn new(client: Client, namespace: &str, identity: String) -> Self {
        ParentLock { leases: Api::namespaced(client, namespace), identity, local: Default::default() }
    }

    /// Runs `write` (which checks and writes one parent change) while no other replica runs
    /// one; `write` gets a [`Held`] to check the ancestry with and to confirm the Lease before
    /// writing.
    pub async fn serialized<T, F, Fut>(&self, write: F) -> Result<T, ApiError>
    where
        F: FnOnce(Held) -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        let _local = self.local.lock().await;
        let lease = self.acquire().await?;
        let outcome = write(Held { since: Instant::now() }).await;
        self.release(lease).await;
        outcome
    }

    /// Takes the Lease, waiting while someone else holds a live one.
    async fn acquire(&self) -> Result<Lease, ApiError> {
        let deadline = Instant::now() + WAIT;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(lease) = self.try_acquire().await.map_err(ApiError::from_kube)? {
                return Ok(lease);
            }
            if Instant::now() > deadline {
                return Err(ApiError::service_unavailable(
                    "another change of the hierarchy has held its lock for too long; retry in a few seconds",
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// The Lease as we hold it, or `None` when someone else holds a live one.
    async fn try_acquire(&self) -> Result<Option<Lease>, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self.leases.get_opt(LEASE).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(LEASE.into()), ..Default::default() },
                spec: Some(self.held_spec(now)),
            };
            return match self.leases.create(&PostParams::default(), &lease).await {
                Ok(l) => Ok(Some(l)),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let expires = spec.renew_time.as_ref().map_or(0, |t| t.0.as_millisecond())
            + 1_000 * i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
        if spec.holder_identity.is_some() && jiff::Timestamp::now().as_millisecond() < expires {
            return Ok(None);
        }
        lease.spec = Some(self.held_spec(now));
        // The resourceVersion in `lease` makes this a compare-and-swap.
        match self.leases.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(l) => Ok(Some(l)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn held_spec(&self, now: MicroTime) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..Default::default()
        }
    }

    /// Gives the Lease up; if that fails, it expires by itself.
    async fn release(&self, mut lease: Lease) {
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = None;
        }
        if let Err(error) = self.leases.replace(LEASE, &PostParams::default(), &lease).await {
            tracing::warn!(%error, lease = LEASE, "cannot release the hierarchy lock; it expires by itself");
        }
    }
}

/// Proof that the caller holds the lock, with the checks to make under it.
pub struct Held {
    since: Instant,
}

impl Held {
    /// Refuses with `Invalid` if making `parent` the parent of `ns` closes a cycle, judged on
    /// the ancestry as kube-apiserver has it now (sealed state only, as the forest reads it).
    pub async fn check_ancestry(
        &self,
        writer: &Writer,
        cache: &Cache,
        ns: &str,
        parent: &str,
    ) -> Result<Result<(), Refusal>, ApiError> {
        let mut ancestry = vec![parent.to_string()];
        let mut seen = HashSet::new();
        let mut current = parent.to_string();
        while seen.insert(current.clone()) && seen.len() < MAX_DEPTH {
            if current == ns {
                ancestry.reverse();
                return Ok(Err(Refusal::Invalid(vec![(
                    "spec.parent".into(),
                    format!(
                        "illegal parent: cycle when making \"{parent}\" the parent of \"{ns}\": current ancestry is {}",
                        ancestry.join(" <- ")
                    ),
                )])));
            }
            let Some(object) = writer.get(&current).await? else { break };
            let Some(next) = cache.read().node_of(object).parent else { break };
            ancestry.push(next.clone());
            current = next;
        }
        Ok(Ok(()))
    }

    /// Refuses to start a write once half the Lease has gone: past that, the write might land
    /// after the Lease expired and another writer checked without it.
    pub fn confirm(&self) -> Result<(), ApiError> {
        if self.since.elapsed() > Duration::from_secs(LEASE_SECONDS as u64 / 2) {
            return Err(ApiError::service_unavailable(
                "the hierarchy change took too long to check and was not made; retry",
            ));
        }
        Ok(())
    }
}
