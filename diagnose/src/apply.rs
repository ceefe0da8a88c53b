//! Applying a remedy's actions: the API calls [`super::remedy`] describes, with their guards
//! (preconditions, `test` operations, the diagnosed resourceVersion) so that a concurrent change
//! makes a call fail instead of clobbering that change.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use kube::{Api, Client};
use serde_json::Value;

use super::error::{is_conflict, is_not_found, is_unprocessable, Error, Result};
use super::evidence::ApiServiceState;
use super::remedy::{webhook_resource, Action, Holder};

/// What applying an action achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The call succeeded.
    Done,
    /// The target was already gone, which is what the action wanted.
    AlreadyGone,
}

impl Action {
    /// Makes the call. A target already gone counts as success; a target that changed since it
    /// was diagnosed gives [`Error::Changed`].
    pub async fn apply(&self, client: &Client) -> Result<Applied> {
        let result = match self {
            Action::DeleteApiService { name, uid, resource_version } => {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiServiceState::api_resource());
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
                    Api::namespaced_with(client.clone(), namespace, &resource.api_resource());
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
        self.outcome(result)
    }

    /// What an API answer means for this action.
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

    /// The finalize subresource takes only a whole Namespace: it is read, checked against the
    /// diagnosed resourceVersion and sent back with that version, so a write in between gives
    /// a 409.
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
                Api::namespaced_with(client.clone(), namespace, &resource.api_resource());
            api.patch(name, &pp, patch).await.map(|_| ())
        }
    }
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

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("m", "r").with_code(code).boxed())
    }

    fn remove_finalizer() -> Action {
        Action::RemoveFinalizer {
            holder: Holder::Namespace { name: "ns".into() },
            finalizer: "example.com/hold".into(),
            index: 0,
            resource_version: "4".into(),
        }
    }

    #[test]
    fn patches_parse_as_rfc_6902() {
        let cascading = Action::AllowCascadingDeletion {
            namespace: "child".into(),
            resource_version: "8".into(),
            has_annotations: false,
        };
        assert!(remove_finalizer().patch().is_ok());
        assert!(cascading.patch().is_ok());
    }

    #[test]
    fn deletes_are_guarded_and_forced_only_when_asked() {
        let p = guarded_delete("u", "9", false);
        let pre = p.preconditions.as_ref().unwrap();
        assert_eq!((pre.uid.as_deref(), pre.resource_version.as_deref()), (Some("u"), Some("9")));
        assert_eq!(p.grace_period_seconds, None);
        assert_eq!(p.propagation_policy, Some(PropagationPolicy::Background));
        assert_eq!(guarded_delete("u", "9", true).grace_period_seconds, Some(0));
    }

    #[test]
    fn answers_mean_done_gone_changed_or_failed() {
        let (patch, delete) = (remove_finalizer(), crate::remedy::testing::delete_pod(false));
        assert_eq!(delete.outcome(Ok(())).unwrap(), Applied::Done);
        assert_eq!(delete.outcome(Err(api_error(404))).unwrap(), Applied::AlreadyGone);
        assert!(matches!(delete.outcome(Err(api_error(409))), Err(Error::Changed { .. })));
        // A 422 is a failed `test` operation for a patch, a plain refusal for anything else.
        assert!(matches!(patch.outcome(Err(api_error(422))), Err(Error::Changed { .. })));
        assert!(matches!(delete.outcome(Err(api_error(422))), Err(Error::Write { .. })));
        assert!(matches!(delete.outcome(Err(api_error(403))), Err(Error::Write { .. })));
    }
}
