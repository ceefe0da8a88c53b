//! Policy propagation end to end, following the HNC user guide: acme-org → team-a → service-1,
//! RoleBindings flowing down, tree labels for NetworkPolicy selectors, re-parenting moving the
//! copies, deleting the source removing them, Remove mode, and a custom resource kind.

use std::time::Duration;

use hns_e2e::*;
use k8s_openapi::api::core::v1::{ResourceQuota, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";

async fn rolebinding(client: &Client, ns: &str, name: &str, group: &str) {
    let rb = role_binding(name, "view", Subject::Group(group));
    Api::<RoleBinding>::namespaced(client.clone(), ns).create(&PostParams::default(), &rb).await.unwrap();
}

/// Waits until `ns` has (or, with `from == None`, lacks) a copy of `name` from `from`.
async fn wait_copy<K>(client: &Client, ns: &str, name: &str, from: Option<&str>)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    eventually(&format!("{ns}/{name} copied from {from:?}"), WAIT, || async {
        let found = api.get_opt(name).await.ok()?;
        let origin = found
            .as_ref()
            .and_then(|o| o.meta().labels.as_ref())
            .and_then(|l| l.get(INHERITED_FROM))
            .cloned();
        (origin.as_deref() == from).then_some(())
    })
    .await;
}

#[tokio::test]
async fn rolebindings_flow_down_follow_moves_and_go_with_their_source() {
    let (env, client, org) = Env::with_namespace("acme-org").await;
    let [team, service] = nested_subnamespaces(&client, &org, ["team-a", "service-1"]).await;
    rolebinding(&client, &org, "acme-admins", "acme-admins").await;

    for ns in [&team, &service] {
        wait_copy::<RoleBinding>(&client, ns, "acme-admins", Some(&org)).await;
    }
    let copy = Api::<RoleBinding>::namespaced(client.clone(), &service).get("acme-admins").await.unwrap();
    assert_eq!(copy.role_ref.name, "view");
    assert_eq!(copy.subjects.unwrap()[0].name, "acme-admins");
    // The tree labels select the whole subtree, as a NetworkPolicy namespaceSelector would.
    let subtree =
        ok(env.kubectl(&["get", "ns", "-l", &format!("{org}.tree.hnc.x-k8s.io/depth"), "-o", "name"]));
    for ns in [&org, &team, &service] {
        assert!(subtree.contains(&format!("namespace/{ns}")), "{subtree}");
    }

    // Copies belong to hns: users may neither edit nor delete them.
    let err = fails(env.kubectl(&["delete", "rolebinding", "acme-admins", "-n", &team]));
    assert!(err.contains(&format!("cannot delete object propagated from namespace \"{org}\"")), "{err}");
    let err = fails(env.kubectl(&["label", "rolebinding", "acme-admins", "-n", &team, "x=y"]));
    assert!(err.contains("cannot modify object propagated"), "{err}");

    // A namespace's own object of the same name is never overwritten: a move that would put it
    // in the way of the new ancestor's is refused (see a_move_that_would_overwrite_…).
    let own = fresh_namespace(&client, "own").await;
    rolebinding(&client, &own, "acme-admins", "locals").await;
    let refused = api_status(set_parent(&client, &own, Some(&org)).await.unwrap_err());
    assert_eq!(refused.code, 409, "{}", refused.message);
    let mine = Api::<RoleBinding>::namespaced(client.clone(), &own).get("acme-admins").await.unwrap();
    assert_eq!(mine.subjects.unwrap()[0].name, "locals", "not overwritten");

    // Re-parenting moves the copies.
    let other = fresh_namespace(&client, "other-org").await;
    rolebinding(&client, &other, "other-admins", "other-admins").await;
    let mover = fresh_namespace(&client, "mover").await;
    set_parent(&client, &mover, Some(&org)).await.unwrap();
    wait_copy::<RoleBinding>(&client, &mover, "acme-admins", Some(&org)).await;
    set_parent(&client, &mover, Some(&other)).await.unwrap();
    wait_copy::<RoleBinding>(&client, &mover, "acme-admins", None).await;
    wait_copy::<RoleBinding>(&client, &mover, "other-admins", Some(&other)).await;

    // Deleting the source removes its copies.
    Api::<RoleBinding>::namespaced(client.clone(), &org)
        .delete("acme-admins", &DeleteParams::default())
        .await
        .unwrap();
    for ns in [&team, &service] {
        wait_copy::<RoleBinding>(&client, ns, "acme-admins", None).await;
    }
    for ns in [&own, &mover] {
        set_parent(&client, ns, None).await.unwrap();
        delete_namespaces(&client, &[ns]).await;
    }
    delete_tree(&client, &org).await;
    delete_namespaces(&client, &[&other]).await;
}

/// An object labelled as a copy is refused at creation, as HNC refuses it, rather than accepted
/// and then deleted by the controller for want of a source.
/// Copies leave out the keys by which Argo CD and Flux claim objects (hns's default
/// `--unpropagated-label` and `--unpropagated-annotation`): a copy carrying them would be taken
/// for the tool's own object, and pruned or adopted. Other labels and annotations are copied.
/// Objects with a `--nopropagation-label` label (Rancher's, by default) are not copied at all.
#[tokio::test]
async fn copies_leave_out_the_keys_gitops_tools_claim_objects_by() {
    let client = Env::get().admin().await;
    let org = fresh_namespace(&client, "gitops-org").await;
    let team = new_subnamespace(&client, &org, "team").await;
    let gitops_labels = [
        ("app.kubernetes.io/instance", "org-rbac"),
        ("kustomize.toolkit.fluxcd.io/name", "org-rbac"),
        ("kustomize.toolkit.fluxcd.io/namespace", "flux-system"),
        ("helm.toolkit.fluxcd.io/name", "org-rbac"),
        ("helm.toolkit.fluxcd.io/namespace", "flux-system"),
    ];
    let tracking =
        ("argocd.argoproj.io/tracking-id", "org-rbac:rbac.authorization.k8s.io/RoleBinding:x/readers");
    let own = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    // Rancher's own objects never propagate (HNC's default --nopropagation-label).
    let mut rancher = role_binding("rancher-owned", "view", Subject::Group("rancher"));
    rancher.metadata.labels = Some(own(&[("cattle.io/creator", "norman")]));
    Api::<RoleBinding>::namespaced(client.clone(), &org)
        .create(&PostParams::default(), &rancher)
        .await
        .unwrap();
    let mut rb = role_binding("readers", "view", Subject::Group("readers"));
    rb.metadata.labels = Some(own(&[gitops_labels.as_slice(), &[("team", "platform")]].concat()));
    rb.metadata.annotations = Some(own(&[tracking, ("note", "kept")]));
    Api::<RoleBinding>::namespaced(client.clone(), &org).create(&PostParams::default(), &rb).await.unwrap();

    wait_copy::<RoleBinding>(&client, &team, "readers", Some(&org)).await;
    let copy = Api::<RoleBinding>::namespaced(client.clone(), &team).get("readers").await.unwrap();
    let labels = copy.metadata.labels.unwrap_or_default();
    for (key, _) in gitops_labels {
        assert!(!labels.contains_key(key), "{key} left out: {labels:?}");
    }
    assert_eq!(labels.get("team").map(String::as_str), Some("platform"), "{labels:?}");
    let annotations = copy.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(tracking.0), "{annotations:?}");
    assert_eq!(annotations.get("note").map(String::as_str), Some("kept"), "{annotations:?}");
    let rancher_copy =
        Api::<RoleBinding>::namespaced(client.clone(), &team).get_opt("rancher-owned").await.unwrap();
    assert!(rancher_copy.is_none(), "planned with readers, and not copied: {rancher_copy:?}");
    delete_tree(&client, &org).await;
}

#[tokio::test]
async fn objects_labelled_as_copies_cannot_be_created() {
    let client = Env::get().admin().await;
    let ns = fresh_namespace(&client, "forged-copy").await;
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "forged", "labels": {INHERITED_FROM: "elsewhere"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    }))
    .unwrap();
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    let status = api_status(roles.create(&PostParams::default(), &role).await.unwrap_err());
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains(&format!("cannot create objects with the label \"{INHERITED_FROM}\"")),
        "{}",
        status.message
    );
    assert!(roles.get_opt("forged").await.unwrap().is_none(), "nothing is created");
    delete_namespaces(&client, &[&ns]).await;
}

/// HNC's rule: a move that would make a new ancestor's object propagate onto a namespace's own
/// object of the same name (not a copy) anywhere in the moved subtree is refused with a
/// conflict naming the objects, and changes nothing. Objects that would not propagate there
/// (exceptions) are no conflict. Once the objects are gone, the move succeeds and the
/// ancestor's policy arrives.
#[tokio::test]
async fn a_move_that_would_overwrite_a_namespaces_own_object_is_refused() {
    let (env, client, org) = Env::with_namespace("ow-org").await;
    let child = fresh_namespace(&client, "ow-child").await;
    let below = new_subnamespace(&client, &child, "below").await;
    rolebinding(&client, &org, "org-sres", "sres").await;
    rolebinding(&client, &org, "org-viewers", "viewers").await;
    let private = RoleBinding {
        metadata: kube::api::ObjectMeta {
            annotations: Some([("propagate.hnc.x-k8s.io/none".to_string(), "true".to_string())].into()),
            ..role_binding("org-private", "view", Subject::Group("org-only")).metadata
        },
        ..role_binding("org-private", "view", Subject::Group("org-only"))
    };
    Api::<RoleBinding>::namespaced(client.clone(), &org)
        .create(&PostParams::default(), &private)
        .await
        .unwrap();
    rolebinding(&client, &child, "org-sres", "someone-else").await;
    rolebinding(&client, &child, "org-private", "child-only").await;
    rolebinding(&client, &below, "org-viewers", "below-only").await;
    // hns must have seen the objects for the question to be asked at all.
    wait_copy::<RoleBinding>(&client, &below, "org-sres", Some(&child)).await;

    // The configuration test beside this one switches kinds on; while a kind's first list runs,
    // hns answers a move with 503 "try again", so the questions below are asked until answered.
    let err = eventually("an answer other than try again", Duration::from_secs(60), || async {
        let err = fails(hns(&env, &["set", &child, "--parent", &org]));
        (!err.contains("try again")).then_some(err)
    })
    .await;
    let expected = format!(
        "Cannot update hierarchy because it would overwrite the following object(s):\n  * Namespace \"{child}\": org-sres (rbac.authorization.k8s.io/v1, Kind=RoleBinding)\n  * Namespace \"{below}\": org-viewers (rbac.authorization.k8s.io/v1, Kind=RoleBinding)\nTo fix this, please rename or remove the conflicting objects first."
    );
    assert!(err.contains(&expected), "{err}");
    assert!(!err.contains("org-private"), "an object that would not propagate is no conflict: {err}");
    let refused = answered(|| set_parent(&client, &child, Some(&org))).await.unwrap_err();
    assert_eq!((refused.code, refused.reason.as_str()), (409, "Conflict"), "{}", refused.message);
    assert!(refused.message.contains(&expected), "{}", refused.message);
    // Every way of writing the parent: a PUT and a server-side apply too.
    let hcs: Api<hns_api::HierarchyConfiguration> = Api::namespaced(client.clone(), &child);
    let mut hc = hcs.get("hierarchy").await.unwrap();
    hc.spec.parent = Some(org.clone());
    let post = PostParams::default();
    let put = answered(|| hcs.replace("hierarchy", &post, &hc)).await.unwrap_err();
    assert_eq!(put.code, 409, "{}", put.message);
    let applied = json!({
        "apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
        "metadata": {"name": "hierarchy", "namespace": child}, "spec": {"parent": org},
    });
    let (gitops, applied) = (PatchParams::apply("gitops"), Patch::Apply(&applied));
    let apply = answered(|| hcs.patch("hierarchy", &gitops, &applied)).await;
    assert!(apply.unwrap_err().message.contains("Cannot update hierarchy"));
    let hc = hcs.get("hierarchy").await.unwrap();
    assert_eq!(hc.spec.parent, None, "the parent is unchanged");

    let rbs = |ns: &str| Api::<RoleBinding>::namespaced(client.clone(), ns);
    rbs(&child).delete("org-sres", &DeleteParams::default()).await.unwrap();
    rbs(&below).delete("org-viewers", &DeleteParams::default()).await.unwrap();
    // hns's watch of RoleBindings brings the deletions a moment later.
    eventually("the move to succeed", Duration::from_secs(15), || async {
        set_parent(&client, &child, Some(&org)).await.ok().map(|_| ())
    })
    .await;
    for ns in [&child, &below] {
        wait_copy::<RoleBinding>(&client, ns, "org-sres", Some(&org)).await;
        wait_copy::<RoleBinding>(&client, ns, "org-viewers", Some(&org)).await;
    }
    let arrived = rbs(&child).get("org-sres").await.unwrap();
    assert_eq!(arrived.subjects.unwrap()[0].name, "sres", "the parent's binding, not the child's");
    let kept = rbs(&child).get("org-private").await.unwrap();
    assert_eq!(kept.subjects.unwrap()[0].name, "child-only");

    set_parent(&client, &child, None).await.unwrap();
    delete_tree(&client, &child).await;
    delete_tree(&client, &org).await;
}

/// A source whose copies would overwrite a descendant's own object of the same name is refused
/// with HNC's 409, naming the descendants, and is not written; an update that would start
/// propagating it there is refused too. Another name is accepted, and the same name once the
/// descendant's object is gone.
#[tokio::test]
async fn a_source_that_would_overwrite_a_descendants_own_object_is_refused() {
    let client = Env::get().admin().await;
    let org = fresh_namespace(&client, "src-org").await;
    let (team, other) = (format!("{org}-team"), format!("{org}-other"));
    for ns in [&team, &other] {
        create_subns(&client, &org, ns).await.unwrap();
    }
    let rbs = |ns: &str| Api::<RoleBinding>::namespaced(client.clone(), ns);
    eventually("the subnamespaces", WAIT, || async { rbs(&other).list(&ListParams::default()).await.ok() })
        .await;
    rolebinding(&client, &team, "sres", "team-only").await;
    // hns's watch of RoleBindings must have brought the team's own binding.
    let source = role_binding("sres", "view", Subject::Group("org-sres"));
    let refused = eventually("the source refused", WAIT, || async {
        match rbs(&org).create(&PostParams::default(), &source).await {
            Err(kube::Error::Api(s)) => Some(s),
            Ok(_) => {
                let _ = rbs(&org).delete("sres", &DeleteParams::default()).await;
                None
            }
            Err(_) => None,
        }
    })
    .await;
    assert_eq!((refused.code, refused.reason.as_str()), (409, "Conflict"), "{}", refused.message);
    assert!(
        refused.message.contains(&format!(
            "would overwrite objects in the following descendant namespace(s): {team}. To fix this, choose a different name for the object, or remove the conflicting objects from the listed namespaces"
        )),
        "{}",
        refused.message
    );
    assert!(rbs(&org).get_opt("sres").await.unwrap().is_none(), "the source was not written");
    assert_eq!(rbs(&team).get("sres").await.unwrap().subjects.unwrap()[0].name, "team-only");

    // Held back by an exception it is no conflict; taking the exception off is refused.
    let mut held = role_binding("sres", "view", Subject::Group("org-sres"));
    held.metadata.annotations =
        Some([("propagate.hnc.x-k8s.io/none".to_string(), "true".to_string())].into());
    rbs(&org).create(&PostParams::default(), &held).await.unwrap();
    let unhold = json!({"metadata": {"annotations": {"propagate.hnc.x-k8s.io/none": null}}});
    let err = rbs(&org).patch("sres", &PatchParams::default(), &Patch::Merge(&unhold)).await.unwrap_err();
    assert!(err.to_string().contains("would overwrite objects"), "{err}");

    rolebinding(&client, &org, "viewers", "org-viewers").await;
    wait_copy::<RoleBinding>(&client, &team, "viewers", Some(&org)).await;
    rbs(&team).delete("sres", &DeleteParams::default()).await.unwrap();
    eventually("the update accepted once the object is gone", Duration::from_secs(15), || async {
        rbs(&org).patch("sres", &PatchParams::default(), &Patch::Merge(&unhold)).await.ok()
    })
    .await;
    wait_copy::<RoleBinding>(&client, &team, "sres", Some(&org)).await;

    // An install that replaces the webhook configuration brings the entry back without rules:
    // hns, watching the configuration (it polls nothing), puts them back at once.
    type Webhooks = k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let webhooks: Api<Webhooks> = Api::all(client.clone());
    let entry = |w: &Webhooks| {
        w.webhooks.iter().flatten().position(|e| e.name == "sources.hns.hnc.x-k8s.io").expect("the entry")
    };
    // hns rewrites the configuration whenever the propagated kinds change, as other tests here
    // do at the same time: a replace that loses that race (409) reads it again.
    eventually("the webhook configuration replaced without rules", Duration::from_secs(20), || async {
        let mut replaced = webhooks.get("hns").await.unwrap();
        let index = entry(&replaced);
        replaced.webhooks.as_mut().unwrap()[index].rules = Some(Vec::new());
        match webhooks.replace("hns", &PostParams::default(), &replaced).await {
            Err(kube::Error::Api(e)) if e.code == 409 => None,
            replaced => Some(replaced.unwrap()),
        }
    })
    .await;
    eventually("hns to put the rules back", Duration::from_secs(20), || async {
        let w = webhooks.get("hns").await.ok()?;
        let rules = w.webhooks.as_ref()?[entry(&w)].rules.clone()?;
        (!rules.is_empty()).then_some(())
    })
    .await;
    delete_tree(&client, &org).await;
}

/// `call`'s result once hns answers it with anything but 503 (see the move test above).
async fn answered<T, F, Fut>(mut call: F) -> Result<T, kube::core::Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    for _ in 0..300 {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) => match api_status(e) {
                s if s.code == 503 => tokio::time::sleep(Duration::from_millis(200)).await,
                s => return Err(s),
            },
        }
    }
    panic!("hns answered 503 for a minute");
}

/// Everything that changes the cluster-wide configuration, in one test so nothing else races it.
#[tokio::test]
async fn configured_kinds_propagate_and_remove_mode_cleans_up() {
    let (env, client) = Env::with_admin().await;
    let config: Api<hns_api::HNCConfiguration> = Api::all(client.clone());
    let root = fresh_namespace(&client, "cfg-root").await;
    let child = new_subnamespace(&client, &root, "child").await;

    // Secrets: Propagate, then Remove.
    let set = |resources: serde_json::Value| {
        let config = config.clone();
        async move {
            config
                .patch(
                    "config",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"resources": resources}})),
                )
                .await
                .unwrap();
        }
    };
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "db-pass"}, "stringData": {"password": "s3cret"}}),
    )
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), &root).create(&PostParams::default(), &secret).await.unwrap();
    // A child's own secret of the same name would be overwritten: HNC refuses the switch.
    let child_secrets: Api<Secret> = Api::namespaced(client.clone(), &child);
    child_secrets.create(&PostParams::default(), &secret).await.unwrap();
    let propagate = json!({"spec": {"resources": [{"resource": "secrets", "mode": "Propagate"}]}});
    let refused =
        config.patch("config", &PatchParams::default(), &Patch::Merge(&propagate)).await.unwrap_err();
    let kube::Error::Api(s) = refused else { panic!("expected a Status") };
    assert_eq!(s.code, 422);
    assert!(s.message.contains(&format!("{child}/db-pass (from {root})")), "{}", s.message);
    child_secrets.delete("db-pass", &DeleteParams::default()).await.unwrap();
    set(json!([{"resource": "secrets", "mode": "Propagate"}])).await;
    wait_copy::<Secret>(&client, &child, "db-pass", Some(&root)).await;
    let status = config.get("config").await.unwrap().status.unwrap();
    let secrets = status.resources.iter().find(|r| r.resource == "secrets").unwrap();
    assert_eq!(secrets.mode, "Propagate");
    assert!(secrets.num_propagated_objects.unwrap() >= 1, "{secrets:?}");
    set(json!([{"resource": "secrets", "mode": "Remove"}])).await;
    wait_copy::<Secret>(&client, &child, "db-pass", None).await;
    assert!(
        Api::<Secret>::namespaced(client.clone(), &root).get_opt("db-pass").await.unwrap().is_some(),
        "the source stays"
    );

    // A custom resource kind, with hns's rights to it granted through the aggregated role.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.e2e.example.com"},
        "spec": {"group": "e2e.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "hns-propagate-e2e-widgets", "labels": {"hnc.x-k8s.io/aggregate-to-propagation": "true"}},
        "rules": [{"apiGroups": ["e2e.example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch", "create", "update", "delete"]}]
    });
    let manifests = std::env::temp_dir().join(format!("{root}-crd.json"));
    std::fs::write(&manifests, json!({"apiVersion": "v1", "kind": "List", "items": [crd, role]}).to_string())
        .unwrap();
    ok(env.kubectl(&["apply", "-f", manifests.to_str().unwrap()]));
    ok(env.kubectl(&["wait", "--for=condition=Established", "crd/widgets.e2e.example.com", "--timeout=60s"]));
    eventually("the cluster to serve widgets", WAIT, || async {
        env.kubectl(&["get", "widgets", "-n", &root]).status.success().then_some(())
    })
    .await;
    set(json!([{"group": "e2e.example.com", "resource": "widgets"}])).await;
    let widget = std::env::temp_dir().join(format!("{root}-widget.json"));
    let body = json!({"apiVersion": "e2e.example.com/v1", "kind": "Widget", "metadata": {"name": "gadget", "namespace": root}, "spec": {"size": 3}});
    std::fs::write(&widget, body.to_string()).unwrap();
    ok(env.kubectl(&["apply", "-f", widget.to_str().unwrap()]));
    let copied = eventually("the widget copied", WAIT, || async {
        let out = env.kubectl(&["get", "widget", "gadget", "-n", &child, "-o", "json"]);
        out.status.success().then(|| serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap())
    })
    .await;
    assert_eq!(copied["spec"]["size"], 3);
    assert_eq!(copied["metadata"]["labels"][INHERITED_FROM], root.as_str());

    // The CRD deleted while configured: reported as HNC does, and propagation resumes when the
    // CRD is back, with no change to the configuration.
    let not_found = || async {
        let status = config.get("config").await.unwrap().status.unwrap_or_default();
        status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "BadConfiguration" && c.reason == "ResourceNotFound")
            .map(|c| (c.message, status.resources))
    };
    ok(env.kubectl(&["delete", "crd", "widgets.e2e.example.com", "--timeout=60s"]));
    let (message, resources) =
        eventually("ResourceNotFound in the configuration's status", WAIT, || async { not_found().await })
            .await;
    assert!(message.contains("\"widgets\" in group \"e2e.example.com\" is not served"), "{message}");
    assert!(!resources.iter().any(|r| r.resource == "widgets"), "{resources:?}");
    ok(env.kubectl(&["apply", "-f", manifests.to_str().unwrap()]));
    ok(env.kubectl(&["wait", "--for=condition=Established", "crd/widgets.e2e.example.com", "--timeout=60s"]));
    eventually("ResourceNotFound cleared", WAIT, || async { not_found().await.is_none().then_some(()) })
        .await;
    eventually("a widget made after the CRD came back copied", WAIT, || async {
        env.kubectl(&["apply", "-f", widget.to_str().unwrap()]).status.success().then_some(())?;
        env.kubectl(&["get", "widget", "gadget", "-n", &child]).status.success().then_some(())
    })
    .await;

    set(json!([])).await;
    ok(env.kubectl(&["delete", "-f", manifests.to_str().unwrap(), "--wait=false"]));
    delete_tree(&client, &root).await;
    let leftover =
        Api::<Secret>::all(client.clone()).list(&ListParams::default().labels(INHERITED_FROM)).await.unwrap();
    assert!(leftover
        .items
        .iter()
        .all(|s| s.metadata.name.as_deref() != Some("db-pass")
            || s.metadata.namespace.as_deref() != Some(&child)));
}

/// A copy the cluster refuses (here because of a quota allowing no RoleBindings) is reported as
/// HNC reports it, on the copy and on its source, and made as soon as the cause is gone.
#[tokio::test]
async fn refused_copies_are_reported_and_made_once_allowed() {
    let (env, client, org) = Env::with_namespace("quota-org").await;
    let team = new_subnamespace(&client, &org, "team").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &team);
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "no-rolebindings"},
        "spec": {"hard": {"count/rolebindings.rbac.authorization.k8s.io": "0"}}
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    eventually("the quota counted by kube-controller-manager", WAIT, || async {
        let status = quotas.get("no-rolebindings").await.ok()?.status?;
        status.hard.filter(|h| !h.is_empty()).map(|_| ())
    })
    .await;

    rolebinding(&client, &org, "org-admins", "org-admins").await;
    let messages = |ns: &str, reason: &str| {
        let field = format!("reason={reason},involvedObject.name=org-admins");
        ok(env.kubectl(&[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            &field,
            "-o",
            "jsonpath={.items[*].message}",
        ]))
    };
    let on_copy = eventually("CannotUpdateObject on the copy", WAIT, || async {
        let m = messages(&team, "CannotUpdateObject");
        (!m.is_empty()).then_some(m)
    })
    .await;
    assert!(on_copy.contains(&format!("Could not write from source namespace \"{org}\"")), "{on_copy}");
    assert!(on_copy.contains("exceeded quota"), "the cluster's reason is passed on: {on_copy}");
    let on_source = eventually("CannotPropagateObject on the source", WAIT, || async {
        let m = messages(&org, "CannotPropagateObject");
        (!m.is_empty()).then_some(m)
    })
    .await;
    assert!(
        on_source.contains(&format!("Could not write to destination namespace \"{team}\"")),
        "{on_source}"
    );

    quotas.delete("no-rolebindings", &DeleteParams::default()).await.unwrap();
    wait_copy::<RoleBinding>(&client, &team, "org-admins", Some(&org)).await;
    delete_tree(&client, &org).await;
}
