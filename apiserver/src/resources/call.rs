//! One API call as a resource module sees it, what it answers, and the checks every resource
//! shares: names and namespaces in bodies, refusals as `Status`es, and reading the caller's own
//! writes back from the cache.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;
use serde_json::Value;

use super::def::ResourceDef;
use super::render::RenderOptions;
use crate::auth::authn::Identity;
use crate::hierarchy::rules::Refusal;
use crate::http::request_info::ResourceRequest;
use crate::http::status::{ApiError, GroupResource};
use crate::state::AppState;

/// One API call, as the resource modules see it.
pub struct Call<'a> {
    /// Shared state.
    pub state: &'a AppState,
    /// The caller.
    pub who: &'a Identity,
    /// What is asked.
    pub req: &'a ResourceRequest,
    /// The resource asked for.
    pub def: &'static ResourceDef,
    /// Query parameters.
    pub query: &'a HashMap<String, String>,
    /// How to render objects.
    pub render: &'a RenderOptions,
    /// The request body (empty for reads).
    pub body: &'a [u8],
    /// Its `Content-Type`.
    pub content_type: Option<&'a str>,
    /// The client's `User-Agent`, which names the manager of writes without `fieldManager`.
    pub user_agent: Option<&'a str>,
}

/// What a resource module answers.
pub struct Reply {
    /// HTTP status (200, 201).
    pub code: u16,
    /// The rendered body.
    pub body: Value,
    /// `Warning` headers (e.g. unknown fields).
    pub warnings: Vec<String>,
}

impl Reply {
    /// 200 with `body`.
    pub fn ok(body: Value) -> Self {
        Reply { code: 200, body, warnings: Vec::new() }
    }
}

/// Makes sure the cache has seen namespace `ns` if it exists: a namespace created a moment ago
/// (perhaps through another replica) may not have reached this replica's watch yet, and a
/// client that just created it expects to use it. Costs one GET, and only on a cache miss.
pub async fn ensure_seen(state: &AppState, ns: &str) -> Result<(), ApiError> {
    if ns.is_empty() || state.cache.read().get(ns).is_some() {
        return Ok(());
    }
    match state.writer.get(ns).await? {
        Some(found) if !state.cache.caught_up_with(&found).await => Err(lagging()),
        _ => Ok(()),
    }
}

/// Waits until the cache holds a namespace as one of hns's writes returned it, so the client's
/// next read from this replica includes its write. The write is made either way; a watch that
/// lags this long is only logged (responses are rendered from the written object).
pub async fn await_write(state: &AppState, written: &Namespace) {
    if !state.cache.caught_up_with(written).await {
        tracing::warn!(
            namespace = written.metadata.name.as_deref().unwrap_or_default(),
            "the namespace watch has not brought hns's own write yet"
        );
    }
}

/// The namespace watch has not brought a change kube-apiserver already made.
fn lagging() -> ApiError {
    ApiError::service_unavailable(
        "hns-apiserver's namespace cache has not caught up with kube-apiserver; retry in a few seconds",
    )
}

/// A refusal from [`crate::hierarchy::rules`] as the `Status` for object `name` of `def`.
pub fn refused(def: &ResourceDef, name: &str, refusal: Refusal) -> ApiError {
    let gr = def.group_resource();
    match refusal {
        Refusal::Invalid(causes) => ApiError::invalid(
            gr,
            def.kind,
            name,
            causes
                .into_iter()
                .map(|(field, message)| StatusCause {
                    field: Some(field),
                    message: Some(message),
                    reason: Some("FieldValueInvalid".into()),
                })
                .collect(),
        ),
        Refusal::Forbidden(m) => ApiError::forbidden(gr, name, m),
        Refusal::AlreadyExists => ApiError::already_exists(gr, name),
        Refusal::Conflict(m) => ApiError::conflict(gr, name, m),
        Refusal::NamespaceNotFound(ns) => {
            ApiError::not_found(GroupResource { group: "", resource: "namespaces" }, &ns)
        }
        Refusal::NotSynced(m) => ApiError::service_unavailable(m),
    }
}

/// The name in a written object must be the one in the URL (when the URL has one).
pub fn check_name(def: &ResourceDef, url_name: &str, body_name: Option<&str>) -> Result<String, ApiError> {
    match (url_name, body_name.filter(|n| !n.is_empty())) {
        ("", None) => Err(ApiError::invalid(
            def.group_resource(),
            def.kind,
            "",
            vec![StatusCause {
                field: Some("metadata.name".into()),
                message: Some("Required value: name is required".into()),
                reason: Some("FieldValueRequired".into()),
            }],
        )),
        ("", Some(n)) => Ok(n.to_string()),
        (u, Some(n)) if u != n => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({u})"
        ))),
        (u, _) => Ok(u.to_string()),
    }
}

/// The namespace in a written object, if given, must be the one in the URL.
pub fn check_namespace(url_ns: &str, body_ns: Option<&str>) -> Result<(), ApiError> {
    match body_ns.filter(|n| !n.is_empty()) {
        Some(n) if n != url_ns => Err(ApiError::bad_request(format!(
            "the namespace of the provided object ({n}) does not match the namespace sent on the request ({url_ns})"
        ))),
        _ => Ok(()),
    }
}
