//! Hierarchical quotas cannot be overspent (issue 18, docs/quotas.md "How it is enforced"):
//! pod creations racing in sibling namespaces never take a subtree past its quota; while hns is
//! down, creations in covered namespaces fail closed and namespaces outside every quota are
//! unaffected; hns's ResourceQuotas cannot be edited or deleted by an admin.
//!
//! Most tests are written against the whole feature: the HierarchicalResourceQuota resource and
//! hns's per-namespace ResourceQuotas come from the serving half (i18-serve), the ledger and the
//! webhooks from i18-ledger. The tests of the enforcement half alone set the quota state up by
//! hand instead ([`quota_by_hand`]: as hns would write it, a sealed annotation and labelled
//! ResourceQuotas, written as hns's own ServiceAccount), so they run without the serving half.

use std::time::Duration;

use futures::future::join_all;
use hns_api::quota::{HierarchicalResourceQuota, HierarchicalResourceQuotaSpec, RESOURCE_QUOTA_NAME};
use hns_apiserver::hierarchy::ledger::{self, Ledger};
use hns_e2e::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const SIBLINGS: usize = 8;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }))
    .unwrap()
}

/// Puts HierarchicalResourceQuota `name` limiting `pods` in namespace `ns`.
async fn hrq(client: &Client, ns: &str, name: &str, pods: u32) {
    let api: Api<HierarchicalResourceQuota> = Api::namespaced(client.clone(), ns);
    let spec =
        HierarchicalResourceQuotaSpec { hard: [("pods".to_string(), Quantity(pods.to_string()))].into() };
    api.create(&PostParams::default(), &HierarchicalResourceQuota::new(name, spec)).await.unwrap();
}

/// The ledger of the tree rooted at `root`, as stored.
async fn stored_ledger(client: &Client, root: &str) -> Option<Ledger> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "hns-system");
    let cm = cms.get_opt(&ledger::configmap_name(root)).await.ok()??;
    serde_json::from_str(cm.data?.get(ledger::DATA_KEY)?).ok()
}

/// Waits until every namespace of `members` is ready for usage: its ResourceQuota counted by
/// Kubernetes, no longer pending, and its usage known to the ledger as `pods` pods.
async fn ready(client: &Client, root: &str, members: &[String], pods: &str) {
    eventually(&format!("namespaces under {root} counted at {pods} pods"), WAIT, || async {
        let l = stored_ledger(client, root).await?;
        for ns in members {
            let rq = Api::<ResourceQuota>::namespaced(client.clone(), ns)
                .get_opt(RESOURCE_QUOTA_NAME)
                .await
                .ok()??;
            rq.status?.used?.get("pods")?;
            let labels =
                Api::<Namespace>::all(client.clone()).get(ns).await.ok()?.metadata.labels.unwrap_or_default();
            if labels.contains_key(hns_api::keys::HRQ_PENDING_LABEL) {
                return None;
            }
            let entry = l.namespaces.get(ns)?;
            (entry.basis.is_some() && entry.used.get("pods").map(|q| q.0.as_str()) == Some(pods))
                .then_some(())?;
        }
        Some(())
    })
    .await;
}

/// A tree `root` with a quota of `limit` pods and [`SIBLINGS`] subnamespaces, ready.
async fn budget_tree(client: &Client, prefix: &str, limit: u32) -> (String, Vec<String>) {
    let root = create_namespace(client, &unique(prefix), &[]).await;
    hrq(client, &root, "budget", limit).await;
    let mut siblings = Vec::new();
    for i in 0..SIBLINGS {
        let name = format!("{root}-{i}");
        create_subns(client, &root, &name).await.unwrap();
        siblings.push(name);
    }
    let mut all = siblings.clone();
    all.push(root.clone());
    ready(client, &root, &all, "0").await;
    (root, siblings)
}

#[tokio::test]
async fn concurrent_creations_in_siblings_never_overspend_the_parent_quota() {
    let env = Env::get();
    let client = env.admin().await;
    let limit = SIBLINGS as u32 - 1;
    let (root, siblings) = budget_tree(&client, "hrq-race", limit).await;
    race(&client, &root, &siblings, limit).await;
    delete_tree(&client, &root).await;
}

/// Rounds of one pod more than the budget created at once across the siblings: exactly the
/// budget is admitted each round, the rest refused with HNC's message.
async fn race(client: &Client, root: &str, siblings: &[String], limit: u32) {
    let mut all = siblings.to_vec();
    all.push(root.to_string());
    for round in 0..4 {
        // One more pod than the budget, all at once, one per sibling and one more in one.
        let mut targets: Vec<&String> = siblings.iter().collect();
        targets.truncate(limit as usize + 1);
        while targets.len() <= limit as usize {
            targets.push(&siblings[(round + targets.len()) % siblings.len()]);
        }
        let creations = targets.iter().enumerate().map(|(i, ns)| {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            async move { api.create(&PostParams::default(), &pod(&format!("p{round}-{i}"))).await }
        });
        let results = join_all(creations).await;
        let admitted = results.iter().filter(|r| r.is_ok()).count();
        let refusals: Vec<String> =
            results.into_iter().filter_map(|r| r.err()).map(|e| e.to_string()).collect();
        assert_eq!(
            admitted, limit as usize,
            "round {round}: exactly the budget admitted; refused: {refusals:?}"
        );
        let expected = format!("exceeded hierarchical quota in namespace \"{root}\": \"budget\"");
        for refusal in &refusals {
            assert!(refusal.contains(&expected), "round {round}: {refusal}");
        }
        // The subtree holds exactly the budget, counted by Kubernetes.
        let mut counted = 0;
        for ns in &all {
            counted += Api::<Pod>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
        }
        assert_eq!(counted, limit as usize, "round {round}");
        // Empty the subtree and wait for the ledger to see it before the next round.
        for ns in siblings {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            api.delete_collection(
                &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
                &ListParams::default(),
            )
            .await
            .unwrap();
        }
        ready(client, root, &all, "0").await;
    }
}

/// hns's own ServiceAccount, whose writes skip hns's webhooks.
const HNS_USER: &str = "system:serviceaccount:hns-system:hns-apiserver";

/// Writes, as hns would, quota `name` of `pods` pods on namespace `ns` (the sealed annotation)
/// and the labelled ResourceQuota in each of `covered`.
async fn quota_by_hand(env: &Env, client: &Client, ns: &str, name: &str, pods: u32, covered: &[String]) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "hns-system");
    let key = secrets.get("hns-hierarchy-seal").await.unwrap().data.unwrap()["key"].0.clone();
    let sealer = hns_apiserver::hierarchy::seal::Sealer::new(&key).unwrap();
    let namespace = Api::<Namespace>::all(client.clone()).get(ns).await.unwrap();
    let mut annotations = namespace.metadata.annotations.unwrap_or_default();
    let stored = json!({name: {"uid": "e2e", "creationTimestamp": "2026-01-01T00:00:00Z", "hard": {"pods": pods.to_string()}}});
    annotations.insert(hns_api::keys::RESOURCE_QUOTAS.into(), stored.to_string());
    annotations.remove(hns_api::keys::SEAL);
    let seal = sealer.seal(ns, &annotations).unwrap();
    let patch = json!({"metadata": {"annotations": {hns_api::keys::RESOURCE_QUOTAS: stored.to_string(), hns_api::keys::SEAL: seal}}});
    ok(env.kubectl(&["--as", HNS_USER, "patch", "namespace", ns, "--type=merge", "-p", &patch.to_string()]));
    for member in covered {
        let rq = json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": RESOURCE_QUOTA_NAME, "namespace": member, "labels": {hns_api::keys::HRQ_LABEL: ""}},
            "spec": {"hard": {"pods": pods.to_string()}},
        });
        let file = std::env::temp_dir().join(format!("{member}-rq.json"));
        std::fs::write(&file, rq.to_string()).unwrap();
        ok(env.kubectl(&["--as", HNS_USER, "apply", "-f", file.to_str().unwrap()]));
    }
}

/// [`budget_tree`], with the quota state written by hand ([`quota_by_hand`]).
async fn budget_tree_by_hand(env: &Env, client: &Client, prefix: &str, limit: u32) -> (String, Vec<String>) {
    let root = create_namespace(client, &unique(prefix), &[]).await;
    let mut siblings = Vec::new();
    for i in 0..SIBLINGS {
        let name = format!("{root}-{i}");
        create_subns(client, &root, &name).await.unwrap();
        siblings.push(name);
    }
    let mut all = siblings.clone();
    all.push(root.clone());
    quota_by_hand(env, client, &root, "budget", limit, &all).await;
    ready(client, &root, &all, "0").await;
    (root, siblings)
}

#[tokio::test]
async fn the_ledger_alone_stops_concurrent_creations_over_a_quota() {
    let env = Env::get();
    let client = env.admin().await;
    let limit = SIBLINGS as u32 - 1;
    let (root, siblings) = budget_tree_by_hand(&env, &client, "hrq-hand", limit).await;
    race(&client, &root, &siblings, limit).await;
    delete_tree(&client, &root).await;
}

#[tokio::test]
async fn hns_down_fails_closed_in_covered_namespaces_only() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("hns_down_fails_closed_in_covered_namespaces_only") else { return };
    let client = env.admin().await;
    let (root, siblings) = budget_tree_by_hand(&env, &client, "hrq-down", 20).await;
    let lone = create_namespace(&client, &unique("hrq-lone"), &[]).await;

    let pid = std::fs::read_to_string(local.dir.join("pids/hns-apiserver.pid")).unwrap();
    assert!(std::process::Command::new("kill").args(["-9", pid.trim()]).status().unwrap().success());
    let covered: Api<Pod> = Api::namespaced(client.clone(), &siblings[0]);
    let refused = covered.create(&PostParams::default(), &pod("during-outage")).await;
    let message = refused.expect_err("a covered namespace fails closed").to_string();
    assert!(message.contains("resourcequotas.hns.hnc.x-k8s.io"), "{message}");
    let outside: Api<Pod> = Api::namespaced(client.clone(), &lone);
    outside
        .create(&PostParams::default(), &pod("during-outage"))
        .await
        .expect("outside every quota: unaffected");

    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let up =
        std::process::Command::new(repo.join("hack/hns-up.sh")).arg("up").arg(&local.dir).status().unwrap();
    assert!(up.success(), "hns-apiserver restarts");
    eventually("a covered namespace accepts pods again", WAIT, || async {
        covered.create(&PostParams::default(), &pod("after-outage")).await.ok()
    })
    .await;
    delete_tree(&client, &root).await;
    delete_namespaces(&client, &[&lone]).await;
}

#[tokio::test]
async fn an_admin_cannot_edit_or_delete_hns_resourcequotas() {
    let env = Env::get();
    let client = env.admin().await;
    let (root, _) = budget_tree_by_hand(&env, &client, "hrq-own", 3).await;
    let rqs: Api<ResourceQuota> = Api::namespaced(client.clone(), &root);

    let edit = Patch::Merge(json!({"spec": {"hard": {"pods": "100"}}}));
    let err = rqs.patch(RESOURCE_QUOTA_NAME, &PatchParams::default(), &edit).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403), "{err}");
    assert!(err.to_string().contains("belongs to hns"), "{err}");
    let unlabel = Patch::Merge(json!({"metadata": {"labels": {hns_api::keys::HRQ_LABEL: null}}}));
    assert!(rqs.patch(RESOURCE_QUOTA_NAME, &PatchParams::default(), &unlabel).await.is_err());
    let err = rqs.delete(RESOURCE_QUOTA_NAME, &DeleteParams::default()).await.unwrap_err();
    assert!(err.to_string().contains("change or delete the HierarchicalResourceQuota instead"), "{err}");

    let lone = create_namespace(&client, &unique("hrq-forge"), &[]).await;
    let forged: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": RESOURCE_QUOTA_NAME, "labels": {hns_api::keys::HRQ_LABEL: "x"}},
        "spec": {"hard": {"pods": "100"}},
    }))
    .unwrap();
    let err = Api::<ResourceQuota>::namespaced(client.clone(), &lone)
        .create(&PostParams::default(), &forged)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("hns makes them for hierarchical quotas"), "{err}");

    // The namespace's deletion still takes its ResourceQuota.
    delete_tree(&client, &root).await;
    delete_namespaces(&client, &[&lone]).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually("the covered namespace gone", Duration::from_secs(120), || async {
        namespaces.get_opt(&root).await.ok()?.is_none().then_some(())
    })
    .await;
}
