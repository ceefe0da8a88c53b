//! The resources hns serves, described once: discovery, OpenAPI, routing and Table output all
//! read these definitions, so a resource is never listed somewhere it is not served.

pub mod checks;
pub mod def;
pub mod hierarchicalresourcequotas;
pub mod hierarchyconfigurations;
pub mod hncconfigurations;
pub mod item;
pub mod listing;
pub mod managed;
pub mod render;
pub mod subnamespaces;
#[cfg(test)]
pub(crate) mod testing;
pub mod tree;
pub mod watch;
pub mod write;

use actix_web::http::header;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};

pub use def::{Call, Reply, ResourceDef};

use crate::auth::authn::Identity;
use crate::auth::view::ViewOnly;
use crate::http::negotiation::{negotiate, Accepted, IncludeObject, Representation};
use crate::http::request_info::{query_params, RequestInfo, Verb};
use crate::http::status::ApiError;
use crate::http::table::RenderOptions;
use crate::state::AppState;

/// Every resource served, in discovery order.
pub const ALL: &[&ResourceDef] = &[
    &hierarchyconfigurations::DEF,
    &hncconfigurations::DEF,
    &subnamespaces::SUBNAMESPACES,
    &subnamespaces::ANCHORS,
    &hierarchicalresourcequotas::DEF,
];

/// The definition of the resource with plural name `plural`.
pub fn find(plural: &str) -> Option<&'static ResourceDef> {
    ALL.iter().copied().find(|d| d.plural == plural)
}

/// Where a request goes: a watch stream, or an answer.
enum Route {
    Watch(def::CurrentObjects),
    Answer(Answer),
}

/// How a request other than a watch is answered: lists of the current objects by the generic
/// machinery, which sees the whole state; the rest by the resource's handler, which sees only
/// its resource's context.
enum Answer {
    List(def::CurrentObjects),
    Handle(def::Handler),
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
    let not_served = || ApiError::method_not_allowed(def.group_resource(), r.verb.as_str());
    let route = match (r.verb, def.handlers.list) {
        (Verb::Watch, _) => Route::Watch(def.handlers.watch.ok_or_else(not_served)?),
        (Verb::List, Some(def::List::Current(current))) => Route::Answer(Answer::List(current)),
        (verb, _) => Route::Answer(Answer::Handle(def.handlers.handler(verb).ok_or_else(not_served)?)),
    };
    let query = query_params(req.query_string());
    let header_str = |h| req.headers().get(h).and_then(|v| v.to_str().ok());
    let has_tree = def.plural == hierarchyconfigurations::DEF.plural && r.verb == Verb::List;
    let accepted = negotiate(header_str(header::ACCEPT), has_tree)?;
    let render = RenderOptions {
        representation: match accepted {
            Accepted::Render(representation) => representation,
            Accepted::HierarchyTree => Representation::Object,
        },
        include: IncludeObject::parse(query.get("includeObject").map(String::as_str))?,
        now: jiff::Timestamp::now(),
    };
    let view_only = req.extensions().get::<ViewOnly>().is_some();
    let view = match view_only {
        true => Some(listing::view_for(&state, &who, def, &r).await?),
        false => None,
    };
    let answer = match route {
        Route::Watch(current_objects) => {
            let peer = req.conn_data::<crate::auth::tls::PeerSocket>().cloned();
            let watch = watch::Request { def, current_objects, req: &r, query: &query, render: &render };
            return watch::serve(peer, state.clone(), who, view, watch).await;
        }
        Route::Answer(answer) => answer,
    };
    if r.verb == Verb::Patch {
        crate::http::patch::require_patch_type(header_str(header::CONTENT_TYPE))?;
    }
    let body = crate::http::body::read(payload).await?;
    if r.verb.is_single_object() {
        checks::ensure_seen(&state, &r.namespace).await?;
        // A subnamespace is its own namespace: a replica may not have seen it yet.
        if def.name_is_namespace && r.verb != Verb::Create {
            checks::ensure_seen_under(&state, &r.namespace, &r.name).await?;
        }
    }
    let call = Call {
        state: def::Shared::new(&state),
        who: &who,
        req: &r,
        def,
        query: &query,
        render: &render,
        body: &body,
        content_type: header_str(header::CONTENT_TYPE),
        user_agent: header_str(header::USER_AGENT),
        view,
    };
    let reply = match (accepted, answer) {
        (Accepted::HierarchyTree, _) => tree::list(&state, &call)?,
        (_, Answer::List(current)) => listing::list(&state, &call, current)?,
        (_, Answer::Handle(handler)) => handler(&call).await?,
    };
    let mut resp = HttpResponse::build(actix_web::http::StatusCode::from_u16(reply.code).unwrap_or_default());
    for w in reply.warnings {
        resp.append_header((header::WARNING, warning_header(&w)));
    }
    Ok(match reply.body {
        def::Body::Json(body) => resp.json(body),
        def::Body::Streamed(body) => resp.content_type(mime::APPLICATION_JSON).streaming(body),
    })
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
