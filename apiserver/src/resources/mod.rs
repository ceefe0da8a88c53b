//! The resources hns serves, described once: discovery, OpenAPI, routing and Table output all
//! read these definitions, so a resource is never listed somewhere it is not served.

pub mod hierarchyconfigurations;
pub mod hncconfigurations;
pub mod managed;
pub mod render;
pub mod subnamespaces;
pub mod watch;

use std::collections::HashMap;

use actix_web::http::header;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;
use serde_json::Value;

use crate::auth::authn::Identity;
use crate::hierarchy::rules::Refusal;
use crate::http::body::MAX_BODY_BYTES;
use crate::http::negotiation::{negotiate, IncludeObject};
use crate::http::request_info::{query_params, RequestInfo, ResourceRequest};
use crate::http::status::{ApiError, GroupResource};
use crate::resources::render::{Column, RenderOptions};
use crate::state::AppState;
use crate::store::hub::Family;

/// How one resource is served.
pub struct ResourceDef {
    /// Plural name, the URL segment (`hierarchyconfigurations`).
    pub plural: &'static str,
    /// Singular name (`hierarchyconfiguration`).
    pub singular: &'static str,
    /// Kind of its objects.
    pub kind: &'static str,
    /// Kind of its lists.
    pub list_kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// The verbs really implemented: controllers act on what discovery lists.
    pub verbs: &'static [&'static str],
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Table columns, `Name` first.
    pub columns: &'static [Column],
    /// Table cells of an object, one per column.
    pub cells: fn(&Value, jiff::Timestamp) -> Vec<Value>,
    /// What the kind is, for `kubectl explain`.
    pub description: &'static str,
    /// The family of derived objects its watch follows.
    pub family: Family,
    /// Schemas of `spec` and `status` (OpenAPI), registered in the generator's definitions.
    pub schemas: fn(&mut schemars::SchemaGenerator) -> (schemars::Schema, Option<schemars::Schema>),
}

impl ResourceDef {
    /// `resource.group`, for error messages.
    pub fn group_resource(&self) -> GroupResource<'static> {
        GroupResource { group: hns_api::GROUP, resource: self.plural }
    }

    /// Whether `verb` is served.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }
}

/// Every resource served, in discovery order.
pub const ALL: &[&ResourceDef] = &[
    &hierarchyconfigurations::DEF,
    &hncconfigurations::DEF,
    &subnamespaces::SUBNAMESPACES,
    &subnamespaces::ANCHORS,
];

/// The definition of the resource with plural name `plural`.
pub fn find(plural: &str) -> Option<&'static ResourceDef> {
    ALL.iter().copied().find(|d| d.plural == plural)
}

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

/// Reads the body up to [`MAX_BODY_BYTES`], answering 413 beyond.
async fn read_body(mut payload: web::Payload) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::too_large(MAX_BODY_BYTES));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Serves a resource request under `/apis/<group>/<version>/`: finds the resource, checks the
/// verb is served, negotiates the representation and hands over to the resource's module.
pub async fn dispatch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let info = req.extensions().get::<RequestInfo>().cloned();
    let who = req.extensions().get::<Identity>().cloned().ok_or_else(ApiError::unauthorized)?;
    let Some(RequestInfo::Resource(r)) = info else {
        return Err(ApiError::path_not_found(req.path()));
    };
    let def = find(&r.resource)
        .filter(|d| r.subresource.is_empty() && (d.namespaced || r.namespace.is_empty()))
        .ok_or_else(|| ApiError::path_not_found(req.path()))?;
    if !def.supports(r.verb) {
        return Err(ApiError::method_not_allowed(def.group_resource(), r.verb));
    }
    let query = query_params(req.query_string());
    let header_str = |h| req.headers().get(h).and_then(|v| v.to_str().ok());
    let render = RenderOptions {
        representation: negotiate(header_str(header::ACCEPT))?,
        include: IncludeObject::parse(query.get("includeObject").map(String::as_str))?,
        now: jiff::Timestamp::now(),
    };
    if r.verb == "watch" {
        let peer = req.conn_data::<crate::auth::tls::PeerSocket>().cloned();
        return watch::serve(peer, &state, def, &r, &query, &render).await;
    }
    if r.verb == "patch" {
        crate::http::patch::require_patch_type(header_str(header::CONTENT_TYPE))?;
    }
    let body = read_body(payload).await?;
    if matches!(r.verb, "get" | "create" | "update" | "patch" | "delete") {
        ensure_seen(&state, &r.namespace).await?;
        // A subnamespace is its own namespace: a replica may not have seen it yet.
        if def.plural != hierarchyconfigurations::PLURAL && r.verb != "create" {
            ensure_seen(&state, &r.name).await?;
        }
    }
    let call = Call {
        state: &state,
        who: &who,
        req: &r,
        def,
        query: &query,
        render: &render,
        body: &body,
        content_type: header_str(header::CONTENT_TYPE),
        user_agent: header_str(header::USER_AGENT),
    };
    let reply = match def.plural {
        hierarchyconfigurations::PLURAL => hierarchyconfigurations::serve(&call).await?,
        hncconfigurations::PLURAL => hncconfigurations::serve(&call).await?,
        _ => subnamespaces::serve(&call).await?,
    };
    let mut resp = HttpResponse::build(actix_web::http::StatusCode::from_u16(reply.code).unwrap_or_default());
    for w in reply.warnings {
        resp.append_header((header::WARNING, warning_header(&w)));
    }
    Ok(resp.json(reply.body))
}

/// A `Warning` header value (RFC 7234: `299 - "text"`). Header values must be visible ASCII, and
/// the text can hold anything a client sent (an unknown field's name), so everything else is
/// escaped; otherwise building the response would fail after the write was made.
fn warning_header(text: &str) -> String {
    let mut quoted = String::from("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            ' '..='~' => quoted.push(c),
            _ => quoted.extend(c.escape_unicode()),
        }
    }
    quoted.push('"');
    quoted
}

/// The objects of `def` in `namespace` (all namespaces when empty), for a watch's initial events.
pub fn current_objects(
    state: &AppState,
    forest: &crate::hierarchy::forest::Forest,
    def: &ResourceDef,
    namespace: &str,
) -> Vec<Value> {
    let in_scope = |n: &&crate::hierarchy::forest::Node| namespace.is_empty() || n.name() == namespace;
    if def.plural == hncconfigurations::PLURAL {
        return vec![crate::store::config_store::value(&state.config)];
    }
    if def.plural == hierarchyconfigurations::PLURAL {
        forest
            .iter()
            .filter(in_scope)
            .filter_map(|n| crate::hierarchy::objects::hierarchy_configuration_value(forest, n.name()))
            .collect()
    } else {
        forest
            .iter()
            .filter(|n| n.is_subnamespace && (namespace.is_empty() || n.parent.as_deref() == Some(namespace)))
            .filter(|n| forest.anchor_exists(n))
            .map(|n| crate::hierarchy::objects::subnamespace(&state.policy, n, def.kind))
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_headers_are_visible_ascii_whatever_the_client_sent() {
        let w = warning_header("unknown field \"\u{1}\u{e9}\u{10ffff}\"");
        assert_eq!(w, r#"299 - "unknown field \"\u{1}\u{e9}\u{10ffff}\"""#);
        assert!(actix_web::http::header::HeaderValue::from_str(&w).is_ok());
    }
}
