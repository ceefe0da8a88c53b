//! `kubectl hns diagnose`, end to end: each cause of a namespace stuck in Terminating is
//! reproduced for real, then diagnosed through the real kubectl plugin dispatch; the dry run
//! must change nothing, `--fix --yes` must make the namespace go away, and objects in other
//! namespaces must stay untouched.
//!
//! An unavailable APIService blocks the deletion of every namespace in the cluster, so these
//! tests run one at a time (a process-wide lock, and `--test-threads=1` in `hack/e2e.sh`, which
//! runs this file apart from the others). They need no hns: diagnose works on any cluster.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hns_e2e::*;
use serde_json::Value;
use tokio::sync::{Mutex, MutexGuard};

/// One scenario at a time: see the module docs.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// How long the namespace controller gets to write its conditions.
const WAIT: Duration = Duration::from_secs(90);

const DEAD_API_SERVICE: &str = "v1.dead.example.com";

// === helpers ===

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kubectl apply -f -` with `yaml`.
fn apply(env: &Env, yaml: &str) {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", &env.kubeconfig)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    ok(child.wait_with_output().unwrap());
}

/// `kubectl get … -o jsonpath=PATH`, or `None` when the object does not exist.
fn get(env: &Env, what: &[&str], path: &str) -> Option<String> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let jsonpath = format!("jsonpath={path}");
    args.extend(["-o", &jsonpath]);
    let out = env.kubectl(&args);
    if out.status.success() {
        return Some(stdout(&out));
    }
    let err = stderr(&out);
    assert!(err.contains("NotFound") || err.contains("not found"), "kubectl {args:?}: {err}");
    None
}

/// uid and resourceVersion: any write changes them.
fn version(env: &Env, what: &[&str]) -> Option<String> {
    get(env, what, "{.metadata.uid}/{.metadata.resourceVersion}")
}

/// Waits until namespace `ns` has condition `type_` with status True.
async fn condition(env: &Env, ns: &str, type_: &str) {
    let path = format!("{{.status.conditions[?(@.type==\"{type_}\")].status}}");
    eventually(&format!("{type_} on {ns}"), WAIT, || async {
        (get(env, &["namespace", ns], &path).as_deref() == Some("True")).then_some(())
    })
    .await;
}

/// A scenario's start: its turn (scenarios run one at a time: see the module docs), the
/// environment, and the clean-up, which ends the turn once it has undone the scenario.
async fn turn() -> (Env, Cleanup) {
    let turn = SERIAL.lock().await;
    let env = Env::get();
    let cleanup = Cleanup::new(&env, turn);
    (env, cleanup)
}

/// [`turn`], and the name of a namespace of the scenario's own, `PREFIX-…`, which the clean-up
/// removes (it is not created yet).
async fn scenario(prefix: &str) -> (Env, Cleanup, String) {
    let (env, mut cleanup) = turn().await;
    let ns = unique(prefix);
    cleanup.namespace(&ns);
    (env, cleanup, ns)
}

/// Asserts that `report` contains each of `lines`, naming the first one missing.
fn assert_contains<S: AsRef<str>>(report: &str, lines: impl IntoIterator<Item = S>) {
    for line in lines {
        let line = line.as_ref();
        assert!(report.contains(line), "missing {line:?} in:\n{report}");
    }
}

/// Deletes namespace `ns` without waiting for it to go.
fn delete_now(env: &Env, ns: &str) {
    ok(env.kubectl(&["delete", "namespace", ns, "--wait=false"]));
}

/// Makes namespace `ns` with `finalizer` in its metadata and deletes it; returns once the
/// namespace controller is done with its part (its own `kubernetes` finalizer gone), so that the
/// namespace is stuck on `finalizer` alone and the next write to it is the test's.
async fn deleted_and_held_by(env: &Env, ns: &str, finalizer: &str) {
    apply(
        env,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}, finalizers: [{finalizer}]}}\n"),
    );
    delete_now(env, ns);
    eventually("the namespace controller is done with its part", WAIT, || async {
        let f = get(env, &["namespace", ns], "{.spec.finalizers}")?;
        (!f.contains("kubernetes")).then_some(())
    })
    .await;
}

/// What must survive a scenario untouched: a namespace with a ConfigMap, and optionally an
/// object carrying the same finalizer as the scenario's.
struct Witness {
    objects: Vec<(Vec<String>, String)>,
}

impl Witness {
    fn new(env: &Env, cleanup: &mut Cleanup, extra: Option<&str>) -> Witness {
        let ns = unique("diag-witness");
        cleanup.namespace(&ns);
        ok(env.kubectl(&["create", "namespace", &ns]));
        ok(env.kubectl(&["create", "configmap", "witness", "-n", &ns, "--from-literal=a=b"]));
        let mut what = vec![vec!["namespace".to_string(), ns.clone()]];
        what.push(vec!["configmap".into(), "witness".into(), "-n".into(), ns.clone()]);
        if let Some(kind) = extra {
            apply(env, &widget_yaml(kind, &ns));
            cleanup.unfinalize(kind, &ns);
            what.push(vec![kind_plural(kind), "w".into(), "-n".into(), ns.clone()]);
        }
        let objects = what
            .into_iter()
            .map(|w| {
                let args: Vec<&str> = w.iter().map(String::as_str).collect();
                let v = version(env, &args).expect("witness exists");
                (w, v)
            })
            .collect();
        Witness { objects }
    }

    fn assert_untouched(&self, env: &Env) {
        for (what, before) in &self.objects {
            let args: Vec<&str> = what.iter().map(String::as_str).collect();
            assert_eq!(version(env, &args).as_ref(), Some(before), "{what:?} was changed");
        }
    }
}

/// Undoes a scenario, whatever happened: the dead APIService and webhooks first (they block
/// every deletion), then finalizers, namespaces and CRDs.
struct Cleanup {
    /// The scenario's turn, held until the clean-up is done (fields drop after [`Drop::drop`]).
    _turn: MutexGuard<'static, ()>,
    kubeconfig: PathBuf,
    api_service: bool,
    webhooks: Vec<String>,
    finalized: Vec<(String, String)>,
    namespaces: Vec<String>,
    crds: Vec<String>,
    cluster_rbac: Vec<String>,
}

impl Cleanup {
    fn new(env: &Env, turn: MutexGuard<'static, ()>) -> Cleanup {
        Cleanup {
            _turn: turn,
            kubeconfig: env.kubeconfig.clone(),
            api_service: false,
            webhooks: Vec::new(),
            finalized: Vec::new(),
            namespaces: Vec::new(),
            crds: Vec::new(),
            cluster_rbac: Vec::new(),
        }
    }

    fn namespace(&mut self, ns: &str) {
        self.namespaces.push(ns.to_string());
    }

    fn unfinalize(&mut self, kind: &str, ns: &str) {
        self.finalized.push((kind_plural(kind), ns.to_string()));
    }

    fn run(&self, args: &[&str]) {
        let _ = kubectl_with(&self.kubeconfig, args);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.api_service {
            self.run(&["delete", "apiservice", DEAD_API_SERVICE, "--ignore-not-found"]);
            self.run(&["delete", "service", "diag-dead", "-n", "default", "--ignore-not-found"]);
        }
        for w in &self.webhooks {
            self.run(&["delete", "validatingwebhookconfiguration", w, "--ignore-not-found"]);
        }
        let none = r#"{"metadata":{"finalizers":null}}"#;
        for (plural, ns) in &self.finalized {
            self.run(&["patch", plural, "w", "-n", ns, "--type", "merge", "-p", none]);
        }
        for ns in &self.namespaces {
            self.run(&["patch", "namespace", ns, "--type", "merge", "-p", none]);
            self.run(&["delete", "namespace", ns, "--ignore-not-found", "--wait=false"]);
            // spec.finalizers can only be changed through the finalize subresource.
            drop_foreign_spec_finalizers(&self.kubeconfig, ns);
        }
        for name in &self.cluster_rbac {
            self.run(&["delete", "clusterrolebinding", name, "--ignore-not-found"]);
            self.run(&["delete", "clusterrole", name, "--ignore-not-found"]);
        }
        for crd in &self.crds {
            self.run(&["delete", "crd", crd, "--ignore-not-found", "--timeout=60s"]);
        }
    }
}

fn drop_foreign_spec_finalizers(kubeconfig: &Path, ns: &str) {
    let out = kubectl_with(kubeconfig, &["get", "namespace", ns, "-o", "json"]);
    let Ok(mut obj) = serde_json::from_slice::<Value>(&out.stdout) else { return };
    let keep: Vec<Value> = obj["spec"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter(|f| *f == "kubernetes").cloned().collect())
        .unwrap_or_default();
    obj["spec"]["finalizers"] = Value::Array(keep);
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(["replace", "--raw", &format!("/api/v1/namespaces/{ns}/finalize"), "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl");
    let _ = child.stdin.take().unwrap().write_all(obj.to_string().as_bytes());
    let _ = child.wait();
}

/// Creates APIService `v1.dead.example.com`, served by an ExternalName Service to a localhost
/// port where nothing listens, and waits until the aggregator marks it unavailable.
async fn dead_api_service(env: &Env, cleanup: &mut Cleanup) {
    cleanup.api_service = true;
    apply(
        env,
        &format!(
            r#"apiVersion: v1
kind: Service
metadata: {{name: diag-dead, namespace: default}}
spec: {{type: ExternalName, externalName: localhost}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {DEAD_API_SERVICE}}}
spec:
  group: dead.example.com
  version: v1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{namespace: default, name: diag-dead, port: 1}}
"#
        ),
    );
    let path = "{.status.conditions[?(@.type==\"Available\")].status}";
    eventually("the dead APIService is unavailable", WAIT, || async {
        (get(env, &["apiservice", DEAD_API_SERVICE], path).as_deref() == Some("False")).then_some(())
    })
    .await;
}

/// Kind `Widget` of group `<group>`, i.e. CRD `widgets.<group>`: `kind` is the group here.
fn kind_plural(group: &str) -> String {
    format!("widgets.{group}")
}

/// Creates the CRD `widgets.<group>` and waits until it is established.
fn widget_crd(env: &Env, cleanup: &mut Cleanup, group: &str) {
    cleanup.crds.push(kind_plural(group));
    apply(
        env,
        &format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"#
        ),
    );
    ok(env.kubectl(&[
        "wait",
        "--for=condition=established",
        &format!("crd/widgets.{group}"),
        "--timeout=60s",
    ]));
}

/// Makes namespace `ns` holding a widget of `group` that carries a finalizer no controller
/// removes (and a witness with the same finalizer); returns the witness.
fn held_by_a_widget(env: &Env, cleanup: &mut Cleanup, group: &str, ns: &str) -> Witness {
    widget_crd(env, cleanup, group);
    let witness = Witness::new(env, cleanup, Some(group));
    cleanup.unfinalize(group, ns);
    ok(env.kubectl(&["create", "namespace", ns]));
    apply(env, &widget_yaml(group, ns));
    witness
}

/// A Widget `w` in `ns` with the finalizer `<group>/cleanup`, which no controller removes.
fn widget_yaml(group: &str, ns: &str) -> String {
    format!(
        "apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: w, namespace: {ns}, finalizers: [{group}/cleanup]}}\n"
    )
}

/// Asserts that `kubectl hns diagnose NS --fix --yes` makes `ns` go away, and returns its
/// stderr (the narration of the fix).
fn fix_removes(env: &Env, ns: &str) -> String {
    let out = hns(env, &["diagnose", ns, "--fix", "--yes", "--timeout", "120s"]);
    let narration = stderr(&out);
    assert_eq!(code(&out), 0, "fix failed:\n{}\n{narration}", stdout(&out));
    assert!(narration.contains(&format!("[{ns}] fixed: the namespace is gone")), "{narration}");
    assert_eq!(get(env, &["namespace", ns], "{.metadata.name}"), None, "{ns} is gone");
    narration
}

/// Runs the dry run, brief and with --details, asserts both report `ns` stuck (exit 2) and
/// returns the detailed report.
fn dry_run(env: &Env, ns: &str) -> String {
    let out = hns(env, &["diagnose", ns]);
    assert_eq!(code(&out), 2, "stuck means exit 2:\n{}{}", stdout(&out), stderr(&out));
    let brief = stdout(&out);
    // One stuck namespace is named in its heading; several, in the list each root cause blocks.
    let one = format!("Namespace {ns}: Terminating");
    assert!(
        brief.contains(&one) || brief.contains(&format!(" {ns},")) || brief.contains(&format!(" {ns}\n")),
        "{brief}"
    );
    let next = format!("Dry run: nothing was changed. To apply the remedies, asking before each: kubectl hns diagnose {ns} --fix\n");
    assert!(brief.contains(&next), "the command that fixes it: {brief}");
    assert!(!brief.contains("evidence:"), "evidence only with --details: {brief}");
    let out = hns(env, &["diagnose", ns, "--details"]);
    assert_eq!(code(&out), 2, "stuck means exit 2:\n{}{}", stdout(&out), stderr(&out));
    let report = stdout(&out);
    assert!(report.contains(&format!("Namespace {ns}: Terminating")), "{report}");
    assert!(report.contains("Dry run: nothing was changed."), "{report}");
    assert!(brief.lines().count() < report.lines().count(), "brief:\n{brief}\ndetailed:\n{report}");
    report
}

fn json(env: &Env, ns: &str) -> Value {
    let out = hns(env, &["diagnose", ns, "-o", "json"]);
    assert_eq!(code(&out), 2);
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn cause_kinds(doc: &Value) -> Vec<String> {
    doc["namespaces"][0]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_string())
        .collect()
}

/// Runs the dry run (see [`dry_run`]) and asserts that its detailed report contains each of
/// `lines`, that the JSON report names the causes `kinds`, in order, and that neither wrote to
/// any of `unchanged` (each named as `kubectl get` takes it); returns the detailed report.
fn diagnosed<S: AsRef<str>>(
    env: &Env,
    ns: &str,
    unchanged: &[&[&str]],
    lines: impl IntoIterator<Item = S>,
    kinds: &[&str],
) -> String {
    let before: Vec<_> = unchanged.iter().map(|what| version(env, what)).collect();
    let report = dry_run(env, ns);
    assert_contains(&report, lines);
    assert_eq!(cause_kinds(&json(env, ns)), kinds);
    for (what, before) in unchanged.iter().zip(before) {
        assert_eq!(version(env, what), before, "dry run");
    }
    report
}

// === scenarios ===

#[path = "diagnose/many.rs"]
mod many;
#[path = "diagnose/nodes.rs"]
mod nodes;

#[path = "diagnose/controllers.rs"]
mod controllers;

#[tokio::test]
async fn diagnose_nothing_stuck() {
    let (env, _cleanup, ns) = scenario("diag-active").await;
    ok(env.kubectl(&["create", "namespace", &ns]));
    let out = hns(&env, &["diagnose", &ns]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(&format!("Namespace {ns}: Active, not being deleted")), "{}", stdout(&out));
    // A name that is nowhere is most likely mistyped: an error, as with kubectl get.
    let out = hns(&env, &["diagnose", &ns, "diag-no-such-namespace"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let report = stdout(&out);
    assert!(report.contains("Namespace diag-no-such-namespace: not found"), "{report}");
    assert!(stderr(&out).contains("namespace(s) not found: diag-no-such-namespace"), "{}", stderr(&out));
    let help = ok(hns(&env, &["diagnose", "--help"]));
    assert!(help.contains("Exit codes:\n  0    nothing is stuck"), "{help}");
    let usage = hns(&env, &["diagnose"]);
    assert!(stderr(&usage).contains("--all-namespaces"), "names or -A are required");
}

#[tokio::test]
async fn diagnose_dead_api_service() {
    let (env, mut cleanup, ns) = scenario("diag-api").await;
    let witness = Witness::new(&env, &mut cleanup, None);
    ok(env.kubectl(&["create", "namespace", &ns]));
    ok(env.kubectl(&["create", "configmap", "data", "-n", &ns, "--from-literal=a=b"]));
    dead_api_service(&env, &mut cleanup).await;
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceDeletionDiscoveryFailure").await;

    let report = diagnosed(
        &env,
        &ns,
        &[&["apiservice", DEAD_API_SERVICE]],
        [
            "1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)",
            "evidence: condition NamespaceDeletionDiscoveryFailure names dead.example.com/v1",
            "evidence: served by Service default/diag-dead:1",
            "DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1.dead.example.com with preconditions",
            "risk: Deleting the APIService removes dead.example.com/v1",
            "refused without --force",
        ],
        &["unavailable_api_service"],
    );
    assert!(!report.contains("v1alpha2.hnc.x-k8s.io is unavailable"), "hns's APIService is fine");
    assert!(get(&env, &["namespace", &ns], "{.metadata.deletionTimestamp}").is_some());

    fix_removes(&env, &ns);
    assert_eq!(version(&env, &["apiservice", DEAD_API_SERVICE]), None);
    witness.assert_untouched(&env);
}

#[tokio::test]
async fn diagnose_crd_finalizer_without_controller() {
    let (env, mut cleanup, ns) = scenario("diag-cr").await;
    let group = "diag-finalizer.example.com";
    let witness = held_by_a_widget(&env, &mut cleanup, group, &ns);
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceFinalizersRemaining").await;

    diagnosed(&env, &ns, &[&["widgets", "w", "-n", &ns]], [
        "1 object(s) wait for finalizer diag-finalizer.example.com/cleanup, which no controller is removing",
        "diag-finalizer.example.com/cleanup on 1 deleted object(s): widgets.diag-finalizer.example.com/w (deleted",
        "it is removed by the controller of diag-finalizer.example.com (CRDs: widgets.diag-finalizer.example.com)",
        "condition NamespaceFinalizersRemaining: Some content in the namespace has finalizers remaining",
        r#"{"op":"test","path":"/metadata/finalizers/0","value":"diag-finalizer.example.com/cleanup"}"#,
        "may be orphaned",
    ], &["pending_finalizer"]);

    fix_removes(&env, &ns);
    witness.assert_untouched(&env);
}

#[tokio::test]
async fn diagnose_foreign_spec_finalizer() {
    let (env, mut cleanup, ns) = scenario("diag-spec").await;
    let witness = Witness::new(&env, &mut cleanup, None);
    apply(
        &env,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\nspec: {{finalizers: [openshift.com/origin]}}\n"),
    );
    delete_now(&env, &ns);
    // The namespace controller removes its own `kubernetes` and leaves the foreign entry.
    eventually("only the foreign spec finalizer left", WAIT, || async {
        let f = get(&env, &["namespace", &ns], "{.spec.finalizers}")?;
        (!f.contains("\"kubernetes\"")).then_some(())
    })
    .await;

    diagnosed(
        &env,
        &ns,
        &[&["namespace", &ns]],
        [
            "spec.finalizers holds openshift.com/origin, which is not the namespace controller's",
            "evidence: spec.finalizers: openshift.com/origin",
            &format!(
                "PUT /api/v1/namespaces/{ns}/finalize with spec.finalizers [\"openshift.com/origin\"] -> []"
            ),
        ],
        &["foreign_spec_finalizer"],
    );

    fix_removes(&env, &ns);
    witness.assert_untouched(&env);
}

#[tokio::test]
async fn diagnose_namespace_metadata_finalizer() {
    let (env, mut cleanup, ns) = scenario("diag-meta").await;
    let witness = Witness::new(&env, &mut cleanup, None);
    deleted_and_held_by(&env, &ns, "example.com/hold").await;

    let before = version(&env, &["namespace", &ns]);
    diagnosed(
        &env,
        &ns,
        &[],
        [
            "the namespace carries the finalizer example.com/hold",
            "evidence: metadata.finalizers: example.com/hold",
            "every deletion condition reports success: only finalizers hold the namespace",
            &format!("PATCH /api/v1/namespaces/{ns} (application/json-patch+json)"),
        ],
        &["namespace_finalizer"],
    );

    // --fix asks before each remedy: with no terminal and no --yes it refuses, changing nothing.
    let refused = hns(&env, &["diagnose", &ns, "--fix"]);
    assert_eq!(code(&refused), 3, "{}", stderr(&refused));
    assert!(stderr(&refused).contains("add --yes"));
    assert_eq!(version(&env, &["namespace", &ns]), before, "dry run and refusal");

    fix_removes(&env, &ns);
    witness.assert_untouched(&env);
}

/// A finalizer's domain names its owner only when it is exactly an API group: `example.com/keep`
/// is not the controller of `bars.example.com`'s, though that group is a subdomain of it.
#[tokio::test]
async fn diagnose_names_no_owner_on_a_near_match() {
    let (env, mut cleanup, ns) = scenario("diag-owner").await;
    widget_crd(&env, &mut cleanup, "bars.example.com");
    deleted_and_held_by(&env, &ns, "example.com/keep").await;

    let report = dry_run(&env, &ns);
    let owner = "it is removed by the controller behind example.com (owner unknown: no API group in this cluster is example.com)";
    assert!(report.contains(owner), "missing {owner:?} in:\n{report}");
    assert!(!report.contains("bars.example.com"), "a near match is no owner:\n{report}");
    fix_removes(&env, &ns);
}

/// A `failurePolicy: Fail` webhook `hook` on configmap DELETEs in namespace `ns` only, whose
/// Service does not exist.
fn dead_webhook(env: &Env, hook: &str, ns: &str) {
    apply(
        env,
        &format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {hook}}}
webhooks:
- name: deny.diag.example.com
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  clientConfig:
    service: {{namespace: default, name: diag-missing, port: 443}}
  rules:
  - {{operations: [DELETE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}
  namespaceSelector:
    matchLabels: {{kubernetes.io/metadata.name: {ns}}}
"#
        ),
    );
}

#[tokio::test]
async fn diagnose_dead_webhook_blocking_deletion() {
    let (env, mut cleanup) = turn().await;
    let witness = Witness::new(&env, &mut cleanup, None);
    let ns = unique("diag-hook");
    let hook = format!("{ns}-deny");
    cleanup.namespace(&ns);
    cleanup.webhooks.push(hook.clone());
    ok(env.kubectl(&["create", "namespace", &ns]));
    ok(env.kubectl(&["create", "configmap", "victim", "-n", &ns, "--from-literal=a=b"]));
    dead_webhook(&env, &hook, &ns);
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceDeletionContentFailure").await;

    let unchanged = [&["validatingwebhookconfiguration", &hook][..], &["configmap", "victim", "-n", &ns]];
    diagnosed(&env, &ns, &unchanged, [
        "1. admission webhook deny.diag.example.com fails closed and cannot be called",
        &format!("evidence: ValidatingWebhookConfiguration {hook}, webhook deny.diag.example.com: failurePolicy Fail, Service default/diag-missing:443 does not exist"),
        "failed calling webhook \"deny.diag.example.com\"",
        "it intercepts DELETE of",
        "configmaps/victim",
        &format!("DELETE /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{hook} with preconditions"),
        "2. ",
        &format!("DELETE /api/v1/namespaces/{ns}/configmaps/victim with preconditions"),
    ], &["dead_webhook", "undeleted_content"]);

    fix_removes(&env, &ns);
    assert_eq!(version(&env, &["validatingwebhookconfiguration", &hook]), None);
    witness.assert_untouched(&env);
}

#[tokio::test]
async fn diagnose_two_causes_at_once() {
    let (env, mut cleanup, ns) = scenario("diag-two").await;
    let group = "diag-two.example.com";
    let witness = held_by_a_widget(&env, &mut cleanup, group, &ns);
    dead_api_service(&env, &mut cleanup).await;
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceDeletionDiscoveryFailure").await;
    condition(&env, &ns, "NamespaceFinalizersRemaining").await;

    let report = dry_run(&env, &ns);
    let api = report.find("1. APIService v1.dead.example.com is unavailable").expect(&report);
    let fin = report.find("2. 1 object(s) wait for finalizer diag-two.example.com/cleanup").expect(&report);
    assert!(api < fin, "the APIService comes first");
    assert_eq!(cause_kinds(&json(&env, &ns)), ["unavailable_api_service", "pending_finalizer"]);
    assert!(version(&env, &["apiservice", DEAD_API_SERVICE]).is_some(), "dry run");

    let narration = fix_removes(&env, &ns);
    let first = narration.find("done: DELETE /apis/apiregistration.k8s.io").expect(&narration);
    let second =
        narration.find(&format!("done: PATCH /apis/{group}/v1/namespaces/{ns}/widgets/w")).expect(&narration);
    assert!(first < second, "fixed in order:\n{narration}");
    witness.assert_untouched(&env);
}

/// The issue's three levels: `h1` (cascading deletion) > `h1-c` > `h1-c-g`, each name made
/// unique. hns holds `h1` and `h1-c` for their subnamespaces only once they are deleted.
/// Returns them with the scenario's turn and a witness.
async fn three_levels() -> (Env, Cleanup, Witness, (String, String, String)) {
    let (env, mut cleanup) = turn().await;
    let witness = Witness::new(&env, &mut cleanup, None);
    let client = env.admin().await;
    let h1 = unique("diag-h1");
    let (c, g) = (format!("{h1}-c"), format!("{h1}-c-g"));
    for ns in [&h1, &c, &g] {
        cleanup.namespace(ns);
    }
    create_namespace(&client, &h1, &[]).await;
    create_subns(&client, &h1, &c).await.expect("subnamespace h1-c");
    create_subns(&client, &c, &g).await.expect("subnamespace h1-c-g");
    allow_cascading_deletion(&client, &h1).await.expect("cascading deletion on h1");
    (env, cleanup, witness, (h1, c, g))
}

/// Whether `ns` carries hns's finalizer for its subnamespaces.
fn held_for_subnamespaces(env: &Env, ns: &str) -> bool {
    get(env, &["namespace", ns], "{.metadata.finalizers}")
        .is_some_and(|f| f.contains(hns_api::keys::HAS_SUBNAMESPACE_FINALIZER))
}

/// Runs `diagnose --fix --yes` on the top of `levels`, and asserts that it made `write` and no
/// other, and that all three namespaces are gone.
fn fixed_with_one_write(env: &Env, levels: [&String; 3], write: &str) {
    let out = &hns(env, &["diagnose", levels[0], "--fix", "--yes", "--timeout", "120s"]);
    let narration = stderr(out);
    assert_eq!(code(out), 0, "fix failed:\n{}\n{narration}", stdout(out));
    let writes: Vec<&str> = narration.lines().filter(|l| l.trim_start().starts_with("done:")).collect();
    assert_eq!(writes.len(), 1, "one write only:\n{narration}");
    assert!(writes[0].contains(write), "{narration}");
    for ns in levels {
        assert_eq!(get(env, &["namespace", ns], "{.metadata.name}"), None, "{ns} is gone");
    }
}

/// The issue's three levels: `h1` (cascading deletion) > `h1-c` > `h1-c-g`, where ConfigMap `w`
/// in `h1-c-g` carries a finalizer nothing removes. hns deletes the whole subtree with `h1`;
/// `h1-c-g` stays, and with it `h1-c` and `h1` (a parent is not gone before its subnamespaces).
/// Asked about `h1`, diagnose must follow the way down to that one object, and `--fix --yes`
/// must free all three by removing that one finalizer and nothing else.
#[tokio::test]
async fn diagnose_follows_a_stuck_subtree() {
    let (env, mut cleanup, witness, (h1, c, g)) = three_levels().await;
    cleanup.finalized.push(("configmaps".into(), g.clone()));
    apply(
        &env,
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: w, namespace: {g}, finalizers: [example.com/f]}}\n"),
    );
    ok(env.kubectl(&["delete", "namespace", &h1, "--wait=false"]));
    condition(&env, &g, "NamespaceFinalizersRemaining").await;
    for ns in [&h1, &c] {
        eventually("the namespace controller is done with h1 and h1-c", WAIT, || async {
            let f = get(&env, &["namespace", ns], "{.spec.finalizers}")?;
            (!f.contains("kubernetes")).then_some(())
        })
        .await;
        let phase = get(&env, &["namespace", ns], "{.status.phase}");
        assert_eq!(phase.as_deref(), Some("Terminating"), "{ns} waits for what is below it");
        assert!(held_for_subnamespaces(&env, ns), "{ns} is held by hns's finalizer");
    }

    let configmap = version(&env, &["configmap", "w", "-n", &g]);
    let out = hns(&env, &["diagnose", &h1, "--details"]);
    let report = stdout(&out);
    assert_eq!(code(&out), 2, "stuck means exit 2:\n{report}{}", stderr(&out));
    assert_contains(&report, [
        format!("1. {h1} waits for {c}, which waits for {g}: 1 object(s) wait for finalizer example.com/f, which no controller is removing"),
        format!("evidence: the way down: {h1} (Terminating) > {c} (Terminating) > {g} (Terminating)"),
        format!("PATCH /api/v1/namespaces/{g}/configmaps/w (application/json-patch+json)"),
        format!("Namespace {g} (below {h1} > {c}): Terminating"),
    ]);
    assert!(!report.contains("remove finalizer hnc.x-k8s.io/hasSubnamespace"), "never orphan:\n{report}");
    let doc: Value = serde_json::from_slice(&hns(&env, &["diagnose", &h1, "-o", "json"]).stdout).unwrap();
    assert_eq!(doc["namespaces"][0]["causes"][0]["kind"], "stuck_subtree");
    assert_eq!(doc["namespaces"][1]["path"], serde_json::json!([h1, c, g]));
    assert_eq!(version(&env, &["configmap", "w", "-n", &g]), configmap, "dry run");

    fixed_with_one_write(&env, [&h1, &c, &g], &format!("PATCH /api/v1/namespaces/{g}/configmaps/w"));
    witness.assert_untouched(&env);
}

/// The three levels held by a `failurePolicy: Fail` webhook whose backend is gone, intercepting
/// DELETEs in `h1-c-g` only: asked about `h1`, diagnose leads down to the webhook, and deleting
/// that webhook configuration (the one write) frees all three.
#[tokio::test]
async fn diagnose_follows_a_subtree_held_by_a_webhook() {
    let (env, mut cleanup, witness, (h1, c, g)) = three_levels().await;
    let hook = format!("{h1}-deny");
    cleanup.webhooks.push(hook.clone());
    ok(env.kubectl(&["create", "configmap", "victim", "-n", &g, "--from-literal=a=b"]));
    dead_webhook(&env, &hook, &g);
    ok(env.kubectl(&["delete", "namespace", &h1, "--wait=false"]));
    condition(&env, &g, "NamespaceDeletionContentFailure").await;

    let report = dry_run(&env, &h1);
    assert_contains(&report, [
        format!("1. {h1} waits for {c}, which waits for {g}: admission webhook deny.diag.example.com fails closed and cannot be called"),
        format!("DELETE /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{hook} with preconditions"),
    ]);
    fixed_with_one_write(
        &env,
        [&h1, &c, &g],
        &format!("DELETE /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{hook}"),
    );
    witness.assert_untouched(&env);
}

/// The three levels held by an unavailable APIService instead: all three stay Terminating.
/// Asked about `h1`, diagnose reports the namespaces below it too (the APIService once, in
/// `h1`), refuses to finalize `h1` while they exist, and deleting the APIService frees all three.
#[tokio::test]
async fn diagnose_follows_a_subtree_held_by_an_api_service() {
    let (env, mut cleanup, witness, (h1, c, g)) = three_levels().await;
    dead_api_service(&env, &mut cleanup).await;
    ok(env.kubectl(&["delete", "namespace", &h1, "--wait=false"]));
    for ns in [&h1, &c, &g] {
        condition(&env, ns, "NamespaceDeletionDiscoveryFailure").await;
    }

    let report = dry_run(&env, &h1);
    assert_contains(
        &report,
        [
            "1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)".to_string(),
            format!("finalizing it would orphan {c}, {g}, the namespace(s) below it that still exist"),
            format!("Namespace {g} (below {h1} > {c}): Terminating"),
            format!("Namespace {c} (below {h1}): Terminating"),
        ],
    );
    assert_eq!(cause_kinds(&json(&env, &h1)), ["unavailable_api_service"], "said once, in h1");

    let write = "DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1.dead.example.com";
    fixed_with_one_write(&env, [&h1, &c, &g], write);
    witness.assert_untouched(&env);
}

#[tokio::test]
async fn diagnose_stale_remedies_change_nothing() {
    use namespace_diagnose::{diagnose, scan, CauseKind, Error, Target};

    let (env, _cleanup, ns) = scenario("diag-stale").await;
    apply(
        &env,
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}, finalizers: [example.com/hold]}}\nspec: {{finalizers: [openshift.com/origin]}}\n"
        ),
    );
    delete_now(&env, &ns);
    // The namespace controller's own writes would change the version compared below.
    eventually("the namespace controller is done with its part", WAIT, || async {
        let f = get(&env, &["namespace", &ns], "{.spec.finalizers}")?;
        (!f.contains("kubernetes")).then_some(())
    })
    .await;
    let client = env.admin().await;
    let evidence = scan(&client, &Target::Named(vec![ns.clone()]), &()).await.unwrap();
    let diagnosis = diagnose(&evidence);
    let causes = &diagnosis.namespaces[0].causes;
    let remedy = |kind| {
        causes
            .iter()
            .find(|c| c.kind == kind)
            .and_then(|c| c.remedy.clone())
            .unwrap_or_else(|| panic!("{causes:?}"))
    };
    let patch = remedy(CauseKind::NamespaceFinalizer);
    let finalize = remedy(CauseKind::ForeignSpecFinalizer);

    // Someone else writes to the namespace after the diagnosis.
    ok(env.kubectl(&["label", "namespace", &ns, "touched=yes"]));
    let before = version(&env, &["namespace", &ns]);
    for action in patch.actions.iter().chain(&finalize.actions) {
        let result = action.apply(&client).await;
        assert!(matches!(result, Err(Error::Changed { .. })), "{}: {result:?}", action.describe());
    }
    assert_eq!(version(&env, &["namespace", &ns]), before, "nothing was written");
    let finalizers = get(&env, &["namespace", &ns], "{.metadata.finalizers} {.spec.finalizers}").unwrap();
    assert!(
        finalizers.contains("example.com/hold") && finalizers.contains("openshift.com/origin"),
        "{finalizers}"
    );
}

#[tokio::test]
async fn diagnose_with_read_rights_only() {
    let (env, mut cleanup, ns) = scenario("diag-read").await;
    let Some(local) = env.local_or_skip("diagnose_with_read_rights_only") else { return };
    let reader = unique("diag-reader");
    cleanup.cluster_rbac.push(reader.clone());
    ok(env.kubectl(&["create", "clusterrole", &reader, "--verb=get,list", "--resource=*.*"]));
    ok(env.kubectl(&["create", "clusterrolebinding", &reader, "--clusterrole", &reader, "--user", &reader]));
    let kubeconfig = local.user_kubeconfig(&reader, &[]);
    deleted_and_held_by(&env, &ns, "example.com/hold").await;

    let out = hns_with(&kubeconfig, &["diagnose", &ns]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    let report = stdout(&out);
    assert!(report.contains("the namespace carries the finalizer example.com/hold"), "{report}");
    assert!(report.contains("you lack the rights to: patch namespaces"), "{report}");

    let before = version(&env, &["namespace", &ns]);
    let out = hns_with(&kubeconfig, &["diagnose", &ns, "--fix", "--yes"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("you lack the rights to patch namespaces"), "{}", stderr(&out));
    assert_eq!(version(&env, &["namespace", &ns]), before, "nothing was written");
}

/// Not a check but figures, for `make bench`: how long diagnosing takes next to knsk's way
/// (one kubectl per namespaced type), on a cluster with at least 100 namespaced resource types
/// (custom resource definitions make up the difference). Five namespaces held by an
/// unavailable APIService.
/// Run with `cargo test -p hns-e2e --test diagnose -- --ignored --nocapture diagnose_bench`.
// Ignored in `make test` because it is a benchmark (figures, no assertion on time);
// `make bench` (hack/bench.sh) runs it with --ignored.
#[tokio::test]
#[ignore = "benchmark: prints figures"]
async fn diagnose_bench_scan() {
    const NAMESPACES: usize = 5;
    const RUNS: usize = 5;
    let (env, mut cleanup) = turn().await;
    let names: Vec<String> = (0..NAMESPACES).map(|_| unique("diag-bench")).collect();
    for ns in &names {
        cleanup.namespace(ns);
        ok(env.kubectl(&["create", "namespace", ns]));
    }
    let listed = stdout(&env.kubectl(&["api-resources", "--verbs=list", "--namespaced", "-o", "name"]))
        .lines()
        .count();
    let crds: Vec<Value> = (listed..100)
        .map(|i| {
            let name = format!("bench{i}s.bench.e2e.example.com");
            cleanup.crds.push(name.clone());
            serde_json::json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
                "spec": {"group": "bench.e2e.example.com", "scope": "Namespaced",
                    "names": {"plural": format!("bench{i}s"), "singular": format!("bench{i}"), "kind": format!("Bench{i}")},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
            })
        })
        .collect();
    if !crds.is_empty() {
        let list = std::env::temp_dir().join("hns-bench-crds.json");
        std::fs::write(
            &list,
            serde_json::json!({"apiVersion": "v1", "kind": "List", "items": crds}).to_string(),
        )
        .unwrap();
        ok(env.kubectl(&["apply", "-f", list.to_str().unwrap()]));
        let _ = std::fs::remove_file(&list);
        ok(env.kubectl(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=120s"]));
    }
    dead_api_service(&env, &mut cleanup).await;
    for ns in &names {
        ok(env.kubectl(&["delete", "namespace", ns, "--wait=false"]));
        condition(&env, ns, "NamespaceDeletionDiscoveryFailure").await;
    }
    let mut args = vec!["diagnose", "-o", "json"];
    args.extend(names.iter().map(String::as_str));

    let mut times = Vec::new();
    for _ in 0..RUNS {
        let start = std::time::Instant::now();
        let out = hns(&env, &args);
        times.push(start.elapsed());
        assert_eq!(code(&out), 2, "{}", stderr(&out));
    }
    times.sort();
    let doc: Value = serde_json::from_slice(&hns(&env, &args).stdout).unwrap();
    for n in doc["namespaces"].as_array().unwrap() {
        assert_eq!(n["causes"][0]["kind"], "unavailable_api_service");
    }

    // knsk: `kubectl api-resources --verbs=list --namespaced -o name | xargs -n 1 kubectl get -n NS`
    let start = std::time::Instant::now();
    let types = stdout(&env.kubectl(&["api-resources", "--verbs=list", "--namespaced", "-o", "name"]));
    let types: Vec<&str> = types.lines().collect();
    for ns in &names {
        for t in &types {
            let _ = env.kubectl(&["get", t, "-n", ns, "--no-headers"]);
        }
    }
    let knsk = start.elapsed();
    println!(
        "bench diagnose: {NAMESPACES} stuck namespaces, median {:?} (min {:?}, max {:?}) over {RUNS} runs",
        times[RUNS / 2],
        times[0],
        times[RUNS - 1]
    );
    println!("bench knsk-style: {} types x {NAMESPACES} namespaces, one kubectl each: {knsk:?}", types.len());
    fix_removes(&env, &names[0]);
}
