//! Lists of namespaced resources, whole or as a user's view: the objects a list answers with and
//! a watch starts from.

use bytes::Bytes;
use serde_json::Value;

use super::def::{Call, CurrentObjects, Reads, Reply, ResourceDef};
use super::item::Item;
use super::render;
use crate::auth::authn::Identity;
use crate::auth::authz;
use crate::auth::view::View;
use crate::hierarchy::forest::{Forest, Node};
use crate::http::list::{paginate, ListOptions, Selectable};
use crate::http::request_info::{RequestInfo, ResourceRequest};
use crate::http::status::ApiError;
use crate::state::{AppState, Context};

/// What `who` may see of `def` across all namespaces.
pub async fn view_of(state: &AppState, who: &Identity, def: &ResourceDef) -> Result<View, ApiError> {
    let namespaces = || state.cache.read().iter().map(|n| n.name().to_string()).collect();
    state.views.view(who, hns_api::GROUP, def.plural, namespaces).await
}

/// The view a list or watch of `def` is answered with (one that shows everything filters
/// nothing, at the cost of a comparison per object). A list in a namespace where the user may get
/// nothing is refused as kube-apiserver refuses it.
pub async fn view_for(
    state: &AppState,
    who: &Identity,
    def: &ResourceDef,
    req: &ResourceRequest,
) -> Result<View, ApiError> {
    let view = view_of(state, who, def).await?;
    if !req.namespace.is_empty() && !view.shows_any_in(&req.namespace) {
        return Err(authz::denial(who, &RequestInfo::Resource(req.clone()), ""));
    }
    Ok(view)
}

/// The view to filter objects with: none when it shows everything (the hot paths of a
/// cluster-wide reader spared a look-up per object).
pub fn filter(view: Option<&View>) -> Option<&View> {
    view.filter(|v| !v.shows_everything())
}

/// Whether `view` shows `object`.
pub fn shows(view: &View, object: &impl Selectable) -> bool {
    view.shows(object.namespace(), object.name())
}

/// The namespaces a list of `def` in `namespace` (every namespace when empty) reads, in order;
/// with a view, only those it may show anything in.
pub fn namespaces<'a>(
    forest: &'a Forest,
    def: &ResourceDef,
    namespace: &'a str,
    view: Option<&'a View>,
) -> Box<dyn Iterator<Item = &'a str> + 'a> {
    if !namespace.is_empty() || !def.namespaced {
        Box::new(std::iter::once(namespace))
    } else if let Some(shown) = view.and_then(View::namespaces) {
        Box::new(shown)
    } else {
        Box::new(forest.names())
    }
}

/// The namespaces of [`namespaces`] that exist: every node of the forest, read in order, when
/// that is what is asked, rather than each name looked up again (at 100,000 namespaces the
/// look-ups were a fifth of a `HierarchyTree`'s time).
pub fn nodes<'a>(
    forest: &'a Forest,
    def: &ResourceDef,
    namespace: &'a str,
    view: Option<&'a View>,
) -> Box<dyn Iterator<Item = &'a Node> + 'a> {
    if namespace.is_empty() && def.namespaced && view.is_none_or(|v| v.namespaces().is_none()) {
        Box::new(forest.iter())
    } else {
        Box::new(namespaces(forest, def, namespace, view).filter_map(|ns| forest.get(ns)))
    }
}

/// The objects of `def` in `namespace` (every namespace when empty), in key order, rendered a
/// namespace at a time (by `in_namespace`) as the iterator is read; with a view, only those it
/// shows, read only from the namespaces it may show anything in.
pub fn objects<'a>(
    forest: &'a Forest,
    def: &'static ResourceDef,
    in_namespace: impl Fn(&str) -> Vec<Item> + 'a,
    namespace: &'a str,
    view: Option<&'a View>,
) -> impl Iterator<Item = Item> + 'a {
    namespaces(forest, def, namespace, view)
        .flat_map(in_namespace)
        .filter(move |o| view.is_none_or(|v| shows(v, o)))
}

/// A streamed answer is sent in pieces of about this size.
pub const PIECE_BYTES: usize = 64 << 10;

/// Serves a list of a namespaced resource whose objects `current` gives. A list across
/// namespaces is rendered from a snapshot of the forest: a page (`limit`) whole, since its size
/// is bounded, anything else while it is sent, so that answering every object of a
/// 100,000-namespace cluster holds one piece of it at a time, not the whole answer.
pub fn list(
    state: &actix_web::web::Data<AppState>,
    call: &Call<'_>,
    current: CurrentObjects,
) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    let view = page_view(state, call, &opts)?;
    if let Some(view) = &view {
        state.views.remember(call.who, call.def.plural, view);
    }
    if !call.req.namespace.is_empty() {
        // One namespace's objects are few: rendered whole under the cache's read lock, without
        // a snapshot, since a change of the forest while one is held copies the forest's maps
        // (the namespace controller lists each resource in each namespace it deletes).
        return Ok(whole(state, call, (&state.cache.read(), view.as_ref()), current, &opts));
    }
    let forest = state.cache.snapshot();
    if opts.limit.is_some() {
        return Ok(whole(state, call, (&forest, view.as_ref()), current, &opts));
    }
    let rv = handed_out(&forest, view.as_ref());
    let (state, def, render) = (state.clone(), call.def, *call.render);
    let (namespace, view) = (call.req.namespace.clone(), filter(view.as_ref()).cloned());
    let (envelope, field) = render::list_envelope(def, render::list_meta(&rv, None, None), &render);
    Ok(Reply::streamed(Box::pin(async_stream::stream! {
        let mut pieces = Pieces::open(envelope, field);
        let reads = Reads::of(&state);
        let in_namespace = |ns: &str| current(&reads, &forest, def, ns);
        let items = objects(&forest, def, in_namespace, &namespace, view.as_ref()).filter(|o| opts.selects(o));
        for item in items {
            let full = pieces.item(|out| render::write_item(def, &item, &render, render::Framing::InList, out))
                .map_err(actix_web::error::ErrorInternalServerError)?;
            if let Some(full) = full {
                yield Ok(full);
            }
        }
        yield Ok(pieces.close());
    })))
}

/// A list sent as it is rendered: its envelope, then its items, cut into pieces of about
/// [`PIECE_BYTES`].
pub struct Pieces {
    piece: Vec<u8>,
    first: bool,
}

impl Pieces {
    /// The list's envelope's fields, then the opening of its items array, `items_field`.
    pub fn open(envelope: serde_json::Map<String, Value>, items_field: &str) -> Pieces {
        let mut piece = Value::Object(envelope).to_string().into_bytes();
        piece.pop(); // the envelope's closing brace: the items follow
        piece.extend_from_slice(format!(",\"{items_field}\":[").as_bytes());
        Pieces { piece, first: true }
    }

    /// Adds an item `write` renders; returns a piece to send once there is a full one.
    pub fn item<E>(&mut self, write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>) -> Result<Option<Bytes>, E> {
        if !std::mem::take(&mut self.first) {
            self.piece.push(b',');
        }
        write(&mut self.piece)?;
        Ok((self.piece.len() >= PIECE_BYTES).then(|| Bytes::from(std::mem::take(&mut self.piece))))
    }

    /// The last piece, which closes the list.
    pub fn close(mut self) -> Bytes {
        self.piece.extend_from_slice(b"]}");
        Bytes::from(self.piece)
    }
}

/// The list (or the page `opts` asks for) of `forest`'s objects as `view` shows them, rendered
/// whole.
fn whole(
    state: &AppState,
    call: &Call<'_>,
    (forest, view): (&Forest, Option<&View>),
    current: CurrentObjects,
    opts: &ListOptions,
) -> Reply {
    let reads = Reads::of(state);
    let in_namespace = |ns: &str| current(&reads, forest, call.def, ns);
    let items = objects(forest, call.def, in_namespace, &call.req.namespace, filter(view));
    let rv = handed_out(forest, view);
    Reply::ok(render::list(call.def, paginate(items, opts, &rv), &rv, call.render))
}

/// The resourceVersion a list of `forest` hands out: with a view, the view's fingerprint beside
/// the number, so that a watch from it resumes on any replica (see [`crate::resource_version`]).
pub fn handed_out(forest: &Forest, view: Option<&View>) -> String {
    view.map_or_else(|| forest.resource_version(), |v| v.resource_version(forest.resource_version()))
}

/// The view a page of a list is cut with: the first page's, so that the pages and the
/// resourceVersion they hand out name one view. A next page (`continue`) whose first page was cut
/// under another view goes on under that one if this replica served it and the user may still
/// see all it shows; otherwise 410 Gone, as kube-apiserver answers a continue it can no longer
/// serve: the client lists again from the start (client-go's pager does so by itself).
fn page_view(state: &AppState, call: &Call<'_>, opts: &ListOptions) -> Result<Option<View>, ApiError> {
    let Some(first) = &opts.continued_at else { return Ok(call.view.clone()) };
    let first = crate::resource_version::parse(first).and_then(|(_, fingerprint)| fingerprint);
    let expired = || {
        ApiError::expired(
            "what this user may see changed since the list's first page; list again from the start",
        )
    };
    match (first, &call.view) {
        (None, None) => Ok(None),
        (Some(first), Some(now)) if first == now.fingerprint() => Ok(Some(now.clone())),
        (Some(first), Some(now)) => {
            let served = state.views.served(call.who, call.def.plural);
            let still_seen = served.into_iter().find(|v| v.fingerprint() == first && now.covers(v));
            still_seen.map(Some).ok_or_else(expired)
        }
        _ => Err(expired()),
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use serde_json::json;

    use crate::http::request_info::Verb;
    use crate::resources::def::Body;
    use crate::resources::hierarchyconfigurations::DEF;
    use crate::resources::testing::{send, state};

    #[tokio::test]
    async fn a_list_is_continued_only_under_the_view_its_first_page_was_cut_with() {
        use super::{page_view, ListOptions, View};
        use crate::resources::testing::Parts;
        let state = state("a b");
        let parts = Parts::new(&DEF, Verb::List, ("", ""));
        let query = Default::default();
        let call = |view: Option<&View>| super::Call {
            view: view.cloned(),
            ..parts.call(&state, &DEF, &query, b"")
        };
        let continued = |rv: String| ListOptions { continued_at: Some(rv), ..Default::default() };
        let (all, none) = (View::everything(), View::default());
        let page = |first: String, now: Option<&View>| page_view(&state, &call(now), &continued(first));
        assert_eq!(page_view(&state, &call(Some(&all)), &ListOptions::default()).unwrap(), Some(all.clone()));
        assert_eq!(page(all.resource_version(7), Some(&all)).unwrap(), Some(all.clone()));
        assert_eq!(page("7".into(), None).unwrap(), None, "answered without views");
        // The user may now see more: the first page's view goes on where this replica served it.
        assert_eq!(page(none.resource_version(7), Some(&all)).unwrap_err().code, 410, "not served here");
        state.views.remember(&parts.who, DEF.plural, &none);
        assert_eq!(page(none.resource_version(7), Some(&all)).unwrap(), Some(none.clone()));
        // Less, or no view named where one is answered (or the reverse): 410.
        state.views.remember(&parts.who, DEF.plural, &all);
        for (first, now) in [
            (all.resource_version(7), Some(&none)),
            ("7".into(), Some(&all)),
            (all.resource_version(7), None),
        ] {
            assert_eq!(page(first.clone(), now).unwrap_err().code, 410, "{first} {now:?}");
        }
    }

    #[tokio::test]
    async fn a_list_across_namespaces_is_streamed_whole_and_in_order() {
        // Enough namespaces for many pieces.
        let spec: Vec<String> =
            (0..3_000).map(|i| if i == 0 { "root".into() } else { format!("ns-{i:04}:root") }).collect();
        let state = state(&spec.join(" "));
        let reply = send(&state, &DEF, Verb::List, ("", ""), &json!({})).await.unwrap();
        let Body::Streamed(mut body) = reply.body else { panic!("a list across namespaces is streamed") };
        let (mut bytes, mut pieces) = (Vec::new(), 0);
        while let Some(piece) = body.next().await {
            bytes.extend_from_slice(&piece.unwrap());
            pieces += 1;
        }
        assert!(pieces > 1, "sent in pieces");
        let list: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(list["kind"], "HierarchyConfigurationList");
        assert_eq!(list["metadata"]["resourceVersion"], state.cache.read().resource_version());
        let namespaces: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["namespace"].as_str().unwrap())
            .collect();
        assert_eq!(namespaces.len(), 3_000);
        assert!(namespaces.windows(2).all(|w| w[0] < w[1]), "key order");
        assert_eq!(namespaces[2_999], "root");
        assert_eq!(list["items"][2_999]["status"]["children"].as_array().unwrap().len(), 2_999);
    }
}
