//! What users read when something is refused or wrong: every message in plain words that say
//! what to do, never a Rust debug rendering (`Some(..)`, `Status { .. }`, kube's `ApiError: …`).
//! Enabling a kind hns has no rights for names the ClusterRole to create and changes nothing; a
//! body with a field of the wrong type is a 400 naming the field, as kube-apiserver's decoding
//! says it.

use std::process::Output;
use std::time::Duration;

use hns_api::{HNCConfiguration, HierarchyConfiguration};
use hns_e2e::*;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// What a Rust `Debug` rendering (or kube's Display of an API error) leaves in a message.
const DEBUG_MARKERS: &[&str] = &["Some(", "None,", "Status {", "ErrorResponse", "ApiError", "{ status:"];

fn assert_plain(what: &str, message: &str) {
    for marker in DEBUG_MARKERS {
        assert!(
            !message.contains(marker),
            "{what}: the message carries a Debug rendering ({marker}): {message}"
        );
    }
}

/// `kubectl hns config ARGS`, retried while another test's change to the configuration makes
/// ours stale.
fn config(env: &Env, args: &[&str]) -> Output {
    let all: Vec<&str> = ["config"].iter().chain(args).copied().collect();
    for _ in 0..5 {
        let out = hns(env, &all);
        if !String::from_utf8_lossy(&out.stderr).contains("has been modified") {
            return out;
        }
    }
    panic!("config {args:?}: conflicts 5 times in a row")
}

fn stderr_of_failure(out: Output) -> String {
    assert_eq!(out.status.code(), Some(1), "expected exit code 1: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn config_spec(client: &Client) -> Value {
    let c: HNCConfiguration = Api::all(client.clone()).get("config").await.unwrap();
    serde_json::to_value(c.spec).unwrap()
}

/// The `Status` of a raw request to hns's API with `body` as `content_type`.
async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> kube::core::Status {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(body.to_vec())
        .unwrap();
    api_status(client.request::<Value>(req).await.expect_err("the request should be refused"))
}

const SERVICES_ADVICE: &str = "grant it by creating a ClusterRole labelled hnc.x-k8s.io/aggregate-to-propagation: \"true\" with get, list, watch, create, update, delete on services";

/// hns holds no rights on Services (config/base/rbac.yaml grants only the common kinds), so
/// enabling them is refused up front with 403 and the ClusterRole that fixes it, and the
/// configuration stays as it was; once that ClusterRole exists, the same change goes through.
#[tokio::test]
async fn a_kind_hns_may_not_watch_is_refused_with_the_role_to_create() {
    let (env, client) = Env::with_admin().await;
    let before = config_spec(&client).await;

    let err = stderr_of_failure(config(&env, &["set-resource", "services", "--mode", "Propagate"]));
    assert_eq!(
        err,
        format!(
            "Error: hncconfigurations.hnc.x-k8s.io \"config\" is forbidden: hns-apiserver may not list, watch, \
             create, update, delete services in the core group; {SERVICES_ADVICE} (rules: [{{apiGroups: [\"\"], \
             resources: [services], verbs: [get, list, watch, create, update, delete]}}]), then set the mode again\n"
        )
    );
    assert_eq!(config_spec(&client).await, before, "the configuration is unchanged");

    // The same refusal through the API: 403 Forbidden, about the configuration.
    let api: Api<HNCConfiguration> = Api::all(client.clone());
    let mut wanted: HNCConfiguration = api.get("config").await.unwrap();
    // Unguarded, so another test's change to the configuration cannot turn this into a 409.
    wanted.metadata.resource_version = None;
    wanted.spec.resources.push(hns_api::ResourceSpec {
        group: String::new(),
        resource: "services".into(),
        mode: Some("Remove".into()),
    });
    let s = api_status(api.replace("config", &Default::default(), &wanted).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{}", s.message);
    assert!(
        s.message.contains("hns-apiserver may not list, watch, delete services in the core group; grant it"),
        "Remove needs no writes, so only the verbs it uses are named: {}",
        s.message
    );
    assert_plain("403 for services", &s.message);
    assert_eq!(config_spec(&client).await, before, "the configuration is unchanged");

    // Following the advice works. (Remove: services copied into other tests' namespaces would
    // disturb them.)
    let role = unique("hns-propagate-services");
    let manifest = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role, "labels": {"hnc.x-k8s.io/aggregate-to-propagation": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["services"],
                   "verbs": ["get", "list", "watch", "create", "update", "delete"]}],
    });
    let file = std::env::temp_dir().join(format!("{role}.json"));
    std::fs::write(&file, manifest.to_string()).unwrap();
    ok(env.kubectl(&["create", "-f", file.to_str().unwrap()]));
    eventually("the ClusterRole aggregated into hns's rights", WAIT, || async {
        let out = config(&env, &["set-resource", "services", "--mode", "Remove", "--yes"]);
        out.status.success().then_some(())
    })
    .await;
    assert!(
        ok(config(&env, &["describe"])).contains("* Removing: services (/v1)"),
        "services are configured now"
    );
    ok(config(&env, &["delete-type", "--resource", "services", "--yes"]));
    ok(env.kubectl(&["delete", "clusterrole", &role]));
}

/// A field of the wrong type is a 400 that names the field, worded as kube-apiserver words it;
/// unparsable JSON and a wrong Content-Type keep messages of their own. Nothing changes.
#[tokio::test]
async fn a_body_with_a_wrong_type_is_400_with_the_field_path() {
    let (env, client, ns) = Env::with_namespace("msg-body").await;
    let path = format!("/apis/hnc.x-k8s.io/v1alpha2/namespaces/{ns}/hierarchyconfigurations/hierarchy");
    let cannot =
        "HierarchyConfiguration in version \"v1alpha2\" cannot be handled as a HierarchyConfiguration: ";

    let hc = |spec: Value| {
        json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
               "metadata": {"name": "hierarchy"}, "spec": spec})
        .to_string()
    };
    let cases: [(&str, &str, String, &str); 4] = [
        (
            "PUT",
            "application/json",
            hc(json!({"parent": 5})),
            "spec.parent: invalid type: integer `5`, expected a string",
        ),
        (
            "PATCH",
            "application/merge-patch+json",
            json!({"spec": {"parent": 5}}).to_string(),
            "spec.parent: invalid type: integer `5`, expected a string",
        ),
        (
            "PUT",
            "application/json",
            hc(json!({"allowCascadingDeletion": "yes"})),
            "spec.allowCascadingDeletion: invalid type: string \"yes\", expected a boolean",
        ),
        (
            "PUT",
            "application/json",
            hc(json!({"labels": [{"key": "a", "value": 1}]})),
            "spec.labels[0].value: invalid type: integer `1`, expected a string",
        ),
    ];
    for (method, content_type, body, field) in &cases {
        let s = raw(&client, method, &path, content_type, body.as_bytes()).await;
        assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{method} {body}: {}", s.message);
        assert!(s.message.starts_with(&format!("{cannot}{field}")), "{method} {body}: {}", s.message);
    }

    // kubectl shows it as kube-apiserver's own refusals.
    let out = fails(env.kubectl(&[
        "patch",
        "hierarchyconfiguration",
        "hierarchy",
        "-n",
        &ns,
        "--type=merge",
        "-p",
        r#"{"spec":{"parent":5}}"#,
    ]));
    assert!(out.contains(&format!("(BadRequest): {cannot}spec.parent: invalid type: integer")), "{out}");

    // Not JSON at all, and not JSON's media type: their own messages.
    let s = raw(&client, "PUT", &path, "application/json", b"{\"spec\": ").await;
    assert_eq!(s.code, 400);
    assert!(s.message.starts_with("the body of the request is not valid JSON: "), "{}", s.message);
    let s = raw(&client, "PUT", &path, "text/plain", hc(json!({})).as_bytes()).await;
    assert_eq!(s.code, 415);
    assert!(s.message.starts_with("the body of the request was in an unknown format - accepted media types include: application/json"), "{}", s.message);

    let api: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &ns);
    assert_eq!(api.get("hierarchy").await.unwrap().spec, Default::default(), "nothing changed");
    delete_namespaces(&client, &[&ns]).await;
}

/// Drives the main error paths (bad bodies, refusals of the API and of the plugin, conditions
/// on namespaces and on the configuration) and checks no message carries a Debug rendering.
#[tokio::test]
async fn no_message_carries_a_debug_rendering() {
    let (env, client) = Env::with_admin().await;
    let (parent, child) = parent_and_child(&client, "msg-parent", "msg-child").await;
    let hc_path = format!("/apis/hnc.x-k8s.io/v1alpha2/namespaces/{child}/hierarchyconfigurations/hierarchy");
    let config_path = "/apis/hnc.x-k8s.io/v1alpha2/hncconfigurations/config";
    let mut messages: Vec<(String, String)> = Vec::new();

    // Bad bodies.
    for (method, path, content_type, body) in [
        (
            "PUT",
            hc_path.as_str(),
            "application/json",
            r#"{"kind": "HierarchyConfiguration", "spec": {"parent": []}}"#,
        ),
        ("PUT", hc_path.as_str(), "application/json", r#"{"kind": "Subnamespace"}"#),
        ("PUT", hc_path.as_str(), "application/json", r#"{"apiVersion": "hnc.x-k8s.io/v1"}"#),
        ("PUT", hc_path.as_str(), "application/json", "[1, 2"),
        ("PUT", hc_path.as_str(), "application/yaml", "spec: {}"),
        ("PATCH", hc_path.as_str(), "application/json-patch+json", r#"[{"op": "jump"}]"#),
        ("PATCH", hc_path.as_str(), "application/apply-patch+yaml", "spec: ["),
        (
            "PATCH",
            config_path,
            "application/merge-patch+json",
            r#"{"spec": {"resources": [{"resource": 3}]}}"#,
        ),
        (
            "PATCH",
            config_path,
            "application/merge-patch+json",
            r#"{"spec": {"resources": [{"resource": "nodes"}]}}"#,
        ),
        (
            "PATCH",
            config_path,
            "application/merge-patch+json",
            r#"{"spec": {"resources": [{"resource": "no-such-things"}]}}"#,
        ),
    ] {
        let s = raw(&client, method, path, content_type, body.as_bytes()).await;
        messages.push((format!("{method} {body}"), s.message));
    }

    // Refusals.
    let api: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &parent);
    let cycle = Patch::Merge(json!({"spec": {"parent": child}}));
    let s = api_status(api.patch("hierarchy", &PatchParams::default(), &cycle).await.unwrap_err());
    messages.push(("a cycle".into(), s.message));
    let missing = Patch::Merge(json!({"spec": {"parent": unique("msg-nowhere")}}));
    let s = api_status(api.patch("hierarchy", &PatchParams::default(), &missing).await.unwrap_err());
    messages.push(("a missing parent".into(), s.message));
    let configs: Api<HNCConfiguration> = Api::all(client.clone());
    let mut podtemplates = configs.get("config").await.unwrap();
    podtemplates.metadata.resource_version = None;
    // PodTemplates: a kind no test grants hns (the one above grants it Services for a while).
    podtemplates.spec.resources.push(hns_api::ResourceSpec {
        group: String::new(),
        resource: "podtemplates".into(),
        mode: None,
    });
    let s = api_status(configs.replace("config", &Default::default(), &podtemplates).await.unwrap_err());
    messages.push(("podtemplates without rights".into(), s.message));

    // The plugin's errors.
    for args in [
        vec!["config", "set-resource", "podtemplates", "--mode", "Propagate"],
        vec!["describe", "msg-no-such-namespace"],
        vec!["set", &parent, "--parent", &child],
        vec!["create", &child, "-n", &parent],
    ] {
        let out = hns(&env, &args);
        assert!(!out.status.success(), "{args:?} should fail");
        messages.push((format!("kubectl hns {args:?}"), String::from_utf8_lossy(&out.stderr).into_owned()));
    }

    // Conditions: the child's parent goes away.
    delete_namespaces(&client, &[&parent]).await;
    let children: Api<HierarchyConfiguration> = Api::namespaced(client.clone(), &child);
    let conditions = eventually("ParentMissing on the child", WAIT, || async {
        let hc = children.get("hierarchy").await.ok()?;
        let conditions = hc.status.unwrap_or_default().conditions;
        conditions.iter().any(|c| c.reason == "ParentMissing").then_some(conditions)
    })
    .await;
    for c in conditions {
        messages.push((format!("condition {}", c.reason), c.message));
    }
    let status = configs.get("config").await.unwrap().status.unwrap_or_default();
    for c in status.conditions {
        messages.push((format!("configuration condition {}", c.reason), c.message));
    }
    messages.push(("kubectl hns describe".into(), ok(hns(&env, &["describe", &child]))));

    for (what, message) in &messages {
        assert!(!message.trim().is_empty(), "{what}: no message");
        assert_plain(what, message);
    }
    delete_namespaces(&client, &[&child]).await;
}
