//! hns's objects as GitOps tools judge them: each is read with `kubectl get -o json` and given
//! to kstatus itself (sigs.k8s.io/cli-utils/pkg/kstatus, the library Flux and kpt wait with;
//! hack/kstatus, built from the Go module proxy by hack/build-kstatus.sh). Healthy objects are
//! `Current`, a namespace with problems in the hierarchy `Failed`, a subnamespace being deleted
//! `Terminating`; `kubectl wait --for=condition=Ready` works on subnamespaces and quotas.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use hns_e2e::{
    create_namespace, create_subns, delete_namespaces, delete_tree, eventually, fails, fresh_namespace,
    manifest_file, ok, set_parent, unique, Env,
};

const WAIT: Duration = Duration::from_secs(30);

/// hack/kstatus's binary, built (or found in the cache) by hack/build-kstatus.sh, once per run.
fn kstatus_binary() -> &'static PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hack/build-kstatus.sh");
        let out = Command::new("bash").arg(&script).stderr(Stdio::inherit()).output().expect("bash runs");
        assert!(out.status.success(), "{} failed", script.display());
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// kstatus's verdict on `kubectl get ARGS -o json`: (status, message) per object.
fn kstatus(env: &Env, args: &[&str]) -> Vec<(String, String)> {
    let json = ok(env.kubectl(&[args, &["-o", "json"]].concat()));
    let mut child = Command::new(kstatus_binary())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the kstatus checker runs");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), json.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kstatus on {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    // `KIND NAMESPACE/NAME STATUS MESSAGE`
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let status = parts.nth(2).unwrap_or_default().to_string();
            (status, parts.next().unwrap_or_default().to_string())
        })
        .collect()
}

fn statuses(env: &Env, args: &[&str]) -> Vec<String> {
    kstatus(env, args).into_iter().map(|(s, _)| s).collect()
}

#[tokio::test]
async fn healthy_objects_are_current_and_ready() {
    let (env, client, root) = Env::with_namespace("ks-root").await;
    let sub = unique("ks-sub");
    create_subns(&client, &root, &sub).await.unwrap();
    let manifest = format!(
        "apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\nmetadata:\n  name: budget\n  namespace: {root}\n\
         spec:\n  hard:\n    pods: 10\n"
    );
    ok(env.kubectl(&["apply", "--server-side", "-f", &manifest_file(&root, &manifest)]));

    for args in [
        &["get", "subns", &sub, "-n", &root][..],
        &["get", "subnamespaceanchors", "-n", &root],
        &["get", "hierarchyconfigurations", "hierarchy", "-n", &sub],
        &["get", "hierarchyconfigurations", "hierarchy", "-n", &root],
        &["get", "hrq", "budget", "-n", &root],
    ] {
        assert_eq!(statuses(&env, args), ["Current"], "{args:?}");
    }
    for object in [format!("subns/{sub}"), format!("subnamespaceanchor/{sub}"), "hrq/budget".to_string()] {
        let waited =
            ok(env.kubectl(&["wait", "--for=condition=Ready", &object, "-n", &root, "--timeout=30s"]));
        assert!(waited.contains("condition met"), "{object}: {waited}");
    }

    delete_tree(&client, &root).await;
}

#[tokio::test]
async fn a_namespace_whose_parent_is_gone_is_failed_until_fixed() {
    let (env, client) = Env::with_admin().await;
    let (parent, child) = (unique("ks-parent"), unique("ks-child"));
    create_namespace(&client, &parent, &[]).await;
    create_namespace(&client, &child, &[]).await;
    set_parent(&client, &child, Some(&parent)).await.unwrap();
    delete_namespaces(&client, &[&parent]).await;
    let config = ["get", "hierarchyconfigurations", "hierarchy", "-n", child.as_str()];
    let (status, message) = eventually("kstatus Failed on the orphan's configuration", WAIT, || async {
        kstatus(&env, &config).pop().filter(|(s, _)| s == "Failed")
    })
    .await;
    assert_eq!(status, "Failed");
    assert!(message.contains("ParentMissing"), "kstatus passes on what is wrong: {message}");

    set_parent(&client, &child, None).await.unwrap();
    eventually("Current once the parent is cleared", WAIT, || async {
        (statuses(&env, &config) == ["Current"]).then_some(())
    })
    .await;
    delete_namespaces(&client, &[&child]).await;
}

#[tokio::test]
async fn a_subnamespace_being_deleted_is_terminating_and_a_taken_name_is_refused() {
    let (env, client, root) = Env::with_namespace("ks-del").await;
    let sub = unique("ks-held");
    create_subns(&client, &root, &sub).await.unwrap();
    // An object with a finalizer of its own holds the namespace in Terminating.
    let held = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {sub}\n  finalizers: [e2e.hns.example.com/hold]\n"
    );
    ok(env.kubectl(&["create", "-f", &manifest_file(&sub, &held)]));
    ok(env.kubectl(&["delete", "subns", &sub, "-n", &root, "--wait=false"]));
    eventually("kstatus Terminating on the subnamespace", WAIT, || async {
        (statuses(&env, &["get", "subns", &sub, "-n", &root]) == ["Terminating"]).then_some(())
    })
    .await;
    let conditions = ok(env.kubectl(&[
        "get",
        "subns",
        &sub,
        "-n",
        &root,
        "-o",
        "jsonpath={range .status.conditions[*]}{.type}={.status} {end}",
    ]));
    assert_eq!(conditions.trim(), "Ready=False Reconciling=True");
    ok(env.kubectl(&[
        "patch",
        "configmap",
        "held",
        "-n",
        &sub,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]));

    // A subnamespace whose name is taken never exists: the write is refused, so a GitOps tool
    // reports the failed apply rather than waiting on a status.
    let taken = fresh_namespace(&client, "ks-taken").await;
    let anchor = format!("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: Subnamespace\nmetadata:\n  name: {taken}\n  namespace: {root}\n");
    let file = std::env::temp_dir().join(format!("{taken}.yaml"));
    std::fs::write(&file, anchor).unwrap();
    let refused = fails(env.kubectl(&["apply", "--server-side", "-f", file.to_str().unwrap()]));
    assert!(refused.contains("cannot create a subnamespace using an existing namespace"), "{refused}");

    delete_tree(&client, &root).await;
    delete_namespaces(&client, &[&taken]).await;
}
