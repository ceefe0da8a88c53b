//! The checks every resource shares: names and namespaces in bodies, refusals as `Status`es,
//! and reading the caller's own writes back from the cache.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, StatusCause};

use super::def::ResourceDef;
use crate::hierarchy::rules::Refusal;
use crate::http::status::{ApiError, GroupResource};
use crate::state::AppState;
use crate::store::cache::Cache;

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

/// For an object named after a namespace (a subnamespace, in `parent`): makes sure the cache has
/// seen namespace `name` if it exists, unless the cache already holds it under `parent`. Every
/// other case pays the same GET, whether or not the cache knows `name` elsewhere: a user may ask
/// for any name in a namespace they may read, and how long a 404 took must not tell them
/// whether a namespace of that name exists somewhere they may not look.
pub async fn ensure_seen_under(state: &AppState, parent: &str, name: &str) -> Result<(), ApiError> {
    let known_here = state.cache.read().get(name).is_some_and(|n| n.parent.as_deref() == Some(parent));
    if name.is_empty() || known_here {
        return Ok(());
    }
    match state.writer.get(name).await? {
        Some(found) if !state.cache.caught_up_with(&found).await => Err(lagging()),
        _ => Ok(()),
    }
}

/// Waits until the cache holds a namespace as one of hns's writes returned it, so the client's
/// next read from this replica includes its write. The write is made either way; a watch that
/// lags this long is only logged (responses are rendered from the written object).
pub async fn await_write(cache: &Cache, written: &Namespace) {
    if !cache.caught_up_with(written).await {
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

/// The name of a written object, as [`check_name`], once its metadata is valid as kube-apiserver
/// validates every object's: hns stores no owner references (its objects are views of
/// namespaces), but one it would refuse is refused here too rather than dropped in silence.
pub fn check_metadata(def: &ResourceDef, url_name: &str, meta: &ObjectMeta) -> Result<String, ApiError> {
    let name = check_name(def, url_name, meta.name.as_deref())?;
    let causes = owner_reference_errors(meta.owner_references.as_deref().unwrap_or_default());
    if !causes.is_empty() {
        return Err(refused(def, &name, Refusal::Invalid(causes)));
    }
    Ok(name)
}

/// What apimachinery's `ValidateOwnerReferences` finds wrong in `refs`, as (field, message).
fn owner_reference_errors(refs: &[OwnerReference]) -> Vec<(String, String)> {
    const FIELD: &str = "metadata.ownerReferences";
    let mut causes = Vec::new();
    for r in refs {
        if r.api_version.is_empty() || r.api_version.split('/').count() > 2 || r.api_version.ends_with('/') {
            causes.push((
                format!("{FIELD}.apiVersion"),
                format!(
                    "Invalid value: \"{}\": version must not be empty and must be GROUP/VERSION or VERSION",
                    r.api_version
                ),
            ));
        }
        for (field, value) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
            if value.is_empty() {
                causes.push((
                    format!("{FIELD}.{field}"),
                    format!("Invalid value: \"\": {field} must not be empty"),
                ));
            }
        }
    }
    let controllers: Vec<&str> =
        refs.iter().filter(|r| r.controller == Some(true)).map(|r| r.name.as_str()).collect();
    if controllers.len() > 1 {
        causes.push((
            FIELD.to_string(),
            format!(
                "Invalid value: only one reference can have Controller set to true; found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        ));
    }
    causes
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

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(kind: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: "n".into(),
            uid: "u".into(),
            controller: Some(controller),
            ..Default::default()
        }
    }

    #[test]
    fn owner_references_need_every_required_field_and_one_controller_at_most() {
        assert!(owner_reference_errors(&[owner("ConfigMap", true), owner("Secret", false)]).is_empty());
        let missing =
            owner_reference_errors(&[OwnerReference { api_version: "a/b/c".into(), ..owner("", false) }]);
        let fields: Vec<&str> = missing.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["metadata.ownerReferences.apiVersion", "metadata.ownerReferences.kind"]);
        let two = owner_reference_errors(&[owner("ConfigMap", true), owner("Secret", true)]);
        assert_eq!(two.len(), 1, "{two:?}");
    }

    /// Issue 40, W1: a 404 for a name the cache knows elsewhere costs what one for a name that
    /// exists nowhere costs (a look at kube-apiserver, which this state cannot reach).
    #[tokio::test]
    async fn a_name_known_elsewhere_is_looked_up_as_one_known_nowhere() {
        let state = crate::resources::testing::state("team-a dev:~team-a other");
        assert!(ensure_seen_under(&state, "team-a", "dev").await.is_ok(), "team-a's own: from the cache");
        assert!(ensure_seen_under(&state, "team-a", "other").await.is_err(), "another's: asked");
        assert!(ensure_seen_under(&state, "team-a", "nowhere").await.is_err(), "nobody's: asked");
    }
}
