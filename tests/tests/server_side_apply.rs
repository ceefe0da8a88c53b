//! Server-side apply end to end: `kubectl apply --server-side` creates and updates
//! Subnamespaces, HierarchyConfigurations and the HNCConfiguration; managers applying and
//! editing different fields each keep theirs; a conflicting apply is refused naming the owner
//! until it forces; and client-side `kubectl apply` (what Argo CD does by default) keeps working
//! on the same objects.

use std::time::Duration;

use hns_api::{keys, HierarchyConfiguration, Subnamespace};
use hns_e2e::*;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// The managedFields entry of `manager` for `operation`, if any.
fn entry<'a>(
    managed: &'a [ManagedFieldsEntry],
    manager: &str,
    operation: &str,
) -> Option<&'a ManagedFieldsEntry> {
    managed
        .iter()
        .find(|e| e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some(operation))
}

/// The FieldsV1 of an entry, as JSON.
fn fields(e: &ManagedFieldsEntry) -> Value {
    e.fields_v1.as_ref().map(|f| f.0.clone()).unwrap_or_default()
}

#[tokio::test]
async fn an_applied_subnamespace_is_created_and_owned_by_its_manager() {
    let (env, client, team) = Env::with_namespace("ssa-team").await;
    let child = format!("{team}-dev");
    let manifest = format!(
        "apiVersion: hnc.x-k8s.io/v1alpha2\nkind: Subnamespace\nmetadata:\n  name: {child}\n  namespace: {team}\n  \
         labels:\n    owner: platform\nspec:\n  labels:\n  - key: env\n    value: dev\n"
    );
    let file = manifest_file(&child, &manifest);

    let out = ok(env.kubectl(&["apply", "--server-side", "-f", &file]));
    assert!(out.contains(&format!("subnamespace.hnc.x-k8s.io/{child} serverside-applied")), "{out}");
    let ns: Namespace = Api::all(client.clone()).get(&child).await.unwrap();
    assert_eq!(ns.metadata.annotations.unwrap()[keys::SUBNAMESPACE_OF], team);

    let api: Api<Subnamespace> = Api::namespaced(client.clone(), &team);
    let subns = api.get(&child).await.unwrap();
    assert_eq!(subns.metadata.labels.unwrap()["owner"], "platform");
    let managed = subns.metadata.managed_fields.unwrap_or_default();
    let mine = entry(&managed, "kubectl", "Apply").unwrap_or_else(|| panic!("no apply entry: {managed:?}"));
    assert_eq!(mine.api_version.as_deref(), Some("hnc.x-k8s.io/v1alpha2"));
    assert_eq!(mine.fields_type.as_deref(), Some("FieldsV1"));
    assert_eq!(
        fields(mine),
        json!({
            "f:metadata": {"f:labels": {"f:owner": {}}},
            "f:spec": {"f:labels": {"k:{\"key\":\"env\"}": {".": {}, "f:key": {}, "f:value": {}}}}
        })
    );

    // Applying again changes nothing; the same object read as HNC's kind shows the same fields.
    let again = ok(env.kubectl(&["apply", "--server-side", "-f", &file]));
    assert!(again.contains("serverside-applied"), "{again}");
    let anchors: Api<hns_api::SubnamespaceAnchor> = Api::namespaced(client.clone(), &team);
    assert_eq!(anchors.get(&child).await.unwrap().metadata.managed_fields.unwrap_or_default(), managed);

    // Dropping the label from the applied configuration removes it: no one else owns it.
    let without = manifest.replace("  labels:\n    owner: platform\n", "");
    ok(env.kubectl(&["apply", "--server-side", "-f", &manifest_file(&child, &without)]));
    assert_eq!(api.get(&child).await.unwrap().metadata.labels, None);

    // Strategic merge patches are still refused, naming the patch types that work.
    let err = fails(env.kubectl(&["patch", "subns", &child, "-n", &team, "--type", "strategic", "-p", "{}"]));
    assert!(err.contains("application/apply-patch+yaml"), "{err}");
    delete_tree(&client, &team).await;
}

#[tokio::test]
async fn managers_of_different_fields_keep_theirs_and_conflicts_name_the_owner() {
    let (env, client, ns) = Env::with_namespace("ssa-hc").await;
    let parent = fresh_namespace(&client, "ssa-parent").await;
    let other = fresh_namespace(&client, "ssa-other").await;
    let api: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &ns);
    let hc_manifest = |spec: &str| {
        format!(
            "apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchyConfiguration\nmetadata:\n  name: hierarchy\n  namespace: {ns}\nspec:\n{spec}"
        )
    };

    // flux applies cascading deletion; kubectl labels; an operator sets the parent.
    let flux = manifest_file(&format!("{ns}-flux"), &hc_manifest("  allowCascadingDeletion: true\n"));
    ok(env.kubectl(&["apply", "--server-side", "--field-manager=flux", "-f", &flux]));
    ok(env.kubectl(&["label", "hierarchyconfiguration", "hierarchy", "-n", &ns, "team=a"]));
    let ops = PatchParams { field_manager: Some("ops".into()), ..Default::default() };
    api.patch("hierarchy", &ops, &Patch::Merge(json!({"spec": {"parent": parent}}))).await.unwrap();

    // flux applies again: nothing of the others' is lost.
    ok(env.kubectl(&["apply", "--server-side", "--field-manager=flux", "-f", &flux]));
    let hc = api.get("hierarchy").await.unwrap();
    assert!(hc.spec.allow_cascading_deletion);
    assert_eq!(hc.spec.parent.as_deref(), Some(parent.as_str()));
    assert_eq!(hc.metadata.labels.unwrap()["team"], "a");
    let managed = hc.metadata.managed_fields.unwrap_or_default();
    let owned =
        |m: &str, op: &str| entry(&managed, m, op).map(fields).unwrap_or_else(|| panic!("{m}: {managed:?}"));
    assert_eq!(owned("flux", "Apply"), json!({"f:spec": {"f:allowCascadingDeletion": {}}}));
    assert_eq!(owned("kubectl-label", "Update"), json!({"f:metadata": {"f:labels": {"f:team": {}}}}));
    assert_eq!(owned("ops", "Update"), json!({"f:spec": {"f:parent": {}}}));

    // A third manager applying another parent conflicts with ops, the parent's owner.
    let argo = manifest_file(&format!("{ns}-argo"), &hc_manifest(&format!("  parent: {other}\n")));
    let err = fails(env.kubectl(&["apply", "--server-side", "--field-manager=argo", "-f", &argo]));
    assert!(err.contains("conflict with \"ops\"") && err.contains(".spec.parent"), "{err}");
    let config = json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
                        "metadata": {"name": "hierarchy", "namespace": ns}, "spec": {"parent": other}});
    let s = api_status(
        api.patch("hierarchy", &PatchParams::apply("argo"), &Patch::Apply(&config)).await.unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(s.message.starts_with("Apply failed with 1 conflict: conflict with \"ops\""), "{}", s.message);
    let causes = s.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(
        (causes[0].reason.as_str(), causes[0].field.as_str()),
        ("FieldManagerConflict", ".spec.parent")
    );
    assert_eq!(api.get("hierarchy").await.unwrap().spec.parent.as_deref(), Some(parent.as_str()), "refused");

    // A dry run with force shows the change and stores nothing.
    ok(env.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=argo",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        &argo,
    ]));
    assert_eq!(api.get("hierarchy").await.unwrap().spec.parent.as_deref(), Some(parent.as_str()));

    // Forcing takes the parent over: ops no longer owns anything and its entry is gone.
    ok(env.kubectl(&["apply", "--server-side", "--field-manager=argo", "--force-conflicts", "-f", &argo]));
    let hc = api.get("hierarchy").await.unwrap();
    assert_eq!(hc.spec.parent.as_deref(), Some(other.as_str()));
    assert!(hc.spec.allow_cascading_deletion, "flux's field stays");
    let managed = hc.metadata.managed_fields.unwrap_or_default();
    assert_eq!(entry(&managed, "argo", "Apply").map(fields), Some(json!({"f:spec": {"f:parent": {}}})));
    assert!(entry(&managed, "ops", "Update").is_none(), "{managed:?}");
    eventually("the namespace to be a child of its new parent", WAIT, || async {
        let ns: Namespace = Api::all(client.clone()).get(&ns).await.ok()?;
        (ns.metadata.labels?.get(&keys::tree_label(&other)).map(String::as_str) == Some("1")).then_some(())
    })
    .await;

    // An empty managedFields list resets them, as in kube-apiserver.
    api.patch("hierarchy", &ops, &Patch::Merge(json!({"metadata": {"managedFields": []}}))).await.unwrap();
    assert_eq!(api.get("hierarchy").await.unwrap().metadata.managed_fields, None);

    let cleanup = json!({"spec": {"parent": null, "allowCascadingDeletion": null}});
    api.patch("hierarchy", &ops, &Patch::Merge(cleanup)).await.unwrap();
    delete_namespaces(&client, &[&ns, &parent, &other]).await;
}

#[tokio::test]
async fn the_hnc_configuration_is_applied_server_side() {
    let (env, client) = Env::with_admin().await;
    let api: Api<hns_api::HNCConfiguration> = Api::all(client.clone());
    let before = api.get("config").await.unwrap();
    // Only a label of our own: other tests running meanwhile rely on spec.resources.
    let manager = unique("ssa-e2e");
    let manifest = |labels: Value| {
        json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HNCConfiguration",
               "metadata": {"name": "config", "labels": labels}})
        .to_string()
    };
    let with = manifest_file(&manager, &manifest(json!({&manager: "yes"})));
    let field_manager = format!("--field-manager={manager}");
    ok(env.kubectl(&["apply", "--server-side", &field_manager, "-f", &with]));
    let config = api.get("config").await.unwrap();
    assert_eq!(config.metadata.labels.unwrap_or_default().get(&manager).map(String::as_str), Some("yes"));
    assert_eq!(config.spec, before.spec, "the spec is not this apply's");
    let managed = config.metadata.managed_fields.unwrap_or_default();
    let mine = entry(&managed, &manager, "Apply").unwrap_or_else(|| panic!("{managed:?}"));
    assert_eq!(fields(mine), json!({"f:metadata": {"f:labels": {format!("f:{manager}"): {}}}}));

    // Applying without the label removes it.
    let without = manifest_file(&manager, &manifest(json!({})));
    ok(env.kubectl(&["apply", "--server-side", &field_manager, "-f", &without]));
    let config = api.get("config").await.unwrap();
    assert!(!config.metadata.labels.unwrap_or_default().contains_key(&manager));
    let managed = config.metadata.managed_fields.unwrap_or_default();
    assert!(entry(&managed, &manager, "Apply").is_none(), "an apply owning nothing is dropped: {managed:?}");
}

#[tokio::test]
async fn client_side_apply_as_argo_cd_does_it_keeps_working() {
    let (env, client, team) = Env::with_namespace("argo-team").await;
    let child = format!("{team}-app");
    let manifests = |env_label: &str| {
        format!(
            "apiVersion: hnc.x-k8s.io/v1alpha2\nkind: SubnamespaceAnchor\nmetadata:\n  name: {child}\n  namespace: {team}\n\
             spec:\n  labels:\n  - key: env\n    value: {env_label}\n---\n\
             apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchyConfiguration\nmetadata:\n  name: hierarchy\n  namespace: {team}\n\
             spec:\n  allowCascadingDeletion: true\n"
        )
    };
    let file = manifest_file(&child, &manifests("dev"));
    let out = ok(env.kubectl(&["apply", "-f", &file]));
    assert!(out.contains(&format!("subnamespaceanchor.hnc.x-k8s.io/{child} created")), "{out}");
    assert!(out.contains("hierarchyconfiguration.hnc.x-k8s.io/hierarchy configured"), "{out}");
    let again = ok(env.kubectl(&["apply", "-f", &file]));
    assert!(!again.contains("configured") && again.contains("unchanged"), "{again}");

    let anchors: Api<hns_api::SubnamespaceAnchor> = Api::namespaced(client.clone(), &team);
    let anchor = anchors.get(&child).await.unwrap();
    let annotations = anchor.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"), "{annotations:?}");
    let managed = anchor.metadata.managed_fields.unwrap_or_default();
    assert!(entry(&managed, "kubectl-client-side-apply", "Update").is_some(), "{managed:?}");

    // A changed manifest is applied as a merge patch by the same manager.
    ok(env.kubectl(&["apply", "-f", &manifest_file(&child, &manifests("prod"))]));
    let anchor = anchors.get(&child).await.unwrap();
    assert_eq!(anchor.spec.labels[0].value, "prod");
    eventually("the managed label to reach the subnamespace", WAIT, || async {
        let ns: Namespace = Api::all(client.clone()).get(&child).await.ok()?;
        (ns.metadata.labels?.get("env").map(String::as_str) == Some("prod")).then_some(())
    })
    .await;

    // Moving the same manifests to server-side apply takes no force: the values agree.
    let out = ok(env.kubectl(&["apply", "--server-side", "-f", &manifest_file(&child, &manifests("prod"))]));
    assert!(out.contains("serverside-applied"), "{out}");
    let hc: HierarchyConfiguration = Api::namespaced(client.clone(), &team).get("hierarchy").await.unwrap();
    assert!(hc.spec.allow_cascading_deletion);
    delete_tree(&client, &team).await;
}
