//! `HierarchyTree`: a list of hierarchy configurations as each namespace's place in the
//! hierarchy and nothing else, for `kubectl hns tree`.
//!
//! A client asks for it as Kubernetes clients ask for a Table, in `Accept`:
//! `application/json;as=HierarchyTree;g=hnc.x-k8s.io;v=v1alpha2`, on a list of
//! `hierarchyconfigurations` (a client that also offers plain JSON gets the plain list from a
//! server without it). At 100,000 namespaces the configurations are some 34 MB and a Table
//! without objects cannot say which namespace a row is; a tree is one small entry per namespace,
//! rendered straight from the forest:
//!
//! ```json
//! {"kind": "HierarchyTree", "apiVersion": "hnc.x-k8s.io/v1alpha2", "metadata": {"resourceVersion": "42"},
//!  "namespaces": [{"name": "acme"}, {"name": "team-a", "parent": "acme", "subnamespace": true}]}
//! ```
//!
//! Each entry is an [`HierarchyTreeEntry`] (`hns_api`, which the plugin reads too): `parent` if
//! the namespace has one, `subnamespace`, `terminating` and `allowCascadingDeletion` when true,
//! its `conditions` as its configuration has them, `hiddenChildren`: the names of children
//! the requester may not see (their configurations are left out, but their names are in this
//! one's), and `hiddenSubnamespaces`: those of them that are subnamespaces. The same
//! namespaces are shown as in the list of configurations, selectors and views included.

use std::borrow::Cow;
use std::collections::BTreeMap;

use hns_api::hierarchy::{HierarchyTreeEntry, HIERARCHY_SINGLETON, HIERARCHY_TREE_KIND};
use serde_json::json;

use super::def::{Call, Reply};
use super::listing;
use crate::auth::view::View;
use crate::hierarchy::conditions;
use crate::hierarchy::forest::{Forest, Node};
use crate::http::list::{ListOptions, Selectable};
use crate::http::status::ApiError;
use crate::state::AppState;

/// One namespace's place in the hierarchy, as `view` shows it.
fn entry<'a>(forest: &'a Forest, node: &'a Node, view: Option<&View>) -> HierarchyTreeEntry<&'a str> {
    let name = node.name();
    let hidden: Vec<&str> = match view {
        Some(v) => forest.children(name).filter(|c| !v.shows(c, HIERARCHY_SINGLETON)).collect(),
        None => Vec::new(),
    };
    let is_subnamespace = |c: &&str| forest.get(c).is_some_and(|n| n.is_subnamespace);
    let hidden_subnamespaces = hidden.iter().copied().filter(is_subnamespace).collect();
    HierarchyTreeEntry {
        name,
        parent: node.parent.as_deref(),
        subnamespace: node.is_subnamespace,
        terminating: node.is_terminating(),
        allow_cascading_deletion: node.allow_cascading_deletion,
        conditions: conditions::recorded(node.meta.annotation(hns_api::keys::CONDITIONS)),
        hidden_children: hidden,
        hidden_subnamespaces,
    }
}

/// A namespace's configuration, as far as selectors read it.
struct Configuration<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
}

impl Selectable for Configuration<'_> {
    fn namespace(&self) -> &str {
        self.namespace
    }

    fn name(&self) -> &str {
        HIERARCHY_SINGLETON
    }

    fn labels(&self) -> Option<Cow<'_, BTreeMap<String, String>>> {
        Some(Cow::Borrowed(self.labels))
    }
}

/// Serves a list of hierarchy configurations as a `HierarchyTree`, rendered from a snapshot of
/// the forest while it is sent.
pub fn list(state: &AppState, call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    if opts.limit.is_some() || opts.after.is_some() {
        return Err(ApiError::bad_request(
            "a HierarchyTree is sent whole: ask for it without limit and continue",
        ));
    }
    if let Some(view) = &call.view {
        state.views.remember(call.who, call.def.plural, view);
    }
    let forest = state.cache.snapshot();
    let rv = listing::handed_out(&forest, call.view.as_ref());
    let envelope = json!({"kind": HIERARCHY_TREE_KIND, "apiVersion": hns_api::API_VERSION, "metadata": {"resourceVersion": rv}});
    let serde_json::Value::Object(envelope) = envelope else {
        unreachable!("json! of an object is an object")
    };
    let (def, namespace, view) =
        (call.def, call.req.namespace.clone(), listing::filter(call.view.as_ref()).cloned());
    Ok(Reply::streamed(Box::pin(async_stream::stream! {
        let mut pieces = listing::Pieces::open(envelope, "namespaces");
        let shown = listing::nodes(&forest, def, &namespace, view.as_ref())
            .filter(|node| view.as_ref().is_none_or(|v| v.shows(node.name(), HIERARCHY_SINGLETON)))
            .filter(|node| opts.selects(&Configuration { namespace: node.name(), labels: &node.hierarchy_meta().labels }));
        for node in shown {
            let full = pieces.item(|out| serde_json::to_writer(out, &entry(&forest, node, view.as_ref())))
                .map_err(actix_web::error::ErrorInternalServerError)?;
            if let Some(full) = full {
                yield Ok(full);
            }
        }
        yield Ok(pieces.close());
    })))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use futures::StreamExt;
    use serde_json::Value;

    use super::*;
    use crate::http::request_info::Verb;
    use crate::resources::def::Body;
    use crate::resources::hierarchyconfigurations::DEF;
    use crate::resources::testing::{state, Parts};

    /// The tree `state` answers for `namespace` with `query`, or its error.
    async fn tree(spec: &str, namespace: &str, query: &[(&str, &str)]) -> Result<Value, ApiError> {
        let state = state(spec);
        let parts = Parts::new(&DEF, Verb::List, (namespace, ""));
        let query: HashMap<String, String> =
            query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let reply = list(&state, &parts.call(&state, &DEF, &query, &[]))?;
        let Body::Streamed(mut body) = reply.body else { panic!("a tree is streamed") };
        let mut bytes = Vec::new();
        while let Some(piece) = body.next().await {
            bytes.extend_from_slice(&piece.unwrap());
        }
        Ok(serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn each_namespace_once_with_its_place_and_nothing_else() {
        let t = tree("acme team-a:acme dev:~team-a orphan:gone", "", &[]).await.unwrap();
        assert_eq!(t["kind"], "HierarchyTree");
        assert_eq!(t["apiVersion"], hns_api::API_VERSION);
        assert!(t["metadata"]["resourceVersion"].is_string());
        let entries = t["namespaces"].as_array().unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["acme", "dev", "orphan", "team-a"], "in order, a missing parent left out");
        assert_eq!(entries[0], serde_json::json!({"name": "acme"}));
        assert_eq!(entries[1], serde_json::json!({"name": "dev", "parent": "team-a", "subnamespace": true}));
        assert_eq!(entries[2]["parent"], "gone");
    }

    #[tokio::test]
    async fn selectors_apply_and_pages_are_refused() {
        let t =
            tree("acme team-a:acme", "", &[("fieldSelector", "metadata.namespace=team-a")]).await.unwrap();
        assert_eq!(t["namespaces"].as_array().unwrap().len(), 1);
        let in_one = tree("acme team-a:acme", "acme", &[]).await.unwrap();
        assert_eq!(in_one["namespaces"][0]["name"], "acme");
        assert_eq!(in_one["namespaces"].as_array().unwrap().len(), 1);
        let e = tree("acme", "", &[("limit", "10")]).await.unwrap_err();
        assert_eq!(e.code, 400, "{}", e.message);
    }
}
