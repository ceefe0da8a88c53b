//! The checks every resource shares: names and namespaces in bodies, refusals as `Status`es,
//! and reading the caller's own writes back from the cache.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;

use super::def::ResourceDef;
use crate::hierarchy::rules::Refusal;
use crate::http::status::{ApiError, GroupResource};
use crate::state::AppState;

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
