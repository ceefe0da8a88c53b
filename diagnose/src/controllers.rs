//! Whether the controllers that remove built-in finalizers run: the leader-election Leases of
//! kube-system (kube-controller-manager's, a cloud-controller-manager's, and kube-apiserver's
//! own identity Leases, whose renewals give the server's clock), and, only where a deleted
//! object waits for such a finalizer, what its controller would look at: the nodes'
//! `spec.providerID` and the Service's load balancer status for
//! `service.kubernetes.io/load-balancer-cleanup`, and the pods that mount a claim for
//! `kubernetes.io/pvc-protection`.

use std::collections::BTreeSet;

use futures::{stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};

use super::error::error_text;
use super::nodes::list_pods;

/// How many reads run at once.
const CONCURRENCY: usize = 8;
/// kube-controller-manager's leader-election Lease in kube-system.
pub const CONTROLLER_MANAGER_LEASE: &str = "kube-controller-manager";
/// A cloud-controller-manager's default leader-election Lease in kube-system.
pub const CLOUD_CONTROLLER_LEASE: &str = "cloud-controller-manager";
/// The label of kube-apiserver's identity Leases, which each API server renews every 10s.
const APISERVER_IDENTITY: (&str, &str) = ("apiserver.kubernetes.io/identity", "kube-apiserver");
/// Nodes read to see whether a cloud provider initialized them: a sample is enough.
const NODE_SAMPLE: u32 = 50;

/// What the scan found about the controllers that remove built-in finalizers.
#[derive(Debug, Clone, Default)]
pub struct ControllerEvidence {
    /// The Leases of kube-system; `None` when they could not be read.
    pub leases: Option<Leases>,
    /// The `spec.providerID`s of (a sample of) the nodes, empty strings for nodes without one;
    /// `None` when not read (no Service waits for its load balancer) or unreadable.
    pub provider_ids: Option<Vec<String>>,
    /// The deleted Services that wait for `service.kubernetes.io/load-balancer-cleanup`.
    pub load_balancers: Vec<LoadBalancer>,
    /// The claims mounted by the pods of the namespaces holding deleted claims with
    /// `kubernetes.io/pvc-protection`.
    pub claims: Vec<ClaimUse>,
    /// The namespaces whose pods were read for `claims`.
    pub claims_read: Vec<String>,
}

impl ControllerEvidence {
    /// The pods of `namespace` that mount claim `claim`, when they were read.
    pub fn claim_users(&self, namespace: &str, claim: &str) -> Option<Vec<&str>> {
        if !self.claims_read.iter().any(|n| n == namespace) {
            return None;
        }
        let users = self.claims.iter().filter(|c| c.namespace == namespace && c.claim == claim);
        Some(users.map(|c| c.pod.as_str()).collect())
    }

    /// The deleted Service `namespace/name` waiting for its load balancer, when it was read.
    pub fn load_balancer(&self, namespace: &str, name: &str) -> Option<&LoadBalancer> {
        self.load_balancers.iter().find(|l| l.namespace == namespace && l.name == name)
    }
}

/// The leader-election Leases that tell which control-plane components run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Leases {
    /// `kube-system/kube-controller-manager`; absent when it runs with `--leader-elect=false`
    /// (or never ran).
    pub controller_manager: Option<LeaseState>,
    /// `kube-system/cloud-controller-manager`.
    pub cloud_controller: Option<LeaseState>,
    /// The latest renewal of kube-apiserver's identity Leases: the server's "now", immune to
    /// the skew of this machine's clock.
    pub apiserver_renewed: Option<Timestamp>,
}

/// A leader-election Lease.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaseState {
    /// `spec.holderIdentity`.
    pub holder: String,
    /// `spec.renewTime`.
    pub renewed: Option<Timestamp>,
    /// `spec.leaseDurationSeconds`.
    pub duration_seconds: i64,
}

/// A deleted Service holding `service.kubernetes.io/load-balancer-cleanup`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadBalancer {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `spec.type`.
    pub type_: String,
    /// `status.loadBalancer.ingress`, as IPs or hostnames: a cloud load balancer was reported.
    pub ingress: Vec<String>,
}

/// A pod that mounts a PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimUse {
    /// The namespace.
    pub namespace: String,
    /// The claim.
    pub claim: String,
    /// The pod.
    pub pod: String,
}

/// Reads the Leases of kube-system; the nodes and `services` (namespace, name) when there are
/// such Services; the pods of `claim_namespaces`. What cannot be read is returned with its error.
pub async fn read(
    client: &Client,
    services: Vec<(String, String)>,
    claim_namespaces: BTreeSet<String>,
) -> (ControllerEvidence, Vec<(String, String)>) {
    let mut unreadable = Vec::new();
    let mut ev = ControllerEvidence::default();
    match Api::<Lease>::namespaced(client.clone(), "kube-system").list(&ListParams::default()).await {
        Ok(list) => ev.leases = Some(leases(&list.items)),
        Err(e) => unreadable.push(("leases in namespace kube-system".to_string(), error_text(&e))),
    }
    if !services.is_empty() {
        match Api::<Node>::all(client.clone()).list(&ListParams::default().limit(NODE_SAMPLE)).await {
            Ok(list) => ev.provider_ids = Some(list.items.iter().map(provider_id).collect()),
            Err(e) => unreadable.push(("nodes".to_string(), error_text(&e))),
        }
    }
    let read: Vec<_> = stream::iter(services)
        .map(|(ns, name)| async move {
            let got = Api::<Service>::namespaced(client.clone(), &ns).get_opt(&name).await;
            (ns, name, got)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for (ns, name, got) in read {
        match got {
            Ok(Some(svc)) => ev.load_balancers.push(load_balancer(svc)),
            Ok(None) => {}
            Err(e) => unreadable.push((format!("service {name} in namespace {ns}"), error_text(&e))),
        }
    }
    for (ns, listed) in list_pods(client, claim_namespaces).await {
        match listed {
            Ok(list) => {
                ev.claims.extend(list.items.iter().flat_map(claim_uses));
                ev.claims_read.push(ns);
            }
            Err(e) => unreadable.push((format!("pods in namespace {ns}"), error_text(&e))),
        }
    }
    (ev, unreadable)
}

/// The Leases that matter among those of kube-system.
fn leases(items: &[Lease]) -> Leases {
    let named = |name: &str| items.iter().find(|l| l.metadata.name.as_deref() == Some(name)).map(lease_state);
    let (key, value) = APISERVER_IDENTITY;
    let apiserver_renewed = items
        .iter()
        .filter(|l| l.metadata.labels.as_ref().and_then(|m| m.get(key)).is_some_and(|v| v == value))
        .filter_map(|l| lease_state(l).renewed)
        .max();
    Leases {
        controller_manager: named(CONTROLLER_MANAGER_LEASE),
        cloud_controller: named(CLOUD_CONTROLLER_LEASE),
        apiserver_renewed,
    }
}

fn lease_state(lease: &Lease) -> LeaseState {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseState {
        holder: spec.holder_identity.unwrap_or_default(),
        renewed: spec.renew_time.or(spec.acquire_time).map(|t| t.0),
        duration_seconds: spec.lease_duration_seconds.unwrap_or_default().into(),
    }
}

fn provider_id(node: &Node) -> String {
    node.spec.as_ref().and_then(|s| s.provider_id.clone()).unwrap_or_default()
}

fn load_balancer(svc: Service) -> LoadBalancer {
    let ingress = svc
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.ip.or(i.hostname))
        .collect();
    LoadBalancer {
        namespace: svc.metadata.namespace.unwrap_or_default(),
        name: svc.metadata.name.unwrap_or_default(),
        type_: svc.spec.and_then(|s| s.type_).unwrap_or_else(|| "ClusterIP".into()),
        ingress,
    }
}

/// The claims `pod` mounts: by name, or the claim of a generic ephemeral volume
/// (`<pod>-<volume>`). Any pod counts, whatever its phase: better to miss a stuck claim than
/// to call a used one free.
fn claim_uses(pod: &Pod) -> Vec<ClaimUse> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.clone()).unwrap_or_default();
    volumes
        .into_iter()
        .filter_map(|v| match (v.persistent_volume_claim, v.ephemeral) {
            (Some(c), _) => Some(c.claim_name),
            (None, Some(_)) => Some(format!("{name}-{}", v.name)),
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|claim| ClaimUse { namespace: namespace.clone(), claim, pod: name.clone() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(name: &str, labels: serde_json::Value, renewed: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
            "spec": {"holderIdentity": format!("{name}-holder"), "leaseDurationSeconds": 15,
                     "renewTime": renewed}
        }))
        .unwrap()
    }

    #[test]
    fn reads_the_leases_that_matter() {
        let identity = json!({"apiserver.kubernetes.io/identity": "kube-apiserver"});
        let items = [
            lease("kube-controller-manager", json!({}), "2026-01-01T00:00:00.000000Z"),
            lease("apiserver-a", identity.clone(), "2026-01-01T00:05:00.000000Z"),
            lease("apiserver-b", identity, "2026-01-01T00:04:00.000000Z"),
            lease("kube-scheduler", json!({}), "2026-01-01T00:06:00.000000Z"),
        ];
        let l = leases(&items);
        let kcm = l.controller_manager.unwrap();
        assert_eq!((kcm.holder.as_str(), kcm.duration_seconds), ("kube-controller-manager-holder", 15));
        assert_eq!(kcm.renewed.unwrap().to_string(), "2026-01-01T00:00:00Z");
        assert_eq!(l.apiserver_renewed.unwrap().to_string(), "2026-01-01T00:05:00Z", "the latest");
        assert!(l.cloud_controller.is_none());
    }

    #[test]
    fn reads_a_services_load_balancer() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns"}, "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}}
        }))
        .unwrap();
        let lb = load_balancer(svc);
        assert_eq!(lb.type_, "LoadBalancer");
        assert_eq!(lb.ingress, ["203.0.113.7", "lb.example.com"]);
    }

    #[test]
    fn reads_the_claims_a_pod_mounts() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "b", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "c", "emptyDir": {}}
            ]}
        }))
        .unwrap();
        let claims: Vec<String> = claim_uses(&pod).into_iter().map(|c| c.claim).collect();
        assert_eq!(claims, ["data", "web-scratch"]);
        let ev = ControllerEvidence {
            claims: claim_uses(&pod),
            claims_read: vec!["ns".into()],
            ..Default::default()
        };
        assert_eq!(ev.claim_users("ns", "data"), Some(vec!["web"]));
        assert_eq!(ev.claim_users("ns", "logs"), Some(vec![]));
        assert_eq!(ev.claim_users("other", "data"), None, "not read");
    }
}
