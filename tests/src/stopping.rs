//! Stopping hns in a test and starting it again, wherever it runs: the local control plane's
//! processes (SIGKILL, then `hack/hns-up.sh up`), or an install in a cluster, the Kubernetes
//! way: its Deployment scaled to nothing and every pod deleted at once with no grace period (as
//! when every replica crashes), then scaled back and waited for.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{eventually, kubectl_with, ok, Env, Local};

const NAMESPACE: &str = "hns-system";
const DEPLOYMENT: &str = "deployment/hns-apiserver";
const PODS: &str = "app.kubernetes.io/name=hns-apiserver";

/// Where the hns under test runs.
pub enum Hns {
    /// hns-apiserver processes of the local control plane.
    Local(Local),
    /// deploy/hns.yaml's Deployment, with its replica count while it runs.
    InCluster { kubeconfig: PathBuf, replicas: String },
}

impl Hns {
    /// The hns of the cluster under test.
    pub fn of(env: &Env) -> Hns {
        match &env.local {
            Some(local) => Hns::Local(local.clone()),
            None => {
                let replicas = ok(kubectl_with(
                    &env.kubeconfig,
                    &["-n", NAMESPACE, "get", DEPLOYMENT, "-o", "jsonpath={.spec.replicas}"],
                ));
                Hns::InCluster { kubeconfig: env.kubeconfig.clone(), replicas: replicas.trim().to_string() }
            }
        }
    }

    /// Stops every replica at once, as a crash does: nothing drains, nothing is released.
    pub fn kill(&self) {
        match self {
            Hns::Local(local) => {
                for name in &local.replica_names {
                    let pid = std::fs::read_to_string(local.dir.join(format!("pids/{name}.pid"))).unwrap();
                    let killed = Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
                    assert!(killed.success(), "kill -9 {name}");
                }
            }
            Hns::InCluster { kubeconfig, .. } => {
                ok(kubectl_with(kubeconfig, &["-n", NAMESPACE, "scale", DEPLOYMENT, "--replicas=0"]));
                ok(kubectl_with(
                    kubeconfig,
                    &[
                        "-n",
                        NAMESPACE,
                        "delete",
                        "pod",
                        "-l",
                        PODS,
                        "--grace-period=0",
                        "--force",
                        "--wait=false",
                    ],
                ));
            }
        }
    }

    /// Starts hns again and waits until kube-apiserver reaches it.
    pub async fn start(&self) {
        match self {
            Hns::Local(local) => {
                let up = Command::new(repo().join("hack/hns-up.sh"))
                    .arg("up")
                    .arg(&local.dir)
                    .env("HNS_REPLICAS", local.replica_names.len().to_string())
                    .status()
                    .unwrap();
                assert!(up.success(), "hns-apiserver restarts");
            }
            Hns::InCluster { kubeconfig, replicas } => {
                ok(kubectl_with(
                    kubeconfig,
                    &["-n", NAMESPACE, "scale", DEPLOYMENT, &format!("--replicas={replicas}")],
                ));
                ok(kubectl_with(
                    kubeconfig,
                    &["-n", NAMESPACE, "rollout", "status", DEPLOYMENT, "--timeout=300s"],
                ));
                eventually("kube-apiserver reaches hns", Duration::from_secs(120), || async {
                    kubectl_with(kubeconfig, &["get", "--raw", "/apis/hnc.x-k8s.io/v1alpha2"])
                        .status
                        .success()
                        .then_some(())
                })
                .await;
            }
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf()
}
