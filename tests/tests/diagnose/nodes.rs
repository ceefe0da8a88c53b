//! Deleted pods that wait for their node: one whose kubelet stopped reporting (a Node object
//! with no kubelet behind it, NotReady), and one bound to a node name with no Node object.

use super::*;

/// When the lost node's kubelet stopped reporting, as the scenario writes it.
const LOST_SINCE: &str = "2026-01-01T00:00:00Z";

/// Deletes a cluster-scoped object (a Node, a PersistentVolume) at the end of a scenario,
/// whatever happened.
struct Guard {
    kubeconfig: PathBuf,
    kind: &'static str,
    name: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = kubectl_with(
            &self.kubeconfig,
            &["delete", self.kind, &self.name, "--ignore-not-found", "--wait=false"],
        );
    }
}

/// Creates Node `name`, with no kubelet behind it, and marks it NotReady the way the node
/// lifecycle controller does once a kubelet stops posting status. (The local control plane
/// runs no node lifecycle controller: without this the node would have no Ready condition.)
fn lost_node(env: &Env, name: &str) -> Guard {
    let guard = Guard { kubeconfig: env.kubeconfig.clone(), kind: "node", name: name.to_string() };
    apply(env, &format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n"));
    let status = serde_json::json!({"status": {"conditions": [{
        "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": LOST_SINCE, "lastTransitionTime": LOST_SINCE,
    }]}});
    ok(env.kubectl(&[
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]));
    guard
}

/// Creates namespace `ns` with pod `web` bound to node `node` (bypassing the scheduler), deletes
/// the namespace and waits until the namespace controller has deleted the pod. With `claim`, the
/// pod mounts PersistentVolumeClaim `data`, deleted before the namespace: pvc-protection keeps
/// it while the pod exists.
async fn deleted_pod_on(env: &Env, ns: &str, node: &str, claim: bool) {
    ok(env.kubectl(&["create", "namespace", ns]));
    // Admission wants the namespace's default ServiceAccount before any pod.
    eventually("the default ServiceAccount", WAIT, || async {
        get(env, &["serviceaccount", "default", "-n", ns], "{.metadata.name}").map(|_| ())
    })
    .await;
    let mut pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  nodeName: {node}\n  containers:\n  - {{name: web, image: registry.k8s.io/pause:3.10}}\n"
    );
    if claim {
        apply(
            env,
            &format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: {ns}}}\nspec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}\n"),
        );
        pod.push_str("  volumes:\n  - {name: data, persistentVolumeClaim: {claimName: data}}\n");
    }
    apply(env, &pod);
    if claim {
        ok(env.kubectl(&["delete", "pvc", "data", "-n", ns, "--wait=false"]));
    }
    ok(env.kubectl(&["delete", "namespace", ns, "--wait=false"]));
    eventually("pod web is deleted", WAIT, || async {
        get(env, &["pod", "web", "-n", ns], "{.metadata.deletionTimestamp}")
            .filter(|t| !t.is_empty())
            .map(|_| ())
    })
    .await;
}

#[tokio::test]
async fn diagnose_pod_on_a_not_ready_node() {
    let (env, mut cleanup, ns) = scenario("diag-node").await;
    let witness = Witness::new(&env, &mut cleanup, None);
    let node = unique("diag-lost-node");
    let _node = lost_node(&env, &node);
    deleted_pod_on(&env, &ns, &node, true).await;

    let node_version = version(&env, &["node", &node]);
    // Diagnosed at once: no need to wait out the pod's grace period when its node is lost.
    let report = diagnosed(&env, &ns, &[&["pod", "web", "-n", &ns]], [
        &format!("1. pod web waits for node {node}, NotReady since {LOST_SINCE}"),
        &format!(
            "evidence: node {node}: Ready=Unknown since {LOST_SINCE} (" // its age follows
        ),
        "NodeStatusUnknown: Kubelet stopped posting node status.",
        &format!("evidence: deleted pods bound to node {node} in namespace {ns}: web ("),
        &format!("kubectl delete node {node}"),
        &format!("kubectl delete pod -n {ns} web --grace-period=0 --force"),
        &format!("remedy: force-delete 1 pod(s) bound to node {node}"),
        &format!("DELETE /api/v1/namespaces/{ns}/pods/web with preconditions"),
        "gracePeriodSeconds=0",
        "they use PersistentVolumeClaim(s) data, which kubernetes.io/pvc-protection keeps until these pods are gone",
        "2. 1 object(s) wait for kubernetes.io/pvc-protection",
        &format!("claim data is still used by pod web, which waits for node {node}: fix that first"),
        &format!("risk: Force deletion removes the pods from the API without their kubelet's confirmation: if node {node} is only partitioned"),
    ], &["pods_waiting_for_node", "pending_finalizer"]);
    assert!(!report.contains("could not delete some content"), "{report}");
    assert!(!report.contains("No cause found"), "{report}");

    let narration = fix_removes(&env, &ns);
    assert!(narration.contains(&format!("done: DELETE /api/v1/namespaces/{ns}/pods/web")), "{narration}");
    assert_eq!(version(&env, &["node", &node]), node_version, "the Node object is left alone");
    witness.assert_untouched(&env);
}

#[tokio::test]
async fn diagnose_pod_on_a_missing_node() {
    let (env, _cleanup, ns) = scenario("diag-nonode").await;
    // No Node object of that name. The pod garbage collector removes the pod 40 to 60s after
    // it first sees it; the diagnosis below comes a few seconds after its creation.
    let node = unique("diag-missing-node");
    deleted_pod_on(&env, &ns, &node, false).await;

    let report = dry_run(&env, &ns);
    assert_contains(&report, [
        &format!("1. pod web waits for node {node}, which does not exist: the pod garbage collector force-deletes it after its 40s quarantine"),
        &format!("evidence: node {node} does not exist: there is no Node object of that name"),
        "within about 60s of noticing it gone",
        &format!("DELETE /api/v1/namespaces/{ns}/pods/web with preconditions"),
    ]);
    assert!(!report.contains("could not delete some content"), "{report}");
    // Whether the fix or the pod garbage collector deletes the pod first, the namespace goes.
    fix_removes(&env, &ns);
}

/// The node cluster of `hack/availability.sh` (HNS_NODES_DIR), if these tests run against one.
fn node_cluster() -> Option<PathBuf> {
    let dir = std::env::var_os("HNS_NODES_DIR").map(PathBuf::from);
    if dir.is_none() {
        eprintln!(
            "diagnose_pods_on_a_really_lost_node: needs real nodes (HNS_NODES_DIR, hack/availability.sh)"
        );
    }
    dir
}

/// Brings every node of the cluster back at the end of a scenario, whatever happened.
struct NodesBack(PathBuf);

impl Drop for NodesBack {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hack/nodes.sh");
        let _ = Command::new(script).arg("up").arg(&self.0).output();
    }
}

/// Issue 36: the kubelet of a real node stops (its containerd and containers too, as in a power
/// cut) while a pod there, with a PersistentVolumeClaim mounted, has a long termination grace
/// period; its namespace is deleted. The pod can never confirm its deletion, so the namespace
/// waits for it, and pvc-protection keeps the claim while the pod exists. diagnose names the
/// node and the pod; --fix frees the namespace.
#[tokio::test]
async fn diagnose_pods_on_a_really_lost_node() {
    let Some(dir) = node_cluster() else { return };
    let (env, _cleanup, ns) = scenario("diag-real-node").await;
    let node = "hns-node-2";
    let toolbox = std::fs::read_to_string(dir.join("env"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("TOOLBOX_IMAGE=").map(str::to_string))
        .expect("TOOLBOX_IMAGE in the cluster's env");
    ok(env.kubectl(&["create", "namespace", &ns]));
    eventually("the default ServiceAccount", WAIT, || async {
        get(&env, &["serviceaccount", "default", "-n", &ns], "{.metadata.name}").map(|_| ())
    })
    .await;
    // A volume on the node (this machine's disk), bound to the claim by name.
    let pv = format!("{ns}-data");
    let _pv = Guard { kubeconfig: env.kubeconfig.clone(), kind: "pv", name: pv.clone() };
    apply(
        &env,
        &format!(
            "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {pv}}}\nspec:\n  capacity: {{storage: 1Mi}}\n  accessModes: [ReadWriteOnce]\n  storageClassName: \"\"\n  persistentVolumeReclaimPolicy: Retain\n  hostPath: {{path: /tmp/hns-pv/{ns}, type: DirectoryOrCreate}}\n  claimRef: {{namespace: {ns}, name: data}}\n"
        ),
    );
    apply(
        &env,
        &format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: {ns}}}\nspec: {{accessModes: [ReadWriteOnce], storageClassName: \"\", volumeName: {pv}, resources: {{requests: {{storage: 1Mi}}}}}}\n"),
    );
    apply(
        &env,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 600\n  containers:\n  - {{name: web, image: \"{toolbox}\", command: [sleep, \"3600\"], volumeMounts: [{{name: data, mountPath: /data}}]}}\n  volumes:\n  - {{name: data, persistentVolumeClaim: {{claimName: data}}}}\n"
        ),
    );
    eventually("pod web running on its node", WAIT, || async {
        get(&env, &["pod", "web", "-n", &ns], "{.status.phase}").filter(|p| p == "Running").map(|_| ())
    })
    .await;

    let _back = NodesBack(dir.clone());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hack/nodes.sh");
    let stopped = Command::new(&script).arg("stop").arg(&dir).arg(node).output().unwrap();
    assert!(stopped.status.success(), "{}", String::from_utf8_lossy(&stopped.stderr));
    delete_now(&env, &ns);
    eventually("pod web is deleted", WAIT, || async {
        get(&env, &["pod", "web", "-n", &ns], "{.metadata.deletionTimestamp}")
            .filter(|t| !t.is_empty())
            .map(|_| ())
    })
    .await;
    // kube-controller-manager marks the node NotReady once its grace period is over.
    eventually("the node is marked NotReady", Duration::from_secs(150), || async {
        get(&env, &["node", node], "{.status.conditions[?(@.type==\"Ready\")].status}")
            .filter(|s| s != "True")
            .map(|_| ())
    })
    .await;

    let report = dry_run(&env, &ns);
    assert_contains(&report, [
        &format!("1. pod web waits for node {node}, NotReady since "),
        &format!("evidence: deleted pods bound to node {node} in namespace {ns}: web ("),
        &format!("kubectl delete pod -n {ns} web --grace-period=0 --force"),
        "they use PersistentVolumeClaim(s) data, which kubernetes.io/pvc-protection keeps until these pods are gone",
    ]);
    let narration = fix_removes(&env, &ns);
    assert!(narration.contains(&format!("done: DELETE /api/v1/namespaces/{ns}/pods/web")), "{narration}");
}
