//! Built-in finalizers whose controller is not there. The local control plane runs no
//! cloud-controller-manager, so a LoadBalancer Service holding
//! `service.kubernetes.io/load-balancer-cleanup` is never released by anything, as on any
//! cluster without a cloud provider. (Its kube-controller-manager must keep running for the
//! other scenarios, so a disabled or stopped controller is covered by the unit tests.)

use super::*;

const LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Removes the finalizer from Service `web` of each namespace at the end, whatever happened.
struct ServiceGuard {
    kubeconfig: PathBuf,
    namespaces: Vec<String>,
}

impl Drop for ServiceGuard {
    fn drop(&mut self) {
        let none = r#"{"metadata":{"finalizers":null}}"#;
        for ns in &self.namespaces {
            let _ = kubectl_with(
                &self.kubeconfig,
                &["patch", "service", "web", "-n", ns, "--type", "merge", "-p", none],
            );
        }
    }
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
    let _serial = SERIAL.lock().await;
    let env = Env::get();
    let mut cleanup = Cleanup::new(&env);
    let witness = Witness::new(&env, &mut cleanup, None);
    let other = unique("diag-lb-witness");
    let ns = unique("diag-lb");
    cleanup.namespace(&other);
    cleanup.namespace(&ns);
    let _guard =
        ServiceGuard { kubeconfig: env.kubeconfig.clone(), namespaces: vec![other.clone(), ns.clone()] };
    // The same finalizer on a Service that is not deleted: the fix must leave it alone.
    ok(env.kubectl(&["create", "namespace", &other]));
    load_balancer(&env, &other);
    ok(env.kubectl(&["create", "namespace", &ns]));
    load_balancer(&env, &ns);
    ok(env.kubectl(&["delete", "namespace", &ns, "--wait=false"]));
    condition(&env, &ns, "NamespaceFinalizersRemaining").await;

    let service = version(&env, &["service", "web", "-n", &ns]);
    let kept = version(&env, &["service", "web", "-n", &other]);
    let report = dry_run(&env, &ns);
    for line in [
        "1. 1 Service(s) wait for service.kubernetes.io/load-balancer-cleanup, but no cloud-controller-manager runs to remove it",
        "evidence: service.kubernetes.io/load-balancer-cleanup on deleted Service(s): web (type LoadBalancer, deleted",
        "evidence: no Lease kube-system/cloud-controller-manager: no cloud-controller-manager runs under its default name",
        "no cloud provider initialized",
        "evidence: Service web has no status.loadBalancer.ingress: no load balancer was ever reported for it",
        "only a cloud-controller-manager removes this finalizer",
        "it is left behind and still billed: check the cloud console",
        &format!("remedy: remove finalizer {LB_CLEANUP} from 1 object(s)"),
        &format!(r#"{{"op":"test","path":"/metadata/finalizers/0","value":"{LB_CLEANUP}"}}"#),
    ] {
        assert!(report.contains(line), "missing {line:?} in:\n{report}");
    }
    let cause = report.split("Last resort").next().unwrap();
    assert!(!cause.contains("refused without --force"), "nothing leaves a doubt here:\n{report}");
    assert_eq!(cause_kinds(&json(&env, &ns)), ["no_cloud_controller"]);
    assert_eq!(version(&env, &["service", "web", "-n", &ns]), service, "dry run");

    let narration = fix_removes(&env, &ns);
    assert!(narration.contains(&format!("/api/v1/namespaces/{ns}/services/web")), "{narration}");
    assert_eq!(version(&env, &["service", "web", "-n", &other]), kept, "the live Service is left alone");
    witness.assert_untouched(&env);
}
