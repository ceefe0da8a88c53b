//! hns's own writes to Namespace objects, made with hns's credentials after the caller has been
//! authorized. Errors from kube-apiserver come back as the cluster's own `Status`.

use hns_api::keys;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::Value;

use crate::http::status::ApiError;

/// Field manager recorded on hns's writes.
pub const FIELD_MANAGER: &str = "hns-apiserver";

/// Writes Namespace objects.
#[derive(Clone)]
pub struct Writer {
    api: Api<Namespace>,
}

impl Writer {
    /// A writer using `client`.
    pub fn new(client: Client) -> Self {
        Writer { api: Api::all(client) }
    }

    /// Reads a namespace from kube-apiserver (not the cache).
    pub async fn get(&self, name: &str) -> Result<Option<Namespace>, ApiError> {
        self.api.get_opt(name).await.map_err(ApiError::from_kube)
    }

    /// Creates a namespace. With `dry_run`, kube-apiserver validates it and stores nothing.
    pub async fn create(&self, ns: &Namespace, dry_run: bool) -> Result<Namespace, ApiError> {
        let pp = PostParams { dry_run, field_manager: Some(FIELD_MANAGER.into()) };
        self.api.create(&pp, ns).await.map_err(ApiError::from_kube)
    }

    /// Applies a JSON merge patch to namespace `name`.
    pub async fn patch(&self, name: &str, patch: &Value, dry_run: bool) -> Result<Namespace, ApiError> {
        let mut pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        if dry_run {
            pp = pp.dry_run();
        }
        self.api.patch(name, &pp, &Patch::Merge(patch)).await.map_err(ApiError::from_kube)
    }

    /// Deletes namespace `name` if its uid is still `uid`, first holding it for its
    /// subnamespaces when `hold` (what [`crate::hierarchy::forest::Forest::needs_hold`] says;
    /// a dry run holds nothing); returns it as it is while it terminates, or `None` if it is
    /// already gone.
    pub async fn delete(
        &self,
        name: &str,
        uid: Option<String>,
        hold: bool,
        dry_run: bool,
    ) -> Result<Option<Namespace>, ApiError> {
        if hold && !dry_run {
            self.hold_for_subnamespaces(name).await?;
        }
        let dp = DeleteParams {
            dry_run,
            preconditions: Some(Preconditions { uid, resource_version: None }),
            ..Default::default()
        };
        let deleted = self.api.delete(name, &dp).await.map_err(ApiError::from_kube)?;
        Ok(deleted.left())
    }

    /// Gives namespace `name` HNC's `hasSubnamespace` finalizer, keeping its others (a strategic
    /// merge patch merges finalizer lists), just before it is deleted: see
    /// [`crate::hierarchy::forest::Forest::needs_hold`]. The webhook calls this for a user's
    /// deletion; hns's own go through [`Writer::delete`].
    /// The hold carries its time ([`keys::HELD_AT`]): one on a namespace still not deleted a
    /// while later is taken back by the controller.
    pub async fn hold_for_subnamespaces(&self, name: &str) -> Result<(), ApiError> {
        let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let hold = serde_json::json!({"metadata": {
            "finalizers": [keys::HAS_SUBNAMESPACE_FINALIZER],
            "annotations": {keys::HELD_AT: jiff::Timestamp::now().to_string()},
        }});
        self.api.patch(name, &pp, &Patch::Strategic(hold)).await.map_err(ApiError::from_kube)?;
        Ok(())
    }
}
