//! Hierarchical quotas cannot be overspent (issue 18, docs/quotas.md "How it is enforced"):
//! pod creations racing in sibling namespaces never take a subtree past its quota; hns's
//! ResourceQuotas cannot be edited or deleted by an admin. (An hns outage: `quotas_outage.rs`.)
//! The ledgers follow their trees: a namespace leaving takes its entry, a tree gone its ledger.

use futures::future::join_all;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use hns_e2e::quotas::{budget_tree, pod, stored_ledger, until_granted, SIBLINGS};
use hns_e2e::*;
use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn concurrent_creations_in_siblings_never_overspend_the_parent_quota() {
    let client = Env::get().admin().await;
    let root = raced_budget_tree(&client, "hrq-race").await.0;
    delete_tree(&client, &root).await;
}

/// A budget tree (see [`budget_tree`]) whose budget is one pod fewer than it has siblings, put
/// through [`race`]; returns its root and siblings.
async fn raced_budget_tree(client: &Client, prefix: &str) -> (String, Vec<String>) {
    let limit = SIBLINGS - 1;
    let (root, siblings) = budget_tree(client, prefix, limit).await;
    race(client, &root, &siblings, limit).await;
    (root, siblings)
}

/// Rounds of one pod more than the budget created at once across the siblings: exactly the
/// budget is admitted each round, the rest refused with HNC's message.
async fn race(client: &Client, root: &str, siblings: &[String], limit: usize) {
    let mut all = siblings.to_vec();
    all.push(root.to_string());
    for round in 0..4 {
        // One more pod than the budget, all at once, one per sibling and one more in one.
        let mut targets: Vec<&String> = siblings.iter().collect();
        targets.truncate(limit + 1);
        while targets.len() <= limit {
            targets.push(&siblings[(round + targets.len()) % siblings.len()]);
        }
        let creations = targets.iter().enumerate().map(|(i, ns)| {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            async move { api.create(&PostParams::default(), &pod(&format!("p{round}-{i}"), "1m")).await }
        });
        let results = join_all(creations).await;
        let admitted = results.iter().filter(|r| r.is_ok()).count();
        let refusals: Vec<String> =
            results.into_iter().filter_map(|r| r.err()).map(|e| e.to_string()).collect();
        assert_eq!(admitted, limit, "round {round}: exactly the budget admitted; refused: {refusals:?}");
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
        assert_eq!(counted, limit, "round {round}");
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
        until_granted(client, root, &all, "0").await;
    }
}

#[tokio::test]
async fn the_ledger_follows_its_tree() {
    let client = Env::get().admin().await;
    let (root, siblings) = raced_budget_tree(&client, "hrq-tree").await;
    // A namespace leaving the tree leaves its ledger; the tree gone, so is the ledger.
    let anchors: Api<hns_api::Subnamespace> = Api::namespaced(client.clone(), &root);
    anchors.delete(&siblings[0], &DeleteParams::default()).await.unwrap();
    eventually("the deleted namespace out of the ledger", WAIT, || async {
        let l = stored_ledger(&client, &root).await?;
        let has = |ns: &str| l["namespaces"].get(ns).is_some();
        (!has(&siblings[0]) && has(&siblings[1])).then_some(())
    })
    .await;
    delete_tree(&client, &root).await;
    eventually("the ledger deleted with its tree", Duration::from_secs(180), || async {
        stored_ledger(&client, &root).await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_admin_cannot_edit_or_delete_hns_resourcequotas() {
    let client = Env::get().admin().await;
    let (root, _) = budget_tree(&client, "hrq-own", 3).await;
    let rqs: Api<ResourceQuota> = Api::namespaced(client.clone(), &root);

    let edit = Patch::Merge(json!({"spec": {"hard": {"pods": "100"}}}));
    let err = rqs.patch(RESOURCE_QUOTA_NAME, &PatchParams::default(), &edit).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403), "{err}");
    assert!(err.to_string().contains("belongs to hns"), "{err}");
    let unlabel = Patch::Merge(json!({"metadata": {"labels": {hns_api::keys::HRQ_LABEL: null}}}));
    assert!(rqs.patch(RESOURCE_QUOTA_NAME, &PatchParams::default(), &unlabel).await.is_err());
    let err = rqs.delete(RESOURCE_QUOTA_NAME, &DeleteParams::default()).await.unwrap_err();
    assert!(err.to_string().contains("change or delete the HierarchicalResourceQuota instead"), "{err}");

    let lone = fresh_namespace(&client, "hrq-forge").await;
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

/// Issue 40, B2: the admin of one subnamespace under a quota cannot stop admission outside it,
/// with a quota on a resource Kubernetes never counts, nor fill the tree's ledger with quotas
/// of thousands of resources.
#[tokio::test]
async fn a_tenants_quotas_never_stop_admission_outside_their_subtree() {
    let (env, admin, parent) = Env::with_namespace("tenantq").await;
    let (tenant_ns, sibling) = (format!("{parent}-tenant"), format!("{parent}-sibling"));
    for ns in [&tenant_ns, &sibling] {
        create_subns(&admin, &parent, ns).await.unwrap();
    }
    hns_e2e::quotas::set_quota(&admin, &parent, "budget", &[("pods", "20")]).await.unwrap();
    let tenant = unique("tenant");
    ok(env.kubectl(&[
        "create",
        "rolebinding",
        "t-admin",
        "-n",
        &tenant_ns,
        "--clusterrole=admin",
        &format!("--user={tenant}"),
    ]));
    let as_tenant = env.client_as(&tenant, &[]).await;
    hns_e2e::quotas::set_quota(&as_tenant, &tenant_ns, "tiny", &[("count/widgets.example.com", "5")])
        .await
        .unwrap();
    let thousands: Vec<(String, String)> =
        (0..2_500).map(|i| (format!("count/w{i}.example.com"), "5".to_string())).collect();
    let hard: Vec<(&str, &str)> = thousands.iter().map(|(r, q)| (r.as_str(), q.as_str())).collect();
    let err =
        hns_e2e::quotas::set_quota(&as_tenant, &tenant_ns, "huge", &hard).await.unwrap_err().to_string();
    assert!(err.contains("must have at most 64 resources"), "{err}");
    // The tenant's own namespace knows its usage too: what nothing counts is used zero.
    until_granted(&admin, &parent, std::slice::from_ref(&tenant_ns), "0").await;
    for (i, ns) in [&sibling, &sibling, &parent].into_iter().enumerate() {
        let api: Api<Pod> = Api::namespaced(admin.clone(), ns);
        api.create(&PostParams::default(), &pod(&format!("p{i}"), "1m"))
            .await
            .unwrap_or_else(|e| panic!("a pod in {ns} beside the tenant's quotas: {e}"));
    }
    let api: Api<Pod> = Api::namespaced(admin.clone(), &tenant_ns);
    api.create(&PostParams::default(), &pod("own", "1m")).await.expect("and in the tenant's own namespace");
    delete_tree(&admin, &parent).await;
}
