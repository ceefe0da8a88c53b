//! Crash safety: hns-apiserver killed with SIGKILL in the middle of propagating to 500
//! namespaces (in a cluster, every pod deleted at once with no grace period), with sources
//! changed while it is down, then restarted: every copy ends up exactly right. Its own test binary, so no other test runs while hns is down (cargo runs test binaries
//! one after another). While hns is down, a namespace outside every hierarchy stays editable
//! although hns labels it (its tree label and `included-namespace`), and a member does not; one
//! created then gets those labels once hns is back.

use std::time::Duration;

use futures::{stream, StreamExt};
use hns_e2e::*;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const CHILDREN: usize = 500;
const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";

/// How many children hold exactly the wanted copies: `keep` with subjects `group`, `fresh`, and
/// no copy of `gone`.
async fn converged(client: &Client, root: &str, group: &str) -> usize {
    let all = Api::<RoleBinding>::all(client.clone())
        .list(&ListParams::default().labels(INHERITED_FROM))
        .await
        .unwrap();
    let mut per_ns: std::collections::BTreeMap<String, Vec<RoleBinding>> = Default::default();
    for rb in all.items {
        per_ns.entry(rb.metadata.namespace.clone().unwrap_or_default()).or_default().push(rb);
    }
    per_ns
        .iter()
        .filter(|(ns, _)| ns.starts_with(&format!("{root}-")))
        .filter(|(_, rbs)| {
            let named = |n: &str| rbs.iter().find(|r| r.metadata.name.as_deref() == Some(n));
            let keep_ok = named("keep").is_some_and(|r| {
                r.subjects.as_ref().is_some_and(|s| s[0].name == group)
                    && r.metadata.labels.as_ref().is_some_and(|l| l[INHERITED_FROM] == root)
            });
            keep_ok && named("fresh").is_some() && named("gone").is_none() && rbs.len() == 2
        })
        .count()
}

#[tokio::test]
async fn sigkill_mid_propagation_then_restart_converges_exactly() {
    let env = Env::get();
    let hns = hns_e2e::stopping::Hns::of(&env);
    let client = env.admin().await;
    let root = fresh_namespace(&client, "crash").await;
    let children: Vec<String> = (0..CHILDREN).map(|i| format!("{root}-{i}")).collect();
    stream::iter(&children)
        .for_each_concurrent(16, |c| {
            let client = client.clone();
            let root = root.clone();
            async move {
                create_subns(&client, &root, c).await.unwrap();
            }
        })
        .await;
    let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &root);
    rbs.create(&PostParams::default(), &role_binding("keep", "view", Subject::Group("before")))
        .await
        .unwrap();
    rbs.create(&PostParams::default(), &role_binding("gone", "view", Subject::Group("before")))
        .await
        .unwrap();
    eventually("the first two bindings everywhere", Duration::from_secs(180), || async {
        let all = Api::<RoleBinding>::all(client.clone())
            .list(&ListParams::default().labels(INHERITED_FROM))
            .await
            .ok()?;
        let copies = all
            .items
            .iter()
            .filter(|r| r.metadata.namespace.as_deref().is_some_and(|n| n.starts_with(&root)))
            .count();
        (copies == 2 * CHILDREN).then_some(())
    })
    .await;

    // A namespace outside every hierarchy, labelled by hns as every managed namespace is.
    let lone = fresh_namespace(&client, "crash-lone").await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    eventually("the lone namespace labelled", Duration::from_secs(30), || async {
        let labels = namespaces.get(&lone).await.ok()?.metadata.labels?;
        labels.contains_key(hns_api::keys::INCLUDED_NAMESPACE).then_some(())
    })
    .await;

    // A new source, and hns killed while it propagates.
    rbs.create(&PostParams::default(), &role_binding("fresh", "view", Subject::Group("during")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    hns.kill();
    let fresh = Api::<RoleBinding>::all(client.clone())
        .list(&ListParams::default().labels(INHERITED_FROM).fields("metadata.name=fresh"))
        .await
        .unwrap()
        .items
        .len();
    println!("copies of the new binding when hns was killed: {fresh}/{CHILDREN}");

    // While hns is down: one source changes, another goes.
    rbs.patch(
        "keep",
        &PatchParams::default(),
        &Patch::Merge(json!({"subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "after"}]})),
    )
    .await
    .unwrap();
    rbs.delete("gone", &DeleteParams::default()).await.unwrap();
    // The outage blocks members (fail-closed webhook) but not the lone namespace (fail-open).
    let label = |value: &str| Patch::Merge(json!({"metadata": {"labels": {"team": value}}}));
    namespaces.patch(&lone, &PatchParams::default(), &label("during-outage")).await.unwrap();
    let blocked = namespaces.patch(&root, &PatchParams::default(), &label("during-outage")).await;
    assert!(blocked.is_err(), "a member's edit waits for hns");
    // A namespace created meanwhile: on Kubernetes 1.36 and later kube-apiserver labels it
    // itself (hns's admission policy); before, hns's mutating webhook fails open, so it is made
    // without the labels, and hns's controller adds them once it is back.
    let newcomer = unique("crash-new");
    let mut made = k8s_openapi::api::core::v1::Namespace::default();
    made.metadata.name = Some(newcomer.clone());
    let made = namespaces.create(&PostParams::default(), &made).await.unwrap();
    let labels = made.metadata.labels.unwrap_or_default();
    let policy_served = admission_policies_served(&client).await;
    if policy_served {
        assert_eq!(
            labels.get(&hns_api::keys::tree_label(&newcomer)).map(String::as_str),
            Some("0"),
            "{labels:?}"
        );
    } else {
        assert!(labels.keys().all(|k| !hns_api::keys::is_hns_label(k)), "made without hns: {labels:?}");
    }

    hns.start().await;
    let started = std::time::Instant::now();
    eventually("every copy exactly right after the restart", Duration::from_secs(300), || async {
        (converged(&client, &root, "after").await == CHILDREN).then_some(())
    })
    .await;
    println!("converged {CHILDREN} namespaces {:.1} s after the restart", started.elapsed().as_secs_f64());
    eventually("the namespace made during the outage labelled", Duration::from_secs(60), || async {
        let labels = namespaces.get(&newcomer).await.ok()?.metadata.labels?;
        let own = labels.get(&hns_api::keys::tree_label(&newcomer)).map(String::as_str) == Some("0");
        (own && labels.contains_key(hns_api::keys::INCLUDED_NAMESPACE)).then_some(())
    })
    .await;

    delete_tree(&client, &root).await;
    delete_namespaces(&client, &[&lone, &newcomer]).await;
}
