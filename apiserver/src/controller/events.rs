//! Kubernetes Events for what people should notice: a namespace gaining a condition, a source
//! that cannot be propagated or whose exception annotations do not parse, a copy that cannot be
//! written. Published by the leader only, best effort: an Event that cannot be written is
//! logged, never retried at the expense of reconciling.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

use crate::hierarchy::conditions::NsCondition;

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

    /// Source `copy.name` would overwrite the destination's own object of that name.
    pub async fn conflict(&self, copy: &CopyRef<'_>) {
        let note = format!(
            "Could not write to destination namespace \"{}\": it has its own {} named \"{}\", which hns does not overwrite",
            copy.destination, copy.kind, copy.name
        );
        self.publish("CannotPropagateObject", note, copy.source()).await;
    }

    /// Source `source` (of the kind `api_version`/`kind`) has exception annotations that do not
    /// parse (`error`), so it is propagated nowhere. HNC's `CannotParseSelector`, on the source,
    /// with the message admission would have refused it with.
    pub async fn cannot_parse_selector(
        &self,
        api_version: &str,
        kind: &str,
        source: &kube::api::ObjectMeta,
        error: &str,
    ) {
        let regarding = ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: source.name.clone(),
            namespace: source.namespace.clone(),
            uid: source.uid.clone(),
            ..Default::default()
        };
        let note = format!("{error}. The object is propagated to no namespace until this is fixed");
        self.publish("CannotParseSelector", note, regarding).await;
    }

    /// hns's ResourceQuota in `namespace`, below quota `name` of `quota_ns`, could not be
    /// written: told on the quota, where its owner looks (HNC's reason and words).
    pub async fn cannot_write_resource_quota(
        &self,
        quota_ns: &str,
        name: &str,
        uid: &str,
        namespace: &str,
        error: &str,
    ) {
        let regarding = ObjectReference {
            api_version: Some(hns_api::API_VERSION.into()),
            kind: Some("HierarchicalResourceQuota".into()),
            name: Some(name.into()),
            namespace: Some(quota_ns.into()),
            uid: Some(uid.into()),
            ..Default::default()
        };
        let note = format!(
            "could not create/update lower-level ResourceQuota in namespace \"{namespace}\": {error}"
        );
        self.publish("CannotWriteResourceQuota", note, regarding).await;
    }

    /// Writing (`act` is "write") or removing (`act` is "remove") a copy failed with `error`.
    /// As HNC does: `CannotUpdateObject` about the copy, in the destination namespace, and for a
    /// write also `CannotPropagateObject` about the source, where its owner looks.
    pub async fn write_failed(&self, copy: &CopyRef<'_>, act: &str, error: &str) {
        let note = format!("Could not {act} from source namespace \"{}\": {error}", copy.source_namespace);
        self.publish("CannotUpdateObject", note, copy.copy()).await;
        if act == "write" {
            let note = format!("Could not {act} to destination namespace \"{}\": {error}", copy.destination);
            self.publish("CannotPropagateObject", note, copy.source()).await;
        }
    }
}

/// A copy hns writes: its kind, its name, and the namespaces it comes from and goes to.
pub struct CopyRef<'a> {
    /// The kind's apiVersion.
    pub api_version: &'a str,
    /// The kind.
    pub kind: &'a str,
    /// The name of the source and of the copy.
    pub name: &'a str,
    /// Where the source is.
    pub source_namespace: &'a str,
    /// Where the copy is.
    pub destination: &'a str,
}

impl CopyRef<'_> {
    fn in_namespace(&self, namespace: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.into()),
            kind: Some(self.kind.into()),
            name: Some(self.name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        }
    }

    fn source(&self) -> ObjectReference {
        self.in_namespace(self.source_namespace)
    }

    fn copy(&self) -> ObjectReference {
        self.in_namespace(self.destination)
    }
}
