//! Hierarchy state that cannot be forged or raced into a cycle.
//!
//! Forgery: hns's webhook keeps others from writing its annotations, but it fails open for
//! namespaces outside hierarchies, and a timed-out webhook is skipped. These tests write the
//! annotations as such a skipped webhook would leave them (with hns's own credentials, which
//! the webhook lets through) and check that hns propagates nothing because of them, reverts
//! them and names the forgery in an event.
//!
//! Races: two moves crossing each other (`x` under `y`, `y` under `x`) sent at the same moment
//! must never both land.

use std::time::{Duration, Instant};

use hns_e2e::*;
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const PARENT: &str = "hnc.x-k8s.io/parent";
const SUBNAMESPACE_OF: &str = "hnc.x-k8s.io/subnamespace-of";
const SEAL: &str = "hnc.x-k8s.io/seal";
const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";

/// A client with hns's own credentials: its writes pass the webhook, as anyone's do when the
/// webhook is skipped.
async fn as_skipped_webhook(local: &Local) -> Client {
    client_for(&local.dir.join("hns-apiserver.kubeconfig")).await
}

async fn annotate(client: &Client, ns: &str, annotations: serde_json::Value) {
    let api: Api<Namespace> = Api::all(client.clone());
    api.patch(ns, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": annotations}})))
        .await
        .unwrap_or_else(|e| panic!("annotate {ns}: {e}"));
}

async fn annotation(client: &Client, ns: &str, key: &str) -> Option<String> {
    let api: Api<Namespace> = Api::all(client.clone());
    api.get(ns).await.unwrap().metadata.annotations.and_then(|a| a.get(key).cloned())
}

async fn copies_in(client: &Client, ns: &str) -> usize {
    let api: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(INHERITED_FROM);
    api.list(&lp).await.map(|l| l.items.len()).unwrap_or(0)
}

/// Watches `ns` for `duration`, counting the RoleBinding copies it ever holds.
async fn most_copies_during(client: &Client, ns: &str, duration: Duration) -> usize {
    let start = Instant::now();
    let mut most = 0;
    while start.elapsed() < duration {
        most = most.max(copies_in(client, ns).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    most
}

async fn forgery_event(client: &Client, ns: &str) -> Option<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = api.list(&ListParams::default()).await.ok()?;
    events
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("ForgedHierarchyState"))
        .and_then(|e| e.message)
}

/// `spec.parent` of `ns`'s hierarchy configuration, as the hierarchy API shows it.
fn spec_parent(env: &Env, ns: &str) -> String {
    ok(env.kubectl(&[
        "get",
        "hierarchyconfiguration",
        "hierarchy",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.parent}",
    ]))
}

/// A namespace a forger would like to take policy from: it holds RoleBinding `victim-secrets`.
async fn victim(admin: &Client) -> String {
    let victim = fresh_namespace(admin, "victim").await;
    let binding = role_binding("victim-secrets", "view", Subject::Group("victim-team"));
    Api::<RoleBinding>::namespaced(admin.clone(), &victim)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    victim
}

/// `hns_forgeries_reverted_total` on the local hns-apiserver's metrics port.
async fn forgeries_reverted(local: &Local) -> u64 {
    let text = local.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix("hns_forgeries_reverted_total "))
        .unwrap_or_else(|| panic!("no hns_forgeries_reverted_total in:\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_forged_parent_propagates_nothing_and_is_reverted_and_reported() {
    let Some((env, local, admin)) = Env::local_with_admin().await else { return };
    let forger_client = as_skipped_webhook(&local).await;
    let victim = victim(&admin).await;
    // The control: a real child of the victim gets the copy, so the checks below can fail.
    let child = fresh_namespace(&admin, "child").await;
    set_parent(&admin, &child, Some(&victim)).await.unwrap();
    eventually("the real child gets the copy", WAIT, || async {
        (copies_in(&admin, &child).await == 1).then_some(())
    })
    .await;

    // A namespace outside every hierarchy names the victim as its parent, with no seal.
    let reverted_before = forgeries_reverted(&local).await;
    let forger = fresh_namespace(&admin, "forger").await;
    annotate(&forger_client, &forger, json!({PARENT: victim})).await;
    assert_eq!(
        most_copies_during(&admin, &forger, Duration::from_secs(3)).await,
        0,
        "a forged parent propagated"
    );
    eventually("the forged parent is reverted", WAIT, || async {
        annotation(&admin, &forger, PARENT).await.is_none().then_some(())
    })
    .await;
    let message =
        eventually("an event names the forgery", WAIT, || async { forgery_event(&admin, &forger).await })
            .await;
    assert!(message.contains(&format!("{PARENT}=\"{victim}\"")), "{message}");
    // The alert's count: the condition is gone already, the revert stays counted.
    let reverted = forgeries_reverted(&local).await;
    assert!(reverted > reverted_before, "hns_forgeries_reverted_total {reverted_before} -> {reverted}");
    assert_eq!(spec_parent(&env, &forger), "", "the hierarchy API shows no parent");

    // A valid seal copied from the real child does not make the same claim valid elsewhere.
    let seal = annotation(&admin, &child, SEAL).await.expect("hns sealed the real child");
    annotate(&forger_client, &forger, json!({PARENT: victim, SEAL: seal})).await;
    assert_eq!(
        most_copies_during(&admin, &forger, Duration::from_secs(3)).await,
        0,
        "a copied seal propagated"
    );
    eventually("the copied seal is reverted", WAIT, || async {
        let cleared = annotation(&admin, &forger, PARENT).await.is_none()
            && annotation(&admin, &forger, SEAL).await.is_none();
        cleared.then_some(())
    })
    .await;

    delete_namespaces(&admin, &[&forger, &child, &victim]).await;
}

#[tokio::test]
async fn a_subnamespace_moved_by_hand_keeps_its_sealed_parent() {
    let Some((env, local, admin)) = Env::local_with_admin().await else { return };
    let forger_client = as_skipped_webhook(&local).await;
    let victim = victim(&admin).await;
    let home = fresh_namespace(&admin, "home").await;
    let sub = unique("sub");
    create_subns(&admin, &home, &sub).await.unwrap();
    eventually("the subnamespace exists", WAIT, || async { annotation(&admin, &sub, SEAL).await }).await;

    annotate(&forger_client, &sub, json!({SUBNAMESPACE_OF: victim})).await;
    assert_eq!(most_copies_during(&admin, &sub, Duration::from_secs(3)).await, 0, "a forged move propagated");
    eventually("the sealed parent is written back", WAIT, || async {
        (annotation(&admin, &sub, SUBNAMESPACE_OF).await.as_deref() == Some(home.as_str())).then_some(())
    })
    .await;
    assert_eq!(spec_parent(&env, &sub), home);
    eventually("an event names the forgery", WAIT, || async { forgery_event(&admin, &sub).await }).await;

    delete_tree(&admin, &home).await;
    delete_namespaces(&admin, &[&victim]).await;
}

#[tokio::test]
async fn crossed_moves_never_both_land() {
    let (env, admin, x) = Env::with_namespace("cross-x").await;
    let y = fresh_namespace(&admin, "cross-y").await;
    let (other_x, other_y) = (env.admin().await, env.admin().await);
    for round in 0..30 {
        let (a, b) = tokio::join!(set_parent(&other_x, &x, Some(&y)), set_parent(&other_y, &y, Some(&x)));
        assert!(!(a.is_ok() && b.is_ok()), "round {round}: both crossed moves landed: a cycle");
        for refused in [a.err(), b.err()].into_iter().flatten() {
            let status = api_status(refused);
            assert_eq!(status.code, 422, "round {round}: {status:?}");
            assert!(status.message.contains("cycle"), "round {round}: {}", status.message);
        }
        let (px, py) = (annotation(&admin, &x, PARENT).await, annotation(&admin, &y, PARENT).await);
        assert!(
            !(px.as_deref() == Some(y.as_str()) && py.as_deref() == Some(x.as_str())),
            "round {round}: cycle"
        );
        set_parent(&admin, &x, None).await.unwrap();
        set_parent(&admin, &y, None).await.unwrap();
    }
    delete_namespaces(&admin, &[&x, &y]).await;
}
