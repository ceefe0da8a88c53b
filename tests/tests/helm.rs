//! The Helm chart (charts/hns) with the real helm (hack/build-helm.sh builds it from the Go module
//! proxy): `helm lint`, values the schema refuses, and the renders compared with the manifests
//! `make manifests` writes, so that the chart and deploy/*.yaml cannot drift. These need no
//! cluster. The chart's life on a cluster (install, upgrade, rollback, uninstall) is
//! `helm_lifecycle_on_nodes`, run by hack/availability.sh on its node cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use hns_e2e::{create_namespace, create_subns, eventually, fails, ok, Env};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, PostParams};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn helm_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let script = root().join("hack/build-helm.sh");
        let out = Command::new("bash").arg(&script).stderr(Stdio::inherit()).output().expect("bash runs");
        assert!(out.status.success(), "{} failed", script.display());
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

fn helm(args: &[&str]) -> Output {
    Command::new(helm_binary()).args(args).current_dir(root()).output().expect("helm runs")
}

/// `helm template` of charts/hns as release hns in hns-system, with `--set` values.
fn render(sets: &[&str]) -> Vec<Value> {
    let mut args = vec!["template", "hns", "charts/hns", "--namespace", "hns-system"];
    for s in sets {
        args.extend(["--set", s]);
    }
    documents(&ok(helm(&args)))
}

/// The objects of a multi-document YAML stream, as JSON values, empty documents left out.
fn documents(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_str_multiple(yaml).expect("valid YAML");
    documents.into_iter().filter(|v| !v.is_null()).collect()
}

fn manifest(file: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(root().join(file)).expect("the manifest is there"))
}

/// What Helm adds and a kubectl install does not have: the chart's own labels.
const CHART_ONLY_LABELS: [&str; 5] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/version",
];

fn without_chart_metadata(mut object: Value) -> Value {
    let metadata = object["metadata"].as_object_mut().expect("metadata");
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        labels.retain(|k, _| !CHART_ONLY_LABELS.contains(&k.as_str()));
        if labels.is_empty() {
            metadata.remove("labels");
        }
    }
    object
}

/// Objects by `kind namespace/name`, for a comparison that names what differs.
fn by_identity(objects: Vec<Value>) -> std::collections::BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(without_chart_metadata)
        .map(|o| {
            let id = format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["namespace"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("?")
            );
            (id, o)
        })
        .collect()
}

/// Fails naming each object that is in one and not the other, or differs.
fn assert_same(chart: Vec<Value>, manifest_file: &str, manifest: Vec<Value>) {
    let (chart, manifest) = (by_identity(chart), by_identity(manifest));
    let mut differences = Vec::new();
    for id in chart.keys().chain(manifest.keys()).collect::<std::collections::BTreeSet<_>>() {
        match (chart.get(id), manifest.get(id)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => differences.push(format!(
                "{id} differs:\n--- chart\n{}\n--- {manifest_file}\n{}",
                serde_saphyr::to_string(a).unwrap(),
                serde_saphyr::to_string(b).unwrap()
            )),
            (Some(_), None) => differences.push(format!("{id}: in the chart, not in {manifest_file}")),
            (None, _) => differences.push(format!("{id}: in {manifest_file}, not in the chart")),
        }
    }
    assert!(
        differences.is_empty(),
        "the chart's render and {manifest_file} have drifted apart (change both, then `make manifests`):\n{}",
        differences.join("\n")
    );
}

fn without_kind(objects: Vec<Value>, kind: &str) -> Vec<Value> {
    objects.into_iter().filter(|o| o["kind"] != kind).collect()
}

#[test]
fn helm_lint_passes_strict() {
    ok(helm(&["lint", "--strict", "charts/hns"]));
    ok(helm(&["lint", "--strict", "charts/hns", "--set", "certificates.source=cert-manager"]));
}

#[test]
fn the_default_render_is_deploy_hns_yaml() {
    // Helm keeps its release in the release namespace, so it must exist before the chart's
    // objects: `helm install --create-namespace` makes it, not the chart.
    assert_same(render(&[]), "deploy/hns.yaml", without_kind(manifest("deploy/hns.yaml"), "Namespace"));
}

#[test]
fn the_cert_manager_render_is_deploy_hns_cert_manager_yaml() {
    assert_same(
        render(&["certificates.source=cert-manager"]),
        "deploy/hns-cert-manager.yaml",
        without_kind(manifest("deploy/hns-cert-manager.yaml"), "Namespace"),
    );
}

#[test]
fn the_prometheus_rule_render_is_deploy_hns_prometheusrule_yaml() {
    let rules = render(&["metrics.prometheusRule.enabled=true"])
        .into_iter()
        .filter(|o| o["kind"] == "PrometheusRule");
    assert_same(
        rules.collect(),
        "deploy/hns-prometheusrule.yaml",
        manifest("deploy/hns-prometheusrule.yaml"),
    );
}

#[test]
fn a_typo_or_a_wrong_value_is_an_error() {
    for (set, named) in [
        ("replica=3", "replica"),
        ("image.digst=sha256:0", "digst"),
        ("certificates.source=vault", "source"),
        ("image.digest=latest", "digest"),
        ("viewAuthorization=everyone", "viewAuthorization"),
        ("replicas=0", "replicas"),
        ("extraArgs[0]=workers=4", "extraArgs"),
        ("podLabels.app\\.kubernetes\\.io/name=x", "app.kubernetes.io/name"),
        ("propagatedKinds[0].apiGroup=*", "apiGroup"),
    ] {
        let err = fails(helm(&["template", "hns", "charts/hns", "--set", set]));
        assert!(err.contains("values don't meet the specifications of the schema"), "{set}: {err}");
        assert!(err.contains(named), "{set}: the error names {named}: {err}");
    }
}

/// The container's arguments of the Deployment in a render.
fn args(objects: &[Value]) -> Vec<String> {
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment");
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone()).unwrap()
}

#[test]
fn values_become_hns_apiserver_flags() {
    let defaults = args(&render(&[]));
    let objects = render(&[
        "excludedNamespaces={kube-system,monitoring}",
        "includedNamespaceRegex=team-.*",
        "labelLoneNamespaces=false",
        "managedNamespaceLabels={env}",
        "unpropagatedLabels={}",
        "noPropagationLabels={owner=ops}",
        "viewAuthorization=review",
        "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ]);
    let flags = args(&objects);
    let added: Vec<&String> = flags.iter().filter(|f| !defaults.contains(f)).collect();
    assert_eq!(
        added,
        [
            "--excluded-namespace=kube-system",
            "--excluded-namespace=monitoring",
            "--excluded-namespace=hns-system",
            "--included-namespace-regex=team-.*",
            "--label-lone-namespaces=false",
            "--managed-namespace-label=env",
            "--nopropagation-label=owner=ops",
            "--unpropagated-label=",
            "--view-authorization=review",
        ],
        "{flags:?}"
    );
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "hns-apiserver:v0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    // Without lone namespaces' labels, kube-apiserver calls the labelling webhook only for a
    // namespace created with hns's keys (as config/components/unlabelled-lone-namespaces).
    let mutating = objects.iter().find(|o| o["kind"] == "MutatingWebhookConfiguration").unwrap();
    assert_eq!(mutating["webhooks"][0]["matchConditions"][1]["name"], "has-hns-keys");
}

#[test]
fn another_namespace_is_named_wherever_hns_refers_to_itself() {
    let out = ok(helm(&["template", "hns", "charts/hns", "--namespace", "platform"]));
    assert!(!out.contains("hns-system"), "hns-system is still named:\n{out}");
    let objects = documents(&out);
    assert!(
        args(&objects).contains(&"--hns-identity=system:serviceaccount:platform:hns-apiserver".to_string())
    );
    assert!(args(&objects).contains(&"--excluded-namespace=platform".to_string()));
    assert!(out.contains("request.userInfo.username != 'system:serviceaccount:platform:hns-apiserver'"));
}

#[test]
fn extra_propagated_kinds_get_aggregated_cluster_roles() {
    let objects = render(&[
        "propagatedKinds[0].apiGroup=monitoring.coreos.com",
        "propagatedKinds[0].resources={prometheusrules}",
    ]);
    let role = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "hns-propagate-monitoring-coreos-com-prometheusrules")
        .expect("the kind's ClusterRole");
    assert_eq!(role["metadata"]["labels"]["hnc.x-k8s.io/aggregate-to-propagation"], "true");
    assert_eq!(role["rules"][0]["apiGroups"][0], "monitoring.coreos.com");
    assert_eq!(role["rules"][0]["resources"][0], "prometheusrules");
}

#[test]
fn the_service_monitor_scrapes_every_replica_over_verified_tls() {
    let objects = render(&["metrics.serviceMonitor.enabled=true"]);
    let monitor = objects.iter().find(|o| o["kind"] == "ServiceMonitor").expect("a ServiceMonitor");
    let service = objects.iter().find(|o| o["kind"] == "Service").unwrap();
    for (k, v) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&service["metadata"]["labels"][k], v, "the ServiceMonitor selects hns's Service by {k}");
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "https");
    assert_eq!(endpoint["tlsConfig"]["serverName"], "hns-apiserver.hns-system.svc");
    assert_eq!(endpoint["tlsConfig"]["ca"]["secret"]["name"], "hns-serving-cert");
}

#[test]
fn a_single_replica_gets_no_disruption_budget_that_would_block_drains() {
    let budgets =
        |sets: &[&str]| render(sets).into_iter().filter(|o| o["kind"] == "PodDisruptionBudget").count();
    assert_eq!(budgets(&[]), 1);
    assert_eq!(budgets(&["replicas=1"]), 0);
    assert_eq!(budgets(&["podDisruptionBudget.enabled=false"]), 0);
}

// --- on a cluster -------------------------------------------------------------------------

/// helm against the test cluster, in the release namespace hns-system.
fn helm_on(env: &Env, args: &[&str]) -> String {
    let kubeconfig = env.kubeconfig.to_str().unwrap();
    let out = helm(&[args, &["--namespace", "hns-system", "--kubeconfig", kubeconfig]].concat());
    eprintln!("helm {}: {}", args[0], String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or(""));
    ok(out)
}

/// `repository:tag` split at the tag's colon.
fn image_values(image: &str) -> [String; 2] {
    let (repository, tag) = image.rsplit_once(':').expect("an image reference with a tag");
    [format!("image.repository={repository}"), format!("image.tag={tag}")]
}

/// The chart to upgrade from: HNS_PREVIOUS_CHART (the previous commit's, when it has one), else
/// this one.
fn previous_chart() -> String {
    std::env::var("HNS_PREVIOUS_CHART")
        .ok()
        .filter(|dir| Path::new(dir).join("Chart.yaml").exists())
        .unwrap_or_else(|| "charts/hns".into())
}

/// hns serves: its APIService is Available and a subnamespace can be made under `root`.
async fn serves(env: &Env, root: &str, child: &str) {
    ok(env.kubectl(&[
        "wait",
        "--for=condition=Available",
        "--timeout=180s",
        "apiservice/v1alpha2.hnc.x-k8s.io",
    ]));
    let client = env.admin().await;
    eventually(&format!("subnamespace {child} of {root}"), Duration::from_secs(120), || async {
        create_subns(&client, root, child).await.ok().map(|_| ())
    })
    .await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually(&format!("namespace {child}"), Duration::from_secs(60), || async {
        namespaces.get_opt(child).await.ok().flatten()
    })
    .await;
}

/// A Role in `root` and its copy in `child`.
async fn copied_role(env: &Env, root: &str, child: &str) {
    let client = env.admin().await;
    let roles: Api<Role> = Api::namespaced(client.clone(), root);
    if roles.get_opt("helm-policy").await.unwrap().is_none() {
        let role: Role =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "helm-policy"}, "rules": []}))
                .unwrap();
        roles.create(&PostParams::default(), &role).await.expect("create the Role");
    }
    let copies: Api<Role> = Api::namespaced(client, child);
    eventually(&format!("the Role's copy in {child}"), Duration::from_secs(60), || async {
        copies.get_opt("helm-policy").await.ok().flatten()
    })
    .await;
}

/// Once hns's Deployment has rolled out, its field at `path` (a JSONPath).
fn rolled_out(env: &Env, path: &str) -> String {
    ok(env.kubectl(&["-n", "hns-system", "rollout", "status", "deployment/hns-apiserver", "--timeout=180s"]));
    let jsonpath = format!("jsonpath={path}");
    ok(env.kubectl(&["-n", "hns-system", "get", "deployment/hns-apiserver", "-o", &jsonpath]))
}

/// The chart's whole life on hack/availability.sh's node cluster, before hns is installed there
/// with kubectl: install (the previous chart with the previous image, one replica), upgrade
/// (this chart and image, two replicas), rollback, uninstall. hns serves after each step, and
/// after the uninstall every namespace and every propagated copy is still there.
#[tokio::test]
async fn helm_lifecycle_on_nodes() {
    let (Ok(image), Ok(previous_image)) = (std::env::var("HNS_IMAGE"), std::env::var("HNS_PREVIOUS_IMAGE"))
    else {
        eprintln!("helm_lifecycle_on_nodes: run by hack/availability.sh (HNS_IMAGE, HNS_PREVIOUS_IMAGE) on a cluster without hns");
        return;
    };
    if std::env::var_os("HNS_HELM_LIFECYCLE").is_none() {
        eprintln!("helm_lifecycle_on_nodes: hns is installed already; hack/availability.sh runs this first");
        return;
    }
    let (env, client) = Env::with_admin().await;
    let [repository, tag] = image_values(&previous_image);
    helm_on(
        &env,
        &[
            "install",
            "hns",
            &previous_chart(),
            "--create-namespace",
            "--set",
            &repository,
            "--set",
            &tag,
            "--set",
            "replicas=1",
            "--wait",
            "--timeout=5m",
        ],
    );
    let root = create_namespace(&client, "helm-root", &[]).await;
    serves(&env, &root, "helm-a").await;
    copied_role(&env, &root, "helm-a").await;

    let [repository, tag] = image_values(&image);
    helm_on(
        &env,
        &["upgrade", "hns", "charts/hns", "--set", &repository, "--set", &tag, "--wait", "--timeout=5m"],
    );
    let ready = rolled_out(&env, "{.status.readyReplicas}");
    assert_eq!(ready, "2", "the upgrade's two replicas are ready");
    serves(&env, &root, "helm-b").await;
    copied_role(&env, &root, "helm-b").await;

    helm_on(&env, &["rollback", "hns", "1", "--wait", "--timeout=5m"]);
    let image_now = rolled_out(&env, "{.spec.template.spec.containers[0].image}");
    assert_eq!(image_now, previous_image, "the rollback brought back the first revision's image");
    serves(&env, &root, "helm-c").await;
    copied_role(&env, &root, "helm-c").await;

    helm_on(&env, &["uninstall", "hns", "--wait", "--timeout=5m"]);
    assert!(
        fails(env.kubectl(&["get", "apiservice", "v1alpha2.hnc.x-k8s.io"])).contains("NotFound"),
        "the APIService went with the release"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [root.as_str(), "helm-a", "helm-b", "helm-c"] {
        let live =
            namespaces.get(ns).await.unwrap_or_else(|e| panic!("namespace {ns} survives the uninstall: {e}"));
        assert!(live.metadata.deletion_timestamp.is_none(), "namespace {ns} is not being deleted");
    }
    for ns in ["helm-a", "helm-b", "helm-c"] {
        let roles: Api<Role> = Api::namespaced(client.clone(), ns);
        roles
            .get("helm-policy")
            .await
            .unwrap_or_else(|e| panic!("the copy in {ns} survives the uninstall: {e}"));
    }
    // Ordinary namespaces now; hns, installed next by kubectl, starts without them.
    hns_e2e::delete_namespaces(&client, &[root.as_str(), "helm-a", "helm-b", "helm-c"]).await;
}
