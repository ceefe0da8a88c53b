//! The hierarchy API end to end: subnamespaces made by users without cluster rights, every
//! hierarchy rule refused with its code and message (and nothing changed), the namespace
//! webhook, cascading deletion through the real namespace controller, and watch.

use std::time::Duration;

use hns_api::{keys, HierarchyConfiguration, Subnamespace};
use hns_e2e::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// The namespace's labels and annotations, to show a refused request changed nothing.
async fn state_of(client: &Client, ns: &str) -> (Value, Value) {
    let n: Namespace = Api::all(client.clone()).get(ns).await.unwrap();
    (json!(n.metadata.labels), json!(n.metadata.annotations))
}

#[tokio::test]
async fn a_user_with_only_create_subnamespaces_makes_namespaces() {
    let (env, client, team) = Env::with_namespace("team-a").await;
    let alice = unique("alice");
    let bob = unique("bob");
    env.grant(&alice, "hns-subnamespace-creator", &team);

    let (anchor, subns) = (format!("{team}-dev"), format!("{team}-test"));
    let manifests = format!(
        "apiVersion: hnc.x-k8s.io/v1alpha2\nkind: SubnamespaceAnchor\nmetadata:\n  name: {anchor}\n  namespace: {team}\n---\n\
         apiVersion: hnc.x-k8s.io/v1alpha2\nkind: Subnamespace\nmetadata:\n  name: {subns}\n  namespace: {team}\n"
    );
    let file = manifest_file(&team, &manifests);
    // The SubjectAccessReview cache may hold "no" from before the grant for up to 10 s.
    eventually("alice's grant to take effect", WAIT, || async {
        env.kubectl_as(&alice, &[], &["auth", "can-i", "create", "subnamespaces.hnc.x-k8s.io", "-n", &team])
            .status
            .success()
            .then_some(())
    })
    .await;
    let out = ok(env.kubectl_as(&alice, &[], &["apply", "-f", &file]));
    assert!(out.contains(&format!("subnamespaceanchor.hnc.x-k8s.io/{anchor} created")), "{out}");
    assert!(out.contains(&format!("subnamespace.hnc.x-k8s.io/{subns} created")), "{out}");
    let again = ok(env.kubectl_as(&alice, &[], &["apply", "-f", &file]));
    assert!(again.contains("unchanged"), "applying twice changes nothing: {again}");

    for child in [&anchor, &subns] {
        let ns: Namespace = Api::all(client.clone()).get(child).await.unwrap();
        let labels = ns.metadata.labels.unwrap();
        assert_eq!(labels[&keys::tree_label(&team)], "1", "{labels:?}");
        assert_eq!(labels[&keys::tree_label(child)], "0");
        assert_eq!(ns.metadata.annotations.unwrap()[keys::SUBNAMESPACE_OF], team);
    }
    let table = ok(env.kubectl_as(&alice, &[], &["get", "subns", "-n", &team]));
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "STATUS", "AGE"]);
    assert_eq!(rows[1][..2], [anchor.as_str(), "Ok"]);
    assert_eq!(rows[2][..2], [subns.as_str(), "Ok"]);

    let err = fails(env.kubectl_as(&bob, &[], &["apply", "-f", &file]));
    assert!(err.contains("forbidden") && err.contains(&bob), "{err}");
    let err = fails(env.kubectl_as(&bob, &[], &["create", "ns", &format!("{team}-bob")]));
    assert!(err.contains("forbidden"), "bob has no other way either: {err}");
    delete_tree(&client, &team).await;
}

#[tokio::test]
async fn hierarchy_rules_refuse_and_change_nothing() {
    let client = Env::get().admin().await;
    let (a, b) = parent_and_child(&client, "a", "b").await;
    let sub = new_subnamespace(&client, &a, "sub").await;
    let other = fresh_namespace(&client, "other").await;
    settled_parent(&client, &a).await;
    let before: Vec<(Value, Value)> = futures_states(&client, &[&a, &b, &sub, &other]).await;

    let cases: Vec<(&str, Result<HierarchyConfiguration, kube::Error>, u16, String)> = vec![
        (
            "cycle",
            set_parent(&client, &a, Some(&b)).await,
            422,
            format!("illegal parent: cycle when making \"{b}\" the parent of \"{a}\": current ancestry is {a} <- {b}"),
        ),
        ("self", set_parent(&client, &a, Some(&a)).await, 422, format!("cycle when making \"{a}\" the parent of \"{a}\"")),
        ("missing parent", set_parent(&client, &b, Some("no-such-ns")).await, 422, "requested parent \"no-such-ns\" does not exist".into()),
        (
            "subnamespace moved",
            set_parent(&client, &sub, Some(&other)).await,
            422,
            format!("Cannot set the parent of \"{sub}\" to \"{other}\" because it's a subnamespace of \"{a}\""),
        ),
        ("excluded parent", set_parent(&client, &other, Some("kube-system")).await, 422, "\"kube-system\" is not managed by hns".into()),
        ("excluded child", set_parent(&client, "kube-public", Some(&a)).await, 422, "\"kube-public\" is not managed by hns".into()),
    ];
    for (what, result, code, message) in cases {
        let s = api_status(result.expect_err(what));
        assert_eq!(s.code, code, "{what}: {}", s.message);
        assert!(s.message.contains(&message), "{what}: {}", s.message);
    }
    let s = api_status(create_subns(&client, &a, &other).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(s.message.contains("cannot create a subnamespace using an existing namespace"), "{}", s.message);
    let s = api_status(create_subns(&client, "kube-system", &unique("x")).await.unwrap_err());
    assert_eq!(s.code, 403, "{}", s.message);
    let s = api_status(create_subns(&client, &a, "Not_A_Name").await.unwrap_err());
    assert_eq!(s.code, 422, "{}", s.message);
    let s = api_status(create_subns(&client, &a, &sub).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));

    assert_eq!(futures_states(&client, &[&a, &b, &sub, &other]).await, before, "refusals changed nothing");
    delete_tree(&client, &a).await;
    delete_namespaces(&client, &[&b, &other]).await;
}

async fn futures_states(client: &Client, names: &[&str]) -> Vec<(Value, Value)> {
    let mut v = Vec::new();
    for n in names {
        v.push(state_of(client, n).await);
    }
    v
}

#[tokio::test]
async fn moves_need_rights_on_the_trees_they_touch() {
    let (env, client, org) = Env::with_namespace("org").await;
    let t1 = fresh_namespace(&client, "t1").await;
    let t2 = fresh_namespace(&client, "t2").await;
    let x = fresh_namespace(&client, "x").await;
    for (child, parent) in [(&t1, &org), (&t2, &org), (&x, &t1)] {
        set_parent(&client, child, Some(parent)).await.unwrap();
    }
    let carol = unique("carol");
    // Admin of x and t1, but not of their common ancestor org. x's rights are the copy of t1's
    // binding: a binding of the same name of x's own would be in the way of t2's after the move,
    // and the move refused for it (a_move_that_would_overwrite_… in propagation.rs).
    for ns in [&t1, &t2] {
        env.grant(&carol, "admin", ns);
    }
    let move_x = |to: &str| {
        let patch = format!("{{\"spec\":{{\"parent\":\"{to}\"}}}}");
        env.kubectl_as(
            &carol,
            &[],
            &["patch", "hierarchyconfiguration", "hierarchy", "-n", &x, "--type=merge", "-p", &patch],
        )
    };
    let err = eventually("carol's admin rights to reach hns", WAIT, || async {
        let err = fails(move_x(&t2));
        err.contains("not authorized to modify the subtree").then_some(err)
    })
    .await;
    assert!(
        err.contains(&format!("modify the subtree of {org}, which is the most recent common ancestor")),
        "{err}"
    );
    assert_eq!(state_of(&client, &x).await.1[keys::PARENT], t1.as_str(), "nothing moved");

    // Under another name: one of t1's and t2's would be overwritten by its copies, and a source
    // that would overwrite descendants' objects is refused (propagation.rs).
    ok(env.kubectl(&[
        "create",
        "rolebinding",
        "org-admins",
        "-n",
        &org,
        "--clusterrole=admin",
        &format!("--user={carol}"),
    ]));
    eventually("the move to be allowed", WAIT, || async { move_x(&t2).status.success().then_some(()) }).await;
    let moved = eventually("the move in the cache", WAIT, || async {
        let hc: HierarchyConfiguration = Api::namespaced(client.clone(), &t2).get("hierarchy").await.ok()?;
        hc.status.is_some_and(|s| s.children.contains(&x)).then_some(())
    });
    moved.await;
    let labels = state_of(&client, &x).await.0;
    assert_eq!(labels[keys::tree_label(&t2)], "1");
    assert_eq!(labels[keys::tree_label(&org)], "2");
    assert!(labels.get(keys::tree_label(&t1)).is_none(), "old tree label removed: {labels}");
    for ns in [&x, &t2, &t1, &org] {
        set_parent(&client, ns, None).await.unwrap();
    }
    delete_namespaces(&client, &[&x, &t1, &t2, &org]).await;
}

#[tokio::test]
async fn the_webhook_guards_hierarchy_state_and_cascading_deletion_works() {
    let (env, client, root) = Env::with_namespace("root").await;
    let [mid, leaf] = nested_subnamespaces(&client, &root, ["mid", "leaf"]).await;
    eventually("the subtree in the cache", WAIT, || async {
        Api::<Subnamespace>::namespaced(client.clone(), &mid).get(&leaf).await.ok().map(|_| ())
    })
    .await;

    let denied = |out| {
        let err = fails(out);
        assert!(err.contains("denied the request"), "{err}");
        err
    };
    let err = denied(env.kubectl(&[
        "label",
        "ns",
        &leaf,
        &format!("{}=7", keys::tree_label(&root)),
        "--overwrite",
    ]));
    assert!(err.contains("can only be managed by hns"), "{err}");
    let err = denied(env.kubectl(&["annotate", "ns", &root, &format!("{}=elsewhere", keys::PARENT)]));
    assert!(err.contains(keys::PARENT), "{err}");
    let err = denied(env.kubectl(&["delete", "ns", &leaf]));
    assert!(
        err.contains(&format!(
            "is a subnamespace. Please delete the subnamespace from the parent namespace {mid}"
        )),
        "{err}"
    );
    let err = denied(env.kubectl(&["delete", "ns", &root]));
    assert!(err.contains("contains subnamespaces"), "{err}");
    let err = fails(env.kubectl(&["delete", "subns", &mid, "-n", &root]));
    assert!(
        err.contains(&format!("subnamespace {mid} is not a leaf and doesn't allow cascading deletion")),
        "{err}"
    );
    for ns in [&root, &mid, &leaf] {
        assert!(
            Api::<Namespace>::all(client.clone())
                .get(ns)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "{ns} intact"
        );
    }
    // Tampering with a namespace outside any hierarchy is refused too (fail-open webhook).
    let outside = fresh_namespace(&client, "outside").await;
    denied(env.kubectl(&["label", "ns", &outside, "hnc.x-k8s.io/hierarchy-member=true"]));
    ok(env.kubectl(&["label", "ns", &outside, "team=x"]));

    // With cascading deletion allowed, deleting the root takes the subtree with it.
    allow_cascading_deletion(&client, &root).await.unwrap();
    // A parent is held for its subnamespaces only once it is deleted: until then, making a
    // subnamespace writes nothing to its parent. A dry run holds nothing.
    let held = |ns: &Namespace| {
        ns.metadata.finalizers.iter().flatten().any(|f| f == keys::HAS_SUBNAMESPACE_FINALIZER)
    };
    let namespaces = Api::<Namespace>::all(client.clone());
    for ns in [&root, &mid] {
        assert!(!held(&namespaces.get(ns).await.unwrap()), "{ns} is not held while it lives");
    }
    ok(env.kubectl(&["delete", "ns", &root, "--dry-run=server"]));
    let after_dry_run = namespaces.get(&root).await.unwrap();
    assert!(!held(&after_dry_run) && after_dry_run.metadata.deletion_timestamp.is_none(), "dry run");
    let deleted = namespaces.delete(&root, &Default::default()).await.unwrap();
    let terminating = deleted.left().expect("root terminates");
    assert!(held(&terminating), "held before it was deleted: {:?}", terminating.metadata.finalizers);
    eventually("the whole subtree to finish terminating", Duration::from_secs(90), || async {
        let api = Api::<Namespace>::all(client.clone());
        for ns in [&root, &mid, &leaf] {
            if api.get_opt(ns).await.ok()?.is_some() {
                return None;
            }
        }
        Some(())
    })
    .await;
    delete_namespaces(&client, &[&outside]).await;
}

#[tokio::test]
async fn deleting_a_leaf_subnamespace_deletes_its_namespace() {
    let (env, client, parent) = Env::with_namespace("parent").await;
    let child = new_subnamespace(&client, &parent, "child").await;
    ok(env.kubectl(&["delete", "subns", &child, "-n", &parent, "--wait=false"]));
    eventually("the child namespace gone", Duration::from_secs(60), || async {
        Api::<Namespace>::all(client.clone()).get_opt(&child).await.ok()?.is_none().then_some(())
    })
    .await;
    let list: Vec<Subnamespace> =
        Api::namespaced(client.clone(), &parent).list(&ListParams::default()).await.unwrap().items;
    assert!(list.is_empty());
    delete_namespaces(&client, &[&parent]).await;
}

#[tokio::test]
async fn kubectl_get_watch_shows_create_and_delete() {
    let (env, client, parent) = Env::with_namespace("watched").await;
    let child = format!("{parent}-w");
    let watch = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &env.kubeconfig)
        .args(["get", "subns", "-n", &parent, "-w", "--output-watch-events", "--request-timeout=40s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    create_subns(&client, &parent, &child).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    ok(env.kubectl(&["delete", "subns", &child, "-n", &parent, "--wait=false"]));
    eventually("the namespace gone", Duration::from_secs(60), || async {
        Api::<Namespace>::all(client.clone()).get_opt(&child).await.ok()?.is_none().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    unsafe_kill(&watch);
    let out = String::from_utf8_lossy(&watch.wait_with_output().unwrap().stdout).into_owned();
    let events: Vec<&str> =
        out.lines().filter(|l| l.contains(&child)).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(events.first(), Some(&"ADDED"), "{out}");
    assert_eq!(events.last(), Some(&"DELETED"), "{out}");
    delete_namespaces(&client, &[&parent]).await;
}

/// Ends a child process (kubectl -w never exits by itself).
fn unsafe_kill(child: &std::process::Child) {
    let _ = std::process::Command::new("kill").arg(child.id().to_string()).status();
}

#[tokio::test]
async fn api_conventions_for_writes() {
    let (env, client, ns) = Env::with_namespace("conv").await;
    let parent = fresh_namespace(&client, "conv-p").await;
    let api: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &ns);
    let hc =
        eventually("the namespace in the cache", WAIT, || async { api.get("hierarchy").await.ok() }).await;

    // dryRun changes nothing.
    let before = state_of(&client, &ns).await;
    let dry = PatchParams { dry_run: true, ..Default::default() };
    let shown =
        api.patch("hierarchy", &dry, &Patch::Merge(json!({"spec": {"parent": parent}}))).await.unwrap();
    assert_eq!(shown.spec.parent.as_deref(), Some(parent.as_str()));
    assert_eq!(state_of(&client, &ns).await, before);
    let sub = format!("{ns}-dry");
    let pp = PostParams { dry_run: true, ..Default::default() };
    Api::<Subnamespace>::namespaced(client.clone(), &ns)
        .create(&pp, &Subnamespace::new(&sub, Default::default()))
        .await
        .unwrap();
    assert!(
        Api::<Namespace>::all(client.clone()).get_opt(&sub).await.unwrap().is_none(),
        "dry-run created nothing"
    );

    // A stale resourceVersion is a conflict.
    let mut stale = hc.clone();
    allow_cascading_deletion(&client, &ns).await.unwrap();
    stale.spec.parent = Some(parent.clone());
    let s = api_status(api.replace("hierarchy", &PostParams::default(), &stale).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{}", s.message);

    // JSON patch works; strict field validation refuses unknown fields.
    let jp = format!("[{{\"op\":\"add\",\"path\":\"/spec/parent\",\"value\":\"{parent}\"}}]");
    ok(env.kubectl(&["patch", "hierarchyconfiguration", "hierarchy", "-n", &ns, "--type=json", "-p", &jp]));
    assert_eq!(api.get("hierarchy").await.unwrap().spec.parent.as_deref(), Some(parent.as_str()));
    let strict =
        PatchParams { field_validation: Some(kube::api::ValidationDirective::Strict), ..Default::default() };
    let s = api_status(
        api.patch("hierarchy", &strict, &Patch::Merge(json!({"spec": {"parnet": "x"}}))).await.unwrap_err(),
    );
    assert_eq!(s.code, 400);
    assert!(s.message.contains("spec.parnet"), "{}", s.message);

    // Strategic merge patch is refused with 415 (clients then fall back to merge patch), a
    // server-side apply without fieldManager with 400, and an oversized body with 413; all as
    // Status objects.
    let path = format!("/apis/hnc.x-k8s.io/v1alpha2/namespaces/{ns}/hierarchyconfigurations/hierarchy");
    for (content_type, body, code) in [
        ("application/strategic-merge-patch+json", b"{}".to_vec(), 415),
        ("application/apply-patch+yaml", b"{}".to_vec(), 400),
        ("application/merge-patch+json", vec![b' '; 4 * 1024 * 1024], 413),
    ] {
        let req = http::Request::patch(&path).header("Content-Type", content_type).body(body).unwrap();
        let s = api_status(client.request::<Value>(req).await.unwrap_err());
        assert_eq!(s.code, code, "{content_type}: {}", s.message);
    }
    assert_eq!(
        api.get("hierarchy").await.unwrap().spec.parent.as_deref(),
        Some(parent.as_str()),
        "unchanged by refusals"
    );
    delete_namespaces(&client, &[&ns, &parent]).await;
}

#[tokio::test]
async fn the_hnc_configuration_is_validated_and_stored() {
    let (env, client) = Env::with_admin().await;
    let api: Api<hns_api::HNCConfiguration> = Api::all(client.clone());
    let before = api.get("config").await.unwrap();
    let bad = json!({"spec": {"resources": [
        {"group": "rbac.authorization.k8s.io", "resource": "rolebindings"},
        {"resource": "nodes"},
        {"resource": "no-such-things"},
    ]}});
    let s = api_status(api.patch("config", &PatchParams::default(), &Patch::Merge(&bad)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(s.message.contains("always uses the 'Propagate' mode and cannot be configured"), "{}", s.message);
    let bad = json!({"spec": {"resources": [{"resource": "nodes"}, {"resource": "no-such-things"}, {"resource": "secrets", "mode": "Often"}]}});
    let s = api_status(api.patch("config", &PatchParams::default(), &Patch::Merge(&bad)).await.unwrap_err());
    assert!(s.message.contains("Unsupported value: \"Often\""), "{}", s.message);
    let bad = json!({"spec": {"resources": [{"resource": "nodes"}, {"resource": "no-such-things"}]}});
    let s = api_status(api.patch("config", &PatchParams::default(), &Patch::Merge(&bad)).await.unwrap_err());
    assert!(s.message.contains("\"nodes\" in group \"\" is cluster-scoped"), "{}", s.message);
    assert!(s.message.contains("\"no-such-things\" in group \"\" is not found"), "{}", s.message);
    assert_eq!(api.get("config").await.unwrap().spec, before.spec, "refusals changed nothing");
    let s = api_status(api.get("other").await.unwrap_err());
    assert_eq!(s.code, 404);
    let err = fails(env.kubectl(&["delete", "hncconfiguration", "config"]));
    assert!(err.contains("MethodNotAllowed") || err.contains("not supported"), "{err}");
}

/// The HNCConfiguration is one object whose resourceVersions are its ConfigMap's: a watch
/// resumed from a version a list handed out, however old, is sent the object as it is now, and
/// never answered 410 (informers of every kind, Argo CD's among them, would list again forever
/// once hns's history of changes had moved past the ConfigMap's last write).
#[tokio::test]
async fn a_watch_of_the_configuration_resumes_from_any_version() {
    let (env, client) = Env::with_admin().await;
    let api: Api<hns_api::HNCConfiguration> = Api::all(client.clone());
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mark = unique("resumed");
    let annotation = format!("e2e-resume={mark}");
    ok(env.kubectl(&["annotate", "--overwrite", "hncconfiguration", "config", &annotation]));
    for from in [rv.as_str(), "1"] {
        let url = format!("/apis/hnc.x-k8s.io/v1alpha2/hncconfigurations?watch=true&resourceVersion={from}&timeoutSeconds=2");
        // Every replica sends it once its store has the annotation.
        let first = eventually("a resumed watch to send the annotated configuration", WAIT, || async {
            let out = ok(env.kubectl(&["get", "--raw", &url]));
            let first: Value = serde_json::from_str(out.lines().next().unwrap_or("{}")).unwrap();
            assert_ne!(first["type"], "ERROR", "resumed from {from}: {out}");
            (first["object"]["metadata"]["annotations"]["e2e-resume"] == mark.as_str()).then_some(first)
        })
        .await;
        assert_eq!(first["type"], "MODIFIED", "resumed from {from}: {first}");
    }
}

#[tokio::test]
async fn watch_resumes_expires_and_lists() {
    let client = Env::get().admin().await;
    let (parent, child) = parent_and_subnamespace(&client, "wl").await;
    let base = format!("/apis/hnc.x-k8s.io/v1alpha2/namespaces/{parent}/subnamespaces");
    let get = |q: String| {
        let req = http::Request::get(format!("{base}?{q}")).body(Vec::new()).unwrap();
        let client = client.clone();
        async move { client.request_text(req).await }
    };
    // WatchList: the current state, then a bookmark marking the end of the initial events.
    let out = get("watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=2".into())
        .await
        .unwrap();
    let events: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], child.as_str());
    let end = events.iter().find(|e| e["type"] == "BOOKMARK").expect("an end-of-initial-events bookmark");
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    // Half-asked WatchList is refused rather than left hanging.
    let s = api_status(get("watch=true&sendInitialEvents=true".into()).await.unwrap_err());
    assert_eq!(s.code, 422);
    // A garbage resourceVersion is a 400; one older than the history is a 410 in the stream.
    let s = api_status(get("watch=true&resourceVersion=yesterday".into()).await.unwrap_err());
    assert_eq!(s.code, 400);
    let out = get("watch=true&resourceVersion=1&timeoutSeconds=2".into()).await.unwrap();
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ERROR", "{out}");
    assert_eq!(first["object"]["code"], 410);
    // A resume from the list's resourceVersion sees only later changes.
    let list =
        Api::<Subnamespace>::namespaced(client.clone(), &parent).list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let second = format!("{parent}-d");
    let watcher = tokio::spawn(get(format!("watch=true&resourceVersion={rv}&timeoutSeconds=4")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    create_subns(&client, &parent, &second).await.unwrap();
    let out = watcher.await.unwrap().unwrap();
    let names: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "ADDED")
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, std::slice::from_ref(&second), "{out}");
    delete_tree(&client, &parent).await;
}

async fn labels_of(client: &Client, ns: &str) -> std::collections::BTreeMap<String, String> {
    Api::<Namespace>::all(client.clone()).get(ns).await.unwrap().metadata.labels.unwrap_or_default()
}

/// As under HNC, every namespace hns manages carries its own depth-0 tree label and
/// `included-namespace: "true"`, in a hierarchy or not, so policies selecting
/// `<ns>.tree.hnc.x-k8s.io/depth` match a namespace without children too; excluded namespaces
/// carry none. A lone namespace gets no membership label: that label selects the fail-closed
/// webhook, and an hns outage must not block namespaces outside hierarchies. Users can neither
/// remove these labels nor forge them.
#[tokio::test]
async fn every_managed_namespace_carries_its_tree_label_and_included_namespace() {
    let (env, client) = Env::with_admin().await;
    // The labels come with the creation itself (hns's mutating webhook): the object the create
    // returns has them, and hns does not write the namespace again.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut new = Namespace::default();
    new.metadata.name = Some(unique("lone"));
    let created = namespaces.create(&PostParams::default(), &new).await.unwrap();
    let lone = created.metadata.name.clone().unwrap();
    let own = keys::tree_label(&lone);
    let labels = created.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(&own).map(String::as_str), Some("0"), "{labels:?}");
    assert_eq!(labels.get(keys::INCLUDED_NAMESPACE).map(String::as_str), Some("true"), "{labels:?}");
    eventually("hns to know the lone namespace", WAIT, || async {
        Api::<HierarchyConfiguration>::namespaced(client.clone(), &lone).get("hierarchy").await.ok()
    })
    .await;
    let now = namespaces.get(&lone).await.unwrap();
    assert_eq!(now.metadata.resource_version, created.metadata.resource_version, "written once: {now:?}");
    let managers: Vec<_> =
        now.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.as_deref()).collect();
    assert!(!managers.contains(&"hns-apiserver"), "hns wrote nothing of its own: {managers:?}");
    assert!(
        !labels.contains_key(keys::HIERARCHY_MEMBER),
        "no parent, no children, no membership: {labels:?}"
    );
    let selected = ok(env.kubectl(&["get", "ns", "-l", &own, "-o", "name"]));
    assert_eq!(selected.trim(), format!("namespace/{lone}"));
    for excluded in ["kube-system", "kube-public"] {
        let l = labels_of(&client, excluded).await;
        assert!(
            !l.keys().any(|k| keys::is_hns_label(k)),
            "{excluded} is excluded and carries none of hns's labels: {l:?}"
        );
    }

    let denied = |out| {
        let err = fails(out);
        assert!(err.contains("denied the request"), "{err}");
        err
    };
    let included = keys::INCLUDED_NAMESPACE;
    let err = denied(env.kubectl(&["label", "ns", &lone, &format!("{included}-")]));
    assert!(err.contains("It has to be set as true on all managed namespaces"), "{err}");
    denied(env.kubectl(&["label", "ns", &lone, &format!("{included}=false"), "--overwrite"]));
    let err = denied(env.kubectl(&["label", "ns", &lone, &format!("{own}-")]));
    assert!(err.contains(&format!("cannot remove tree label \"{own}\"")), "{err}");
    denied(env.kubectl(&["label", "ns", &lone, &format!("{}=1", keys::tree_label("elsewhere"))]));
    let err = denied(env.kubectl(&["label", "ns", "kube-system", &format!("{included}=true")]));
    assert!(err.contains("unmanaged namespace"), "{err}");
    ok(env.kubectl(&["label", "ns", &lone, "team=x"]));
    assert_eq!(labels_of(&client, &lone).await[&own], "0", "refusals changed nothing");

    // A manifest exported from HNC carries included-namespace: "true", which HNC accepts on
    // create; tree labels it refuses.
    let exported = create_namespace(&client, &unique("exported"), &[(included, "true")]).await;
    let forged = unique("forged");
    let mut ns = Namespace::default();
    ns.metadata.name = Some(forged.clone());
    ns.metadata.labels = Some([(keys::tree_label(&lone), "1".to_string())].into());
    let refused =
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap_err();
    assert_eq!(api_status(refused).code, 403);
    delete_namespaces(&client, &[&lone, &exported]).await;
}

/// For each version of namespace `ns` written after resourceVersion `rv`, until `quiet` passes
/// with no new version: whether it carried the membership label, and the mark's time.
async fn memberships_since(client: &Client, ns: &str, rv: &str, quiet: Duration) -> Vec<(bool, bool)> {
    use futures::{StreamExt, TryStreamExt};
    let api: Api<Namespace> = Api::all(client.clone());
    let wp = WatchParams::default().fields(&format!("metadata.name={ns}")).timeout(60);
    let mut stream = api.watch(&wp, rv).await.unwrap().boxed();
    let mut versions = Vec::new();
    while let Ok(event) = tokio::time::timeout(quiet, stream.try_next()).await {
        match event.unwrap() {
            Some(WatchEvent::Modified(n)) => versions.push((
                n.metadata.labels.unwrap_or_default().contains_key(keys::HIERARCHY_MEMBER),
                n.metadata.annotations.unwrap_or_default().contains_key(keys::MARKED_AT),
            )),
            Some(_) => {}
            None => break,
        }
    }
    versions
}

/// A namespace about to gain its first child is marked a member before the child is made and
/// stays one: the controller does not take the mark back while the child is on its way (it
/// did, and wrote it again once the child came, leaving the parent outside the fail-closed
/// webhook in between); it removes only the mark's time once the child is there. Both ways of
/// gaining a child: a subnamespace, and a parent set.
#[tokio::test]
async fn a_parent_is_a_member_from_its_mark_on() {
    let client = Env::get().admin().await;
    let api: Api<Namespace> = Api::all(client.clone());
    let by_subnamespace = fresh_namespace(&client, "mark-sub").await;
    let by_set = fresh_namespace(&client, "mark-set").await;
    let child = fresh_namespace(&client, "mark-child").await;
    let mut rvs = Vec::new();
    for parent in [&by_subnamespace, &by_set] {
        rvs.push(api.get(parent).await.unwrap().metadata.resource_version.unwrap());
    }
    create_subns(&client, &by_subnamespace, &unique("mark-sub-c")).await.unwrap();
    set_parent(&client, &child, Some(&by_set)).await.unwrap();
    for (parent, rv) in [&by_subnamespace, &by_set].into_iter().zip(&rvs) {
        settled_parent(&client, parent).await;
        let versions = memberships_since(&client, parent, rv, Duration::from_secs(2)).await;
        let (marked, settled) = ((true, true), (true, false));
        assert_eq!(versions, [marked, settled], "{parent}: (member, mark's time) in each version");
    }
    delete_tree(&client, &by_subnamespace).await;
    delete_namespaces(&client, &[&child, &by_set]).await;
}

/// HNC's external hierarchies: a tool such as Config Sync creates a root namespace with
/// `hnc.x-k8s.io/managed-by` and tree labels of its own hierarchy (ancestors that exist only in
/// Git). hns keeps those labels and hands them down to the namespace's subnamespaces, one deeper
/// per level; refuses a parent for it, and the annotation on a child; refuses to create a
/// namespace the external hierarchy names, also where kube-apiserver's namespace-labels policy
/// would otherwise label it without calling hns; and once the annotation goes, so do the labels.
#[tokio::test]
async fn an_external_hierarchys_tree_labels_are_kept_handed_down_and_reserved() {
    let client = Env::get().admin().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let (ext, abstract_ns, other) = (unique("ext"), unique("abstract"), unique("other"));
    let abstract_label = keys::tree_label(&abstract_ns);
    let mut ns = Namespace::default();
    ns.metadata.name = Some(ext.clone());
    ns.metadata.annotations = Some([(keys::MANAGED_BY.to_string(), "configsync.gke.io".to_string())].into());
    ns.metadata.labels = Some([(abstract_label.clone(), "1".to_string())].into());
    namespaces.create(&PostParams::default(), &ns).await.expect("the external tool creates its namespace");
    create_namespace(&client, &other, &[]).await;
    let child = unique("child");
    create_subns(&client, &ext, &child).await.unwrap();
    eventually("the external tree labels to reach the subnamespace", WAIT, || async {
        let l = namespaces.get(&child).await.ok()?.metadata.labels?;
        (l.get(&abstract_label).map(String::as_str) == Some("2")
            && l.get(&keys::tree_label(&ext)).map(String::as_str) == Some("1"))
        .then_some(())
    })
    .await;
    // The root's own writes (marked a member, then the mark's time removed) are apart from the
    // child's: wait for them before taking the state the refusal below must not change.
    settled_parent(&client, &ext).await;
    let l = labels_of(&client, &ext).await;
    assert_eq!(l.get(&abstract_label).map(String::as_str), Some("1"), "kept on the root: {l:?}");
    assert_eq!(l.get(&keys::tree_label(&ext)).map(String::as_str), Some("0"), "{l:?}");

    let before = state_of(&client, &ext).await;
    let status = api_status(set_parent(&client, &ext, Some(&other)).await.unwrap_err());
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains("is managed by \"configsync.gke.io\", not hns"), "{status:?}");
    assert_eq!(state_of(&client, &ext).await, before, "the refusal changed nothing");
    // The tool may not place its namespace in the subtree of a namespace that exists.
    let into_other = json!({"metadata": {"labels": {keys::tree_label(&other): "1"}}});
    let refused = namespaces.patch(&ext, &PatchParams::default(), &Patch::Merge(&into_other)).await;
    let status = api_status(refused.unwrap_err());
    assert!(
        status.message.contains(&format!("names namespace \"{other}\", which exists in the cluster")),
        "{status:?}"
    );
    let annotate = json!({"metadata": {"annotations": {keys::MANAGED_BY: "configsync.gke.io"}}});
    let refused = namespaces.patch(&child, &PatchParams::default(), &Patch::Merge(&annotate)).await;
    let status = api_status(refused.unwrap_err());
    assert!(status.message.contains(&format!("is a subnamespace of \"{ext}\"")), "{status:?}");

    // The name is reserved. kube-apiserver's policy stops labelling it once hns has rewritten
    // the policy, from when a dry run is already refused. (With --label-lone-namespaces=false
    // kube-apiserver calls hns for no plain namespace's creation: only subnamespaces are checked.)
    if !lone_namespaces_unlabelled(&client).await {
        let mut taken = Namespace::default();
        taken.metadata.name = Some(abstract_ns.clone());
        let dry_run = PostParams { dry_run: true, ..Default::default() };
        eventually("the reserved name to be refused", WAIT, || async {
            namespaces.create(&dry_run, &taken).await.err()
        })
        .await;
        let status = api_status(namespaces.create(&PostParams::default(), &taken).await.unwrap_err());
        assert_eq!(status.code, 409, "{status:?}");
        let manager = "is reserved by the external hierarchy manager \"configsync.gke.io\"";
        assert!(status.message.contains(manager), "{status:?}");
    }
    let status = api_status(create_subns(&client, &other, &abstract_ns).await.unwrap_err());
    assert_eq!(status.code, 409, "{status:?}");

    // Without the annotation the root is hns's own again: the external labels go everywhere.
    let release = json!({"metadata": {"annotations": {keys::MANAGED_BY: null}}});
    namespaces.patch(&ext, &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    eventually("the external tree labels to go", WAIT, || async {
        let gone = |l: std::collections::BTreeMap<String, String>| !l.contains_key(&abstract_label);
        (gone(labels_of(&client, &ext).await) && gone(labels_of(&client, &child).await)).then_some(())
    })
    .await;
    delete_tree(&client, &ext).await;
    delete_namespaces(&client, &[&other]).await;
}
