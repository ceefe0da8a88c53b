//! The resources hns serves, described once: discovery, OpenAPI, routing and Table output all
//! read these definitions, so a resource is never listed somewhere it is not served.

pub mod hierarchyconfigurations;

use actix_web::http::header;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::negotiation::{negotiate, IncludeObject};
use crate::render::{Column, RenderOptions};
use crate::request_info::{query_params, RequestInfo};
use crate::server::AppState;
use crate::status::{ApiError, GroupResource};

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
pub const ALL: &[&ResourceDef] = &[&hierarchyconfigurations::DEF];

/// The definition of the resource with plural name `plural`.
pub fn find(plural: &str) -> Option<&'static ResourceDef> {
    ALL.iter().copied().find(|d| d.plural == plural)
}

/// Serves a resource request under `/apis/<group>/<version>/`: finds the resource, checks the
/// verb is served, negotiates the representation and hands over to the resource's module.
pub async fn dispatch(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let info = req.extensions().get::<RequestInfo>().cloned();
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
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let render = RenderOptions {
        representation: negotiate(accept)?,
        include: IncludeObject::parse(query.get("includeObject").map(String::as_str))?,
        now: jiff::Timestamp::now(),
    };
    let body = match def.plural {
        hierarchyconfigurations::PLURAL => hierarchyconfigurations::serve(&state, &r, &query, &render)?,
        _ => return Err(ApiError::path_not_found(req.path())),
    };
    Ok(HttpResponse::Ok().json(body))
}
