//! Lists of namespaced resources, whole or as a user's view: the objects a list answers with and
//! a watch starts from.

use serde_json::Value;

use super::def::{Call, CurrentObjects, Reply, ResourceDef};
use super::render;
use crate::auth::authn::Identity;
use crate::auth::authz;
use crate::auth::view::View;
use crate::hierarchy::forest::Forest;
use crate::http::list::{paginate, ListOptions};
use crate::http::request_info::{RequestInfo, ResourceRequest};
use crate::http::status::ApiError;
use crate::state::AppState;

/// What `who` may see of `def` across all namespaces.
pub async fn view_of(state: &AppState, who: &Identity, def: &ResourceDef) -> Result<View, ApiError> {
    let namespaces = || state.cache.read().iter().map(|n| n.name().to_string()).collect();
    state.views.view(who, hns_api::GROUP, def.plural, namespaces).await
}

/// The view a list or watch of `def` is answered with: `None` when the user may get every object
/// (nothing to filter). A list in a namespace where the user may get nothing is refused as
/// kube-apiserver refuses it.
pub async fn view_for(
    state: &AppState,
    who: &Identity,
    def: &ResourceDef,
    req: &ResourceRequest,
) -> Result<Option<View>, ApiError> {
    let view = view_of(state, who, def).await?;
    if view.shows_everything() {
        return Ok(None);
    }
    if !req.namespace.is_empty() && !view.shows_any_in(&req.namespace) {
        return Err(authz::denial(who, &RequestInfo::Resource(req.clone()), ""));
    }
    Ok(Some(view))
}

/// Whether `view` shows `object`.
pub fn shows(view: &View, object: &Value) -> bool {
    let meta = &object["metadata"];
    view.shows(meta["namespace"].as_str().unwrap_or_default(), meta["name"].as_str().unwrap_or_default())
}

/// The objects of `def` in `namespace` (all namespaces when empty), in key order; with a view,
/// only those it shows, read only from the namespaces it may show anything in.
pub fn visible(
    state: &AppState,
    forest: &Forest,
    def: &ResourceDef,
    current: CurrentObjects,
    namespace: &str,
    view: Option<&View>,
) -> Vec<Value> {
    let Some(view) = view else {
        return current(state, forest, def, namespace);
    };
    let objects = match view.namespaces().filter(|_| namespace.is_empty()) {
        Some(namespaces) => namespaces.flat_map(|ns| current(state, forest, def, ns)).collect(),
        None => current(state, forest, def, namespace),
    };
    objects.into_iter().filter(|o| shows(view, o)).collect()
}

/// Serves a list of a namespaced resource whose objects `current` gives.
pub fn list(call: &Call<'_>, current: CurrentObjects) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    let forest = call.state.cache.read();
    let items = visible(call.state, &forest, call.def, current, &call.req.namespace, call.view.as_ref());
    if let Some(view) = &call.view {
        call.state.views.remember(call.who, call.def.plural, view);
    }
    let rv = forest.resource_version();
    Ok(Reply::ok(render::list(call.def, paginate(items, &opts, &rv), &rv, call.render)))
}
