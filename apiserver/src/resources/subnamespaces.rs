//! `subnamespaces` and `subnamespaceanchors`: two kinds over one fact, the child namespace's
//! `hnc.x-k8s.io/subnamespace-of` annotation. Creating one creates the namespace with hns's
//! credentials (the caller only needs `create subnamespaces` in the parent); deleting one deletes
//! the namespace.

use std::future::ready;

use hns_api::{SubnamespaceSpec, SubnamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use super::checks::{await_write, check_metadata, check_namespace, refused};
use super::def::{Call, Handlers, Reply, ResourceDef};
use super::item::Item;
use super::listing;
use super::managed::{self, METADATA, META_KVPS};
use super::write::{self, Failure, Stored};
use crate::hierarchy::forest::{Forest, Node, ObjectLabels};
use crate::hierarchy::identity::{self, Derived};
use crate::hierarchy::objects;
use crate::hierarchy::plan::{self, HierarchyState};
use crate::hierarchy::rules;
use crate::http::body::{self, WriteOptions};
use crate::http::list::{paginate, ListOptions, Selectable};
use crate::http::status::ApiError;
use crate::http::table::{age, Column, AGE_COLUMN, NAME_COLUMN};
use crate::resources::render;
use crate::ssa::Shape;
use crate::state::AppState;

/// Both kinds serve every verb, with the same handlers.
const HANDLERS: Handlers = Handlers {
    get: Some(|c| Box::pin(ready(get(c)))),
    list: Some(|c| Box::pin(ready(listing::list(c, current)))),
    watch: Some(current),
    create: Some(|c| Box::pin(create(c))),
    update: Some(|c| Box::pin(update(c))),
    patch: Some(|c| Box::pin(update(c))),
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
    singular: "subnamespace",
    kind: "Subnamespace",
    list_kind: "SubnamespaceList",
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
    singular: "subnamespaceanchor",
    kind: "SubnamespaceAnchor",
    list_kind: "SubnamespaceAnchorList",
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

fn subnamespace<'f>(forest: &'f Forest, parent: &str, name: &str) -> Option<&'f Node> {
    forest
        .get(name)
        .filter(|n| n.is_subnamespace && n.parent.as_deref() == Some(parent) && forest.anchor_exists(n))
}

fn get(call: &Call<'_>) -> Result<Reply, ApiError> {
    let forest = call.state.cache.read();
    let node = subnamespace(&forest, &call.req.namespace, &call.req.name)
        .ok_or_else(|| ApiError::not_found(call.def.group_resource(), &call.req.name))?;
    Ok(Reply::ok(render::object(
        call.def,
        objects::subnamespace_value(&call.state.policy, node, call.def.kind),
        call.render,
    )?))
}

/// The subnamespaces a list, watch or deletecollection addresses, as objects of `def`'s kind,
/// in key order.
fn current(state: &AppState, forest: &Forest, def: &ResourceDef, namespace: &str) -> Vec<Item> {
    forest
        .subnamespaces(namespace)
        .filter(|n| forest.anchor_exists(n))
        .map(|n| Item::subnamespace(objects::subnamespace(&state.policy, n), def.kind))
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

async fn create(call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = WriteOptions::from_query(call.query)?;
    let value = body::parse_json(call.body, call.content_type)?;
    let value = managed::track_update(call, &opts, &SHAPE, &serde_json::json!({}), value)?;
    create_object(call, &opts, value, Vec::new()).await
}

/// A server-side apply to a subnamespace that does not exist creates it, as a POST would: the
/// caller needs `create` on top of `patch`, as kube-apiserver asks for a create by apply.
async fn create_by_apply(call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = WriteOptions::from_query(call.query)?;
    let create = crate::http::request_info::ResourceRequest {
        verb: crate::http::request_info::Verb::Create,
        ..call.req.clone()
    };
    call.state.authz.authorize(call.who, &crate::http::request_info::RequestInfo::Resource(create)).await?;
    let bare = serde_json::json!({
        "apiVersion": hns_api::API_VERSION,
        "kind": call.def.kind,
        "metadata": {"name": call.req.name, "namespace": call.req.namespace},
    });
    let (value, warnings) = managed::desired::<Written>(call, &opts, &SHAPE, &bare)?;
    create_object(call, &opts, value, warnings).await
}

/// Creates the subnamespace `value` describes, after the hierarchy rules.
async fn create_object(
    call: &Call<'_>,
    opts: &WriteOptions,
    value: Value,
    mut warnings: Vec<String>,
) -> Result<Reply, ApiError> {
    let (obj, more): (Written, _) = body::decode(value, call.def.kind, opts.field_validation)?;
    warnings.extend(more);
    let parent = call.req.namespace.as_str();
    let name = check_metadata(call.def, &call.req.name, &obj.metadata)?;
    check_namespace(parent, obj.metadata.namespace.as_deref())?;
    let state = HierarchyState {
        parent: Some(parent.to_string()),
        managed_labels: obj.spec.labels.clone(),
        managed_annotations: obj.spec.annotations.clone(),
        subnamespace_meta: ObjectLabels::of(&obj.metadata),
        ..Default::default()
    };
    let (namespace, mark) = {
        let forest = call.state.cache.read();
        let policy = &call.state.policy;
        rules::check_new_subnamespace(&forest, policy, parent, &name)
            .map_err(|r| refused(call.def, &name, r))?;
        rules::check_managed(policy, &state.managed_labels, &state.managed_annotations)
            .map_err(|r| refused(call.def, &name, r))?;
        let mark = forest.get(parent).and_then(plan::mark_member);
        (plan::new_subnamespace(&forest, policy, parent, &name, &state), mark)
    };
    if let (Some(m), false) = (mark, opts.dry_run) {
        call.state.writer.patch(parent, &m, false).await?;
    }
    let created = call
        .state
        .writer
        .create(&namespace, opts.dry_run)
        .await
        .map_err(|e| already_there(call, &name, e))?;
    if !opts.dry_run {
        await_write(call.state, &created).await;
    }
    let node = call.state.cache.read().node_of(created);
    let body = render::object(
        call.def,
        objects::subnamespace_value(&call.state.policy, &node, call.def.kind),
        call.render,
    )?;
    Ok(Reply::json(201, body, warnings))
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

/// Updates (or, by server-side apply, creates) a subnamespace.
async fn update(call: &Call<'_>) -> Result<Reply, ApiError> {
    write::retrying(call, Stored::Namespace(&call.req.name), || update_once(call)).await
}

/// One attempt of an update.
async fn update_once(call: &Call<'_>) -> Result<Reply, Failure> {
    let opts = WriteOptions::from_query(call.query)?;
    let (parent, name) = (call.req.namespace.as_str(), call.req.name.as_str());
    let gr = call.def.group_resource();
    let found = {
        let forest = call.state.cache.read();
        subnamespace(&forest, parent, name).map(|node| {
            (objects::subnamespace_value(&call.state.policy, node, call.def.kind), HierarchyState::of(node))
        })
    };
    let (current, current_state) = match found {
        Some(found) => found,
        None if managed::is_apply(call) => return create_by_apply(call).await.map_err(Failure::Final),
        None => return Err(Failure::Final(ApiError::not_found(gr, name))),
    };
    let (desired, mut warnings) = managed::desired::<Written>(call, &opts, &SHAPE, &current)?;
    let (obj, more): (Written, _) = body::decode(desired, call.def.kind, opts.field_validation)?;
    warnings.extend(more);
    check_metadata(call.def, name, &obj.metadata)?;
    check_namespace(parent, obj.metadata.namespace.as_deref())?;
    let client_precondition =
        write::check_resource_version(call, gr, name, &current, obj.metadata.resource_version.as_deref())?;
    let desired = HierarchyState {
        managed_labels: obj.spec.labels.clone(),
        managed_annotations: obj.spec.annotations.clone(),
        subnamespace_meta: ObjectLabels::of(&obj.metadata),
        ..current_state.clone()
    };
    if (&desired.managed_labels, &desired.managed_annotations)
        != (&current_state.managed_labels, &current_state.managed_annotations)
    {
        rules::check_managed(&call.state.policy, &desired.managed_labels, &desired.managed_annotations)
            .map_err(|r| refused(call.def, name, r))?;
    }
    let patch = {
        let forest = call.state.cache.read();
        forest.get(name).and_then(|node| plan::hierarchy_patch(&forest, &call.state.policy, node, &desired))
    };
    let mut node = None;
    if let Some(p) = patch {
        let updated = call
            .state
            .writer
            .patch(name, &p, opts.dry_run)
            .await
            .map_err(|e| write::write_failed(e, client_precondition.then_some((gr, name))))?;
        if !opts.dry_run {
            await_write(call.state, &updated).await;
        }
        node = Some(call.state.cache.read().node_of(updated));
    }
    let obj = match node {
        Some(n) => objects::subnamespace_value(&call.state.policy, &n, call.def.kind),
        None => current,
    };
    Ok(Reply::json(200, render::object(call.def, obj, call.render).map_err(Failure::Final)?, warnings))
}

/// Deletes one subnamespace after the checks, held first for its own subnamespaces if it has
/// any (see [`crate::hierarchy::forest::Forest::needs_hold`]); returns its object as it stands.
async fn delete_one(
    call: &Call<'_>,
    name: &str,
    uid: Option<String>,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let hold = call.state.cache.read().needs_hold(name, jiff::Timestamp::now());
    let remaining = call.state.writer.delete(name, uid, hold, dry_run).await?;
    if let (Some(ns), false) = (&remaining, dry_run) {
        await_write(call.state, ns).await;
    }
    let forest = call.state.cache.read();
    let shown = match remaining {
        Some(ns) => objects::subnamespace_value(&call.state.policy, &forest.node_of(ns), call.def.kind),
        None => forest
            .get(name)
            .map(|n| objects::subnamespace_value(&call.state.policy, n, call.def.kind))
            .unwrap_or_default(),
    };
    Ok(shown)
}

async fn delete(call: &Call<'_>) -> Result<Reply, ApiError> {
    let (parent, name) = (call.req.namespace.as_str(), call.req.name.as_str());
    let gr = call.def.group_resource();
    let (pre, dry_run) = write::delete_options(call)?;
    let uid = {
        let forest = call.state.cache.read();
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
    let obj = delete_one(call, name, uid, dry_run).await?;
    Ok(Reply::ok(render::object(call.def, obj, call.render)?))
}

/// Deletes every selected subnamespace, or none: all are checked before the first is deleted.
async fn delete_collection(call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    let (_, dry_run) = write::delete_options(call)?;
    let targets: Vec<(String, Option<String>)> = {
        let forest = call.state.cache.read();
        let items = paginate(
            listing::objects(call.state, &forest, call.def, current, &call.req.namespace, None),
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
        deleted.push(delete_one(call, &name, uid, dry_run).await?);
    }
    let rv = call.state.cache.read().resource_version();
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
    use crate::http::body::FieldValidation;
    use crate::http::request_info::Verb;
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
