//! Defects a tenant (or anyone who reaches hns's port) could trigger: patches that ask for
//! gigabytes, watches from a resourceVersion that will never come, metrics and webhook answers
//! for strangers, idle connections, HTTP/2, and cascading deletion one level per namespace
//! controller retry.

use std::io::{Read, Write};
use std::time::Duration;

use hns_e2e::forged;
use hns_e2e::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use serde_json::json;

const API: &str = "/apis/hnc.x-k8s.io/v1alpha2";
const WAIT: Duration = Duration::from_secs(60);

/// `kubectl patch --type json` of `ns`'s hierarchy configuration with `ops` (from a file: 10,001
/// operations are too long for a command line).
fn json_patch_hierarchy(env: &Env, ns: &str, ops: &[serde_json::Value]) -> std::process::Output {
    let file = std::env::temp_dir().join(format!("{ns}-{}-ops.json", ops.len()));
    std::fs::write(&file, serde_json::Value::Array(ops.to_vec()).to_string()).unwrap();
    let path = file.to_str().unwrap();
    env.kubectl(&[
        "patch",
        "hierarchyconfiguration",
        "hierarchy",
        "-n",
        ns,
        "--type",
        "json",
        "--patch-file",
        path,
    ])
}

#[tokio::test]
async fn a_json_patch_that_doubles_the_object_is_refused_before_it_grows() {
    let (env, admin, ns) = Env::with_namespace("amplify").await;
    let mut ops =
        vec![json!({"op": "add", "path": "/metadata/annotations", "value": {"a": "x".repeat(1000)}})];
    ops.extend((0..20).map(|i| {
        json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/a{i}")})
    }));
    let err = fails(json_patch_hierarchy(&env, &ns, &ops));
    assert!(err.contains("larger than"), "{err}");
    let too_many: Vec<_> = (0..10_001).map(|_| json!({"op": "test", "path": "/spec", "value": {}})).collect();
    let err = fails(json_patch_hierarchy(&env, &ns, &too_many));
    assert!(err.contains("The allowed maximum operations in a JSON patch is 10000, got 10001"), "{err}");
    let annotations = Api::<Namespace>::all(admin.clone()).get(&ns).await.unwrap().metadata.annotations;
    assert!(annotations.unwrap_or_default().keys().all(|k| !k.starts_with('a')), "nothing was written");
    delete_namespaces(&admin, &[&ns]).await;
}

#[tokio::test]
async fn a_watch_from_a_resource_version_never_reached_is_refused() {
    let env = Env::get();
    let err = fails(env.kubectl(&[
        "get",
        "--raw",
        &format!("{API}/subnamespaces?watch=true&resourceVersion=18446744073709551615"),
    ]));
    assert!(err.contains("Too large resource version: 18446744073709551615"), "{err}");
}

#[tokio::test]
async fn metrics_are_served_only_to_those_allowed() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("metrics_are_served_only_to_those_allowed") else { return };
    let url = format!("{}/metrics", local.hns_url());
    let anonymous = local.direct_client(None).get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let proxy = local.direct_client(Some(local.front_proxy_identity()));
    let nobody = proxy.get(&url).remote_user("nobody", &[]).send().await.unwrap();
    assert_eq!(nobody.status(), 403);
    let admin = proxy.get(&url).remote_user("scraper", &["system:masters"]).send().await.unwrap();
    assert_eq!(admin.status(), 200);
    assert!(admin.text().await.unwrap().contains("hns_namespaces"));
}

async fn uid_of(client: &kube::Client, ns: &str) -> String {
    Api::<Namespace>::all(client.clone()).get(ns).await.unwrap().metadata.uid.unwrap()
}

#[tokio::test]
async fn the_namespace_webhook_names_no_other_namespace_to_strangers() {
    let Some((env, local, admin)) = Env::local_with_admin().await else { return };
    let (parent, child) = parent_and_subnamespace(&admin, "secretive").await;
    eventually("the subnamespace exists", WAIT, || async {
        Api::<Namespace>::all(admin.clone()).get(&child).await.ok()
    })
    .await;
    // A caller without a certificate of the cluster's, naming the namespace only, learns
    // nothing: the answer is the one for any namespace hns does not know.
    for uid in [None, Some("00000000-0000-0000-0000-00000000dead")] {
        let answer =
            forged::send(&local, "/validate-namespaces", &forged::namespace_delete(&child, uid)).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert_eq!(answer["response"]["status"].get("message"), None, "{answer}");
    }
    // One who knows its uid (who may read it) learns only that it is a subnamespace.
    let uid = uid_of(&admin, &child).await;
    let answer =
        forged::send(&local, "/validate-namespaces", &forged::namespace_delete(&child, Some(&uid))).await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("is a subnamespace") && !message.contains(&format!("{parent} ")), "{message}");
    assert!(!message.contains(&format!("-n {parent}")), "{message}");
    // kube-apiserver presents its certificate, so its users get the whole answer.
    let err = fails(env.kubectl(&["delete", "ns", &child]));
    assert!(err.contains(&format!("parent namespace {parent}")), "{err}");
    delete_tree(&admin, &parent).await;
}

/// Issue 40, B4: a forged review of a parent's deletion makes hns write nothing; naming the
/// parent's uid (which only those who may read it know), it holds the parent only for the
/// hold's grace (the controller takes it back: unit tests and the reliability suite wait).
#[tokio::test]
async fn a_forged_deletion_review_makes_hns_write_nothing() {
    let Some((_, local, admin)) = Env::local_with_admin().await else { return };
    let parent = fresh_namespace(&admin, "forgedhold").await;
    create_subns(&admin, &parent, &format!("{parent}-c")).await.unwrap();
    // Deletable with its subnamespaces: a real deletion of it would be held.
    allow_cascading_deletion(&admin, &parent).await.unwrap();
    let finalizers = || async {
        let ns = Api::<Namespace>::all(admin.clone()).get(&parent).await.unwrap();
        (ns.metadata.finalizers.unwrap_or_default(), ns.metadata.annotations.unwrap_or_default())
    };
    let before = finalizers().await;
    for uid in [None, Some("00000000-0000-0000-0000-00000000dead")] {
        let answer =
            forged::send(&local, "/validate-namespaces", &forged::namespace_delete(&parent, uid)).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(finalizers().await, before, "nothing was written");
    let uid = uid_of(&admin, &parent).await;
    forged::send(&local, "/validate-namespaces", &forged::namespace_delete(&parent, Some(&uid))).await;
    let (held, annotations) = finalizers().await;
    assert!(held.contains(&"hnc.x-k8s.io/hasSubnamespace".to_string()), "{held:?}");
    assert!(
        annotations.contains_key("hnc.x-k8s.io/held-for-subnamespaces-at"),
        "the hold has its time: {annotations:?}"
    );
    delete_tree(&admin, &parent).await;
}

/// Issue 40, B3: stepping oldObject's resourceVersion, a caller without a certificate got a
/// different answer at the stored one, then the ancestor's quota, its limit and the subtree's
/// usage. Without the ResourceQuota's uid every answer is now the same, the stored version too.
/// The sources webhook's answer depends on what descendants hold: a stranger's review (no
/// certificate of the cluster's) is allowed whatever it names, while kube-apiserver's call for
/// the same source is refused.
#[tokio::test]
async fn the_sources_webhook_tells_strangers_nothing() {
    let Some((_, local, admin)) = Env::local_with_admin().await else { return };
    let (parent, child) = parent_and_subnamespace(&admin, "secs").await;
    let bindings = |ns: &str| Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin.clone(), ns);
    eventually("the subnamespace", WAIT, || async { bindings(&child).list(&Default::default()).await.ok() })
        .await;
    let own = role_binding("taken", "view", Subject::Group("child-only"));
    bindings(&child).create(&Default::default(), &own).await.unwrap();
    let source = role_binding("taken", "view", Subject::Group("parent"));
    eventually("kube-apiserver's call refused", WAIT, || async {
        match bindings(&parent).create(&Default::default(), &source).await {
            Err(kube::Error::Api(s)) if s.code == 409 => Some(()),
            Ok(_) => {
                let _ = bindings(&parent).delete("taken", &Default::default()).await;
                None
            }
            Err(_) => None,
        }
    })
    .await;
    let mut answers = std::collections::BTreeSet::new();
    for name in ["taken", "free"] {
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "00000000-0000-0000-0000-000000000001",
                "kind": {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "RoleBinding"},
                "resource": {"group": "rbac.authorization.k8s.io", "version": "v1", "resource": "rolebindings"},
                "name": name, "namespace": parent, "operation": "CREATE",
                "userInfo": {"username": "someone"},
                "object": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": parent},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}},
            }
        });
        answers.insert(forged::send(&local, "/validate-sources", &review).await["response"].to_string());
    }
    assert_eq!(answers.len(), 1, "one answer whatever the review names: {answers:?}");
    let answer: serde_json::Value = serde_json::from_str(answers.first().unwrap()).unwrap();
    assert_eq!(answer["allowed"], true, "{answer}");
    delete_tree(&admin, &parent).await;
}

#[tokio::test]
async fn the_quota_webhook_tells_strangers_nothing() {
    let Some((_, local, admin)) = Env::local_with_admin().await else { return };
    let (parent, child) = parent_and_subnamespace(&admin, "secq").await;
    hns_e2e::quotas::set_quota(&admin, &parent, "budget", &[("pods", "6")]).await.unwrap();
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(admin.clone(), &child);
    let read = || async {
        let rq = quotas.get("hrq.hnc.x-k8s.io").await.ok()?;
        let used = rq.status.as_ref()?.used.as_ref()?.get("pods")?.0.clone();
        Some((rq.metadata.uid.clone()?, rq.metadata.resource_version.clone()?, used))
    };
    // Counted, and settled: hns writes its allocation on it once it knows the usage.
    let stored = eventually("the child's ResourceQuota to be counted and settled", WAIT, || async {
        let first = read().await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        (read().await? == first).then_some(first)
    })
    .await;
    let version: u64 = stored.1.parse().unwrap();
    let forged = "00000000-0000-0000-0000-00000000beef";
    let mut answers = std::collections::BTreeSet::new();
    for v in version.saturating_sub(3)..=version + 3 {
        let review = forged::quota_status_update(&child, (forged, &v.to_string(), &stored.2), 98);
        let answer = forged::send(&local, "/mutate-quota-status", &review).await;
        answers.insert(answer["response"].to_string());
    }
    assert_eq!(answers.len(), 1, "one answer for every version: {answers:?}");
    let answer: serde_json::Value = serde_json::from_str(answers.first().unwrap()).unwrap();
    assert_eq!(answer["allowed"], true, "{answer}");
    assert!(answer.get("patch").is_none() && answer["status"].get("message").is_none(), "{answer}");
    // With the uid, which only those who may read the ResourceQuota know, a wrong usage is
    // refused as forged.
    let review = forged::quota_status_update(&child, (&stored.0, &stored.1, "5"), 98);
    let answer = forged::send(&local, "/mutate-quota-status", &review).await;
    assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");
    delete_tree(&admin, &parent).await;
}

/// Issue 40, W2: the status subresource carries labels too, and is checked as the object is.
#[tokio::test]
async fn the_status_subresource_cannot_forge_tree_labels() {
    let (env, admin, ns) = Env::with_namespace("statusforge").await;
    let patch = json!({"metadata": {"labels": {"victim.tree.hnc.x-k8s.io/depth": "1"}}}).to_string();
    let err = fails(env.kubectl(&["patch", "ns", &ns, "--subresource=status", "--type=merge", "-p", &patch]));
    assert!(err.contains("can only be managed by hns"), "{err}");
    let labels =
        Api::<Namespace>::all(admin.clone()).get(&ns).await.unwrap().metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key("victim.tree.hnc.x-k8s.io/depth"), "{labels:?}");
    delete_namespaces(&admin, &[&ns]).await;
}

/// Issue 40, W3: a stranger sending a body a byte at a time is cut off, not held for a minute.
#[tokio::test]
async fn a_strangers_slow_body_is_cut_off() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("a_strangers_slow_body_is_cut_off") else { return };
    let local = local.clone();
    let (held, answer) =
        tokio::task::spawn_blocking(move || forged::slow_body(&local, Duration::from_secs(60)))
            .await
            .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    println!("a slow body was cut off after {held:?}");
}

#[tokio::test]
async fn connections_of_strangers_are_closed_after_their_answer() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("connections_of_strangers_are_closed_after_their_answer") else {
        return;
    };
    let url = format!("{}/healthz", local.hns_url());
    for client in [local.direct_client(None), local.direct_client(Some(rogue_identity("stranger")))] {
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.headers().get("connection").map(|v| v.to_str().unwrap()), Some("close"));
    }
    let unauthorized =
        local.direct_client(None).get(format!("{}{API}", local.hns_url())).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(unauthorized.headers().get("connection").map(|v| v.to_str().unwrap()), Some("close"));
    // kube-apiserver's connections (the front proxy's certificate) stay open for the next request.
    let proxy = local.direct_client(Some(local.front_proxy_identity())).get(&url).send().await.unwrap();
    assert_ne!(proxy.headers().get("connection").map(|v| v.to_str().unwrap()), Some("close"));
}

#[tokio::test]
async fn http2_is_not_offered_and_oversized_bodies_get_413() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("http2_is_not_offered_and_oversized_bodies_get_413") else { return };
    let mut tls = local.front_proxy_connection(b"\x02h2\x08http/1.1");
    assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"http/1.1"[..]));
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    tls.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    let body = "x".repeat(10 << 20);
    let r = local
        .direct_client(Some(local.front_proxy_identity()))
        .post(format!("{}{API}/namespaces/default/subnamespaces", local.hns_url()))
        .remote_user("admin", &["system:masters"])
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let status: serde_json::Value = r.json().await.unwrap();
    assert_eq!(status["reason"], "RequestEntityTooLarge", "{status}");
}

#[tokio::test]
async fn a_deep_subtree_starts_terminating_at_once_and_goes() {
    let (env, admin) = Env::with_admin().await;
    let prefix = unique("deep");
    let tree = hns_e2e::deletion::chain(&admin, &prefix, 12).await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces.delete(&tree.root, &Default::default()).await.unwrap();
    // kube-controller-manager's namespace controller alone reaches a subnamespace only 5 s or
    // more after its parent began terminating (over a minute for 12 levels): hns deletes them all
    // as soon as it sees the root go.
    eventually("every namespace of the chain terminating or gone", Duration::from_secs(30), || async {
        for name in &tree.names {
            if let Ok(ns) = namespaces.get(name).await {
                ns.metadata.deletion_timestamp.as_ref()?;
            }
        }
        Some(())
    })
    .await;
    // Inside a terminating parent, a terminating subnamespace is no longer content to wait for.
    let middle = &tree.names[6];
    eventually("no Subnamespace listed in a terminating parent", WAIT, || async {
        let out = env.kubectl(&["get", "subns", "-n", middle, "-o", "name"]);
        (out.status.success() && out.stdout.is_empty()).then_some(())
    })
    .await;
    let left = hns_e2e::deletion::delete_and_wait(&admin, &[], &tree.names, Duration::from_secs(300)).await;
    assert!(left.left.is_empty(), "left behind: {:?}", left.left);
}

#[tokio::test]
async fn a_watch_ends_soon_after_its_client_leaves() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("a_watch_ends_soon_after_its_client_leaves") else { return };
    // A quiet watch without bookmarks writes nothing for half an hour: only noticing that its
    // client has gone ends it. The client here stops sending (half-closes), then waits for hns
    // to end the answer and the connection.
    let mut tls = local.front_proxy_connection(b"\x08http/1.1");
    let request = format!(
        "GET {API}/namespaces/{}/subnamespaces?watch=true HTTP/1.1\r\nHost: localhost\r\n\
         X-Remote-User: watcher\r\nX-Remote-Group: system:masters\r\n\r\n",
        unique("quiet")
    );
    tls.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    tls.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    tls.get_ref().shutdown(std::net::Shutdown::Write).unwrap();
    tls.get_ref().set_read_timeout(Some(WAIT)).unwrap();
    let started = std::time::Instant::now();
    let ended = loop {
        let mut buf = [0u8; 4096];
        match tls.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => {} // the end of the answer, if hns ends it
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                break false
            }
            // A close without TLS's close_notify: the connection ended too.
            Err(_) => break true,
        }
    };
    assert!(ended, "the watch was still open after {} s", started.elapsed().as_secs());
}
