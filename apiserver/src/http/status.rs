//! API errors, answered as `metav1.Status` objects with Kubernetes' reasons and codes.
//!
//! The constructors mirror `k8s.io/apimachinery/pkg/api/errors` (`NewNotFound`, `NewForbidden`,
//! …) so messages read the way kubectl users know them.

use actix_web::{http::StatusCode, HttpResponse, ResponseError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

/// An error answered to an API client as a `Status`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable message: what happened and, where it helps, what to do.
    pub message: String,
    /// The object the error is about, and field causes for `Invalid`.
    pub details: Option<Box<StatusDetails>>,
}

/// The group/resource an error is about, e.g. `hierarchyconfigurations.hnc.x-k8s.io`.
#[derive(Debug, Clone, Copy)]
pub struct GroupResource<'a> {
    /// API group; empty for the core group.
    pub group: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
}

impl std::fmt::Display for GroupResource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// metav1's `StatusReason`s, so that kube-apiserver's answers keep theirs when passed on.
const STATUS_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None }
    }

    fn with_details(mut self, gr: GroupResource<'_>, name: &str) -> Self {
        self.details = Some(Box::new(StatusDetails {
            group: Some(gr.group.to_string()),
            kind: Some(gr.resource.to_string()),
            name: (!name.is_empty()).then(|| name.to_string()),
            ..Default::default()
        }));
        self
    }

    /// 400: the request itself is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401: no trusted identity came with the request.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 for a resource request, phrased like kube-apiserver's RBAC denials.
    pub fn forbidden(gr: GroupResource<'_>, name: &str, message: impl std::fmt::Display) -> Self {
        let what = if name.is_empty() { format!("{gr}") } else { format!("{gr} \"{name}\"") };
        Self::new(403, "Forbidden", format!("{what} is forbidden: {message}")).with_details(gr, name)
    }

    /// 403 for a non-resource path such as `/apis`.
    pub fn forbidden_path(user: &str, verb: &str, path: &str) -> Self {
        Self::new(403, "Forbidden", format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""))
    }

    /// 404 for a named object.
    pub fn not_found(gr: GroupResource<'_>, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found")).with_details(gr, name)
    }

    /// 404 for a path nothing is served at.
    pub fn path_not_found(path: &str) -> Self {
        Self::new(404, "NotFound", format!("the server could not find the requested resource (path {path})"))
    }

    /// 405: the resource exists but does not support this verb.
    pub fn method_not_allowed(gr: GroupResource<'_>, verb: &str) -> Self {
        Self::new(405, "MethodNotAllowed", format!("{verb} is not supported on {gr}")).with_details(gr, "")
    }

    /// 405 for a path that exists but not for this method (e.g. `POST /apis`).
    pub fn new_method_not_allowed_path(method: &str, path: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method} {path})"),
        )
    }

    /// 406: none of the media types in `Accept` can be produced.
    pub fn not_acceptable(accept: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: application/json (with as=Table or as=PartialObjectMetadata[List] of meta.k8s.io/v1), got: {accept}"),
        )
    }

    /// 409: the object exists already.
    pub fn already_exists(gr: GroupResource<'_>, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{gr} \"{name}\" already exists")).with_details(gr, name)
    }

    /// 409: the change clashes with the current state (e.g. a stale resourceVersion).
    pub fn conflict(gr: GroupResource<'_>, name: &str, why: impl std::fmt::Display) -> Self {
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"))
            .with_details(gr, name)
    }

    /// 409 for a write based on an old resourceVersion.
    pub fn stale(gr: GroupResource<'_>, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 for a server-side apply that would change fields other managers own, worded and
    /// detailed as kube-apiserver's (one `FieldManagerConflict` cause per field).
    pub fn apply_conflict(conflicts: &crate::ssa::Conflicts) -> Self {
        let causes = conflicts
            .0
            .iter()
            .map(|c| StatusCause {
                reason: Some("FieldManagerConflict".into()),
                message: Some(format!("conflict with {}", c.manager)),
                field: Some(c.field.clone()),
            })
            .collect();
        let mut err = Self::new(409, "Conflict", conflicts.to_string());
        err.details = Some(Box::new(StatusDetails { causes: Some(causes), ..Default::default() }));
        err
    }

    /// 415: the body's media type is not one the endpoint takes.
    pub fn unsupported_media_type(got: &str, supported: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {} (got \"{got}\")", supported.join(", ")),
        )
    }

    /// 422: a JSON patch could not be applied (e.g. a failed `test` operation).
    pub fn unprocessable_patch(why: impl std::fmt::Display) -> Self {
        Self::new(422, "Invalid", format!("the patch could not be applied: {why}"))
    }

    /// 422 with field causes. Named by kind, as kube-apiserver names invalid objects
    /// (`The HierarchyConfiguration "hierarchy" is invalid: …` in kubectl).
    pub fn invalid(gr: GroupResource<'_>, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let summary = causes
            .iter()
            .map(|c| format!("{}: {}", c.field.as_deref().unwrap_or(""), c.message.as_deref().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(", ");
        let qualified = GroupResource { group: gr.group, resource: kind };
        let mut err = Self::new(422, "Invalid", format!("{qualified} \"{name}\" is invalid: {summary}"))
            .with_details(qualified, name);
        if let Some(d) = err.details.as_mut() {
            d.causes = Some(causes);
        }
        err
    }

    /// An error answered by kube-apiserver to one of hns's own calls, passed on as it came so
    /// the caller sees the cluster's own reason (a conflict, another webhook's denial, …).
    pub fn from_kube(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(s) => {
                let code = s.code;
                let reason = STATUS_REASONS
                    .iter()
                    .find(|r| **r == s.reason)
                    .copied()
                    .unwrap_or(if code >= 500 { "InternalError" } else { "" });
                Self::new(code, reason, s.message.clone())
            }
            other => Self::internal(kube_message(&other)),
        }
    }

    /// 413: the body is larger than the server takes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 413 with a message of the caller's: what the request asked for is too large.
    pub fn too_large_with(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 504 for a resourceVersion newer than hns has seen after waiting for it, as
    /// kube-apiserver's watch cache answers (`NewTooLargeResourceVersionError`): the client
    /// retries, or its resourceVersion is not one of this cluster's.
    pub fn too_large_resource_version(asked: u64, current: u64) -> Self {
        let mut e =
            Self::new(504, "Timeout", format!("Too large resource version: {asked}, current: {current}"));
        e.details = Some(Box::new(StatusDetails {
            causes: Some(vec![StatusCause {
                reason: Some("ResourceVersionTooLarge".into()),
                message: Some("Too large resource version".into()),
                field: None,
            }]),
            retry_after_seconds: Some(1),
            ..StatusDetails::default()
        }));
        e
    }

    /// 408: the client took too long to send its request.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(408, "Timeout", message)
    }

    /// 410: a resourceVersion older than the server remembers; list again.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 422 for watch options that do not fit together.
    pub fn invalid_watch(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 500: a fault of ours or of the cluster behind us.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {message}"))
    }

    /// 503: not ready to answer yet; the client should retry.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `Status` as JSON, with its type fields (k8s-openapi's `Status` leaves them out).
    pub fn to_status_value(&self) -> serde_json::Value {
        let mut body = serde_json::to_value(self.to_status()).unwrap_or_default();
        body["kind"] = "Status".into();
        body["apiVersion"] = "v1".into();
        body["metadata"] = serde_json::json!({});
        body
    }

    /// The `Status` object sent to the client.
    pub fn to_status(&self) -> Status {
        Status {
            status: Some("Failure".into()),
            message: Some(self.message.clone()),
            reason: Some(self.reason.into()),
            code: Some(self.code.into()),
            details: self.details.as_deref().cloned(),
            ..Default::default()
        }
    }
}

/// A kube error in words for users: an answer of kube-apiserver by its `Status` message (kube's
/// own Display of it appends the `Status`'s debug form, which is for logs), anything else as
/// kube words it.
pub fn kube_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(s) if s.message.is_empty() => format!("the server answered {} {}", s.code, s.reason),
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(self.to_status_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HC: GroupResource<'static> =
        GroupResource { group: "hnc.x-k8s.io", resource: "hierarchyconfigurations" };

    #[test]
    fn not_found_reads_like_kube_apiserver() {
        let e = ApiError::not_found(HC, "hierarchy");
        assert_eq!(e.code, 404);
        assert_eq!(e.message, "hierarchyconfigurations.hnc.x-k8s.io \"hierarchy\" not found");
        let s = e.to_status();
        assert_eq!(s.details.unwrap().name.as_deref(), Some("hierarchy"));
    }

    #[test]
    fn forbidden_names_the_resource() {
        let e = ApiError::forbidden(HC, "", "User \"bob\" cannot list resource");
        assert_eq!(
            e.message,
            "hierarchyconfigurations.hnc.x-k8s.io is forbidden: User \"bob\" cannot list resource"
        );
    }

    #[test]
    fn response_is_a_status_object() {
        let resp = ApiError::unauthorized().error_response();
        assert_eq!(resp.status(), 401);
    }

    #[test]
    fn cluster_answers_keep_their_reason() {
        let kube = |code: u16, reason: &str| {
            ApiError::from_kube(kube::Error::Api(Box::new(
                kube::core::Status::failure("m", reason).with_code(code),
            )))
        };
        assert_eq!(kube(413, "RequestEntityTooLarge").reason, "RequestEntityTooLarge");
        assert_eq!(kube(429, "TooManyRequests").reason, "TooManyRequests");
        assert_eq!(kube(418, "Teapot").reason, "");
        assert_eq!(kube(502, "Bad").reason, "InternalError");
    }

    #[test]
    fn kube_errors_read_as_their_message() {
        let forbidden = kube::Error::Api(Box::new(
            kube::core::Status::failure("services is forbidden: User \"x\" cannot list", "Forbidden")
                .with_code(403),
        ));
        assert!(forbidden.to_string().contains("Status {"), "kube's Display carries the Debug form");
        assert_eq!(kube_message(&forbidden), "services is forbidden: User \"x\" cannot list");
        let bare = kube::Error::Api(Box::new(kube::core::Status::failure("", "Forbidden").with_code(403)));
        assert_eq!(kube_message(&bare), "the server answered 403 Forbidden");
    }
}
