//! Hierarchical resource quotas end to end: CRUD through kubectl, refused limits (422 with field
//! causes, nothing written), the usage of a subtree of subnamespaces counted by the real quota
//! controller, hns's ResourceQuota per namespace with the smallest limit of nested quotas, a
//! move out lowering the usage, who may set a quota, the wait kubectl is told of while a namespace
//! joins a quota, and HNC's own plugin listing quotas.

use std::time::Duration;

use hns_api::quota::RESOURCE_QUOTA_NAME;
use hns_api::{keys, HierarchicalResourceQuota};
use hns_e2e::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ResourceQuota};
use kube::api::{ApiResource, DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// Quotas of `ns` as untyped objects, so that bodies the typed API would not allow can be sent.
fn dynamic(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<HierarchicalResourceQuota>(&()))
}

/// Creates quota `name` in `ns` with `hard`.
async fn create_quota(client: &Client, ns: &str, name: &str, hard: Value) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": hns_api::API_VERSION, "kind": "HierarchicalResourceQuota",
        "metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard},
    }))
    .unwrap();
    dynamic(client, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

/// `status.used` of quota `name` in `ns`.
async fn used(client: &Client, ns: &str, name: &str) -> Value {
    let q = dynamic(client, ns).get(name).await.unwrap();
    q.data["status"]["used"].clone()
}

/// Waits until `status.used` of quota `name` in `ns` is `want`.
async fn used_becomes(client: &Client, ns: &str, name: &str, want: Value) {
    eventually(&format!("status.used of {ns}/{name} to be {want}"), WAIT, || async {
        (used(client, ns, name).await == want).then_some(())
    })
    .await;
}

/// hns's ResourceQuota in `ns`, once it exists and the namespace is no longer pending.
async fn resource_quota(client: &Client, ns: &str) -> ResourceQuota {
    eventually(&format!("hns's ResourceQuota in {ns}, and {ns} no longer pending"), WAIT, || async {
        let rq = Api::<ResourceQuota>::namespaced(client.clone(), ns)
            .get_opt(RESOURCE_QUOTA_NAME)
            .await
            .ok()??;
        let n: Namespace = Api::all(client.clone()).get(ns).await.ok()?;
        let pending = n.metadata.labels.unwrap_or_default().contains_key(keys::HRQ_PENDING_LABEL);
        (!pending).then_some(rq)
    })
    .await
}

/// Waits until hns's ResourceQuota in `ns` is gone: `why` says what takes it away.
async fn resource_quota_gone(client: &Client, ns: &str, why: &str) {
    eventually(why, WAIT, || async {
        let rq =
            Api::<ResourceQuota>::namespaced(client.clone(), ns).get_opt(RESOURCE_QUOTA_NAME).await.ok()?;
        rq.is_none().then_some(())
    })
    .await;
}

/// Creates pod `name` in `ns` requesting `cpu`, retrying while Kubernetes' quota admission has
/// no usage for a new ResourceQuota yet or the namespace's ServiceAccount is not made yet.
async fn create_pod(client: &Client, ns: &str, name: &str, cpu: &str) {
    let pod = quotas::pod(name, cpu);
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(&format!("pod {ns}/{name} to be created"), WAIT, || async {
        match api.create(&PostParams::default(), &pod).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => Some(()),
            Err(_) => None,
        }
    })
    .await;
}

/// The namespace's labels and annotations, to show a refused request changed nothing.
async fn state_of(client: &Client, ns: &str) -> Value {
    let n: Namespace = Api::all(client.clone()).get(ns).await.unwrap();
    json!([n.metadata.labels, n.metadata.annotations])
}

#[tokio::test]
async fn quotas_are_created_listed_patched_and_deleted_with_kubectl() {
    let (env, client, team) = Env::with_namespace("hrq-crud").await;
    let manifest = format!(
        "apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\nmetadata:\n  name: team-budget\n  namespace: {team}\n\
         spec:\n  hard:\n    pods: 10\n    requests.cpu: \"1500m\"\n    limits.memory: 2Gi\n"
    );
    let file = manifest_file(&team, &manifest);
    let out = ok(env.kubectl(&["apply", "-f", &file]));
    assert!(out.contains("hierarchicalresourcequota.hnc.x-k8s.io/team-budget created"), "{out}");
    // A POST of a name taken is kube-apiserver's AlreadyExists.
    let again = env.kubectl(&["create", "-f", &file]);
    assert!(!again.status.success(), "a second create is refused");
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("AlreadyExists") && err.contains("\"team-budget\" already exists"), "{err}");

    let yaml = ok(env.kubectl(&["get", "hrq", "team-budget", "-n", &team, "-o", "json"]));
    let q: Value = serde_json::from_str(&yaml).unwrap();
    assert_eq!(q["spec"]["hard"], json!({"pods": "10", "requests.cpu": "1500m", "limits.memory": "2Gi"}));
    assert_eq!(q["status"]["hard"], q["spec"]["hard"]);
    assert!(q["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36), "{q}");
    assert!(q["metadata"]["creationTimestamp"].is_string(), "{q}");

    let table = ok(env.kubectl(&["get", "hrq", "-A"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "REQUEST", "LIMIT", "AGE"], "{table}");
    let row = table.lines().find(|l| l.starts_with(&team)).unwrap_or_else(|| panic!("{team} in {table}"));
    assert!(row.contains("pods: 0/10, requests.cpu: 0/1500m"), "{row}");
    assert!(row.contains("limits.memory: 0/2Gi"), "{row}");

    ok(env.kubectl(&[
        "patch",
        "hrq",
        "team-budget",
        "-n",
        &team,
        "--type=merge",
        "-p",
        r#"{"spec":{"hard":{"pods":"5","limits.memory":null}}}"#,
    ]));
    let q: Value =
        serde_json::from_str(&ok(env.kubectl(&["get", "hrq", "team-budget", "-n", &team, "-o", "json"])))
            .unwrap();
    assert_eq!(q["spec"]["hard"], json!({"pods": "5", "requests.cpu": "1500m"}));
    // The controller keeps the namespace's ResourceQuota at the quota's limits.
    eventually("the ResourceQuota to follow the patch", WAIT, || async {
        let rq = resource_quota(&client, &team).await;
        let hard = rq.spec?.hard?;
        (hard.get("pods")?.0 == "5" && !hard.contains_key("limits.memory")).then_some(())
    })
    .await;

    ok(env.kubectl(&["apply", "-f", &file]));
    let more = json!({"pods": "1"});
    create_quota(&client, &team, "second", more).await;
    // kubectl deletes one by one; deletecollection is a client's single call.
    let api = dynamic(&client, &team);
    let dry = kube::api::DeleteParams { dry_run: true, ..Default::default() };
    api.delete_collection(&dry, &kube::api::ListParams::default()).await.unwrap();
    assert_eq!(
        ok(env.kubectl(&["get", "hrq", "-n", &team, "-o", "name"])).lines().count(),
        2,
        "a dry run deletes nothing"
    );
    // Only `second` goes; `team-budget` stays for the single delete below.
    let only_second = kube::api::ListParams::default().fields("metadata.name=second");
    api.delete_collection(&kube::api::DeleteParams::default(), &only_second).await.unwrap();
    assert_eq!(
        ok(env.kubectl(&["get", "hrq", "-n", &team, "-o", "name"])).trim(),
        "hierarchicalresourcequota.hnc.x-k8s.io/team-budget"
    );

    let out = ok(env.kubectl(&["delete", "hrq", "team-budget", "-n", &team]));
    assert!(out.contains("deleted"), "{out}");
    let err = fails(env.kubectl(&["get", "hrq", "team-budget", "-n", &team]));
    assert!(err.contains("NotFound") || err.contains("not found"), "{err}");
    let ns: Namespace = Api::all(client.clone()).get(&team).await.unwrap();
    assert!(!ns.metadata.annotations.unwrap_or_default().contains_key(keys::RESOURCE_QUOTAS));
    resource_quota_gone(&client, &team, "the ResourceQuota to go with the last quota").await;
    delete_namespaces(&client, &[&team]).await;
}

#[tokio::test]
async fn bad_limits_are_refused_at_their_field_and_nothing_is_written() {
    let (env, client, team) = Env::with_namespace("hrq-invalid").await;
    let before = state_of(&client, &team).await;
    let cases = [
        (json!({"pods": "ten"}), "spec.hard.pods", "not a quantity"),
        (
            json!({"pods": "1", "no-such-resource": "1"}),
            "spec.hard.no-such-resource",
            "must be a standard resource",
        ),
        (json!({"requests.cpu": 1.5}), "spec.hard.requests.cpu", "write the quantity as a string (\"1.5\")"),
    ];
    for (hard, field, says) in cases {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": hns_api::API_VERSION, "kind": "HierarchicalResourceQuota",
            "metadata": {"name": "bad"}, "spec": {"hard": hard},
        }))
        .unwrap();
        let status =
            api_status(dynamic(&client, &team).create(&PostParams::default(), &obj).await.unwrap_err());
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{hard}: {}", status.message);
        let causes = status.details.map(|d| d.causes).unwrap_or_default();
        let cause =
            causes.iter().find(|c| c.field == field).unwrap_or_else(|| panic!("{field} in {causes:?}"));
        assert!(cause.message.contains(says), "{hard}: {}", cause.message);
        assert!(!status.message.contains("Quantity("), "no Debug rendering: {}", status.message);
    }
    // Three bad fields at once, of both sorts: all three are named.
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": hns_api::API_VERSION, "kind": "HierarchicalResourceQuota",
        "metadata": {"name": "bad"},
        "spec": {"hard": {"pods": "ten", "requests.cpu": "-1", "no-such-resource": "1", "secrets": "2"}},
    }))
    .unwrap();
    let status = api_status(dynamic(&client, &team).create(&PostParams::default(), &obj).await.unwrap_err());
    let mut fields: Vec<String> =
        status.details.map(|d| d.causes).unwrap_or_default().into_iter().map(|c| c.field).collect();
    fields.dedup(); // Kubernetes gives a resource it does not know two causes
    assert_eq!(
        fields,
        ["spec.hard.no-such-resource", "spec.hard.pods", "spec.hard.requests.cpu"],
        "{}",
        status.message
    );
    assert_eq!(state_of(&client, &team).await, before, "nothing written");
    let listed = ok(env.kubectl(&["get", "hrq", "-n", &team, "-o", "name"]));
    assert!(listed.trim().is_empty(), "{listed}");
    delete_namespaces(&client, &[&team]).await;
}

#[tokio::test]
async fn a_quota_counts_the_usage_of_its_whole_subtree() {
    let (env, client, root) = Env::with_namespace("hrq-root").await;
    let (a, b, c) = (format!("{root}-a"), format!("{root}-b"), format!("{root}-c"));
    create_subns(&client, &root, &a).await.unwrap();
    create_subns(&client, &a, &b).await.unwrap();
    create_subns(&client, &b, &c).await.unwrap();
    create_quota(&client, &root, "budget", json!({"requests.cpu": "2", "pods": "10"})).await;
    for ns in [&root, &a, &b, &c] {
        let rq = resource_quota(&client, ns).await;
        assert_eq!(
            rq.metadata.labels.unwrap_or_default().get(keys::HRQ_LABEL).map(String::as_str),
            Some("true")
        );
    }
    create_pod(&client, &b, "p1", "500m").await;
    create_pod(&client, &c, "p2", "500m").await;
    create_pod(&client, &c, "p3", "250m").await;
    used_becomes(&client, &root, "budget", json!({"pods": "3", "requests.cpu": "1250m"})).await;
    let table = ok(env.kubectl(&["get", "hrq", "-n", &root]));
    assert!(table.contains("pods: 3/10, requests.cpu: 1250m/2"), "{table}");
    // The plugin prints HNC's table.
    let printed = ok(hns(&env, &["hrq", "-n", &root]));
    let header: Vec<&str> = printed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE", "REQUEST", "LIMIT"], "{printed}");
    assert!(printed.lines().nth(1).unwrap().starts_with("budget "), "{printed}");
    assert!(printed.contains("pods: 3/10, requests.cpu: 1250m/2"), "{printed}");
    let all = ok(hns(&env, &["hrq", "budget", "-A"]));
    assert!(all.starts_with("NAMESPACE "), "{all}");
    assert!(all.lines().any(|l| l.starts_with(&format!("{root} "))), "{all}");
    let none = hns(&env, &["hrq", "nothing", "-n", &root]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("\"nothing\" not found"), "{none:?}");
    delete_tree(&client, &root).await;
}

/// The labels of namespace `ns` in the first version of it whose parent is `parent`, watched
/// from resourceVersion `rv`: what the write that moved it carried.
async fn labels_when_moved(client: &Client, ns: &str, parent: &str, rv: &str) -> Value {
    use futures::{StreamExt, TryStreamExt};
    let api: Api<Namespace> = Api::all(client.clone());
    let wp = WatchParams::default().fields(&format!("metadata.name={ns}")).timeout(30);
    let mut stream = api.watch(&wp, rv).await.unwrap().boxed();
    while let Some(event) = stream.try_next().await.unwrap() {
        if let WatchEvent::Modified(n) = event {
            if n.metadata.annotations.as_ref().and_then(|a| a.get(keys::PARENT)).map(String::as_str)
                == Some(parent)
            {
                return json!(n.metadata.labels);
            }
        }
    }
    panic!("no version of {ns} under {parent} seen");
}

#[tokio::test]
async fn nested_quotas_the_smallest_limit_wins_and_a_move_out_lowers_usage() {
    let client = Env::get().admin().await;
    let root = fresh_namespace(&client, "hrq-nest").await;
    let team = new_subnamespace(&client, &root, "team").await;
    let full = fresh_namespace(&client, "hrq-full").await;
    create_quota(&client, &root, "org", json!({"pods": "10", "services": "5"})).await;
    create_quota(&client, &team, "team", json!({"pods": "3"})).await;

    // Moving in: the write that moves it marks it pending, and the controller ends that.
    let rv =
        Api::<Namespace>::all(client.clone()).get(&full).await.unwrap().metadata.resource_version.unwrap();
    set_parent(&client, &full, Some(&team)).await.unwrap();
    let labels = labels_when_moved(&client, &full, &team, &rv).await;
    assert_eq!(labels[keys::HRQ_PENDING_LABEL], "true", "{labels}");
    let rq = resource_quota(&client, &full).await;
    let hard = json!(rq.spec.unwrap().hard);
    assert_eq!(hard, json!({"pods": "3", "services": "5"}), "the smallest of each");
    let hard = json!(resource_quota(&client, &root).await.spec.unwrap().hard);
    assert_eq!(hard, json!({"pods": "10", "services": "5"}));

    create_pod(&client, &full, "p1", "100m").await;
    used_becomes(&client, &team, "team", json!({"pods": "1"})).await;
    used_becomes(&client, &root, "org", json!({"pods": "1", "services": "0"})).await;

    // A limit lowered below the usage: allowed, and the quota says it is exceeded.
    let lowered = json!({"spec": {"hard": {"pods": "0"}}});
    dynamic(&client, &team)
        .patch("team", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(lowered))
        .await
        .unwrap();
    let q = dynamic(&client, &team).get("team").await.unwrap();
    let exceeded = &q.data["status"]["conditions"][0];
    assert_eq!(
        (exceeded["type"].as_str(), exceeded["status"].as_str()),
        (Some("Exceeded"), Some("True")),
        "{q:?}"
    );
    assert!(exceeded["message"].as_str().unwrap().contains("pods: 1 used of 0"), "{exceeded}");

    set_parent(&client, &full, None).await.unwrap();
    used_becomes(&client, &team, "team", json!({"pods": "0"})).await;
    used_becomes(&client, &root, "org", json!({"pods": "0", "services": "0"})).await;
    resource_quota_gone(&client, &full, "the ResourceQuota of a namespace no quota covers to go").await;
    delete_namespaces(&client, &[&full]).await;
    delete_tree(&client, &root).await;
}

#[tokio::test]
async fn only_admins_of_a_quotas_namespace_may_set_it() {
    let (env, client, root) = Env::with_namespace("hrq-rbac").await;
    let sub = new_subnamespace(&client, &root, "sub").await;
    create_quota(&client, &root, "org", json!({"pods": "10"})).await;
    let alice = unique("alice");
    env.grant(&alice, "admin", &sub);
    eventually("alice's grant to take effect", WAIT, || async {
        env.kubectl_as(
            &alice,
            &[],
            &["auth", "can-i", "create", "hierarchicalresourcequotas.hnc.x-k8s.io", "-n", &sub],
        )
        .status
        .success()
        .then_some(())
    })
    .await;
    let manifest = |ns: &str, name: &str| {
        format!("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  hard:\n    pods: \"2\"\n")
    };
    let file = manifest_file(&format!("{sub}-own"), &manifest(&sub, "mine"));
    let out = ok(env.kubectl_as(&alice, &[], &["apply", "-f", &file]));
    assert!(out.contains("created"), "{out}");
    let shown = ok(env.kubectl_as(&alice, &[], &["get", "hrq", "-n", &sub]));
    assert!(shown.contains("mine"), "{shown}");

    let file = manifest_file(&format!("{sub}-parent"), &manifest(&root, "loose"));
    let err = fails(env.kubectl_as(&alice, &[], &["apply", "-f", &file]));
    assert!(err.contains("forbidden") || err.contains("Forbidden"), "{err}");
    let err = fails(env.kubectl_as(
        &alice,
        &[],
        &["patch", "hrq", "org", "-n", &root, "--type=merge", "-p", r#"{"spec":{"hard":{"pods":"1000"}}}"#],
    ));
    assert!(err.contains("forbidden") || err.contains("Forbidden"), "{err}");
    assert_eq!(used(&client, &root, "org").await, json!({"pods": "0"}));
    let q = dynamic(&client, &root).get("org").await.unwrap();
    assert_eq!(q.data["spec"]["hard"]["pods"], "10", "unchanged");
    delete_tree(&client, &root).await;
}

/// HNC's own kubectl plugin, if `hack/build-hnc.sh` has built it.
fn hnc_plugin() -> Option<std::path::PathBuf> {
    let cache = std::env::var_os("HNS_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/hns")))?;
    Some(cache.join("hnc/v1.1.0/kubectl-hns")).filter(|p| p.exists())
}

#[tokio::test]
async fn hncs_own_plugin_lists_quotas() {
    let Some(plugin) = hnc_plugin() else {
        println!("skipped: HNC's kubectl-hns is not built (run hack/build-hnc.sh)");
        return;
    };
    let (env, client, team) = Env::with_namespace("hrq-hnc").await;
    create_quota(&client, &team, "team-budget", json!({"pods": "7", "limits.cpu": "2"})).await;
    let out = std::process::Command::new(&plugin)
        .env("KUBECONFIG", &env.kubeconfig)
        .args(["hrq", "-n", &team])
        .output()
        .unwrap();
    let text = ok(out);
    assert!(text.contains("team-budget"), "{text}");
    assert!(text.contains("pods: 0/7"), "{text}");
    assert!(text.contains("limits.cpu: 0/2"), "{text}");
    delete_namespaces(&client, &[&team]).await;
}

#[tokio::test]
async fn quotas_are_applied_server_side_explained_and_watched_as_usage_changes() {
    use futures::{StreamExt, TryStreamExt};
    let (env, client, team) = Env::with_namespace("hrq-ssa").await;
    let manifest = |pods: &str| {
        format!("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\nmetadata:\n  name: budget\n  namespace: {team}\nspec:\n  hard:\n    pods: \"{pods}\"\n")
    };
    let file = std::env::temp_dir().join(format!("{team}-ssa.yaml"));
    let file = file.to_str().unwrap();
    std::fs::write(file, manifest("4")).unwrap();
    let out = ok(env.kubectl(&["apply", "--server-side", "--field-manager=team", "-f", file]));
    assert!(out.contains("serverside-applied"), "{out}");
    std::fs::write(file, manifest("6")).unwrap();
    let err = fails(env.kubectl(&["apply", "--server-side", "--field-manager=intruder", "-f", file]));
    assert!(err.contains("conflict") && err.contains(".spec.hard.pods"), "{err}");
    ok(env.kubectl(&["apply", "--server-side", "--field-manager=team", "-f", file]));
    let q = dynamic(&client, &team).get("budget").await.unwrap();
    assert_eq!(q.data["spec"]["hard"]["pods"], "6");

    let explained = ok(env.kubectl(&["explain", "hrq.spec"]));
    assert!(explained.contains("hard"), "{explained}");

    resource_quota(&client, &team).await;
    let rv = q.metadata.resource_version.clone().unwrap();
    let wp = WatchParams::default().fields("metadata.name=budget").timeout(60);
    let mut stream = dynamic(&client, &team).watch(&wp, &rv).await.unwrap().boxed();
    create_pod(&client, &team, "p1", "100m").await;
    loop {
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Modified(q)) if q.data["status"]["used"]["pods"] == "1" => break,
            Some(_) => continue,
            None => panic!("the watch ended without the quota's usage changing"),
        }
    }
    delete_namespaces(&client, &[&team]).await;
}

#[tokio::test]
async fn a_resource_quota_hns_cannot_write_is_reported_on_the_quota() {
    let (env, client) = Env::with_admin().await;
    let team = unique("hrq-denied");
    // An admission policy refusing hns's ResourceQuotas in this namespace only.
    let policy = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: {team}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [v1]\n      operations: [CREATE]\n      resources: [resourcequotas]\n  validations:\n  - expression: \"false\"\n    message: no ResourceQuotas here\n\
         ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: {team}\nspec:\n  policyName: {team}\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector:\n      matchLabels:\n        kubernetes.io/metadata.name: {team}\n    objectSelector:\n      matchLabels:\n        hnc.x-k8s.io/hrq: \"true\"\n"
    );
    let file = std::env::temp_dir().join(format!("{team}-policy.yaml"));
    std::fs::write(&file, policy).unwrap();
    let file = file.to_str().unwrap();
    ok(env.kubectl(&["apply", "-f", file]));
    create_namespace(&client, &team, &[]).await;
    // Policies take a moment to be enforced: wait until a ResourceQuota like hns's is refused.
    let probe = format!(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: probe\n  namespace: {team}\n  labels:\n    hnc.x-k8s.io/hrq: \"true\"\nspec:\n  hard:\n    pods: \"1\"\n"
    );
    let probe_file = std::env::temp_dir().join(format!("{team}-probe.yaml"));
    std::fs::write(&probe_file, probe).unwrap();
    eventually("the admission policy to be enforced", WAIT, || async {
        let out = env.kubectl(&["create", "--dry-run=server", "-f", probe_file.to_str().unwrap()]);
        String::from_utf8_lossy(&out.stderr).contains("no ResourceQuotas here").then_some(())
    })
    .await;
    create_quota(&client, &team, "budget", json!({"pods": "5"})).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &team);
    let event = eventually("CannotWriteResourceQuota on the quota", WAIT, || async {
        let lp = kube::api::ListParams::default().fields("reason=CannotWriteResourceQuota");
        events.list(&lp).await.ok()?.items.into_iter().next()
    })
    .await;
    assert_eq!(event.involved_object.kind.as_deref(), Some("HierarchicalResourceQuota"));
    assert_eq!(event.involved_object.name.as_deref(), Some("budget"));
    let message = event.message.unwrap_or_default();
    assert!(
        message
            .contains(&format!("could not create/update lower-level ResourceQuota in namespace \"{team}\"")),
        "{message}"
    );
    assert!(message.contains("no ResourceQuotas here"), "{message}");
    let pending =
        Api::<Namespace>::all(client.clone()).get(&team).await.unwrap().metadata.labels.unwrap_or_default();
    assert_eq!(
        pending.get(keys::HRQ_PENDING_LABEL).map(String::as_str),
        Some("true"),
        "pending while uncounted"
    );
    // Nothing may be created there meanwhile: 429 with a wait, which kubectl honours by itself.
    let config_maps: Api<ConfigMap> = Api::namespaced(env.admin_without_retries().await, &team);
    let settings: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "settings"}})).unwrap();
    let status = match config_maps.create(&PostParams::default(), &settings).await {
        Err(kube::Error::Api(status)) => status,
        other => panic!("created in a pending namespace: {other:?}"),
    };
    assert_eq!(status.code, 429, "{status:?}");
    assert!(status.message.contains("try again in a moment"), "{status:?}");
    assert_eq!(status.details.map(|d| d.retry_after_seconds), Some(1));
    let err = fails(env.kubectl(&["create", "configmap", "settings", "-n", &team, "-v=4"]));
    // kubectl's log line reads "Got a Retry-After 1s response for attempt 1" or, structured,
    // "Got a Retry-After response" delay="1s" attempt=1, depending on its logging.
    assert!(err.contains("Got a Retry-After"), "kubectl waited and sent it again: {err}");
    assert!(err.contains("try again in a moment"), "the last answer is shown: {err}");
    ok(env.kubectl(&["delete", "-f", file]));
    delete_namespaces(&client, &[&team]).await;
}

/// Tries to create a pod in `ns` from `spec` (a dry run on the server, so admission runs and
/// nothing is stored) with the real kubectl; kubectl's output.
fn try_pod(env: &Env, ns: &str, name: &str, spec: Value) -> std::process::Output {
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec});
    let file = std::env::temp_dir().join(format!("{ns}-{name}.json"));
    std::fs::write(&file, pod.to_string()).unwrap();
    env.kubectl(&["create", "--dry-run=server", "-f", file.to_str().unwrap()])
}

/// Waits until a pod from `spec` is admitted in `ns` (a new namespace gets its ServiceAccount,
/// which a pod needs, a moment after it is created).
async fn admitted(env: &Env, ns: &str, name: &str, spec: Value) {
    eventually(&format!("pod {ns}/{name} to be admitted"), WAIT, || async {
        try_pod(env, ns, name, spec.clone()).status.success().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_pod_lacking_a_resource_a_quota_requires_is_told_which_quota_requires_it() {
    let (env, client, root) = Env::with_namespace("hrq-required").await;
    let team = new_subnamespace(&client, &root, "team").await;
    create_quota(&client, &root, "cap", json!({"requests.cpu": "2", "limits.memory": "1Gi", "pods": "5"}))
        .await;
    // "cpu" is "requests.cpu": a quota limiting both asks for it once.
    create_quota(&client, &team, "team", json!({"requests.cpu": "1", "cpu": "1"})).await;
    // hns's ResourceQuota names the nearest quota for each resource every container must declare.
    let prefix = keys::REQUIRED_BY_PREFIX;
    eventually("the ResourceQuota to name the quotas requiring resources", WAIT, || async {
        let rq = Api::<ResourceQuota>::namespaced(client.clone(), &team)
            .get_opt(RESOURCE_QUOTA_NAME)
            .await
            .ok()??;
        let a = rq.metadata.annotations.unwrap_or_default();
        let named = |r: &str| a.get(&format!("{prefix}{r}")).cloned();
        (named("requests.cpu") == Some(format!("{team}/team"))
            && named("limits.memory") == Some(format!("{root}/cap"))
            && named("pods").is_none())
        .then_some(())
    })
    .await;
    resource_quota(&client, &team).await;
    let image = "registry.k8s.io/pause:3.10";
    let bare = json!({
        "initContainers": [{"name": "init", "image": image, "resources": {"requests": {"cpu": "10m"}}}],
        "containers": [{"name": "app", "image": image}],
    });
    // kube-apiserver reads the ResourceQuota through its informer: wait for the policy to see it.
    let refused = eventually("the pod to be refused naming the quotas", WAIT, || async {
        let out = try_pod(&env, &team, "bare", bare.clone());
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        stderr.contains("HierarchicalResourceQuota").then_some((out.status.code(), stderr))
    })
    .await;
    let (code, message) = refused;
    assert_eq!(code, Some(1), "{message}");
    assert!(message.contains("(Forbidden)"), "{message}");
    assert!(
        message.contains(&format!(
            "every container must set resources.requests.cpu (missing in app): HierarchicalResourceQuota {team}/team limits requests.cpu in namespace {team}"
        )),
        "the nearest quota, and only the container lacking it: {message}"
    );
    assert_eq!(message.matches("must set resources.requests.cpu").count(), 1, "once: {message}");
    assert!(
        message.contains(&format!(
            "every container must set resources.limits.memory (missing in app, init): HierarchicalResourceQuota {root}/cap limits limits.memory in namespace {team}"
        )),
        "{message}"
    );
    assert!(message.contains("give the namespace a default with a LimitRange"), "{message}");
    // What Kubernetes' quota admission admits, the policy admits: every container declaring
    // the resources, or the pod declaring them at pod level.
    let declared = |c: &str| json!({"name": c, "image": image, "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "8Mi"}}});
    let full = json!({"initContainers": [declared("init")], "containers": [declared("app")]});
    admitted(&env, &team, "full", full).await;
    let pod_level = json!({
        "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "16Mi"}},
        "containers": [{"name": "app", "image": image}],
    });
    admitted(&env, &team, "pod-level", pod_level).await;
    // A namespace outside every quota has no ResourceQuota, so no parameter: not checked.
    let outside = fresh_namespace(&client, "hrq-none").await;
    admitted(&env, &outside, "bare", json!({"containers": [{"name": "app", "image": image}]})).await;
    delete_tree(&client, &root).await;
    delete_namespaces(&client, &[&outside]).await;
}
