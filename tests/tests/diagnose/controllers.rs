//! Built-in finalizers whose controller is not there. The local control plane runs no
//! cloud-controller-manager, so a LoadBalancer Service holding
//! `service.kubernetes.io/load-balancer-cleanup` is never released by anything, as on any
//! cluster without a cloud provider. Its kube-controller-manager must keep running for the other
//! scenarios: a stopped one is shown by the Lease it leaves behind (the local one runs without
//! leader election, so it never touches that Lease), and a disabled controller runs on a
//! control plane of its own.

use super::*;

const LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// At the end, whatever happened: removes the finalizers of `objects` (type, name, namespace)
/// and deletes the Lease named `lease` in kube-system.
struct Guard {
    kubeconfig: PathBuf,
    objects: Vec<[String; 3]>,
    lease: Option<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let none = r#"{"metadata":{"finalizers":null}}"#;
        for [kind, name, ns] in &self.objects {
            let _ = kubectl_with(
                &self.kubeconfig,
                &["patch", kind, name, "-n", ns, "--type", "merge", "-p", none],
            );
        }
        if let Some(lease) = &self.lease {
            let _ = kubectl_with(
                &self.kubeconfig,
                &["delete", "lease", lease, "-n", "kube-system", "--ignore-not-found"],
            );
        }
    }
}

fn object(kind: &str, name: &str, ns: &str) -> [String; 3] {
    [kind.to_string(), name.to_string(), ns.to_string()]
}

/// Service `web` of type LoadBalancer in `ns`, holding the finalizer a cloud-controller-manager
/// adds when it creates the load balancer.
fn load_balancer(env: &Env, ns: &str) {
    apply(
        env,
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {ns}, finalizers: [{LB_CLEANUP}]}}\nspec:\n  type: LoadBalancer\n  selector: {{app: web}}\n  ports: [{{port: 80}}]\n"
        ),
    );
}

#[tokio::test]
async fn diagnose_load_balancer_without_cloud_controller() {
    let (env, mut cleanup) = turn().await;
    let witness = Witness::new(&env, &mut cleanup, None);
    let other = unique("diag-lb-witness");
    let ns = unique("diag-lb");
    cleanup.namespace(&other);
    cleanup.namespace(&ns);
    let _guard = Guard {
        kubeconfig: env.kubeconfig.clone(),
        objects: vec![object("service", "web", &other), object("service", "web", &ns)],
        lease: None,
    };
    // The same finalizer on a Service that is not deleted: the fix must leave it alone.
    ok(env.kubectl(&["create", "namespace", &other]));
    load_balancer(&env, &other);
    ok(env.kubectl(&["create", "namespace", &ns]));
    load_balancer(&env, &ns);
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceFinalizersRemaining").await;

    let kept = version(&env, &["service", "web", "-n", &other]);
    let report = diagnosed(&env, &ns, &[&["service", "web", "-n", &ns]], [
        "1. 1 Service(s) wait for service.kubernetes.io/load-balancer-cleanup, but no cloud-controller-manager runs to remove it",
        "evidence: service.kubernetes.io/load-balancer-cleanup on deleted Service(s): web (type LoadBalancer, deleted",
        "evidence: no Lease kube-system/cloud-controller-manager: no cloud-controller-manager runs under its default name",
        "no cloud provider initialized",
        "evidence: Service web has no status.loadBalancer.ingress: no load balancer was ever reported for it",
        "only a cloud-controller-manager removes this finalizer",
        "it is left behind and still billed: check the cloud console",
        &format!("remedy: remove finalizer {LB_CLEANUP} from 1 object(s)"),
        &format!(r#"{{"op":"test","path":"/metadata/finalizers/0","value":"{LB_CLEANUP}"}}"#),
    ], &["no_cloud_controller"]);
    let cause = report.split("Last resort").next().unwrap();
    assert!(!cause.contains("refused without --force"), "nothing leaves a doubt here:\n{report}");

    let narration = fix_removes(&env, &ns);
    assert!(narration.contains(&format!("/api/v1/namespaces/{ns}/services/web")), "{narration}");
    assert_eq!(version(&env, &["service", "web", "-n", &other]), kept, "the live Service is left alone");
    witness.assert_untouched(&env);
}

/// What a stopped kube-controller-manager leaves: its Lease, no longer renewed.
const GONE_SINCE: &str = "2026-01-01T00:00:00Z";

#[tokio::test]
async fn diagnose_controller_manager_down() {
    let (env, _cleanup, ns) = scenario("diag-kcm").await;
    let lease = "kube-controller-manager";
    let existing = get(&env, &["lease", lease, "-n", "kube-system"], "{.metadata.name}");
    assert_eq!(existing, None, "this control plane's kube-controller-manager runs without leader election");
    let _guard = Guard {
        kubeconfig: env.kubeconfig.clone(),
        objects: vec![object("configmap", "held", &ns)],
        lease: Some(lease.into()),
    };
    apply(
        &env,
        &format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {lease}, namespace: kube-system}}\nspec: {{holderIdentity: cp-gone_1f2e, leaseDurationSeconds: 15, acquireTime: \"2025-12-01T00:00:00.000000Z\", renewTime: \"2026-01-01T00:00:00.000000Z\"}}\n"
        ),
    );
    // A finalizer of kube-controller-manager's persistentvolume-protection-controller, which
    // (stopped) removes nothing; on a ConfigMap, the running one ignores it too.
    ok(env.kubectl(&["create", "namespace", &ns]));
    ok(env.kubectl(&["create", "configmap", "held", "-n", &ns]));
    let finalizers = r#"{"metadata":{"finalizers":["kubernetes.io/pv-protection"]}}"#;
    ok(env.kubectl(&["patch", "configmap", "held", "-n", &ns, "--type", "merge", "-p", finalizers]));
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceFinalizersRemaining").await;

    let report = dry_run(&env, &ns);
    assert_contains(&report, [
        "1. kube-controller-manager is not running: its Lease was last renewed ",
        &format!("evidence: Lease kube-system/kube-controller-manager: held by cp-gone_1f2e, last renewed at {GONE_SINCE} ("),
        "evidence: a running kube-controller-manager renews its Lease every few seconds",
        "evidence: spec.finalizers holds \"kubernetes\", which only its namespace-controller removes",
        "evidence: kubernetes.io/pv-protection, removed by its persistentvolume-protection-controller, holds 1 deleted object(s): configmaps/held",
        "Start kube-controller-manager again",
        "risk: None: nothing is changed.",
    ]);
    assert_eq!(cause_kinds(&json(&env, &ns)), ["controller_manager_down"], "said once, not per finalizer");
}

/// A control plane of its own whose kube-controller-manager runs without controller `disabled`
/// (`hack/control-plane.sh`, about 20s to start), stopped at the end, whatever happened.
struct ControlPlane {
    dir: PathBuf,
}

impl ControlPlane {
    fn up(dir: PathBuf, disabled: &str) -> ControlPlane {
        let plane = ControlPlane { dir };
        let out = Command::new("bash")
            .arg(script())
            .arg("up")
            .arg(&plane.dir)
            .env("HNS_KCM_DISABLE", disabled)
            .output()
            .expect("bash");
        assert!(out.status.success(), "control plane did not start:\n{}", stderr(&out));
        plane
    }

    fn env(&self) -> Env {
        Env { kubeconfig: self.dir.join("kubeconfig"), local: None }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("down").arg(&self.dir).output();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hack/control-plane.sh")
}

#[tokio::test]
async fn diagnose_disabled_pvc_protection_controller() {
    let _serial = SERIAL.lock().await;
    let shared = Env::get();
    let Some(local) = shared.local_or_skip("diagnose_disabled_pvc_protection_controller") else { return };
    let controller = "persistentvolumeclaim-protection-controller";
    let plane = ControlPlane::up(local.dir.join("without-pvc-protection"), controller);
    let env = plane.env();
    let ns = unique("diag-pvc");
    ok(env.kubectl(&["create", "namespace", &ns]));
    // Admission adds kubernetes.io/pvc-protection; only the disabled controller removes it.
    apply(
        &env,
        &format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: {ns}}}\nspec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}\n"),
    );
    delete_now(&env, &ns);
    condition(&env, &ns, "NamespaceFinalizersRemaining").await;
    // Just deleted, the claim may still be waiting for a running controller.
    assert_eq!(cause_kinds(&json(&env, &ns)), ["pending_finalizer"]);
    eventually("the claim is two minutes past its deletion", Duration::from_secs(300), || async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        (cause_kinds(&json(&env, &ns)) == ["disabled_controller"]).then_some(())
    })
    .await;

    let claim = version(&env, &["pvc", "data", "-n", &ns]);
    let report = dry_run(&env, &ns);
    assert_contains(&report, [
        &format!("1. 1 PersistentVolumeClaim(s) keep kubernetes.io/pvc-protection although no pod uses them: kube-controller-manager's {controller} is likely disabled"),
        "evidence: kubernetes.io/pvc-protection on deleted claim(s): data (deleted ",
        &format!("evidence: no pod in namespace {ns} mounts them"),
        "evidence: kube-controller-manager runs: its namespace-controller has written this namespace's deletion conditions",
        &format!("--controllers flag: an entry -{controller}"),
        "remedy: remove finalizer kubernetes.io/pvc-protection from 1 object(s)",
        &format!("PATCH /api/v1/namespaces/{ns}/persistentvolumeclaims/data"),
        "its volume and data",
    ]);
    assert_eq!(version(&env, &["pvc", "data", "-n", &ns]), claim, "dry run");
    fix_removes(&env, &ns);
}
