//! Kubernetes Events for what people should notice: a namespace gaining a condition, and a
//! source that cannot be propagated. Published by the leader only, best effort: an Event that
//! cannot be written is logged, never retried at the expense of reconciling.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

use crate::conditions::NsCondition;

/// Publishes hns's Events.
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// Events reported by `instance` (this replica).
    pub fn new(client: Client, instance: String) -> Self {
        Events {
            recorder: Recorder::new(
                client,
                Reporter { controller: hns_api::EVENT_COMPONENT.into(), instance: Some(instance) },
            ),
        }
    }

    async fn publish(&self, reason: &str, note: String, regarding: ObjectReference) {
        let ev = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&ev, &regarding).await {
            tracing::debug!(%error, reason, "cannot publish event");
        }
    }

    /// A namespace gained `condition`. The Event lives in that namespace, where
    /// `kubectl describe namespace` and `kubectl get events -n` find it.
    pub async fn condition(&self, ns: &str, uid: Option<String>, condition: &NsCondition) {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Namespace".into()),
            name: Some(ns.into()),
            namespace: Some(ns.into()),
            uid,
            ..Default::default()
        };
        self.publish(condition.reason, format!("{}: {}", condition.type_, condition.message), regarding)
            .await;
    }

    /// Source `name` (of `kind`, in `source_namespace`) was not copied into `destination`.
    pub async fn cannot_propagate(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        source_namespace: &str,
        destination: &str,
    ) {
        let regarding = ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(name.into()),
            namespace: Some(source_namespace.into()),
            ..Default::default()
        };
        let note = format!(
            "Could not write to destination namespace \"{destination}\": it has its own {kind} named \"{name}\", which hns does not overwrite"
        );
        self.publish("CannotPropagateObject", note, regarding).await;
    }
}
