//! A new namespace's labels cost kube-apiserver no call to hns where it can give them itself
//! (hns's MutatingAdmissionPolicy, Kubernetes 1.36 and later; apiserver/src/admission/
//! namespace_labels.rs), and hns's webhook gives them everywhere else.
//!
//! One test in its own binary: it counts kube-apiserver's calls to hns's webhook, which other
//! tests creating namespaces at the same time would add to.

use std::time::Duration;

use hns_api::keys;
use hns_e2e::apiserver_metrics::{kube_apiserver_metrics, metric_sum};
use hns_e2e::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};

const WAIT: Duration = Duration::from_secs(30);
const POLICY: &str = "hns-namespace-labels";

/// kube-apiserver's calls so far to the webhook that labels new namespaces.
async fn webhook_calls(client: &Client) -> f64 {
    let metrics = kube_apiserver_metrics(client).await.unwrap();
    metric_sum(
        &metrics,
        "apiserver_admission_webhook_admission_duration_seconds_count",
        Some(("name", "namespace-labels.hns.hnc.x-k8s.io")),
    )
}

fn policies(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicy");
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "mutatingadmissionpolicies"))
}

/// Creates a namespace named `name` (or, when it ends with `-`, generated from it) with
/// `labels`; returns what the create returned.
async fn create(client: &Client, name: &str, labels: &[(&str, &str)]) -> Namespace {
    let mut ns = Namespace::default();
    if name.ends_with('-') {
        ns.metadata.generate_name = Some(name.to_string());
    } else {
        ns.metadata.name = Some(name.to_string());
    }
    ns.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap()
}

fn lone_labels_of(ns: &Namespace) -> (Option<String>, Option<String>) {
    let name = ns.metadata.name.clone().unwrap();
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    (labels.get(&keys::tree_label(&name)).cloned(), labels.get(keys::INCLUDED_NAMESPACE).cloned())
}

fn labelled(ns: &Namespace) -> bool {
    lone_labels_of(ns) == (Some("0".into()), Some("true".into()))
}

#[tokio::test]
async fn new_namespaces_are_labelled_in_the_creating_request() {
    let client = Env::get().admin().await;
    if lone_namespaces_unlabelled(&client).await {
        return lone_namespaces_cost_nothing(&client).await;
    }
    let created = std::cell::RefCell::new(Vec::new());
    if admission_policies_served(&client).await {
        // hns applies the policy once it leads; kube-apiserver compiles it a moment later. Until
        // then the webhook labels new namespaces: wait until a plain one is created without it.
        eventually("plain namespaces created without calling hns", WAIT, || async {
            let before = webhook_calls(&client).await;
            let ns = create(&client, &unique("plain"), &[]).await;
            assert!(labelled(&ns), "labelled in the creating request: {ns:?}");
            created.borrow_mut().push(ns.metadata.name.clone().unwrap());
            (webhook_calls(&client).await == before).then_some(())
        })
        .await;
        let before = webhook_calls(&client).await;
        for _ in 0..3 {
            let ns = create(&client, &unique("plain"), &[("team", "x")]).await;
            assert!(labelled(&ns), "labelled in the creating request: {ns:?}");
            created.borrow_mut().push(ns.metadata.name.clone().unwrap());
        }
        assert_eq!(webhook_calls(&client).await, before, "hns was not called for plain namespaces");

        // A namespace that carries a key of hns's is still checked by hns (a manifest exported
        // from HNC carries included-namespace).
        let exported = create(&client, &unique("exported"), &[(keys::INCLUDED_NAMESPACE, "true")]).await;
        assert!(labelled(&exported), "{exported:?}");
        created.borrow_mut().push(exported.metadata.name.clone().unwrap());
        assert!(webhook_calls(&client).await > before, "hns checked the namespace with hns's label");

        // Deleted, the policy is put back, owned by hns's MutatingWebhookConfiguration.
        policies(&client).delete(POLICY, &DeleteParams::default()).await.unwrap();
        let back = eventually("hns to put its policy back", WAIT, || async {
            policies(&client)
                .get_opt(POLICY)
                .await
                .unwrap()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
        })
        .await;
        let owners = back.metadata.owner_references.unwrap_or_default();
        assert!(
            owners.iter().any(|o| o.kind == "MutatingWebhookConfiguration" && o.name == "hns"),
            "{owners:?}"
        );
    } else {
        // Before Kubernetes 1.36 the webhook labels every new namespace.
        let before = webhook_calls(&client).await;
        let ns = create(&client, &unique("plain"), &[]).await;
        assert!(labelled(&ns), "labelled in the creating request: {ns:?}");
        created.borrow_mut().push(ns.metadata.name.clone().unwrap());
        assert!(webhook_calls(&client).await > before, "the webhook labelled it");
    }

    // generateName: no name to label by at admission; the namespace is created all the same and
    // hns's controller labels it.
    let generated = create(&client, "generated-", &[]).await;
    let name = generated.metadata.name.clone().unwrap();
    created.borrow_mut().push(name.clone());
    eventually("hns's controller to label the generated namespace", WAIT, || async {
        labelled(&Api::<Namespace>::all(client.clone()).get(&name).await.unwrap()).then_some(())
    })
    .await;
    let created = created.into_inner();
    let names: Vec<&str> = created.iter().map(String::as_str).collect();
    delete_namespaces(&client, &names).await;
}

/// With lone namespaces unlabelled, kube-apiserver neither calls hns nor runs its policy for a
/// plain new namespace, which carries nothing of hns's; one that joins a hierarchy is labelled.
async fn lone_namespaces_cost_nothing(client: &Client) {
    eventually("hns to delete its admission policy", WAIT, || async {
        policies(client).get_opt(POLICY).await.unwrap().is_none().then_some(())
    })
    .await;
    // kube-apiserver stops applying a deleted policy (and a changed webhook) a moment after: wait
    // until a plain namespace, created as a dry run, carries nothing of hns's.
    eventually("kube-apiserver to stop labelling plain namespaces", WAIT, || async {
        let mut probe = Namespace::default();
        probe.metadata.name = Some(unique("probe"));
        let dry_run = PostParams { dry_run: true, ..Default::default() };
        let ns = Api::<Namespace>::all(client.clone()).create(&dry_run, &probe).await.ok()?;
        let labels = ns.metadata.labels.unwrap_or_default();
        (!labels.keys().any(|k| k.contains("hnc.x-k8s.io"))).then_some(())
    })
    .await;
    let before = webhook_calls(client).await;
    let mut created = Vec::new();
    for _ in 0..3 {
        let ns = create(client, &unique("unlabelled"), &[]).await;
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        assert!(!labels.keys().any(|k| k.contains("hnc.x-k8s.io")), "{labels:?}");
        created.push(ns.metadata.name.clone().unwrap());
    }
    assert_eq!(webhook_calls(client).await, before, "hns was not called for plain namespaces");
    // A namespace created with a key of hns's is still checked.
    let forged = create(client, &unique("checked"), &[(keys::INCLUDED_NAMESPACE, "true")]).await;
    created.push(forged.metadata.name.clone().unwrap());
    assert!(webhook_calls(client).await > before, "hns checked the namespace with hns's label");
    // Joining a hierarchy brings the labels.
    let parent = created[0].clone();
    let child = format!("{parent}-child");
    create_subns(client, &parent, &child).await.unwrap();
    eventually("the new parent labelled", WAIT, || async {
        labelled(&Api::<Namespace>::all(client.clone()).get(&parent).await.unwrap()).then_some(())
    })
    .await;
    allow_cascading_deletion(client, &parent).await.unwrap();
    let names: Vec<&str> = created.iter().map(String::as_str).collect();
    delete_namespaces(client, &names).await;
}
