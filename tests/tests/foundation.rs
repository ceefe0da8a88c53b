//! The foundation, end to end: hns-apiserver behind kube-apiserver's aggregation layer.
//! Discovery, OpenAPI, the read path of `hierarchyconfigurations`, authentication and
//! authorization, all through the real kube-apiserver and the real kubectl.

use std::time::Duration;

use hns_api::HierarchyConfiguration;
use hns_e2e::*;
use kube::api::ListParams;
use kube::Api;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn apiservice_is_available() {
    let env = Env::get();
    let out = ok(env.kubectl(&[
        "get",
        "apiservice",
        "v1alpha2.hnc.x-k8s.io",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
    ]));
    assert_eq!(out.trim(), "True");
}

#[tokio::test]
async fn kubectl_discovers_the_group() {
    let env = Env::get();
    let out = ok(env.kubectl(&["api-resources", "--api-group=hnc.x-k8s.io", "-o", "wide"]));
    let row =
        out.lines().find(|l| l.starts_with("hierarchyconfigurations")).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("HierarchyConfiguration"), "{row}");
    assert!(row.contains(" create,get,list,patch,update,watch "), "only the verbs really served: {row}");
    let raw = ok(env.kubectl(&["get", "--raw", "/apis/hnc.x-k8s.io/v1alpha2"]));
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["groupVersion"], "hnc.x-k8s.io/v1alpha2");
}

#[tokio::test]
async fn get_all_prints_one_row_per_namespace() {
    let (env, client) = Env::with_admin().await;
    let (root, child) = parent_and_child(&client, "acme", "team").await;

    eventually("both namespaces in the table", WAIT, || async {
        let out = ok(env.kubectl(&["get", "hierarchyconfigurations", "-A", "--no-headers"]));
        (out.contains(&root) && out.contains(&child)).then_some(())
    })
    .await;
    // Namespaces made by tests running beside this one, or still being deleted by earlier ones,
    // may appear in one listing and not yet the other: compare until the cluster is still.
    let marker = format!("-{}-", std::process::id());
    let names = |out: &str| -> Vec<String> {
        let mut v: Vec<String> = out
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| !n.contains(&marker))
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    eventually("one row per namespace", Duration::from_secs(90), || async {
        let rows = names(&ok(env.kubectl(&["get", "hierarchyconfigurations", "-A", "--no-headers"])));
        let namespaces = names(&ok(env.kubectl(&["get", "namespaces", "--no-headers"])));
        (rows == namespaces).then_some(())
    })
    .await;

    let header = ok(env.kubectl(&["get", "hierarchyconfigurations", "-n", &child]));
    let mut lines = header.lines();
    let columns: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(columns, ["NAME", "PARENT", "CHILDREN", "CONDITIONS", "AGE"]);
    let cells: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&cells[..2], ["hierarchy", root.as_str()]);

    let parent_row =
        ok(env.kubectl(&["get", "hierarchyconfigurations", "-n", &root, "-o", "wide", "--no-headers"]));
    assert!(parent_row.contains(&child), "children column names the child: {parent_row}");
    assert!(parent_row.contains("false"), "-o wide adds cascading deletion: {parent_row}");
    delete_namespaces(&client, &[&child, &root]).await;
}

#[tokio::test]
async fn get_returns_the_derived_object_and_404_otherwise() {
    let client = Env::get().admin().await;
    let root = fresh_namespace(&client, "root").await;
    let child = unique("sub");
    create_subns(&client, &root, &child).await.unwrap();

    let api: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &root);
    let hc = eventually("the child in the parent's status", WAIT, || async {
        let hc = api.get("hierarchy").await.ok()?;
        hc.status.as_ref().is_some_and(|s| s.children.contains(&child)).then_some(hc)
    })
    .await;
    assert_eq!(hc.spec.parent, None);
    let child_hc: HierarchyConfiguration =
        Api::namespaced(client.clone(), &child).get("hierarchy").await.unwrap();
    assert_eq!(child_hc.spec.parent.as_deref(), Some(root.as_str()));

    let ns: k8s_openapi::api::core::v1::Namespace = Api::all(client.clone()).get(&child).await.unwrap();
    assert!(child_hc.metadata.uid.is_some(), "a HierarchyConfiguration has a uid");
    assert_ne!(child_hc.metadata.uid, ns.metadata.uid, "a uid of its own, not the namespace's");
    assert_eq!(child_hc.metadata.creation_timestamp, ns.metadata.creation_timestamp, "made with it");

    for (namespace, name) in [(root.as_str(), "other"), ("no-such-namespace", "hierarchy")] {
        let err =
            Api::<HierarchyConfiguration>::namespaced(client.clone(), namespace).get(name).await.unwrap_err();
        match err {
            kube::Error::Api(s) => {
                assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
                assert!(
                    s.message.contains(&format!("hierarchyconfigurations.hnc.x-k8s.io \"{name}\" not found")),
                    "{}",
                    s.message
                );
            }
            other => panic!("expected a 404 Status, got {other}"),
        }
    }
    set_parent(&client, &root, None).await.ok();
    let api: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &root);
    let cascade = serde_json::json!({"spec": {"allowCascadingDeletion": true}});
    api.patch("hierarchy", &Default::default(), &kube::api::Patch::Merge(cascade)).await.unwrap();
    delete_namespaces(&client, &[&root]).await;
}

#[tokio::test]
async fn lists_page_and_select() {
    let (env, client) = Env::with_admin().await;
    let names: Vec<String> = futures_names(&client, 5).await;
    let all = eventually("five new namespaces listed", WAIT, || async {
        let out =
            ok(env.kubectl(&["get", "hierarchyconfigurations", "-A", "--chunk-size=2", "--no-headers"]));
        names.iter().all(|n| out.contains(n.as_str())).then_some(out)
    })
    .await;
    let count = |out: &str, n: &str| out.lines().filter(|l| l.split_whitespace().next() == Some(n)).count();
    for n in &names {
        assert_eq!(count(&all, n), 1, "paging returns each namespace once");
    }

    let api: Api<HierarchyConfiguration> = Api::all(client.clone());
    let picked =
        api.list(&ListParams::default().fields(&format!("metadata.namespace={}", names[2]))).await.unwrap();
    assert_eq!(picked.items.len(), 1);
    assert_eq!(picked.items[0].metadata.namespace.as_deref(), Some(names[2].as_str()));

    let meta = api.list_metadata(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(meta.items.len(), 3, "PartialObjectMetadataList honours limit");
    assert!(meta.metadata.continue_.is_some());
    assert!(meta.items.iter().all(|m| m.metadata.name.as_deref() == Some("hierarchy")));

    let bad = api.list(&ListParams::default().fields("spec.parent=x")).await.unwrap_err();
    assert!(matches!(bad, kube::Error::Api(ref s) if s.code == 400), "{bad}");
    delete_namespaces(&client, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
}

async fn futures_names(client: &kube::Client, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    for _ in 0..n {
        names.push(create_namespace(client, &unique("page"), &[]).await);
    }
    names
}

#[tokio::test]
async fn unsupported_verbs_are_405() {
    let env = Env::get();
    let err = fails(env.kubectl(&["delete", "hierarchyconfiguration", "hierarchy", "-n", "default"]));
    assert!(err.contains("MethodNotAllowed") || err.contains("not supported"), "{err}");
}

#[tokio::test]
async fn openapi_is_merged_so_explain_works() {
    let env = Env::get();
    // kube-apiserver's OpenAPI aggregator polls with back-off; it may still be fetching.
    let out = eventually("kube-apiserver to merge hns's OpenAPI", Duration::from_secs(180), || async {
        let out = env.kubectl(&["explain", "hierarchyconfigurations.spec"]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    assert!(out.contains("allowCascadingDeletion"), "{out}");
    assert!(out.contains("parent"), "{out}");
    let out = eventually("the new OpenAPI merged", Duration::from_secs(180), || async {
        let out = ok(env.kubectl(&["explain", "subnamespaces.status"]));
        out.contains("Ok, Missing, Conflict, Forbidden or Terminating").then_some(out)
    })
    .await;
    assert!(out.contains("status"), "{out}");
}

#[tokio::test]
async fn user_without_rbac_gets_a_403_status() {
    let env = Env::get();
    let err = fails(env.kubectl_as("bob", &[], &["get", "hierarchyconfigurations", "-n", "default"]));
    assert!(
        err.contains(
            "User \"bob\" cannot list resource \"hierarchyconfigurations\" in API group \"hnc.x-k8s.io\""
        ),
        "{err}"
    );
    // The Status itself, as a client library sees it.
    let raw = env.kubectl_as(
        "bob",
        &[],
        &["get", "--raw", "/apis/hnc.x-k8s.io/v1alpha2/namespaces/default/hierarchyconfigurations/hierarchy"],
    );
    let err = fails(raw);
    assert!(err.contains("Forbidden") || err.contains("forbidden"), "{err}");
}

#[tokio::test]
async fn viewers_of_a_namespace_may_read_its_hierarchy() {
    let (env, client, ns) = Env::with_namespace("viewed").await;
    ok(env.kubectl(&[
        "create",
        "rolebinding",
        "alice-view",
        "-n",
        &ns,
        "--clusterrole=view",
        "--user=alice",
    ]));
    let out = eventually("alice's view rights to reach hns (SAR cache is 10 s)", WAIT, || async {
        let out =
            env.kubectl_as("alice", &[], &["get", "hierarchyconfigurations", "-n", &ns, "--no-headers"]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    assert!(out.starts_with("hierarchy"), "{out}");
    let err = fails(env.kubectl_as("alice", &[], &["get", "hierarchyconfigurations", "-n", "default"]));
    assert!(err.contains("forbidden"), "alice sees only her namespace: {err}");
    delete_namespaces(&client, &[&ns]).await;
}

// ---- direct connections to hns-apiserver, bypassing kube-apiserver -------------------------

const LIST_PATH: &str = "/apis/hnc.x-k8s.io/v1alpha2/hierarchyconfigurations";

async fn status_of(resp: reqwest::Response) -> (u16, Value) {
    let code = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    (code, body)
}

#[tokio::test]
async fn forged_identity_headers_without_a_front_proxy_certificate_are_401() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("forged_identity_headers") else {
        return;
    };
    let forged = |c: &reqwest::Client| {
        c.get(format!("{}{LIST_PATH}", local.hns_url())).remote_user("admin", &["system:masters"])
    };
    let cases = [
        ("no client certificate", local.direct_client(None)),
        ("a certificate from another CA", local.direct_client(Some(rogue_identity("front-proxy-client")))),
        (
            "a front-proxy certificate with a disallowed CN",
            local.direct_client(Some(local.identity_from("front-proxy-ca", "intruder"))),
        ),
    ];
    for (what, client) in cases {
        let (code, body) = status_of(forged(&client).send().await.unwrap()).await;
        assert_eq!(code, 401, "{what}");
        assert_eq!(body["kind"], "Status", "{what}");
        assert_eq!(body["reason"], "Unauthorized", "{what}");
    }
    // The real proxy's certificate makes the same headers count.
    let proxy = local.direct_client(Some(local.front_proxy_identity()));
    let (code, body) = status_of(forged(&proxy).send().await.unwrap()).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "HierarchyConfigurationList");
}

#[tokio::test]
async fn health_needs_no_credentials_and_says_what_it_checks() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("health") else {
        return;
    };
    let c = local.direct_client(None);
    for path in ["/healthz", "/livez", "/readyz"] {
        let r = c.get(format!("{}{path}", local.hns_url())).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(r.text().await.unwrap(), "ok");
    }
    let verbose =
        c.get(format!("{}/readyz?verbose", local.hns_url())).send().await.unwrap().text().await.unwrap();
    assert!(verbose.contains("[+]authentication-config ok"), "{verbose}");
    assert!(verbose.contains("[+]namespace-cache ok"), "{verbose}");
}

#[tokio::test]
async fn discovery_negotiates_like_kube_apiserver_expects() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("discovery") else {
        return;
    };
    let c = local.direct_client(Some(local.front_proxy_identity()));
    let get = |path: &str, accept: &str| {
        c.get(format!("{}{path}", local.hns_url()))
            .remote_user("system:kube-aggregator", &["system:masters"])
            .header("Accept", accept.to_string())
            .send()
    };
    let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    let r = get("/apis", v2).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.contains("as=APIGroupDiscoveryList") && ct.contains("v=v2"), "{ct}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["items"][0]["versions"][0]["resources"][0]["responseKind"]["kind"],
        "HierarchyConfiguration"
    );

    let (code, body) = status_of(get("/apis", "application/json").await.unwrap()).await;
    assert_eq!((code, body["kind"].as_str()), (200, Some("APIGroupList")));
    let (code, body) = status_of(
        get("/apis", "application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList").await.unwrap(),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (406, Some("NotAcceptable")), "never 404 or 503");

    let (code, body) = status_of(get("/openapi/v2", "application/json").await.unwrap()).await;
    assert_eq!(code, 200);
    assert!(body["definitions"]["io.x-k8s.hnc.v1alpha2.HierarchyConfiguration"].is_object());
    let (code, body) = status_of(get("/openapi/v3", "application/json").await.unwrap()).await;
    assert_eq!(code, 200);
    let url = body["paths"]["apis/hnc.x-k8s.io/v1alpha2"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (code, body) = status_of(get(&url, "application/json").await.unwrap()).await;
    assert_eq!((code, body["openapi"].as_str()), (200, Some("3.0.0")));
    let (code, body) = status_of(get("/version", "application/json").await.unwrap()).await;
    assert_eq!(code, 200);
    assert!(body["gitVersion"].as_str().unwrap().starts_with('v'));
    let (code, body) = status_of(get("/no/such/path", "application/json").await.unwrap()).await;
    assert_eq!((code, body["kind"].as_str()), (404, Some("Status")));
}

/// hns's CA (base64), from the Secret it keeps its certificates in.
fn hns_ca(env: &Env) -> String {
    ok(env.kubectl(&[
        "get",
        "secret",
        "-n",
        "hns-system",
        "hns-serving-cert",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]))
}

#[tokio::test]
async fn self_managed_certificates_are_injected_as_ca_bundles() {
    let env = Env::get();
    let ca = hns_ca(&env);
    assert!(!ca.trim().is_empty(), "hns wrote its CA into the Secret");
    let apiservice =
        ok(env.kubectl(&["get", "apiservice", "v1alpha2.hnc.x-k8s.io", "-o", "jsonpath={.spec.caBundle}"]));
    assert_eq!(apiservice.trim(), ca.trim(), "APIService caBundle is hns's CA");
    let bundles = |kind: &str| {
        let webhooks = ok(env.kubectl(&[
            "get",
            kind,
            "hns",
            "-o",
            "jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{\"\\n\"}{end}",
        ]));
        webhooks.lines().map(|b| b.trim().to_string()).collect::<Vec<_>>()
    };
    let validating = bundles("validatingwebhookconfiguration");
    assert_eq!(
        validating.len(),
        8,
        "namespaces (two entries, and their status), propagated objects, exception annotations, sources and hierarchical quotas (two)"
    );
    let mutating = bundles("mutatingwebhookconfiguration");
    assert_eq!(mutating.len(), 2, "the labels of new namespaces, and hierarchical quotas' usage updates");
    assert!(validating.iter().chain(&mutating).all(|b| b == ca.trim()), "every webhook trusts hns's CA");
}

/// Re-applying a manifest without caBundles (or any edit) is undone at once: hns watches the
/// configurations it keeps, instead of looking every so often.
#[tokio::test]
async fn a_wiped_ca_bundle_is_put_back() {
    let env = Env::get();
    let ca = hns_ca(&env);
    // The quota-usage webhook of the mutating configuration fails open: nothing else depends on
    // it for the moment it is wrong.
    let bundle = "jsonpath={.webhooks[1].clientConfig.caBundle}";
    ok(env.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        "hns",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/webhooks/1/clientConfig/caBundle","value":"Cg=="}]"#,
    ]));
    // Less than hns's retry period (30 s): only its watch can be this quick.
    let wanted = format!("{bundle}={}", ca.trim());
    ok(env.kubectl(&["wait", "--for", &wanted, "mutatingwebhookconfiguration/hns", "--timeout=20s"]));
}

#[tokio::test]
async fn the_install_manifest_is_accepted_by_the_api_server() {
    let env = Env::get();
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/hns.yaml");
    let out = env.kubectl(&["apply", "--dry-run=server", "-f", manifest]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for kind in [
        "namespace/hns-system",
        "serviceaccount/hns-apiserver",
        "clusterrole.rbac.authorization.k8s.io/hns-apiserver",
        "service/hns-apiserver",
        "apiservice.apiregistration.k8s.io/v1alpha2.hnc.x-k8s.io",
        "deployment.apps/hns-apiserver",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/hns",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/hns",
    ] {
        assert!(stdout.contains(kind), "{kind} not accepted:\n{stdout}\n{stderr}");
    }
    // policy/v1 PodDisruptionBudget is GA from Kubernetes 1.21; the local control plane is 1.20.
    for line in stderr.lines().filter(|l| l.to_lowercase().starts_with("error")) {
        assert!(
            line.contains("PodDisruptionBudget") && line.contains("policy/v1"),
            "unexpected error: {line}"
        );
    }
}
