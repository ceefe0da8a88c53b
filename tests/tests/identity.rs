//! The identity of the objects hns derives: every one has a uid of its own (a Subnamespace and
//! its child's HierarchyConfiguration come from one Namespace, yet clients key caches and owner
//! references by uid), the same after hns-apiserver restarts, and the HNCConfiguration has a
//! uid, creation time and resourceVersion before anyone writes it. Its own test binary: it
//! restarts hns-apiserver, so no other test may run meanwhile (cargo runs test binaries one
//! after another).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use hns_api::{HNCConfiguration, HierarchyConfiguration, Subnamespace};
use hns_e2e::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::sync::Mutex;

/// One restart at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

const WAIT: Duration = Duration::from_secs(30);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `hack/hns-up.sh CMD` on the local control plane, with as many replicas as run now.
fn hns_up(local: &Local, cmd: &str) {
    let status = Command::new(repo().join("hack/hns-up.sh"))
        .arg(cmd)
        .arg(&local.dir)
        .env("HNS_REPLICAS", local.replica_names.len().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "hack/hns-up.sh {cmd}");
}

/// The uids of `child`'s Subnamespace (in `parent`), its HierarchyConfiguration and the
/// HNCConfiguration.
async fn uids(client: &Client, parent: &str, child: &str) -> (String, String, String) {
    let sub = Api::<Subnamespace>::namespaced(client.clone(), parent).get(child).await.unwrap();
    let hc = Api::<HierarchyConfiguration>::namespaced(client.clone(), child).get("hierarchy").await.unwrap();
    let config = Api::<HNCConfiguration>::all(client.clone()).get("config").await.unwrap();
    let uid = |u: Option<String>, what: &str| u.unwrap_or_else(|| panic!("{what} has no uid"));
    (
        uid(sub.metadata.uid, "Subnamespace"),
        uid(hc.metadata.uid, "HierarchyConfiguration"),
        uid(config.metadata.uid, "HNCConfiguration"),
    )
}

/// uid and resourceVersion of the object at `path` (under the group's version) as each replica
/// serves it, asked directly as kube-apiserver asks.
async fn on_every_replica(local: &Local, path: &str) -> Vec<(String, String)> {
    let client = local.direct_client(Some(local.front_proxy_identity()));
    let mut seen = Vec::new();
    for port in &local.hns_ports {
        let url = format!("https://{}:{port}/apis/hnc.x-k8s.io/v1alpha2/{path}", local.hns_host);
        let resp = client.get(&url).remote_user("admin", &["system:masters"]).send().await.unwrap();
        let v: serde_json::Value = resp.json().await.unwrap();
        let field = |f: &str| {
            v["metadata"][f].as_str().unwrap_or_else(|| panic!("no {f} from :{port}: {v}")).to_string()
        };
        seen.push((field("uid"), field("resourceVersion")));
    }
    seen
}

/// Every replica serves the object at `path` with uid `uid` (and one resourceVersion).
async fn replicas_agree(local: &Local, path: &str, uid: &str) {
    let seen = eventually(&format!("every replica to serve {path} alike"), WAIT, || async {
        let seen = on_every_replica(local, path).await;
        seen.windows(2).all(|w| w[0] == w[1]).then_some(seen)
    })
    .await;
    assert_eq!(seen[0].0, uid, "{path}");
}

#[tokio::test]
async fn derived_objects_have_uids_of_their_own_that_survive_a_restart() {
    let _serial = SERIAL.lock().await;
    let Some((env, local, client)) = Env::local_with_admin().await else { return };
    let (parent, child) = parent_and_subnamespace(&client, "id").await;
    let ns = Api::<Namespace>::all(client.clone()).get(&child).await.unwrap();
    let before = uids(&client, &parent, &child).await;
    assert_ne!(before.0, before.1, "a Subnamespace and its child's HierarchyConfiguration");
    assert_ne!(Some(&before.0), ns.metadata.uid.as_ref(), "a Subnamespace and its Namespace");
    assert_ne!(Some(&before.1), ns.metadata.uid.as_ref(), "a HierarchyConfiguration and its Namespace");
    let anchor: serde_json::Value = serde_json::from_str(&ok(env.kubectl(&[
        "get",
        "subnamespaceanchors",
        "-n",
        &parent,
        &child,
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(anchor["metadata"]["uid"], before.0.as_str(), "one object under both resources");
    replicas_agree(&local, &format!("namespaces/{parent}/subnamespaces/{child}"), &before.0).await;
    replicas_agree(&local, &format!("namespaces/{child}/hierarchyconfigurations/hierarchy"), &before.1).await;
    replicas_agree(&local, "hncconfigurations/config", &before.2).await;

    hns_up(&local, "up");
    assert_eq!(uids(&client, &parent, &child).await, before, "the same uids after a restart");

    // A delete guarded by a uid (as the garbage collector's) names the Subnamespace's own.
    let subs: Api<Subnamespace> = Api::namespaced(client.clone(), &parent);
    let guarded = |uid: Option<String>| DeleteParams {
        preconditions: Some(kube::api::Preconditions { uid, resource_version: None }),
        ..Default::default()
    };
    let e = subs.delete(&child, &guarded(ns.metadata.uid.clone())).await.unwrap_err();
    assert_eq!(api_status(e).code, 409, "the Namespace's uid is not the Subnamespace's");
    subs.delete(&child, &guarded(Some(before.0.clone()))).await.unwrap();
    delete_tree(&client, &parent).await;
}

/// The HNCConfiguration as kubectl prints it, once it has a uid.
async fn config_with_uid(env: &Env) -> serde_json::Value {
    eventually("the HNCConfiguration to have a uid", WAIT, || async {
        let out = env.kubectl(&["get", "hncconfiguration", "config", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["metadata"]["uid"].is_string().then_some(v)
    })
    .await
}

/// A fresh cluster's configuration, before anyone wrote it: its ConfigMap is deleted while hns
/// is down, as if never made. hns makes it when it starts (and again when it is deleted), so
/// the HNCConfiguration has its identity from the start, the same in a watch's first event.
#[tokio::test]
async fn the_hnc_configuration_has_an_identity_before_its_first_write() {
    let _serial = SERIAL.lock().await;
    let Some((env, local, client)) = Env::local_with_admin().await else { return };
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "hns-system");
    let kept = configmaps.get_opt("hns-config").await.unwrap().and_then(|cm| cm.data);

    hns_up(&local, "down");
    let _ = configmaps.delete("hns-config", &DeleteParams::default()).await;
    hns_up(&local, "up");
    let yaml = ok(env.kubectl(&["get", "hncconfiguration", "config", "-o", "yaml"]));
    for field in ["uid:", "creationTimestamp:", "resourceVersion:"] {
        assert!(yaml.contains(&format!("\n  {field} ")), "no {field} in:\n{yaml}");
    }
    let got = config_with_uid(&env).await;
    let api: Api<HNCConfiguration> = Api::all(client.clone());
    let first =
        api.watch(&WatchParams::default().timeout(5), "0").await.unwrap().boxed().try_next().await.unwrap();
    let Some(WatchEvent::Added(watched)) = first else { panic!("a watch starts with the object: {first:?}") };
    assert_eq!(watched.metadata.uid.as_deref(), got["metadata"]["uid"].as_str());
    assert_eq!(watched.metadata.resource_version.as_deref(), got["metadata"]["resourceVersion"].as_str());
    // Re-read: a restart may move the replicas to other ports.
    let restarted = Env::get();
    let local = restarted.local.as_ref().expect("the local control plane");
    replicas_agree(local, "hncconfigurations/config", got["metadata"]["uid"].as_str().unwrap()).await;

    // Deleted while hns runs: made again, with a new identity (a new object), at once.
    configmaps.delete("hns-config", &DeleteParams::default()).await.unwrap();
    let again = eventually("a new HNCConfiguration identity", WAIT, || async {
        let v = config_with_uid(&env).await;
        (v["metadata"]["uid"] != got["metadata"]["uid"]).then_some(v)
    })
    .await;
    assert!(again["metadata"]["creationTimestamp"].is_string(), "{again}");

    if let Some(data) = kept {
        let mut cm = configmaps.get("hns-config").await.unwrap();
        cm.data = Some(data);
        configmaps.replace("hns-config", &Default::default(), &cm).await.unwrap();
    }
}
