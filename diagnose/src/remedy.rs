//! Remedies: the exact API calls that undo a cause, each printable before it is made, and what
//! right each needs. Pure: making the calls is [`super::apply`]'s.
//!
//! The calls are guarded so that a concurrent change makes them fail instead of clobbering that
//! change: DELETEs carry `uid` and `resourceVersion` preconditions; JSON patches start with
//! `test` operations on `resourceVersion` and on the very entry they remove; the finalize PUT
//! sends the namespace with the resourceVersion it was diagnosed at.

use serde::Serialize;
use serde_json::{json, Value};

use super::evidence::ResourceType;

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1";

/// A remedy: one or more API calls that undo one cause, applied together after one
/// confirmation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remedy {
    /// What it is and what it targets, which stays the same across re-scans.
    #[serde(skip)]
    pub id: RemedyId,
    /// What it does, in words.
    pub summary: String,
    /// The calls, in order.
    pub actions: Vec<Action>,
    /// Set when the remedy is refused unless `--force` is given, saying why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_force: Option<String>,
    /// Rights the current user lacks for these calls (from SelfSubjectAccessReviews).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_rights: Vec<String>,
}

impl Remedy {
    /// A remedy of `actions`.
    pub fn new(id: RemedyId, summary: impl Into<String>, actions: Vec<Action>) -> Remedy {
        Remedy { id, summary: summary.into(), actions, needs_force: None, missing_rights: Vec::new() }
    }
}

/// What a remedy does and to what: how a fix recognises a remedy it already applied or was
/// declined after a re-scan. Not the summary, which counts objects (so it changes as they go)
/// and does not always name the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RemedyId {
    /// Delete an APIService.
    DeleteApiService {
        /// Its name.
        name: String,
    },
    /// Remove a webhook from its configuration (or the configuration, when it is the only one).
    RemoveWebhook {
        /// Validating or mutating.
        mutating: bool,
        /// The configuration's name.
        configuration: String,
        /// The webhook's name.
        webhook: String,
    },
    /// Delete the objects in a namespace that were never deleted.
    DeleteContent {
        /// The namespace.
        namespace: String,
    },
    /// Force-delete the pods in a namespace that are past their grace period.
    ForceDeletePods {
        /// The namespace.
        namespace: String,
    },
    /// Force-delete the deleted pods in a namespace that wait for a node that is not Ready or
    /// missing.
    ForceDeletePodsOnNode {
        /// The namespace.
        namespace: String,
        /// The node.
        node: String,
    },
    /// Remove a finalizer from the deleted objects in a namespace.
    RemoveObjectFinalizer {
        /// The namespace.
        namespace: String,
        /// The finalizer.
        finalizer: String,
    },
    /// Remove a finalizer from a namespace's `metadata.finalizers`.
    RemoveNamespaceFinalizer {
        /// The namespace.
        namespace: String,
        /// The finalizer.
        finalizer: String,
    },
    /// Drop an entry other than `kubernetes` from a namespace's `spec.finalizers`.
    DropSpecFinalizer {
        /// The namespace.
        namespace: String,
        /// The finalizer.
        finalizer: String,
    },
    /// Allow cascading deletion on a subnamespace.
    AllowCascadingDeletion {
        /// The subnamespace.
        namespace: String,
    },
    /// Finalize a namespace by hand: the last resort.
    Finalize {
        /// The namespace.
        namespace: String,
    },
}

/// The object a finalizer is removed from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", rename_all_fields = "camelCase", tag = "kind")]
pub enum Holder {
    /// A Namespace (its `metadata.finalizers`).
    Namespace {
        /// Its name.
        name: String,
    },
    /// A namespaced object.
    Object {
        /// Its type.
        resource: ResourceType,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Holder {
    fn path(&self) -> String {
        match self {
            Holder::Namespace { name } => format!("/api/v1/namespaces/{name}"),
            Holder::Object { resource, namespace, name } => resource.object_path(namespace, name),
        }
    }
}

/// One API call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", rename_all_fields = "camelCase", tag = "kind")]
pub enum Action {
    /// Delete an APIService.
    DeleteApiService {
        /// Its name.
        name: String,
        /// Precondition.
        uid: String,
        /// Precondition.
        resource_version: String,
    },
    /// Remove one webhook from its configuration (deleting the configuration when it is the
    /// only one).
    RemoveWebhook {
        /// Validating or mutating.
        mutating: bool,
        /// The configuration's name.
        configuration: String,
        /// Precondition.
        uid: String,
        /// Precondition.
        resource_version: String,
        /// The webhook's position.
        index: usize,
        /// The webhook's name (tested before removal).
        webhook: String,
        /// Whether it is the configuration's only webhook.
        only: bool,
    },
    /// Delete a namespaced object.
    DeleteObject {
        /// Its type.
        resource: ResourceType,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Precondition.
        uid: String,
        /// Precondition.
        resource_version: String,
        /// Delete with `gracePeriodSeconds: 0` (force).
        force: bool,
    },
    /// Remove one finalizer from an object's `metadata.finalizers`.
    RemoveFinalizer {
        /// The object.
        holder: Holder,
        /// The finalizer.
        finalizer: String,
        /// Its position (tested before removal).
        index: usize,
        /// Precondition.
        resource_version: String,
    },
    /// Set hns's `allow-cascading-deletion` annotation on a namespace.
    AllowCascadingDeletion {
        /// The namespace.
        namespace: String,
        /// Precondition.
        resource_version: String,
        /// Whether the namespace has an annotations map to add to.
        has_annotations: bool,
    },
    /// Rewrite a namespace's `spec.finalizers` through the `finalize` subresource.
    FinalizeNamespace {
        /// The namespace.
        namespace: String,
        /// Precondition.
        resource_version: String,
        /// The finalizers it has.
        from: Vec<String>,
        /// The finalizers it should have.
        to: Vec<String>,
    },
}

/// A right an action needs, as a SelfSubjectAccessReview asks it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Right {
    /// The verb.
    pub verb: &'static str,
    /// The API group.
    pub group: String,
    /// The resource.
    pub resource: String,
    /// The subresource, if any.
    pub subresource: Option<&'static str>,
    /// The namespace, for namespaced resources.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl std::fmt::Display for Right {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if let Some(s) = self.subresource {
            write!(f, "/{s}")?;
        }
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => Ok(()),
        }
    }
}

impl Action {
    /// The method and path of its call, without the body and preconditions [`Action::describe`]
    /// adds: what a narration says once the call is made.
    pub fn request_line(&self) -> String {
        self.describe().splitn(3, ' ').take(2).collect::<Vec<_>>().join(" ")
    }

    /// The exact API call, as the report prints it.
    pub fn describe(&self) -> String {
        match self {
            Action::DeleteApiService {
                name,
                uid,
                resource_version,
            } => format!(
                "DELETE {APISERVICES}/{name} {}",
                preconditions(uid, resource_version)
            ),
            Action::RemoveWebhook {
                configuration,
                uid,
                resource_version,
                only: true,
                ..
            } => format!(
                "DELETE {} {}",
                self.webhook_path(configuration),
                preconditions(uid, resource_version)
            ),
            Action::RemoveWebhook { configuration, .. } => patch_line(
                &self.webhook_path(configuration),
                &self.json_patch().unwrap_or_default(),
            ),
            Action::DeleteObject {
                resource,
                namespace,
                name,
                uid,
                resource_version,
                force,
            } => format!(
                "DELETE {} {}{}",
                resource.object_path(namespace, name),
                preconditions(uid, resource_version),
                if *force { ", gracePeriodSeconds=0" } else { "" }
            ),
            Action::RemoveFinalizer { holder, .. } => {
                patch_line(&holder.path(), &self.json_patch().unwrap_or_default())
            }
            Action::AllowCascadingDeletion { namespace, .. } => patch_line(
                &format!("/api/v1/namespaces/{namespace}"),
                &self.json_patch().unwrap_or_default(),
            ),
            Action::FinalizeNamespace {
                namespace,
                resource_version,
                from,
                to,
            } => format!(
                "PUT /api/v1/namespaces/{namespace}/finalize with spec.finalizers {} -> {} (resourceVersion {resource_version})",
                json!(from),
                json!(to)
            ),
        }
    }

    /// The right this action needs.
    pub fn right(&self) -> Right {
        let right = |verb, group: &str, resource: &str, namespace: Option<&str>, name: &str| Right {
            verb,
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: None,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        match self {
            Action::DeleteApiService { name, .. } => {
                right("delete", "apiregistration.k8s.io", "apiservices", None, name)
            }
            Action::RemoveWebhook { mutating, configuration, only, .. } => right(
                if *only { "delete" } else { "patch" },
                "admissionregistration.k8s.io",
                webhook_resource(*mutating),
                None,
                configuration,
            ),
            Action::DeleteObject { resource, namespace, name, .. } => {
                right("delete", &resource.group, &resource.plural, Some(namespace), name)
            }
            Action::RemoveFinalizer { holder: Holder::Namespace { name }, .. }
            | Action::AllowCascadingDeletion { namespace: name, .. } => {
                right("patch", "", "namespaces", None, name)
            }
            Action::RemoveFinalizer { holder: Holder::Object { resource, namespace, name }, .. } => {
                right("patch", &resource.group, &resource.plural, Some(namespace), name)
            }
            Action::FinalizeNamespace { namespace, .. } => {
                Right { subresource: Some("finalize"), ..right("update", "", "namespaces", None, namespace) }
            }
        }
    }

    /// The JSON patch of a PATCH action.
    pub(super) fn json_patch(&self) -> Option<Value> {
        match self {
            Action::RemoveWebhook { resource_version, index, webhook, .. } => Some(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
                {"op": "test", "path": format!("/webhooks/{index}/name"), "value": webhook},
                {"op": "remove", "path": format!("/webhooks/{index}")},
            ])),
            Action::RemoveFinalizer { finalizer, index, resource_version, .. } => Some(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
                {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": finalizer},
                {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
            ])),
            Action::AllowCascadingDeletion { resource_version, has_annotations, .. } => {
                let key = hns_api::keys::ALLOW_CASCADING_DELETION.replace('/', "~1");
                let mut ops = vec![
                    json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}),
                ];
                if !has_annotations {
                    ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
                }
                ops.push(
                    json!({"op": "add", "path": format!("/metadata/annotations/{key}"), "value": "true"}),
                );
                Some(Value::Array(ops))
            }
            _ => None,
        }
    }

    fn webhook_path(&self, configuration: &str) -> String {
        let mutating = matches!(self, Action::RemoveWebhook { mutating: true, .. });
        format!("{WEBHOOKS}/{}/{configuration}", webhook_resource(mutating))
    }
}

fn preconditions(uid: &str, resource_version: &str) -> String {
    format!("with preconditions uid={uid}, resourceVersion={resource_version}")
}

fn patch_line(path: &str, patch: &Value) -> String {
    format!("PATCH {path} (application/json-patch+json) {patch}")
}

/// The plural of the webhook configurations of one kind.
pub(super) fn webhook_resource(mutating: bool) -> &'static str {
    if mutating {
        "mutatingwebhookconfigurations"
    } else {
        "validatingwebhookconfigurations"
    }
}

/// Actions for the unit tests of what describes and applies them.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A deletion of Pod `ns/p` (uid `u`, resourceVersion 9).
    pub fn delete_pod(force: bool) -> Action {
        Action::DeleteObject {
            resource: ResourceType::pods(),
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            resource_version: "9".into(),
            force,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget() -> ResourceType {
        ResourceType {
            group: "stable.example.com".into(),
            version: "v1".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
        }
    }

    #[test]
    fn describes_deletes_with_their_preconditions() {
        let a = Action::DeleteApiService {
            name: "v1.dead.example.com".into(),
            uid: "u1".into(),
            resource_version: "7".into(),
        };
        assert_eq!(
            a.describe(),
            "DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1.dead.example.com with preconditions uid=u1, resourceVersion=7"
        );
        assert_eq!(a.right().to_string(), "delete apiservices.apiregistration.k8s.io");
        let pod = testing::delete_pod(true);
        assert_eq!(
            pod.describe(),
            "DELETE /api/v1/namespaces/ns/pods/p with preconditions uid=u, resourceVersion=9, gracePeriodSeconds=0"
        );
        assert_eq!(pod.right().to_string(), "delete pods in namespace ns");
        assert_eq!(
            pod.request_line(),
            "DELETE /api/v1/namespaces/ns/pods/p",
            "what a narration says once done"
        );
    }

    #[test]
    fn removes_one_finalizer_behind_tests() {
        let a = Action::RemoveFinalizer {
            holder: Holder::Object { resource: widget(), namespace: "ns".into(), name: "w".into() },
            finalizer: "stable.example.com/cleanup".into(),
            index: 1,
            resource_version: "42".into(),
        };
        assert_eq!(
            a.describe(),
            r#"PATCH /apis/stable.example.com/v1/namespaces/ns/widgets/w (application/json-patch+json) [{"op":"test","path":"/metadata/resourceVersion","value":"42"},{"op":"test","path":"/metadata/finalizers/1","value":"stable.example.com/cleanup"},{"op":"remove","path":"/metadata/finalizers/1"}]"#
        );
        assert_eq!(a.right().to_string(), "patch widgets.stable.example.com in namespace ns");
    }

    #[test]
    fn removes_a_webhook_or_its_whole_configuration() {
        let mut a = Action::RemoveWebhook {
            mutating: false,
            configuration: "cfg".into(),
            uid: "u".into(),
            resource_version: "3".into(),
            index: 0,
            webhook: "deny.example.com".into(),
            only: true,
        };
        assert_eq!(
            a.describe(),
            "DELETE /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/cfg with preconditions uid=u, resourceVersion=3"
        );
        if let Action::RemoveWebhook { only, .. } = &mut a {
            *only = false;
        }
        assert!(a.describe().contains(r#"{"op":"remove","path":"/webhooks/0"}"#));
        assert_eq!(
            a.right().to_string(),
            "patch validatingwebhookconfigurations.admissionregistration.k8s.io"
        );
    }

    #[test]
    fn finalizes_through_the_subresource() {
        let a = Action::FinalizeNamespace {
            namespace: "ns".into(),
            resource_version: "5".into(),
            from: vec!["openshift.com/origin".into(), "kubernetes".into()],
            to: vec!["kubernetes".into()],
        };
        assert_eq!(
            a.describe(),
            r#"PUT /api/v1/namespaces/ns/finalize with spec.finalizers ["openshift.com/origin","kubernetes"] -> ["kubernetes"] (resourceVersion 5)"#
        );
        assert_eq!(a.right().to_string(), "update namespaces/finalize");
    }

    #[test]
    fn allows_cascading_deletion_with_an_escaped_key() {
        let a = Action::AllowCascadingDeletion {
            namespace: "child".into(),
            resource_version: "8".into(),
            has_annotations: false,
        };
        let d = a.describe();
        assert!(d.contains(r#"{"op":"add","path":"/metadata/annotations","value":{}}"#), "{d}");
        assert!(d.contains("/metadata/annotations/hnc.x-k8s.io~1allow-cascading-deletion"), "{d}");
    }
}
