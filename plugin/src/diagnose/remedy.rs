//! Remedies: the exact API calls that undo a cause, each printable before it is made and
//! guarded so that a concurrent change makes it fail instead of clobbering that change.
//!
//! Guards: DELETEs carry `uid` and `resourceVersion` preconditions; JSON patches start with
//! `test` operations on `resourceVersion` and on the very entry they remove; the finalize PUT
//! sends the namespace with the resourceVersion it was diagnosed at.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::{json, Value};

use super::evidence::ResourceType;
use super::{is_conflict, is_not_found, is_unprocessable, Error, Result};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1";

/// A remedy: one or more API calls that undo one cause, applied together after one
/// confirmation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Remedy {
    /// What it does, in words; also identifies it across re-scans.
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
    pub fn new(summary: impl Into<String>, actions: Vec<Action>) -> Remedy {
        Remedy { summary: summary.into(), actions, needs_force: None, missing_rights: Vec::new() }
    }
}

/// The object a finalizer is removed from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
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
#[serde(rename_all = "snake_case", tag = "kind")]
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

/// What applying an action achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The call succeeded.
    Done,
    /// The target was already gone, which is what the action wanted.
    AlreadyGone,
}

impl Action {
    /// The exact API call, as printed in the plan.
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
    fn json_patch(&self) -> Option<Value> {
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

    /// Makes the call. A target already gone counts as success; a target that changed since it
    /// was diagnosed gives [`Error::Changed`].
    pub async fn apply(&self, client: &Client) -> Result<Applied> {
        let outcome = match self {
            Action::DeleteApiService { name, uid, resource_version } => {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &apiservice_resource());
                api.delete(name, &guarded_delete(uid, resource_version, false)).await.map(|_| ())
            }
            Action::RemoveWebhook { mutating, configuration, uid, resource_version, only, .. } => {
                let api: Api<DynamicObject> =
                    Api::all_with(client.clone(), &webhook_configuration_resource(*mutating));
                if *only {
                    api.delete(configuration, &guarded_delete(uid, resource_version, false)).await.map(|_| ())
                } else {
                    api.patch(configuration, &PatchParams::default(), &self.patch()?).await.map(|_| ())
                }
            }
            Action::DeleteObject { resource, namespace, name, uid, resource_version, force } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &api_resource(resource));
                api.delete(name, &guarded_delete(uid, resource_version, *force)).await.map(|_| ())
            }
            Action::RemoveFinalizer { holder, .. } => patch_holder(client, holder, &self.patch()?).await,
            Action::AllowCascadingDeletion { namespace, .. } => {
                let holder = Holder::Namespace { name: namespace.clone() };
                patch_holder(client, &holder, &self.patch()?).await
            }
            Action::FinalizeNamespace { namespace, resource_version, to, .. } => {
                return self.finalize(client, namespace, resource_version, to).await
            }
        };
        self.outcome(outcome)
    }

    fn outcome(&self, result: Result<(), kube::Error>) -> Result<Applied> {
        match result {
            Ok(()) => Ok(Applied::Done),
            Err(e) if is_not_found(&e) => Ok(Applied::AlreadyGone),
            Err(e) if is_conflict(&e) || (self.json_patch().is_some() && is_unprocessable(&e)) => {
                Err(Error::Changed { action: self.describe() })
            }
            Err(source) => Err(Error::Write { action: self.describe(), source }),
        }
    }

    fn patch(&self) -> Result<Patch<Value>> {
        let value = self.json_patch().unwrap_or_default();
        let patch = serde_json::from_value(value)
            .map_err(|source| Error::Encode { what: "JSON patch".into(), source })?;
        Ok(Patch::Json(patch))
    }

    async fn finalize(
        &self,
        client: &Client,
        namespace: &str,
        resource_version: &str,
        to: &[String],
    ) -> Result<Applied> {
        let api: Api<Namespace> = Api::all(client.clone());
        let mut ns = match api.get(namespace).await {
            Ok(ns) => ns,
            Err(e) => return self.outcome(Err(e)),
        };
        if ns.metadata.resource_version.as_deref() != Some(resource_version) {
            return Err(Error::Changed { action: self.describe() });
        }
        ns.spec.get_or_insert_with(Default::default).finalizers = Some(to.to_vec());
        let result =
            api.replace_subresource("finalize", namespace, &PostParams::default(), &ns).await.map(|_| ());
        self.outcome(result)
    }
}

async fn patch_holder(client: &Client, holder: &Holder, patch: &Patch<Value>) -> Result<(), kube::Error> {
    let pp = PatchParams::default();
    match holder {
        Holder::Namespace { name } => {
            let api: Api<Namespace> = Api::all(client.clone());
            api.patch(name, &pp, patch).await.map(|_| ())
        }
        Holder::Object { resource, namespace, name } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(resource));
            api.patch(name, &pp, patch).await.map(|_| ())
        }
    }
}

fn preconditions(uid: &str, resource_version: &str) -> String {
    format!("with preconditions uid={uid}, resourceVersion={resource_version}")
}

fn patch_line(path: &str, patch: &Value) -> String {
    format!("PATCH {path} (application/json-patch+json) {patch}")
}

fn guarded_delete(uid: &str, resource_version: &str, force: bool) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: Some(resource_version.to_string()),
        }),
        grace_period_seconds: force.then_some(0),
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    }
}

fn webhook_resource(mutating: bool) -> &'static str {
    if mutating {
        "mutatingwebhookconfigurations"
    } else {
        "validatingwebhookconfigurations"
    }
}

/// The APIService type, which k8s-openapi does not carry (it belongs to kube-aggregator).
pub(crate) fn apiservice_resource() -> ApiResource {
    ApiResource {
        group: "apiregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiregistration.k8s.io/v1".into(),
        kind: "APIService".into(),
        plural: "apiservices".into(),
    }
}

fn webhook_configuration_resource(mutating: bool) -> ApiResource {
    let kind = if mutating { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
    ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: kind.into(),
        plural: webhook_resource(mutating).into(),
    }
}

/// The kube type of a discovered resource.
pub(crate) fn api_resource(r: &ResourceType) -> ApiResource {
    let api_version =
        if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
    ApiResource {
        group: r.group.clone(),
        version: r.version.clone(),
        api_version,
        kind: r.kind.clone(),
        plural: r.plural.clone(),
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
        let pod = Action::DeleteObject {
            resource: ResourceType {
                group: String::new(),
                version: "v1".into(),
                plural: "pods".into(),
                kind: "Pod".into(),
            },
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            resource_version: "9".into(),
            force: true,
        };
        assert_eq!(
            pod.describe(),
            "DELETE /api/v1/namespaces/ns/pods/p with preconditions uid=u, resourceVersion=9, gracePeriodSeconds=0"
        );
        assert_eq!(pod.right().to_string(), "delete pods in namespace ns");
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
        assert!(a.patch().is_ok(), "the patch parses as RFC 6902");
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
        assert!(a.patch().is_ok());
    }
}
