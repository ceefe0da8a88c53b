//! Leader election with a `coordination.k8s.io` Lease, as client-go's leaderelection does it.
//!
//! Every replica serves the API; only the holder of the Lease writes (the controller). A holder
//! that stops renewing loses the Lease after its duration, and another replica takes it over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;

/// How long a Lease is valid without renewal.
const LEASE_SECONDS: i32 = 15;
/// How often the holder renews and the others check.
const RETRY: Duration = Duration::from_secs(2);

/// Competes for Lease `name` in `namespace` as `identity`; the receiver says whether we lead.
pub fn run(client: Client, namespace: &str, name: &str, identity: String) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let name = name.to_string();
    tokio::spawn(async move {
        let mut last_renewal: Option<tokio::time::Instant> = None;
        loop {
            match try_acquire_or_renew(&api, &name, &identity).await {
                Ok(true) => last_renewal = Some(tokio::time::Instant::now()),
                Ok(false) => last_renewal = None,
                Err(error) => tracing::warn!(%error, lease = %name, "lease update failed"),
            }
            // Leadership lapses on our side before the Lease can expire on anyone else's.
            let leading =
                last_renewal.is_some_and(|t| t.elapsed() < Duration::from_secs(LEASE_SECONDS as u64 - 5));
            if *tx.borrow() != leading {
                tracing::info!(lease = %name, %identity, leading, "leadership changed");
                let _ = tx.send(leading);
            }
            tokio::time::sleep(RETRY).await;
        }
    });
    rx
}

/// Gives the Lease up if we hold it, so that another replica takes over at once instead of after
/// the Lease expires (a rolling update, a clean shutdown).
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

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// Takes or renews the Lease; `Ok(false)` when someone else holds a live one.
async fn try_acquire_or_renew(api: &Api<Lease>, name: &str, identity: &str) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(name).await? else {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(identity.into()),
                lease_duration_seconds: Some(LEASE_SECONDS),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let mine = spec.holder_identity.as_deref() == Some(identity);
    if !mine {
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
        let renewed = spec.renew_time.as_ref().map_or(0, |t| t.0.as_second());
        let released = spec.holder_identity.is_none();
        if !released && jiff::Timestamp::now().as_second() < renewed + duration {
            return Ok(false);
        }
        spec.holder_identity = Some(identity.into());
        spec.acquire_time = Some(now());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.lease_duration_seconds = Some(LEASE_SECONDS);
    spec.renew_time = Some(now());
    // The resourceVersion in `lease` makes this a compare-and-swap: of two replicas taking an
    // expired Lease at once, one gets a conflict.
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
