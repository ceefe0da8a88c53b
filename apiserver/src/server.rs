//! The HTTP layer: routes, the authentication/authorization filter, and the discovery and
//! OpenAPI handlers. Resource requests go on to [`crate::resources::dispatch`].

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::http::ConnectionType;
use actix_web::middleware::{from_fn, Next};
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use hns_api::{GROUP, VERSION};

use crate::auth::authn::{ClusterPeer, Identity, PeerCertificates};
use crate::auth::view::ViewOnly;
use crate::http::body::MAX_BODY_BYTES;
use crate::http::negotiation::{discovery_format, DiscoveryFormat};
use crate::http::request_info::{RequestInfo, Verb};
use crate::http::status::ApiError;
use crate::state::AppState;
use crate::{admission, discovery, health, openapi, resources};

/// Paths served to anyone: health checks, as k8s.io/apiserver's
/// `--authorization-always-allow-paths`, and the admission webhooks, which kube-apiserver calls
/// without a client certificate unless configured to present one, and which only answer
/// questions, changing nothing (and say nothing of other namespaces to a caller without one: see
/// [`crate::admission`]). Everything else, `/metrics` included, needs authentication and a
/// SubjectAccessReview, as on Kubernetes' own components.
fn always_allowed(path: &str) -> bool {
    matches!(
        path,
        "/healthz"
            | "/livez"
            | "/readyz"
            | "/validate-namespaces"
            | "/mutate-namespaces"
            | "/validate-objects"
            | "/validate-exceptions"
            | "/validate-sources"
            | "/mutate-quota-status"
            | "/validate-quota-objects"
            | "/validate-quota-pending"
    )
}

/// Authenticates and authorizes every request except health checks. The parsed
/// [`RequestInfo`] is left in the request's extensions for the handlers. Refusals are answered
/// here (not passed up as errors), so that [`close_strangers_connections`] sees them too.
async fn guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if always_allowed(req.path()) {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let identity = match authenticate(&req).await {
        Ok(identity) => identity,
        Err(e) => return Ok(req.error_response(e)),
    };
    let (method, path, user) = (
        req.method().clone(),
        req.uri().path_and_query().map_or_else(|| req.path().to_string(), |p| p.to_string()),
        identity.0.user.clone(),
    );
    req.extensions_mut().insert(identity.0);
    req.extensions_mut().insert(identity.1);
    if identity.2 {
        req.extensions_mut().insert(ViewOnly);
    }
    let resp = next.call(req).await?;
    tracing::debug!(%method, %path, %user, status = resp.status().as_u16(), "request");
    Ok(resp.map_into_boxed_body())
}

/// Who sent `req`, what it asks, and whether it is answered with the user's view (a list or
/// watch, see [`answered_with_views`]), once authorized.
async fn authenticate(req: &ServiceRequest) -> Result<(Identity, RequestInfo, bool), ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("no application state"))?;
    let Some(config) = state.authn.current() else {
        return Err(ApiError::service_unavailable(
            "the authentication configuration has not been loaded yet; try again shortly",
        ));
    };
    let identity = config
        .authenticate(req.conn_data::<PeerCertificates>(), req.headers())
        .ok_or_else(ApiError::unauthorized)?;
    let info = RequestInfo::parse(req.method().as_str(), req.path(), req.query_string());
    if is_discovery(&info) {
        return Ok((identity, info, false));
    }
    // Lists and watches of hns's namespaced resources are authorized object by object, by
    // the user's view: kube-apiserver lets every authenticated user make them
    // (config/base/rbac.yaml), so a review of the list itself would say yes to anyone.
    if answered_with_views(&info) {
        return Ok((identity, info, true));
    }
    if let Err(e) = state.authz.authorize(&identity, &info).await {
        tracing::debug!(user = %identity.user, path = req.path(), reason = %e, "denied");
        return Err(e);
    }
    Ok((identity, info, false))
}

/// Whether a request reads discovery or OpenAPI, which need no review of their own: only
/// kube-apiserver can present the front-proxy identity, and it authorized this very request
/// before passing it on (RBAC's `system:discovery`); what they say, kube-apiserver's aggregated
/// discovery and OpenAPI already tell the same user. Reviewing them again cost hns a
/// SubjectAccessReview a minute for each controller polling discovery, at idle.
fn is_discovery(info: &RequestInfo) -> bool {
    let RequestInfo::NonResource { verb, path } = info else { return false };
    let served = [
        "/apis".to_string(),
        format!("/apis/{GROUP}"),
        format!("/apis/{GROUP}/{VERSION}"),
        "/version".to_string(),
        "/openapi/v2".to_string(),
        "/openapi/v3".to_string(),
        format!("/openapi/v3/apis/{GROUP}/{VERSION}"),
    ];
    verb == "get" && served.contains(path)
}

/// Whether a request is answered with its user's view: a list or watch of one of hns's
/// namespaced resources.
fn answered_with_views(info: &RequestInfo) -> bool {
    matches!(info, RequestInfo::Resource(r)
        if matches!(r.verb, Verb::List | Verb::Watch)
            && r.group == GROUP
            && r.subresource.is_empty()
            && resources::find(&r.resource).is_some_and(|d| d.namespaced))
}

/// Closes the connection after answering a peer that presented no certificate of the cluster's
/// (probes, direct clients, anyone who can reach the port): only kube-apiserver's connections are
/// kept open while idle ([`crate::options`]'s keep-alive outlasts kube-apiserver's own), so
/// strangers cannot hold thousands of idle connections. The answer says so (`Connection: close`),
/// so a client never reuses a connection about to be closed.
///
/// A stranger's request must also be over within [`STRANGER_DEADLINE`], its body included:
/// otherwise anyone could hold connections open by sending a body a byte at a time.
async fn close_strangers_connections(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let cluster_peer = req
        .app_data::<web::Data<AppState>>()
        .and_then(|s| s.authn.current())
        .is_some_and(|c| c.is_cluster_peer(req.conn_data::<PeerCertificates>()));
    req.extensions_mut().insert(ClusterPeer(cluster_peer));
    let draining = req.app_data::<web::Data<AppState>>().is_some_and(|s| s.shutdown.is_draining());
    if cluster_peer {
        let mut resp = next.call(req).await?.map_into_boxed_body();
        if draining {
            // Told to stop: kube-apiserver takes its next request elsewhere (crate::shutdown).
            resp.response_mut().head_mut().set_connection_type(ConnectionType::Close);
        }
        return Ok(resp);
    }
    let Ok(resp) = tokio::time::timeout(STRANGER_DEADLINE, next.call(req)).await else {
        // The request went with the handling given up; the server answers the error and, its
        // body not read to the end, closes the connection.
        return Err(ApiError::request_timeout(format!(
            "the request took longer than {} s to arrive and be answered",
            STRANGER_DEADLINE.as_secs()
        ))
        .into());
    };
    let mut resp = resp?.map_into_boxed_body();
    resp.response_mut().head_mut().set_connection_type(ConnectionType::Close);
    Ok(resp)
}

/// How long a request from a peer without a certificate of the cluster's may take, from its
/// headers to its answer. Such peers are probes, which send no body, and kube-apiserver calling
/// the webhooks when its admission configuration gives it no certificate, which sends its body
/// at once and gives up after the webhook's `timeoutSeconds` (5 s at most here).
const STRANGER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

async fn apis(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
    Ok(match discovery_format(accept)? {
        DiscoveryFormat::Legacy => HttpResponse::Ok().json(discovery::api_group_list()),
        DiscoveryFormat::Aggregated(v) => HttpResponse::Ok()
            .content_type(discovery::aggregated_content_type(v))
            .body(discovery::aggregated(v).to_string()),
    })
}

async fn api_group() -> HttpResponse {
    HttpResponse::Ok().json(discovery::api_group())
}

async fn api_resource_list() -> HttpResponse {
    HttpResponse::Ok().json(discovery::api_resource_list())
}

/// Serves a prebuilt OpenAPI document, honouring `If-None-Match`.
fn document(req: &HttpRequest, doc: &'static openapi::Document) -> HttpResponse {
    let cached =
        req.headers().get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(doc.etag.as_str());
    if cached {
        return HttpResponse::NotModified().insert_header((header::ETAG, doc.etag.clone())).finish();
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::ETAG, doc.etag.clone()))
        .body(doc.body.as_str())
}

async fn openapi_v2(req: HttpRequest) -> HttpResponse {
    document(&req, openapi::v2())
}

async fn openapi_v3_index() -> HttpResponse {
    HttpResponse::Ok().json(openapi::v3_index())
}

async fn openapi_v3(req: HttpRequest) -> HttpResponse {
    document(&req, openapi::v3_group_version())
}

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::path_not_found(req.path()))
}

async fn method_not_allowed(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::new_method_not_allowed_path(req.method().as_str(), req.path()))
}

/// A path served for one method: `web::get()` (HEAD too) for reads, `web::post()` for the
/// admission webhooks, to which kube-apiserver POSTs its AdmissionReviews. Any other method is
/// answered 405 with a Status.
pub fn only<F, Args>(method: actix_web::Route, path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path).route(method.to(handler)).default_service(web::to(method_not_allowed))
}

/// All routes, for `App::configure`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    let gv = format!("/apis/{GROUP}/{VERSION}");
    cfg.service(only(web::get(), "/healthz", health::healthz))
        .service(only(web::get(), "/livez", health::livez))
        .service(only(web::get(), "/readyz", health::readyz))
        .service(only(web::get(), "/version", health::version))
        .service(only(web::get(), "/apis", apis))
        .service(only(web::get(), &format!("/apis/{GROUP}"), api_group))
        .service(only(web::get(), &gv, api_resource_list))
        .service(web::resource(format!("{gv}/{{rest:.+}}")).to(resources::dispatch))
        .service(only(web::post(), "/validate-namespaces", admission::validate_namespaces))
        .service(only(web::post(), "/mutate-namespaces", admission::mutate_namespaces))
        .service(only(web::post(), "/validate-objects", admission::validate_objects))
        .service(only(web::post(), "/validate-exceptions", admission::validate_exceptions))
        .service(only(web::post(), "/validate-sources", admission::sources::validate_sources))
        .service(only(web::post(), "/mutate-quota-status", admission::quota_webhooks::admit_status))
        .service(only(web::post(), "/validate-quota-objects", admission::quota_webhooks::validate_objects))
        .service(only(web::post(), "/validate-quota-pending", admission::quota_webhooks::validate_pending))
        .service(only(web::get(), "/openapi/v2", openapi_v2))
        .service(only(web::get(), "/openapi/v3", openapi_v3_index))
        .service(only(web::get(), &format!("/openapi/v3/apis/{GROUP}/{VERSION}"), openapi_v3))
        .default_service(web::to(not_found));
}

/// The Status for a JSON body (an admission webhook's) that could not be read.
fn json_refused(e: actix_web::error::JsonPayloadError, req: &HttpRequest) -> ApiError {
    use actix_web::error::JsonPayloadError;
    match e {
        JsonPayloadError::Overflow { limit } | JsonPayloadError::OverflowKnownLength { limit, .. } => {
            ApiError::too_large(limit)
        }
        JsonPayloadError::ContentType => {
            let got = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
            ApiError::unsupported_media_type(got, &["application/json"])
        }
        e => ApiError::bad_request(format!("the body could not be read as a JSON AdmissionReview: {e}")),
    }
}

/// The application: routes behind the guard, body size limits and Status errors for bad JSON.
pub fn app(
    state: web::Data<AppState>,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    actix_web::App::new()
        .app_data(state)
        .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
        .app_data(
            web::JsonConfig::default()
                .limit(MAX_BODY_BYTES)
                .error_handler(|e, req| json_refused(e, req).into()),
        )
        .wrap(from_fn(guard))
        .wrap(from_fn(close_strangers_connections))
        .configure(routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_webhook_body_is_answered_with_a_status() {
        use actix_web::error::JsonPayloadError;
        let req = actix_web::test::TestRequest::post()
            .insert_header(("Content-Type", "text/plain"))
            .to_http_request();
        let code = |e| json_refused(e, &req).code;
        assert_eq!(code(JsonPayloadError::Overflow { limit: 10 }), 413);
        assert_eq!(code(JsonPayloadError::ContentType), 415);
        assert!(json_refused(JsonPayloadError::ContentType, &req).message.contains("text/plain"));
        let not_json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        assert_eq!(code(JsonPayloadError::Deserialize(not_json)), 400);
    }

    #[test]
    fn only_reads_of_discovery_and_openapi_go_unreviewed() {
        let info = |method: &str, path: &str| RequestInfo::parse(method, path, "");
        for path in ["/apis", "/apis/hnc.x-k8s.io", "/apis/hnc.x-k8s.io/v1alpha2", "/openapi/v2", "/version"]
        {
            assert!(is_discovery(&info("GET", path)), "{path}");
        }
        assert!(!is_discovery(&info("POST", "/apis")), "not a read");
        assert!(
            !is_discovery(&info("GET", "/metrics")),
            "metrics are reviewed, as on Kubernetes' components"
        );
        let resource = info("GET", "/apis/hnc.x-k8s.io/v1alpha2/namespaces/a/subnamespaces");
        assert!(!is_discovery(&resource), "resources are reviewed");
    }
}
