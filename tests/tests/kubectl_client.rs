//! hns as current clients meet it through a current kube-apiserver: the aggregated discovery
//! (apidiscovery.k8s.io/v2) and OpenAPI v3 that kube-apiserver merges from hns, and the real
//! kubectl of the control plane's version (`get -w`, `wait`, `explain`) and kube-controller-manager's
//! informers, which no one here wrote.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hns_e2e::*;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

/// GET `path` from kube-apiserver as the admin, with `accept`.
async fn get_raw(env: &Env, path: &str, accept: &str) -> Value {
    let client = env.admin().await;
    let req = http::Request::get(path).header("Accept", accept).body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap_or_else(|e| panic!("GET {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
}

#[tokio::test]
async fn kube_apiserver_merges_hns_into_aggregated_discovery() {
    let env = Env::get();
    let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    // The aggregator fetches an APIService's discovery in the background, so the group may take
    // a moment to appear after hns became Available, and shows as Stale while a fetch it retries
    // (one made as hns was starting) has not yet succeeded.
    let group = eventually("hnc.x-k8s.io Current in kube-apiserver's aggregated discovery", WAIT, || async {
        let list = get_raw(&env, "/apis", v2).await;
        assert_eq!(list["kind"], "APIGroupDiscoveryList", "{list}");
        let group = list["items"].as_array()?.iter().find(|g| g["metadata"]["name"] == "hnc.x-k8s.io")?;
        (group["versions"][0]["freshness"] == "Current").then(|| group.clone())
    })
    .await;
    let version = &group["versions"][0];
    assert_eq!(version["version"], "v1alpha2");
    let resource = |name: &str| -> Value {
        version["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["resource"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} missing from {group}"))
    };
    let subns = resource("subnamespaces");
    assert_eq!(subns["shortNames"], serde_json::json!(["subns"]));
    assert_eq!(subns["scope"], "Namespaced");
    assert_eq!(subns["responseKind"]["kind"], "Subnamespace");
    let verbs: Vec<&str> = subns["verbs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for verb in ["create", "delete", "get", "list", "patch", "update", "watch"] {
        assert!(verbs.contains(&verb), "{verb} missing from {verbs:?}");
    }
    assert_eq!(resource("hncconfigurations")["scope"], "Cluster");
    let hc_verbs = resource("hierarchyconfigurations")["verbs"].clone();
    assert!(!hc_verbs.as_array().unwrap().contains(&"delete".into()), "only served verbs: {hc_verbs}");
}

#[tokio::test]
async fn kube_apiserver_serves_hns_openapi_v3_and_explain_reads_it() {
    let env = Env::get();
    let url = eventually("hns's group in kube-apiserver's /openapi/v3", Duration::from_secs(180), || async {
        let index = get_raw(&env, "/openapi/v3", "application/json").await;
        index["paths"]["apis/hnc.x-k8s.io/v1alpha2"]["serverRelativeURL"].as_str().map(str::to_string)
    })
    .await;
    let doc = get_raw(&env, &url, "application/json").await;
    assert!(doc["openapi"].as_str().unwrap_or_default().starts_with("3."), "{}", doc["openapi"]);
    let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
    assert!(schemas.contains_key("io.x-k8s.hnc.v1alpha2.Subnamespace"), "{:?}", schemas.keys());
    // kubectl explain reads OpenAPI v3 first.
    let out = ok(env.kubectl(&["explain", "subnamespaces.spec"]));
    assert!(out.contains("KIND:") && out.contains("Subnamespace"), "{out}");
}

/// Reads `kubectl` output lines on a thread, so a test can wait for one with a timeout.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn next_line_containing(rx: &mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line containing {needle:?} from kubectl: {e}"),
        }
    }
}

#[tokio::test]
async fn kubectl_get_watch_and_wait_follow_subnamespaces() {
    let (env, client, parent) = Env::with_namespace("kc-watch").await;
    let first = new_subnamespace(&client, &parent, "a").await;
    let mut watch = Command::new("kubectl")
        .env("KUBECONFIG", &env.kubeconfig)
        .args(["get", "subns", "-n", &parent, "--watch", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl must be on PATH");
    let lines = lines_of(&mut watch);
    // The existing subnamespace comes with the list, so the watch is open from here on.
    next_line_containing(&lines, &first);
    let child = new_subnamespace(&client, &parent, "c").await;
    let added = next_line_containing(&lines, &child);
    assert!(added.starts_with("ADDED"), "{added}");
    // `kubectl wait` on a field of hns's status, and on the object's deletion.
    ok(env.kubectl(&[
        "wait",
        "-n",
        &parent,
        &format!("subns/{child}"),
        "--for=jsonpath={.status.status}=Ok",
        "--timeout=30s",
    ]));
    ok(env.kubectl(&["delete", "subns", "-n", &parent, &child, "--wait=false"]));
    let gone = next_line_containing(&lines, "DELETED");
    assert!(gone.contains(&child), "{gone}");
    ok(env.kubectl(&["wait", "-n", &parent, &format!("subns/{child}"), "--for=delete", "--timeout=30s"]));
    let _ = watch.kill();
    let _ = watch.wait();
    delete_tree(&client, &parent).await;
}

/// kube-controller-manager's garbage collector follows every deletable resource through a
/// metadata informer, which since Kubernetes 1.35 starts with a WatchList
/// (`sendInitialEvents=true`). An object owned by a Subnamespace is collected once the
/// Subnamespace is gone only if that informer works against hns.
#[tokio::test]
async fn the_garbage_collector_follows_subnamespaces() {
    let (env, client, parent) = Env::with_namespace("kc-gc").await;
    let child = format!("{parent}-c");
    let subns = create_subns(&client, &parent, &child).await.unwrap();
    let uid = subns.metadata.uid.expect("a Subnamespace has a uid");
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), &parent);
    let owned = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "owned-by-subns", "ownerReferences": [{
            "apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "Subnamespace", "name": child, "uid": uid,
        }]},
    }))
    .unwrap();
    configmaps.create(&Default::default(), &owned).await.unwrap();
    ok(env.kubectl(&["delete", "subns", "-n", &parent, &child]));
    eventually("the garbage collector to delete the ConfigMap owned by the Subnamespace", WAIT, || async {
        configmaps.get_opt("owned-by-subns").await.unwrap().is_none().then_some(())
    })
    .await;
    delete_tree(&client, &parent).await;
}
