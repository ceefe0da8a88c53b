//! `subnamespaces` and `subnamespaceanchors`: two kinds over one fact, the child namespace's
//! `hnc.x-k8s.io/subnamespace-of` annotation. Creating one creates the namespace with hns's
//! credentials (the caller only needs `create subnamespaces` in the parent); deleting one deletes
//! the namespace.

use std::future::ready;

use hns_api::{SubnamespaceSpec, SubnamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use super::checks::{await_write, refused};
use super::def::{Call, Handlers, List, Reads, Reply, ResourceDef};
use super::item::Item;
use super::listing;
use super::managed::{self, METADATA, META_KVPS};
use super::write::{self, Attempt, Start, Stored, Strategy};
use crate::auth::authz::Authorizer;
use crate::hierarchy::forest::{Forest, Node, ObjectLabels};
use crate::hierarchy::identity::{self, Derived};
use crate::hierarchy::objects;
use crate::hierarchy::plan::{self, HierarchyState};
use crate::hierarchy::policy::Policy;
use crate::hierarchy::rules;
use crate::http::list::{paginate, ListOptions, Selectable};
use crate::http::request_info::{RequestInfo, ResourceRequest, Verb};
use crate::http::status::ApiError;
use crate::http::table::{age, Column, AGE_COLUMN, NAME_COLUMN};
use crate::resources::render;
use crate::ssa::Shape;
use crate::state::{AppState, Context};
use crate::store::cache::Cache;
use crate::store::writer::Writer;

/// Both kinds serve every verb, with the same handlers.
const HANDLERS: Handlers = Handlers {
    get: Some(|c| Box::pin(ready(get(c)))),
    list: Some(List::Current(current)),
    watch: Some(current),
    create: Some(write::handler::<Sub>),
    update: Some(write::handler::<Sub>),
    patch: Some(write::handler::<Sub>),
    delete: Some(|c| Box::pin(delete(c))),
    delete_collection: Some(|c| Box::pin(delete_collection(c))),
};

const COLUMNS: &[Column] = &[
    NAME_COLUMN,
    Column {
        name: "Status",
        kind: "string",
        format: "",
        description: "Ok, Missing, Conflict, Forbidden or Terminating (the namespace is being deleted).",
        priority: 0,
    },
    AGE_COLUMN,
    Column {
        name: "Labels",
        kind: "string",
        format: "",
        description: "Managed labels (spec.labels).",
        priority: 1,
    },
];

/// `subnamespaces` (short `subns`), kind `Subnamespace`.
pub const SUBNAMESPACES: ResourceDef = ResourceDef {
    plural: "subnamespaces",
    kind: "Subnamespace",
    namespaced: true,
    handlers: HANDLERS,
    name_is_namespace: true,
    short_names: &["subns"],
    columns: COLUMNS,
    cells,
    derived: Derived::Subnamespace,
    description:
        "A namespace created under the namespace this object lives in. Its name is the new namespace's \
                  name; deleting it deletes that namespace.",
    schemas: |g| (g.subschema_for::<SubnamespaceSpec>(), Some(g.subschema_for::<SubnamespaceStatus>())),
};

/// `subnamespaceanchors`, kind `SubnamespaceAnchor`: HNC's name for the same objects.
pub const ANCHORS: ResourceDef = ResourceDef {
    plural: "subnamespaceanchors",
    kind: "SubnamespaceAnchor",
    namespaced: true,
    handlers: HANDLERS,
    name_is_namespace: true,
    short_names: &[],
    columns: COLUMNS,
    cells,
    derived: Derived::Subnamespace,
    description: "HNC's name for a Subnamespace: the anchor of a subnamespace in its parent namespace.",
    schemas: |g| {
        (g.subschema_for::<hns_api::SubnamespaceAnchorSpec>(), Some(g.subschema_for::<SubnamespaceStatus>()))
    },
};

/// The fields of a Subnamespace (or SubnamespaceAnchor) that writers own.
const SHAPE: Shape = Shape::Struct(&[
    ("metadata", METADATA),
    ("spec", Shape::Struct(&[("labels", META_KVPS), ("annotations", META_KVPS)])),
]);

/// What serving subnamespaces touches of the server's state.
struct SubnamespaceContext<'a> {
    cache: &'a Cache,
    policy: &'a Policy,
    writer: &'a Writer,
    /// For a server-side apply that creates, which needs `create` on top of `patch`.
    authz: &'a Authorizer,
}

impl<'a> Context<'a> for SubnamespaceContext<'a> {
    fn of(state: &'a AppState) -> Self {
        SubnamespaceContext {
            cache: &state.cache,
            policy: &state.policy,
            writer: &state.writer,
            authz: &state.authz,
        }
    }
}

fn subnamespace<'f>(forest: &'f Forest, parent: &str, name: &str) -> Option<&'f Node> {
    forest
        .get(name)
        .filter(|n| n.is_subnamespace && n.parent.as_deref() == Some(parent) && forest.anchor_exists(n))
}

fn get(call: &Call<'_>) -> Result<Reply, ApiError> {
    let cx: SubnamespaceContext = call.context();
    let forest = cx.cache.read();
    let node = subnamespace(&forest, &call.req.namespace, &call.req.name)
        .ok_or_else(|| ApiError::not_found(call.def.group_resource(), &call.req.name))?;
    Ok(Reply::ok(render::object(
        call.def,
        objects::subnamespace_value(cx.policy, node, call.def.kind),
        call.render,
    )?))
}

/// The subnamespaces a list, watch or deletecollection addresses, as objects of `def`'s kind,
/// in key order.
fn current(reads: &Reads<'_>, forest: &Forest, def: &ResourceDef, namespace: &str) -> Vec<Item> {
    subnamespaces_in(reads.policy, forest, def, namespace)
}

fn subnamespaces_in(policy: &Policy, forest: &Forest, def: &ResourceDef, namespace: &str) -> Vec<Item> {
    forest
        .subnamespaces(namespace)
        .filter(|n| forest.anchor_exists(n))
        .map(|n| Item::subnamespace(objects::subnamespace(policy, n), def.kind))
        .collect()
}

/// What a list or deletecollection addresses.
/// The parts of a written Subnamespace or SubnamespaceAnchor that hns stores, and its status:
/// hns sets the status itself and ignores a written one, as Kubernetes does for resources with
/// a status subresource, but reads it so that a malformed status is refused (400) rather than
/// silently accepted, and a well-formed one is not reported as an unknown field.
#[derive(Deserialize)]
struct Written {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: SubnamespaceSpec,
    #[serde(default, rename = "status")]
    _status: Option<SubnamespaceStatus>,
}

/// A subnamespace is its own namespace: creating one creates the namespace, and a change of its
/// labels and annotations is a patch of it.
struct Sub;

impl Strategy for Sub {
    type Context<'a> = SubnamespaceContext<'a>;
    type Object = Written;
    /// The namespace's hierarchy as it was; `None` when the write creates it.
    type Before = Option<HierarchyState>;
    const SHAPE: Shape = SHAPE;

    fn stored<'a>(_: &'a Call<'_>, name: &'a str) -> Stored<'a> {
        Stored::Namespace(name)
    }

    async fn start(
        cx: &Self::Context<'_>,
        call: &Call<'_>,
    ) -> Result<Start<Option<HierarchyState>>, ApiError> {
        let name = call.req.name.clone();
        if call.req.verb == Verb::Create {
            return Ok(Start { name, current: None, before: None });
        }
        let found = {
            let forest = cx.cache.read();
            subnamespace(&forest, &call.req.namespace, &name).map(|node| {
                (objects::subnamespace_value(cx.policy, node, call.def.kind), HierarchyState::of(node))
            })
        };
        match found {
            Some((current, before)) => Ok(Start { name, current: Some(current), before: Some(before) }),
            // A server-side apply to a subnamespace that does not exist creates it, as a POST
            // would: the caller needs `create` on top of `patch`, as kube-apiserver asks.
            None if managed::is_apply(call) => {
                let create = ResourceRequest { verb: Verb::Create, ..call.req.clone() };
                cx.authz.authorize(call.who, &RequestInfo::Resource(create)).await?;
                Ok(Start { name, current: None, before: None })
            }
            None => Err(ApiError::not_found(call.def.group_resource(), &name)),
        }
    }

    async fn validate(attempt: &Attempt<'_, Self>) -> Result<(), ApiError> {
        let Attempt { cx, call, start, name, obj, .. } = attempt;
        let policy = cx.policy;
        let refusal = |r| refused(call.def, name, r);
        let Some(before) = &start.before else {
            let forest = cx.cache.read();
            rules::check_new_subnamespace(&forest, policy, &call.req.namespace, name).map_err(refusal)?;
            return rules::check_managed(policy, &obj.spec.labels, &obj.spec.annotations).map_err(refusal);
        };
        if (&obj.spec.labels, &obj.spec.annotations) != (&before.managed_labels, &before.managed_annotations)
        {
            rules::check_managed(policy, &obj.spec.labels, &obj.spec.annotations).map_err(refusal)?;
        }
        Ok(())
    }

    async fn store(attempt: &Attempt<'_, Self>) -> Result<Value, ApiError> {
        let Attempt { cx, call, start, name, obj, dry_run } = attempt;
        match (&start.before, &start.current) {
            (Some(before), Some(current)) => update(cx, call, (before, current), name, obj, *dry_run).await,
            _ => create(cx, call, name, obj, *dry_run).await,
        }
    }
}

/// Creates the subnamespace `obj` describes; returns it as served.
async fn create(
    cx: &SubnamespaceContext<'_>,
    call: &Call<'_>,
    name: &str,
    obj: &Written,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let parent = call.req.namespace.as_str();
    let state = HierarchyState {
        parent: Some(parent.to_string()),
        managed_labels: obj.spec.labels.clone(),
        managed_annotations: obj.spec.annotations.clone(),
        subnamespace_meta: ObjectLabels::of(&obj.metadata),
        ..Default::default()
    };
    let (namespace, mark) = {
        let forest = cx.cache.read();
        let mark = forest.get(parent).and_then(|p| plan::mark_member(&forest, p, jiff::Timestamp::now()));
        (plan::new_subnamespace(&forest, cx.policy, parent, name, &state), mark)
    };
    if let (Some(m), false) = (mark, dry_run) {
        cx.writer.patch(parent, &m, false).await?;
    }
    let created = cx.writer.create(&namespace, dry_run).await.map_err(|e| already_there(call, name, e))?;
    if !dry_run {
        await_write(cx.cache, &created).await;
    }
    let node = cx.cache.read().node_of(created);
    Ok(objects::subnamespace_value(cx.policy, &node, call.def.kind))
}

/// A namespace made by someone else between our check and our create is the same conflict.
fn already_there(call: &Call<'_>, name: &str, e: ApiError) -> ApiError {
    if e.reason == "AlreadyExists" {
        refused(
            call.def,
            name,
            rules::Refusal::Conflict("cannot create a subnamespace using an existing namespace".into()),
        )
    } else {
        e
    }
}

/// Writes the subnamespace's labels and annotations onto its namespace; returns it as served.
async fn update(
    cx: &SubnamespaceContext<'_>,
    call: &Call<'_>,
    (before, current): (&HierarchyState, &Value),
    name: &str,
    obj: &Written,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let desired = HierarchyState {
        managed_labels: obj.spec.labels.clone(),
        managed_annotations: obj.spec.annotations.clone(),
        subnamespace_meta: ObjectLabels::of(&obj.metadata),
        ..before.clone()
    };
    let patch = {
        let forest = cx.cache.read();
        forest.get(name).and_then(|node| plan::hierarchy_patch(&forest, cx.policy, node, &desired))
    };
    let Some(p) = patch else {
        return Ok(current.clone());
    };
    let updated = cx.writer.patch(name, &p, dry_run).await?;
    if !dry_run {
        await_write(cx.cache, &updated).await;
    }
    let node = cx.cache.read().node_of(updated);
    Ok(objects::subnamespace_value(cx.policy, &node, call.def.kind))
}

/// Deletes one subnamespace after the checks, held first for its own subnamespaces if it has
/// any (see [`crate::hierarchy::forest::Forest::needs_hold`]); returns its object as it stands.
async fn delete_one(
    cx: &SubnamespaceContext<'_>,
    call: &Call<'_>,
    name: &str,
    uid: Option<String>,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let hold = cx.cache.read().needs_hold(name, jiff::Timestamp::now());
    let remaining = cx.writer.delete(name, uid, hold, dry_run).await?;
    if let (Some(ns), false) = (&remaining, dry_run) {
        await_write(cx.cache, ns).await;
    }
    let forest = cx.cache.read();
    let shown = match remaining {
        Some(ns) => objects::subnamespace_value(cx.policy, &forest.node_of(ns), call.def.kind),
        None => forest
            .get(name)
            .map(|n| objects::subnamespace_value(cx.policy, n, call.def.kind))
            .unwrap_or_default(),
    };
    Ok(shown)
}

async fn delete(call: &Call<'_>) -> Result<Reply, ApiError> {
    let (parent, name) = (call.req.namespace.as_str(), call.req.name.as_str());
    let gr = call.def.group_resource();
    let (pre, dry_run) = write::delete_options(call)?;
    let cx: SubnamespaceContext = call.context();
    let uid = {
        let forest = cx.cache.read();
        let node = subnamespace(&forest, parent, name).ok_or_else(|| ApiError::not_found(gr, name))?;
        let own_uid = identity::uid_of(node.meta.uid(), Derived::Subnamespace);
        if pre.uid.is_some_and(|u| Some(u) != own_uid) {
            return Err(ApiError::conflict(
                gr,
                name,
                "Precondition failed: UID in precondition does not match the UID of the object",
            ));
        }
        if pre.resource_version.as_ref().is_some_and(|rv| Some(rv.as_str()) != node.meta.resource_version()) {
            return Err(ApiError::stale(gr, name));
        }
        rules::check_delete_subnamespace(&forest, name).map_err(|r| refused(call.def, name, r))?;
        node.meta.uid().map(str::to_string)
    };
    let obj = delete_one(&cx, call, name, uid, dry_run).await?;
    Ok(Reply::ok(render::object(call.def, obj, call.render)?))
}

/// Deletes every selected subnamespace, or none: all are checked before the first is deleted.
async fn delete_collection(call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    let (_, dry_run) = write::delete_options(call)?;
    let cx: SubnamespaceContext = call.context();
    let targets: Vec<(String, Option<String>)> = {
        let forest = cx.cache.read();
        let in_namespace = |ns: &str| subnamespaces_in(cx.policy, &forest, call.def, ns);
        let items = paginate(
            listing::objects(&forest, call.def, in_namespace, &call.req.namespace, None),
            &ListOptions { limit: None, after: None, ..opts },
            "",
        )
        .items;
        let mut targets = Vec::new();
        for item in items {
            let name = item.name().to_string();
            rules::check_delete_subnamespace(&forest, &name).map_err(|r| refused(call.def, &name, r))?;
            // The namespace's own uid guards its deletion (the item's is the Subnamespace's).
            let uid = forest.get(&name).and_then(|n| n.meta.uid().map(str::to_string));
            targets.push((name, uid));
        }
        targets
    };
    let mut deleted = Vec::new();
    for (name, uid) in targets {
        deleted.push(delete_one(&cx, call, &name, uid, dry_run).await?);
    }
    let rv = cx.cache.read().resource_version();
    let items = deleted.into_iter().map(Item::from_value).collect::<Result<_, _>>()?;
    let page = crate::http::list::Page { items, ..Default::default() };
    Ok(Reply::ok(render::list(call.def, page, &rv, call.render)))
}

fn cells(item: &Item, now: jiff::Timestamp) -> Vec<Value> {
    let (meta, labels, status) = match item {
        Item::Subnamespace(s) => (&s.metadata, &s.spec.labels, &s.status),
        Item::Anchor(a) => (&a.metadata, &a.spec.labels, &a.status),
        _ => return Vec::new(),
    };
    let labels: Vec<String> = labels.iter().map(|kv| format!("{}={}", kv.key, kv.value)).collect();
    let state = status
        .as_ref()
        .and_then(|s| s.state)
        .map_or(Value::Null, |s| serde_json::to_value(s).unwrap_or_default());
    vec![
        meta.name.clone().unwrap_or_default().into(),
        state,
        age(meta.creation_timestamp.as_ref(), now),
        labels.join(",").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::hierarchy::policy::testing::policy;
    use crate::http::body::{self, FieldValidation};
    use crate::resources::testing::{send, state};
    use serde_json::json;

    fn written(parent: &str, name: &str, rv: Option<&str>) -> Value {
        json!({
            "apiVersion": hns_api::API_VERSION, "kind": "Subnamespace",
            "metadata": {"name": name, "namespace": parent, "resourceVersion": rv},
        })
    }

    // Decided from the cache alone: the state's client reaches nothing.

    #[tokio::test]
    async fn subnamespaces_of_excluded_or_missing_parents_or_of_taken_names_are_refused() {
        let state = state("team-a other");
        let refused = |parent: &'static str, name: &'static str| {
            let state = &state;
            async move {
                let e = send(state, &SUBNAMESPACES, Verb::Create, (parent, ""), &written(parent, name, None))
                    .await
                    .err()
                    .unwrap();
                (e.code, e.reason)
            }
        };
        assert_eq!(refused("kube-system", "dev").await, (403, "Forbidden"));
        assert_eq!(refused("gone", "dev").await, (404, "NotFound"));
        assert_eq!(refused("team-a", "other").await, (409, "Conflict"));
        assert_eq!(refused("team-a", "Not_A_Name").await, (422, "Invalid"));
    }

    #[tokio::test]
    async fn managed_fields_of_the_wrong_types_are_refused_not_replaced() {
        let state = state("team-a dev:~team-a");
        let mut body = written("team-a", "dev", None);
        body["metadata"]["managedFields"] = json!([{"manager": "x", "fieldsType": {}}]);
        let e = send(&state, &SUBNAMESPACES, Verb::Update, ("team-a", "dev"), &body).await.err().unwrap();
        assert_eq!(e.code, 400, "{}", e.message);
        assert!(e.message.contains("metadata.managedFields"), "{}", e.message);
        let e = send(&state, &SUBNAMESPACES, Verb::Create, ("team-a", ""), &body).await.err().unwrap();
        assert_eq!(e.code, 400, "a create too: {}", e.message);
        // FieldsV1 decodes from any JSON value: its schema's type (an object) is checked apart.
        for fields in [json!(true), json!("f:spec"), json!([])] {
            body["metadata"]["managedFields"] =
                json!([{"manager": "x", "fieldsV1": {}}, {"fieldsV1": fields}]);
            let e = send(&state, &SUBNAMESPACES, Verb::Update, ("team-a", "dev"), &body).await.err().unwrap();
            assert_eq!(e.code, 400, "{}", e.message);
            assert!(e.message.contains("managedFields[1].fieldsV1"), "{}", e.message);
        }
    }

    #[tokio::test]
    async fn a_stale_update_is_the_clients_conflict_and_a_missing_one_is_not_found() {
        let state = state("team-a dev:~team-a");
        let stale = written("team-a", "dev", Some("999"));
        let e = send(&state, &SUBNAMESPACES, Verb::Update, ("team-a", "dev"), &stale).await.err().unwrap();
        assert_eq!((e.code, e.reason), (409, "Conflict"), "{}", e.message);
        let e = send(&state, &SUBNAMESPACES, Verb::Get, ("team-a", "nope"), &json!({})).await.err().unwrap();
        assert_eq!(e.code, 404);
    }

    #[test]
    fn a_subnamespace_lives_in_its_parent() {
        let f = forest("team-a dev:~team-a");
        let v = objects::subnamespace_value(&policy(), f.get("dev").unwrap(), "SubnamespaceAnchor");
        assert_eq!(v["kind"], "SubnamespaceAnchor");
        assert_eq!(v["metadata"]["namespace"], "team-a");
        assert_eq!(v["metadata"]["name"], "dev");
        assert_eq!(v["status"]["status"], "Ok");
        assert_eq!(cells(&Item::from_value(v).unwrap(), jiff::Timestamp::now())[1], "Ok");
        assert!(subnamespace(&f, "team-a", "dev").is_some());
        assert!(subnamespace(&f, "other", "dev").is_none());
    }

    #[test]
    fn a_written_status_is_checked_but_not_stored() {
        let body = |status| serde_json::json!({"metadata": {"name": "dev"}, "status": {"status": status}});
        let (_, warnings): (Written, _) =
            body::decode(body("Missing"), "Subnamespace", FieldValidation::Strict).unwrap();
        assert!(warnings.is_empty());
        let e = body::decode::<Written>(body("B"), "Subnamespace", FieldValidation::Ignore).err().unwrap();
        assert_eq!(e.code, 400);
    }

    #[test]
    fn a_subnamespace_of_an_excluded_parent_is_forbidden() {
        let f = forest("kube-system x:~kube-system");
        assert_eq!(
            objects::subnamespace_value(&policy(), f.get("x").unwrap(), "Subnamespace")["status"]["status"],
            "Forbidden"
        );
    }
}
