//! `kubectl hns get` through kubectl's real plugin dispatch: a subtree's objects as kubectl
//! would print them had it listed the subtree's namespaces with -A, its namespaces, a user who
//! may read only part of it, and kinds that cannot be listed.

use std::process::Output;
use std::time::Duration;

use hns_e2e::quotas::pod;
use hns_e2e::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// The label every pod of a test's subtree carries, so `kubectl get -A -l` lists exactly them.
const TAG: &str = "hns-e2e/subtree-get";

/// A three-level subtree: `root` with subnamespaces `rootza` (with `rootzaz` below it) and
/// `rootzb`. `kubectl get -A` lists in the order of etcd's keys, `/registry/pods/NS/NAME`, and
/// with these names that order is the subtree's depth-first one, which `hns get` prints (with
/// `root-a` and `root-a-1`, `root-a-1/` would sort first: `-` is below `/`).
struct Subtree {
    root: String,
    a: String,
    a1: String,
    b: String,
}

impl Subtree {
    async fn new(client: &Client, prefix: &str) -> Subtree {
        let root = create_namespace(client, &unique(prefix), &[]).await;
        let (a, a1, b) = (format!("{root}za"), format!("{root}zaz"), format!("{root}zb"));
        for (parent, child) in [(&root, &a), (&a, &a1), (&root, &b)] {
            create_subns(client, parent, child).await.unwrap_or_else(|e| panic!("subnamespace {child}: {e}"));
        }
        Subtree { root, a, a1, b }
    }

    /// Its namespaces, depth first.
    fn all(&self) -> [&str; 4] {
        [&self.root, &self.a, &self.a1, &self.b]
    }

    /// Creates pods: two in the root, one in `a` (labelled app=web), two in `a-1` (one app=web),
    /// none in `b`. Each is retried until its namespace has the `default` ServiceAccount the
    /// controller manager makes, without which pods are refused.
    async fn with_pods(self, client: &Client) -> Subtree {
        for (ns, name, app) in [
            (&self.root, "root-x", "db"),
            (&self.root, "root-y", "db"),
            (&self.a, "a-web", "web"),
            (&self.a1, "leaf-web", "web"),
            (&self.a1, "leaf-db", "db"),
        ] {
            let mut p: Pod = pod(name, "10m");
            p.metadata.labels = Some([(TAG.into(), self.root.clone()), ("app".into(), app.into())].into());
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            eventually(&format!("pod {name} in {ns}"), WAIT, || async {
                api.create(&PostParams::default(), &p).await.ok()
            })
            .await;
        }
        self
    }

    fn tag(&self) -> String {
        format!("{TAG}={}", self.root)
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The NAMESPACE and NAME of each row of a table.
fn rows(table: &str) -> Vec<(&str, &str)> {
    table
        .lines()
        .skip(1)
        .map(|l| {
            let mut cells = l.split_whitespace();
            (cells.next().unwrap_or_default(), cells.next().unwrap_or_default())
        })
        .collect()
}

/// Runs `ours` and `kubectl`'s until both print the same, and returns that: AGE may tick
/// between two runs.
async fn same_output(what: &str, ours: impl Fn() -> Output, kubectl: impl Fn() -> Output) -> String {
    let mut last = (String::new(), String::new());
    let found = eventually(what, WAIT, || {
        let (a, b) = (ok(ours()), ok(kubectl()));
        let same = (a == b).then(|| a.clone());
        last = (a, b);
        async move { same }
    })
    .await;
    assert_eq!(found, last.0, "{what}: {:?}", last.1);
    found
}

#[tokio::test]
async fn a_subtrees_pods_as_kubectl_prints_them_with_all_namespaces() {
    let (env, client) = Env::with_admin().await;
    let t = Subtree::new(&client, "sg-pods").await.with_pods(&client).await;
    let (root, tag) = (t.root.as_str(), t.tag());

    let table = same_output(
        "hns get pods as kubectl get pods -A",
        || hns(&env, &["get", "pods", "-n", root]),
        || env.kubectl(&["get", "pods", "-A", "-l", &tag]),
    )
    .await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let namespaces: Vec<&str> = table.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(namespaces, [root, root, &t.a, &t.a1, &t.a1], "subtree order; no row for {}", t.b);
    same_output(
        "-o wide",
        || hns(&env, &["get", "po", "-n", root, "-o", "wide"]),
        || env.kubectl(&["get", "pods", "-A", "-l", &tag, "-o", "wide"]),
    )
    .await;

    // Every spelling of the kind, and -o name as kubectl prints it.
    let names = "pod/root-x\npod/root-y\npod/a-web\npod/leaf-db\npod/leaf-web\n";
    for kind in ["pods", "pod", "po", "Pod"] {
        assert_eq!(ok(hns(&env, &["get", kind, "-n", root, "-o", "name"])), names, "{kind}");
    }
    let in_a1 = ok(env.kubectl(&["get", "pods", "-n", &t.a1, "-o", "name"]));
    assert!(names.ends_with(&in_a1), "each namespace's rows in the server's order: {in_a1}");

    // -l is the server's selector.
    assert_eq!(
        ok(hns(&env, &["get", "pods", "-n", root, "-l", "app=web", "-o", "name"])),
        "pod/a-web\npod/leaf-web\n"
    );
    let web = ok(hns(&env, &["get", "pods", "-n", root, "-l", "app=web"]));
    assert_eq!(rows(&web), [(t.a.as_str(), "a-web"), (&t.a1, "leaf-web")], "{web}");

    // --subtree=false: the root alone.
    assert_eq!(
        ok(hns(&env, &["get", "pods", "-n", root, "--subtree=false", "-o", "name"])),
        "pod/root-x\npod/root-y\n"
    );
    assert_eq!(ok(hns(&env, &["get", "pods", "-n", root, "--subtree", "-o", "name"])), names);

    // -o json: one List of typed items, in the order kubectl -A gives them.
    let doc: Value =
        serde_json::from_str(&ok(hns(&env, &["get", "pods", "-n", root, "-o", "json"]))).unwrap();
    let theirs: Value =
        serde_json::from_str(&ok(env.kubectl(&["get", "pods", "-A", "-l", &tag, "-o", "json"]))).unwrap();
    assert_eq!(
        (&doc["apiVersion"], &doc["kind"], &doc["metadata"]["resourceVersion"]),
        (&theirs["apiVersion"], &theirs["kind"], &Value::from(""))
    );
    let key = |d: &Value| -> Vec<(String, String, String, String)> {
        d["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                (
                    s(&i["apiVersion"]),
                    s(&i["kind"]),
                    s(&i["metadata"]["namespace"]),
                    s(&i["metadata"]["name"]),
                )
            })
            .collect()
    };
    assert_eq!(key(&doc), key(&theirs));
    assert_eq!(key(&doc).len(), 5);
    let yaml: Value =
        serde_saphyr::from_str(&ok(hns(&env, &["get", "pods", "-n", root, "-o", "yaml"]))).unwrap();
    assert_eq!(key(&yaml), key(&doc));

    // Nothing found: kubectl's sentence, on stderr, and success.
    let out = hns(&env, &["get", "pods", "-n", &t.b]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        (stdout(&out), stderr(&out)),
        (String::new(), format!("No resources found in {}'s subtree.\n", t.b))
    );
    let out = hns(&env, &["get", "deployments.apps", "-n", root, "--subtree=false"]);
    assert_eq!(stderr(&out), format!("No resources found in {root} namespace.\n"));
    delete_tree(&client, root).await;
}

#[tokio::test]
async fn a_subtrees_namespaces() {
    let (env, client) = Env::with_admin().await;
    let t = Subtree::new(&client, "sg-ns").await;
    let [root, a, a1, b] = t.all();
    for kind in ["ns", "namespaces", "namespace"] {
        same_output(
            "hns get ns as kubectl get ns NAMES",
            || hns(&env, &["get", kind, "-n", root]),
            || env.kubectl(&["get", "ns", root, a, a1, b]),
        )
        .await;
    }
    assert_eq!(
        ok(hns(&env, &["get", "ns", "-n", a, "-o", "name"])),
        format!("namespace/{a}\nnamespace/{a1}\n")
    );
    let doc: Value = serde_json::from_str(&ok(hns(&env, &["get", "ns", "-n", root, "-o", "json"]))).unwrap();
    let names: Vec<&str> =
        doc["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, t.all());
    assert_eq!(doc["items"][0]["kind"], "Namespace");
    let err = fails(hns(&env, &["get", "ns", "-n", root, "-l", "x=y"]));
    assert!(err.contains(&format!("kubectl get ns -l {root}.tree.hnc.x-k8s.io/depth")), "{err}");
    delete_tree(&client, root).await;
}

/// A user allowed to list pods only in `a` (a Role and RoleBinding there, which hns copies to
/// `a-1`) and to read the hierarchy everywhere: the rows of `a` and `a-1`, and one line naming
/// the root and `b`.
#[tokio::test]
async fn a_user_sees_the_namespaces_they_may_read_and_one_line_for_the_rest() {
    let (env, client) = Env::with_admin().await;
    let t = Subtree::new(&client, "sg-rbac").await.with_pods(&client).await;
    let root = t.root.as_str();
    let user = unique("sg-dev");
    let as_user = format!("--as={user}");
    ok(env.kubectl(&[
        "create",
        "rolebinding",
        "hier",
        "-n",
        root,
        "--clusterrole=hns-view",
        &format!("--user={user}"),
    ]));
    ok(env.kubectl(&["create", "role", "pod-lister", "-n", &t.a, "--verb=list", "--resource=pods"]));
    ok(env.kubectl(&[
        "create",
        "rolebinding",
        "pods",
        "-n",
        &t.a,
        "--role=pod-lister",
        &format!("--user={user}"),
    ]));

    let expected_rows = [(t.a.as_str(), "a-web"), (&t.a1, "leaf-db"), (&t.a1, "leaf-web")];
    let warning = format!(
        "Warning: cannot list pods in 2 of 4 namespaces of {root}'s subtree (forbidden): {root}, {}\n",
        t.b
    );
    let out = eventually("the user's rights copied down the subtree", WAIT, || async {
        let out = hns(&env, &["get", "pods", "-n", root, &as_user]);
        (rows(&stdout(&out)) == expected_rows && stderr(&out) == warning).then_some(out)
    })
    .await;
    assert!(out.status.success(), "something listed: success");
    assert!(stdout(&out).starts_with("NAMESPACE "), "{}", stdout(&out));
    // What kubectl itself says of each namespace, as that user.
    for ns in [&t.a, &t.a1] {
        ok(env.kubectl(&["get", "pods", "-n", ns, &as_user]));
    }
    for ns in [root, &t.b] {
        assert!(fails(env.kubectl(&["get", "pods", "-n", ns, &as_user])).contains("forbidden"));
    }

    // Nothing readable: the server's refusal, as kubectl would print it for one namespace.
    let err = fails(hns(&env, &["get", "pods", "-n", root, "--subtree=false", &as_user]));
    assert_eq!(
        err,
        format!("Error: pods is forbidden: User \"{user}\" cannot list resource \"pods\" in API group \"\" in the namespace \"{root}\"\n")
    );
    let err = fails(hns(&env, &["get", "pods", "-n", &t.b, &as_user]));
    assert!(err.starts_with("Error: pods is forbidden: ") && err.contains(&format!("\"{}\"", t.b)), "{err}");
    // Not even ROOT's place in the hierarchy readable: still a refusal about pods.
    let nobody = format!("--as={}", unique("nobody"));
    let err = fails(hns(&env, &["get", "pods", "-n", root, &nobody]));
    let last = err.lines().last().unwrap_or_default();
    assert!(err.starts_with(&format!("Warning: listing {root} alone: its subtree cannot be read")), "{err}");
    assert!(last.starts_with("Error: pods is forbidden: ") && last.contains(&format!("\"{root}\"")), "{err}");
    delete_tree(&client, root).await;
}

#[tokio::test]
async fn kinds_that_cannot_be_listed_in_a_subtree() {
    let (env, client, root) = Env::with_namespace("sg-kinds").await;

    let out = hns(&env, &["get", "foo", "-n", &root]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "Error: the server doesn't have a resource type \"foo\"\n");
    let theirs = fails(env.kubectl(&["get", "foo", "-n", &root]));
    assert!(theirs.contains("the server doesn't have a resource type \"foo\""), "kubectl's words: {theirs}");
    let err = fails(hns(&env, &["get", "nodes", "-n", &root]));
    assert_eq!(err, "Error: nodes are not namespaced, so no namespace's subtree holds any: list them with kubectl get nodes\n");
    let err = fails(hns(&env, &["get", "pods", "-n", "sg-no-such-namespace"]));
    assert_eq!(err, "Error: namespace \"sg-no-such-namespace\" not found\n");
    // resource.group resolves as kubectl resolves it, also for hns's own kinds.
    let hc = ok(hns(&env, &["get", "hierarchyconfigurations.hnc.x-k8s.io", "-n", &root, "-o", "name"]));
    assert_eq!(hc, "hierarchyconfiguration.hnc.x-k8s.io/hierarchy\n");
    assert_eq!(
        hc,
        ok(env.kubectl(&["get", "hierarchyconfigurations.hnc.x-k8s.io", "-n", &root, "-o", "name"]))
    );
    delete_namespaces(&client, &[&root]).await;
}
