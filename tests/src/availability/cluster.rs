//! What the availability scenarios do to the node cluster and read from it: hns's pods and the
//! nodes they run on, the leader, the processes behind a pod, and the node scripts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};

/// hns's namespace and the labels of its pods, as deploy/hns.yaml installs them.
pub const NAMESPACE: &str = "hns-system";
const SELECTOR: &str = "app.kubernetes.io/name=hns-apiserver";
const DEPLOYMENT: &str = "hns-apiserver";

/// The node cluster: its client, its kubeconfig, and the directory the node scripts keep it in.
pub struct Cluster {
    pub client: Client,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
}

/// One of hns's pods.
#[derive(Debug, Clone)]
pub struct Replica {
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub ready: bool,
}

impl Cluster {
    /// hns's pods that are not terminating.
    pub async fn replicas(&self) -> Vec<Replica> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NAMESPACE);
        let list =
            pods.list(&ListParams::default().labels(SELECTOR)).await.map(|l| l.items).unwrap_or_default();
        list.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| Replica {
                pod: p.metadata.name.clone().unwrap_or_default(),
                uid: p.metadata.uid.clone().unwrap_or_default(),
                node: p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
                ready: p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
            })
            .collect()
    }

    /// Whether the Deployment has rolled out fully: every replica updated and available, on
    /// nodes of its own, none terminating.
    pub async fn settled(&self) -> bool {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), NAMESPACE);
        let Ok(d) = deployments.get(DEPLOYMENT).await else { return false };
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = d.status.unwrap_or_default();
        let rolled = status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(want)
            && status.available_replicas == Some(want)
            && status.replicas == Some(want);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NAMESPACE);
        let all =
            pods.list(&ListParams::default().labels(SELECTOR)).await.map(|l| l.items).unwrap_or_default();
        let replicas = self.replicas().await;
        let mut nodes: Vec<&str> = replicas.iter().map(|r| r.node.as_str()).collect();
        nodes.sort();
        nodes.dedup();
        rolled && all.len() == want as usize && nodes.len() == replicas.len()
    }

    /// Waits until [`Cluster::settled`], at most `limit`; whether it got there.
    pub async fn until_settled(&self, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.settled().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        false
    }

    /// The replica holding the controller's Lease.
    pub async fn leader(&self) -> Option<Replica> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NAMESPACE);
        let holder = leases.get("hns-controller").await.ok()?.spec?.holder_identity?;
        let pod = holder.rsplit_once('_').map_or(holder.as_str(), |(pod, _)| pod).to_string();
        self.replicas().await.into_iter().find(|r| r.pod == pod)
    }

    /// The leader, waiting up to `within` for the Lease to name a running replica: right after
    /// a rollout or a drain it may still name the pod that went, until the other replica has
    /// seen it go and taken over.
    pub async fn settled_leader(&self, within: Duration) -> Option<Replica> {
        let started = Instant::now();
        loop {
            match self.leader().await {
                Some(leader) => return Some(leader),
                None if started.elapsed() >= within => return None,
                None => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    }

    /// Runs kubectl against the cluster; its output, or why it failed.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .map_err(|e| format!("kubectl: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!("kubectl {}: {text}", args.join(" ")))
        }
    }

    /// Runs `hack/nodes.sh CMD DIR ARGS…`.
    pub fn nodes(&self, cmd: &str, args: &[&str]) -> Result<(), String> {
        let script = repo().join("hack/nodes.sh");
        let out = Command::new(&script)
            .arg(cmd)
            .arg(&self.dir)
            .args(args)
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("hack/nodes.sh {cmd}: {}", String::from_utf8_lossy(&out.stderr)))
        }
    }
}

/// The repository's root (the tests crate's parent).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the repository")
        .to_path_buf()
}

/// The host processes of pod `uid`'s containers named `comm` (found by their cgroup: the pods
/// run on this machine, under each node's cgroup root), for a signal from outside, as a crash
/// or the kernel's OOM killer would send it.
pub fn processes_of(uid: &str, comm: &str) -> Vec<i32> {
    let mark = format!("pod{uid}");
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let named = std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm);
            named && std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(&mark))
        })
        .collect()
}

/// Sends SIGKILL to `pid`.
pub fn kill(pid: i32) -> Result<(), String> {
    let out =
        Command::new("kill").args(["-9", &pid.to_string()]).output().map_err(|e| format!("kill: {e}"))?;
    out.status
        .success()
        .then_some(())
        .ok_or_else(|| format!("kill -9 {pid}: {}", String::from_utf8_lossy(&out.stderr)))
}
