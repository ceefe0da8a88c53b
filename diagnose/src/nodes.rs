//! Deleted pods and the nodes they are bound to. Only the kubelet of a pod's node confirms that
//! its containers stopped, so a deleted pod on a node whose kubelet stopped reporting (the
//! machine dead or partitioned) stays Terminating, and its namespace with it. The metadata-only
//! lists of the scan do not carry `spec.nodeName`: the pods of the namespaces that hold deleted
//! pods are read again in full, and each node they name is read once.

use std::collections::{BTreeSet, HashSet};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, ObjectList};
use kube::{Api, Client};

use super::error::error_text;

/// How many reads run at once.
const CONCURRENCY: usize = 8;

/// The deleted pods bound to a node, and the health of those nodes.
#[derive(Debug, Clone, Default)]
pub struct NodeEvidence {
    /// Deleted pods with a `spec.nodeName`, in the target namespaces.
    pub pods: Vec<BoundPod>,
    /// The nodes they name; a node that could not be read is not here.
    pub nodes: Vec<NodeState>,
}

impl NodeEvidence {
    /// The health of node `name`, when it was read.
    pub fn health(&self, name: &str) -> Option<&NodeHealth> {
        self.nodes.iter().find(|n| n.name == name).map(|n| &n.health)
    }
}

/// A deleted pod bound to a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoundPod {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (a precondition for deleting it).
    pub uid: String,
    /// Its resourceVersion (a precondition for deleting it).
    pub resource_version: String,
    /// When it was deleted (plus its grace period).
    pub deletion_timestamp: Option<Timestamp>,
    /// `spec.nodeName`.
    pub node: String,
    /// The PersistentVolumeClaims it mounts, which pvc-protection holds while it exists.
    pub claims: Vec<String>,
}

/// A node and whether its kubelet reports.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeState {
    /// Its name.
    pub name: String,
    /// What its Ready condition says.
    pub health: NodeHealth,
}

/// What the API says about a node's kubelet.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeHealth {
    /// Ready=True: the kubelet reports and confirms deletions itself.
    Ready,
    /// Ready=False or Unknown (the node lifecycle controller sets Unknown when the kubelet
    /// stops posting status).
    NotReady {
        /// `False` or `Unknown`.
        status: String,
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
        /// `lastTransitionTime`.
        since: Option<Timestamp>,
    },
    /// No Ready condition: no kubelet ever reported for it.
    NeverReported {
        /// When the Node object was created.
        registered: Option<Timestamp>,
    },
    /// There is no Node object of that name.
    Missing,
}

/// The health a Node object shows.
pub fn health(node: &Node) -> NodeHealth {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => NodeHealth::Ready,
        Some(c) => NodeHealth::NotReady {
            status: c.status.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            since: c.last_transition_time.as_ref().map(|t| t.0),
        },
        None => {
            NodeHealth::NeverReported { registered: node.metadata.creation_timestamp.as_ref().map(|t| t.0) }
        }
    }
}

/// The pods of each of `namespaces`, listed up to [`CONCURRENCY`] at once, in no order.
pub(crate) async fn list_pods(
    client: &Client,
    namespaces: impl IntoIterator<Item = String>,
) -> Vec<(String, kube::Result<ObjectList<Pod>>)> {
    stream::iter(namespaces)
        .map(|ns| async move {
            let listed = Api::<Pod>::namespaced(client.clone(), &ns).list(&ListParams::default()).await;
            (ns, listed)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// Reads the deleted pods of `namespaces` (those holding deleted pods), and the nodes they are
/// bound to. What cannot be read is returned with its error, described (`pods in namespace x`,
/// `node n`): a node that could not be read is never taken for a missing one.
pub async fn read(client: &Client, namespaces: BTreeSet<String>) -> (NodeEvidence, Vec<(String, String)>) {
    let mut unreadable = Vec::new();
    let mut pods = Vec::new();
    for (ns, result) in list_pods(client, namespaces).await {
        match result {
            Ok(list) => pods.extend(list.items.into_iter().filter_map(bound_pod)),
            Err(e) => unreadable.push((format!("pods in namespace {ns}"), error_text(&e))),
        }
    }
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let names: BTreeSet<String> = pods.iter().map(|p| p.node.clone()).collect();
    let read: Vec<_> = stream::iter(names)
        .map(|name| async move {
            let got = Api::<Node>::all(client.clone()).get_opt(&name).await;
            (name, got)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut nodes = Vec::new();
    for (name, result) in read {
        match result {
            Ok(Some(node)) => nodes.push(NodeState { name, health: health(&node) }),
            Ok(None) => nodes.push(NodeState { name, health: NodeHealth::Missing }),
            Err(e) => unreadable.push((format!("node {name}"), error_text(&e))),
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    (NodeEvidence { pods, nodes }, unreadable)
}

/// The pod, when it was deleted and is bound to a node.
fn bound_pod(pod: Pod) -> Option<BoundPod> {
    let m = pod.metadata;
    let deletion_timestamp = Some(m.deletion_timestamp?.0);
    let spec = pod.spec?;
    let node = spec.node_name.filter(|n| !n.is_empty())?;
    let mut seen = HashSet::new();
    let claims = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.persistent_volume_claim.map(|c| c.claim_name))
        .filter(|c| seen.insert(c.clone()))
        .collect();
    Some(BoundPod {
        namespace: m.namespace.unwrap_or_default(),
        name: m.name.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        deletion_timestamp,
        node,
        claims,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(conditions: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn reads_a_nodes_ready_condition() {
        let ready = node(json!([{"type": "Ready", "status": "True"}]));
        assert_eq!(health(&ready), NodeHealth::Ready);
        let lost = node(json!([{"type": "MemoryPressure", "status": "False"}, {
            "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.", "lastTransitionTime": "2026-01-01T00:05:00Z"
        }]));
        let NodeHealth::NotReady { status, reason, since, .. } = health(&lost) else { panic!() };
        assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "NodeStatusUnknown"));
        assert_eq!(since.unwrap().to_string(), "2026-01-01T00:05:00Z");
        let NodeHealth::NeverReported { registered } = health(&node(json!([]))) else { panic!() };
        assert_eq!(registered.unwrap().to_string(), "2026-01-01T00:00:00Z");
    }

    #[test]
    fn keeps_deleted_pods_bound_to_a_node() {
        let pod = |deleted: bool, node: Option<&str>| -> Pod {
            let mut meta = json!({"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "3"});
            if deleted {
                meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
                "nodeName": node, "containers": [],
                "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                            {"name": "b", "persistentVolumeClaim": {"claimName": "data"}},
                            {"name": "c", "emptyDir": {}}]
            }}))
            .unwrap()
        };
        let p = bound_pod(pod(true, Some("n1"))).unwrap();
        assert_eq!((p.node.as_str(), p.uid.as_str(), p.resource_version.as_str()), ("n1", "u", "3"));
        assert_eq!(p.claims, ["data"]);
        assert!(bound_pod(pod(false, Some("n1"))).is_none(), "not deleted");
        assert!(bound_pod(pod(true, None)).is_none(), "never scheduled: podgc deletes it at once");
    }
}
