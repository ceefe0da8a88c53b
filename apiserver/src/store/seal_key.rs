//! The seal key: a Secret in hns's own namespace that only hns reads, and the adoption of the
//! hierarchy that existed before it.
//!
//! The first replica to start creates the key, marked as *adopting*; whoever finds it so (that
//! replica, or another if it crashed midway) seals every namespace's hierarchy annotations as
//! they are, then marks the key adopted. Every replica finishes this before its forest starts,
//! so no replica ever judges unsealed state that predates the key as forged. Adoption is
//! idempotent: sealing sealed state changes nothing.
//!
//! A lost key (the Secret deleted) is the same as a first install: the next replica to start
//! makes a new key and adopts the hierarchy as it then is. Replicas still running with the old
//! key must be restarted (`kubectl rollout restart`), or they take the new seals for forgeries.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{stream, StreamExt};
use hns_api::keys;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::ByteString;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::hierarchy::seal::{Sealer, Verdict, KEY_BYTES};
use crate::store::writer::FIELD_MANAGER;

/// The Secret holding the key, in hns's namespace.
pub const SECRET: &str = "hns-hierarchy-seal";
/// The Secret's data key.
const DATA_KEY: &str = "key";
/// Annotation on the Secret: `Pending` until the hierarchy that predates the key is sealed.
const ADOPTION: &str = "hnc.x-k8s.io/adoption";
/// Namespaces sealed at once during adoption.
const PARALLEL: usize = 16;

/// Loads the key from Secret [`SECRET`] in `namespace` (creating it on first install) and
/// finishes a pending adoption; retries until kube-apiserver answers.
pub async fn load(client: Client, namespace: &str) -> Sealer {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let namespaces: Api<Namespace> = Api::all(client);
    loop {
        match try_load(&secrets, &namespaces).await {
            Ok(sealer) => return sealer,
            Err(error) => {
                tracing::warn!(%error, secret = SECRET, "cannot load the seal key yet; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

async fn try_load(secrets: &Api<Secret>, namespaces: &Api<Namespace>) -> anyhow::Result<Sealer> {
    let secret = match secrets.get_opt(SECRET).await? {
        Some(s) => s,
        None => create(secrets).await?,
    };
    let key = secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .filter(|k| k.0.len() >= 16)
        .ok_or_else(|| anyhow::anyhow!("Secret {SECRET} has no {DATA_KEY} of 16 bytes or more"))?;
    let sealer = Sealer::new(&key.0)?;
    if adoption_pending(&secret) {
        let sealed = adopt(namespaces, &sealer).await?;
        tracing::info!(namespaces = sealed, "sealed the hierarchy that predates the seal key");
        let done = json!({"metadata": {"annotations": {ADOPTION: "Done"}}});
        secrets.patch(SECRET, &PatchParams::default(), &Patch::Merge(&done)).await?;
    }
    Ok(sealer)
}

fn adoption_pending(secret: &Secret) -> bool {
    secret.metadata.annotations.as_ref().and_then(|a| a.get(ADOPTION)).map(String::as_str) == Some("Pending")
}

/// Creates a new random key, marked for adoption; a replica that loses the race reads the
/// winner's.
async fn create(secrets: &Api<Secret>) -> anyhow::Result<Secret> {
    let mut key = vec![0u8; KEY_BYTES];
    openssl::rand::rand_bytes(&mut key)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SECRET.into()),
            annotations: Some(BTreeMap::from([(ADOPTION.to_string(), "Pending".to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_string(), ByteString(key))])),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            tracing::info!(secret = SECRET, "created the seal key");
            Ok(created)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(secrets.get(SECRET).await?),
        Err(e) => Err(e.into()),
    }
}

/// Seals every namespace whose hierarchy annotations do not verify under `sealer`, as they are.
/// Returns how many were sealed.
async fn adopt(namespaces: &Api<Namespace>, sealer: &Sealer) -> anyhow::Result<usize> {
    let all = namespaces.list(&ListParams::default()).await?;
    let unsealed: Vec<Namespace> =
        all.items.into_iter().filter(|ns| matches!(verdict(sealer, ns), Verdict::Forged(_))).collect();
    let results: Vec<anyhow::Result<()>> = stream::iter(unsealed)
        .map(|ns| seal_one(namespaces, sealer, ns))
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let count = results.len();
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    Ok(count)
}

fn verdict(sealer: &Sealer, ns: &Namespace) -> Verdict {
    let empty = BTreeMap::new();
    let annotations = ns.metadata.annotations.as_ref().unwrap_or(&empty);
    sealer.verify(ns.metadata.name.as_deref().unwrap_or_default(), annotations)
}

/// Seals one namespace as it is, re-reading it when it changed under us.
async fn seal_one(namespaces: &Api<Namespace>, sealer: &Sealer, mut ns: Namespace) -> anyhow::Result<()> {
    let name = ns.metadata.name.clone().unwrap_or_default();
    for _ in 0..5 {
        let annotations = ns.metadata.annotations.clone().unwrap_or_default();
        let seal = sealer.seal(&name, &annotations);
        let patch = json!({"metadata": {
            "resourceVersion": ns.metadata.resource_version,
            "annotations": {keys::SEAL: seal},
        }});
        let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match namespaces.patch(&name, &pp, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => match namespaces.get_opt(&name).await? {
                Some(fresh) if matches!(verdict(sealer, &fresh), Verdict::Forged(_)) => ns = fresh,
                _ => return Ok(()),
            },
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("namespace {name} kept changing while being sealed")
}
