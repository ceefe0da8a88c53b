//! Handlers without a cluster: the shared state around a cache filled from a compact
//! description, and a client that reaches nothing, so a test fails loudly if a path it expects to
//! be decided from the cache alone calls kube-apiserver.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::def::{Call, List, Reply, ResourceDef, Shared};
use crate::auth::authn::{AuthnState, Identity};
use crate::auth::authz::Authorizer;
use crate::auth::certs::ServingCert;
use crate::auth::view::{Mode, Views};
use crate::hierarchy::policy::testing::policy;
use crate::http::negotiation::{IncludeObject, Representation};
use crate::http::request_info::{ResourceRequest, Verb};
use crate::http::status::ApiError;
use crate::http::table::RenderOptions;
use crate::propagation::Propagation;
use crate::state::AppState;
use crate::store::cache::testing::cache;
use crate::store::config_store::ConfigStore;
use crate::store::parent_lock::ParentLock;
use crate::store::writer::Writer;

/// State whose cache holds the namespaces of `spec`; its client points at a closed port.
pub fn state(spec: &str) -> actix_web::web::Data<AppState> {
    let config = kube::Config::new("https://127.0.0.1:1".parse().expect("a valid URL"));
    let client = kube::Client::try_from(config).expect("a client for a fixed URL");
    let cache = Arc::new(cache(spec));
    actix_web::web::Data::new(AppState {
        propagation: Arc::new(Propagation::new(client.clone(), cache.changes.clone())),
        cache,
        authn: Arc::new(AuthnState::default()),
        authz: Authorizer::new(client.clone()),
        views: Views::new(Arc::default(), Authorizer::new(client.clone()), Mode::Rbac),
        policy: policy(),
        writer: Writer::new(client.clone()),
        config: Arc::new(ConfigStore::default()),
        shutdown: Arc::default(),
        parent_lock: Arc::new(ParentLock::new(client.clone(), "hns-system", "test".into())),
        ledgers: Arc::new(crate::store::quota_ledgers::LedgerStore::new(client.clone(), "hns-system")),
        client,
        namespace: "hns-system".into(),
        serving: ServingCert::empty(),
    })
}

/// Who sends, what, and how it is rendered: the parts of a [`Call`] from `alice`.
pub struct Parts {
    /// `alice`, authenticated.
    pub who: Identity,
    /// The request.
    pub req: ResourceRequest,
    /// Plain JSON.
    pub render: RenderOptions,
}

impl Parts {
    /// `verb` on object `name` of `def` in `namespace`.
    pub fn new(def: &ResourceDef, verb: Verb, (namespace, name): (&str, &str)) -> Parts {
        Parts {
            who: Identity {
                user: "alice".into(),
                groups: vec!["system:authenticated".into()],
                extra: Default::default(),
            },
            req: ResourceRequest {
                verb,
                group: hns_api::GROUP.into(),
                version: hns_api::VERSION.into(),
                namespace: namespace.into(),
                resource: def.plural.into(),
                name: name.into(),
                subresource: String::new(),
            },
            render: RenderOptions {
                representation: Representation::Object,
                include: IncludeObject::Object,
                now: jiff::Timestamp::now(),
            },
        }
    }

    /// The call of these parts with `body` and `query`.
    pub fn call<'a>(
        &'a self,
        state: &'a actix_web::web::Data<AppState>,
        def: &'static ResourceDef,
        query: &'a HashMap<String, String>,
        body: &'a [u8],
    ) -> Call<'a> {
        Call {
            state: Shared::new(state),
            who: &self.who,
            req: &self.req,
            def,
            query,
            render: &self.render,
            body,
            content_type: Some("application/json"),
            user_agent: Some("unit-test"),
            view: None,
        }
    }
}

/// Sends `verb` on object `name` of `def` in `namespace` with JSON `body`, as `alice`.
pub async fn send(
    state: &actix_web::web::Data<AppState>,
    def: &'static ResourceDef,
    verb: Verb,
    at: (&str, &str),
    body: &Value,
) -> Result<Reply, ApiError> {
    let parts = Parts::new(def, verb, at);
    let body = serde_json::to_vec(body).expect("JSON serializes");
    let query = HashMap::new();
    let call = parts.call(state, def, &query, &body);
    match (verb, def.handlers.list) {
        (Verb::List, Some(List::Current(current))) => super::listing::list(state, &call, current),
        _ => def.handlers.handler(verb).expect("a verb the resource serves")(&call).await,
    }
}
