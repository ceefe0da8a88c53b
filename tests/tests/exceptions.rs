//! Exception annotations (`propagate.hnc.x-k8s.io/select`, `treeSelect`, `none`, `all`) that do
//! not parse: refused at admission with what is wrong and what is accepted, as HNC refuses them;
//! and, where one got in past admission (written before hns was installed, or while migrating
//! from HNC), the object propagates nowhere and a `CannotParseSelector` Warning says why.
//! Never is a typo read as "no exception", which would copy a Secret into every descendant.

use std::time::Duration;

use hns_e2e::*;
use k8s_openapi::api::core::v1::{Event, Secret};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";
const SELECT: &str = "propagate.hnc.x-k8s.io/select";
const TREE_SELECT: &str = "propagate.hnc.x-k8s.io/treeSelect";
const NONE: &str = "propagate.hnc.x-k8s.io/none";

fn secret(name: &str, annotations: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "stringData": {"password": "s3cret"},
    }))
    .unwrap()
}

/// Whether `ns` holds a copy of `name` (an object hns labelled as copied from elsewhere).
async fn has_copy<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let found = api.get_opt(name).await.unwrap();
    found.is_some_and(|o| o.meta().labels.as_ref().is_some_and(|l| l.contains_key(INHERITED_FROM)))
}

/// Waits until `api` (one namespace) has, or with `present == false` lacks, a copy of `name`.
async fn wait_copy<K>(api: &Api<K>, name: &str, present: bool)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let what = format!("copy of {name} {}", if present { "made" } else { "gone" });
    eventually(&what, WAIT, || async { (has_copy(api, name).await == present).then_some(()) }).await;
}

async fn set_resources(client: &Client, resources: serde_json::Value) {
    let config: Api<hns_api::HNCConfiguration> = Api::all(client.clone());
    let patch = json!({"spec": {"resources": resources}});
    config.patch("config", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
}

/// The only test in this file that changes the HNCConfiguration (test binaries run one at a
/// time, so no other test sees Secrets propagate).
#[tokio::test]
async fn bad_exception_annotations_on_a_propagated_secret_are_refused() {
    let (env, client, root) = Env::with_namespace("exc-root").await;
    let (a, b) = (format!("{root}-a"), format!("{root}-b"));
    create_subns(&client, &root, &a).await.unwrap();
    create_subns(&client, &root, &b).await.unwrap();
    // (Not `env`: the local control plane runs hns with `--managed-namespace-label env`.)
    ok(env.kubectl(&["label", "ns", &a, "stage=prod"]));
    set_resources(&client, json!([{"resource": "secrets", "mode": "Propagate"}])).await;
    let (in_root, in_a, in_b): (Api<Secret>, Api<Secret>, Api<Secret>) = (
        Api::namespaced(client.clone(), &root),
        Api::namespaced(client.clone(), &a),
        Api::namespaced(client.clone(), &b),
    );
    // Secrets propagate from here on (and hns's admission knows it).
    in_root.create(&PostParams::default(), &secret("control", json!({}))).await.unwrap();
    wait_copy(&in_a, "control", true).await;

    let cases = [
        (json!({NONE: "maybe"}), format!("invalid {NONE} value \"maybe\": use \"true\" or \"false\"")),
        (json!({SELECT: "!!bad"}), format!("invalid Kubernetes labelSelector in {SELECT}")),
        (json!({TREE_SELECT: "a, b"}), "should only have one non-negated namespace, but got multiple: a, b".into()),
        (json!({TREE_SELECT: "Team_A"}), "\"Team_A\" is not a valid namespace name".into()),
        (
            json!({TREE_SELECT: a, NONE: "true"}),
            format!("cannot have more than one selector at the same time, but got multiple: {TREE_SELECT}, {NONE}"),
        ),
        (json!({"propagate.hnc.x-k8s.io/nnone": "true"}), "invalid HNC exceptions annotation".into()),
        (json!({"propagat.hnc.x-k8s.io/none": "true"}), "invalid HNC exceptions annotation".into()),
    ];
    for (i, (annotations, expected)) in cases.into_iter().enumerate() {
        let name = format!("bad-{i}");
        let refused = in_root.create(&PostParams::default(), &secret(&name, annotations.clone())).await;
        let status = api_status(refused.expect_err(&format!("{annotations} was accepted")));
        assert_eq!(status.code, 400, "{status:?}");
        assert!(status.message.contains(&expected), "{annotations}: {}", status.message);
        assert!(in_root.get_opt(&name).await.unwrap().is_none(), "{annotations}: nothing is created");
    }
    // An update adding a bad value is refused too, and changes nothing.
    let patch = Patch::Merge(json!({"metadata": {"annotations": {NONE: "maybe"}}}));
    let status = api_status(in_root.patch("control", &PatchParams::default(), &patch).await.unwrap_err());
    assert_eq!(status.code, 400);
    assert!(status.message.contains("accepted, as by HNC: 1, t, T, TRUE, True"), "{}", status.message);
    assert!(has_copy(&in_a, "control").await, "the refused update changed nothing");

    // `True` is true, as HNC reads it: the secret stays where it is. A plain secret made after
    // it is copied, so by then the quiet one would have been too.
    in_root.create(&PostParams::default(), &secret("quiet", json!({NONE: "True"}))).await.unwrap();
    in_root.create(&PostParams::default(), &secret("after", json!({}))).await.unwrap();
    wait_copy(&in_a, "after", true).await;
    wait_copy(&in_b, "after", true).await;
    assert!(!has_copy(&in_a, "quiet").await && !has_copy(&in_b, "quiet").await, "none: True propagated");
    // And set on a propagated secret, it takes the copies back.
    let patch = Patch::Merge(json!({"metadata": {"annotations": {NONE: "True"}}}));
    in_root.patch("control", &PatchParams::default(), &patch).await.unwrap();
    wait_copy(&in_a, "control", false).await;
    wait_copy(&in_b, "control", false).await;

    // Valid selectors still choose the targets.
    in_root
        .create(&PostParams::default(), &secret("prod-only", json!({SELECT: "stage=prod"})))
        .await
        .unwrap();
    in_root
        .create(&PostParams::default(), &secret("not-a", json!({TREE_SELECT: format!("!{a}")})))
        .await
        .unwrap();
    in_root.create(&PostParams::default(), &secret("last", json!({}))).await.unwrap();
    wait_copy(&in_a, "prod-only", true).await;
    wait_copy(&in_b, "not-a", true).await;
    wait_copy(&in_a, "last", true).await;
    wait_copy(&in_b, "last", true).await;
    assert!(!has_copy(&in_b, "prod-only").await, "select stage=prod reached a namespace without the label");
    assert!(!has_copy(&in_a, "not-a").await, "treeSelect !{a} reached {a}");

    set_resources(&client, json!([])).await;
    delete_tree(&client, &root).await;
}

async fn cannot_parse_selector(client: &Client, ns: &str, name: &str) -> Option<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let fields = format!("reason=CannotParseSelector,involvedObject.name={name}");
    let events = api.list(&ListParams::default().fields(&fields)).await.ok()?;
    events.items.into_iter().find(|e| e.type_.as_deref() == Some("Warning")).and_then(|e| e.message)
}

/// Objects written with hns's own credentials skip its webhooks (matchConditions), as objects
/// written before hns was installed did.
#[tokio::test]
async fn a_bad_annotation_that_got_past_admission_propagates_nowhere_and_is_reported() {
    let env = Env::get();
    let Some(local) =
        env.local_or_skip("a_bad_annotation_that_got_past_admission_propagates_nowhere_and_is_reported")
    else {
        return;
    };
    let admin = env.admin().await;
    let unchecked = client_for(&local.dir.join("hns-apiserver.kubeconfig")).await;
    let root = fresh_namespace(&admin, "exc-past").await;
    let child = new_subnamespace(&admin, &root, "child").await;
    let (in_root, in_child): (Api<RoleBinding>, Api<RoleBinding>) =
        (Api::namespaced(admin.clone(), &root), Api::namespaced(admin.clone(), &child));
    in_root
        .create(&PostParams::default(), &role_binding("leaky", "view", Subject::Group("leaky-team")))
        .await
        .unwrap();
    wait_copy(&in_child, "leaky", true).await;

    // A bad value on a propagated object: its copies go. (hns may update RoleBindings, not
    // patch them.)
    let mut leaky = in_root.get("leaky").await.unwrap();
    leaky.metadata.annotations = Some([(NONE.to_string(), "maybe".to_string())].into());
    Api::<RoleBinding>::namespaced(unchecked.clone(), &root)
        .replace("leaky", &PostParams::default(), &leaky)
        .await
        .unwrap();
    wait_copy(&in_child, "leaky", false).await;
    let message = eventually("CannotParseSelector about leaky", WAIT, || async {
        cannot_parse_selector(&admin, &root, "leaky").await
    })
    .await;
    assert!(message.contains(&format!("invalid {NONE} value \"maybe\"")), "{message}");
    assert!(message.contains("propagated to no namespace"), "{message}");

    // A new object with a selector that does not parse is never copied.
    let mut never = role_binding("never", "view", Subject::Group("never-team"));
    never.metadata.annotations = Some([(SELECT.to_string(), "!!bad".to_string())].into());
    Api::<RoleBinding>::namespaced(unchecked.clone(), &root)
        .create(&PostParams::default(), &never)
        .await
        .unwrap();
    in_root
        .create(&PostParams::default(), &role_binding("after", "view", Subject::Group("after-team")))
        .await
        .unwrap();
    wait_copy(&in_child, "after", true).await;
    assert!(!has_copy(&in_child, "never").await, "a selector that does not parse propagated");
    let message = eventually("CannotParseSelector about never", WAIT, || async {
        cannot_parse_selector(&admin, &root, "never").await
    })
    .await;
    assert!(message.contains("\"!!bad\""), "{message}");

    // Its owner may still edit it otherwise (admission judges only changed values, as HNC's),
    // and fixing the value brings the copies back.
    let label = Patch::Merge(json!({"metadata": {"labels": {"team": "leaky"}}}));
    in_root.patch("leaky", &PatchParams::default(), &label).await.unwrap();
    let fixed = Patch::Merge(json!({"metadata": {"annotations": {NONE: "false"}}}));
    in_root.patch("leaky", &PatchParams::default(), &fixed).await.unwrap();
    wait_copy(&in_child, "leaky", true).await;

    in_root.delete("never", &DeleteParams::default()).await.unwrap();
    delete_tree(&admin, &root).await;
}
