//! `hierarchyconfigurations`: one singleton `hierarchy` per namespace, derived from the
//! namespace's annotations and the forest. Writes become one patch of the namespace.

use std::future::ready;

use hns_api::hierarchy::HIERARCHY_SINGLETON;
use hns_api::{HierarchyConfiguration, HierarchyConfigurationSpec, HierarchyConfigurationStatus};
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::checks::{await_write, refused};
use super::def::{Call, Handlers, List, Reads, Reply, ResourceDef};
use super::item::Item;
use super::managed::{METADATA, META_KVPS};
use super::write::{self, Attempt, Start, Strategy};
use crate::auth::authz::Authorizer;
use crate::hierarchy::forest::{Forest, Node, ObjectLabels};
use crate::hierarchy::identity::Derived;
use crate::hierarchy::objects;
use crate::hierarchy::plan::{self, HierarchyState};
use crate::hierarchy::policy::Policy;
use crate::hierarchy::rules::{self, AuthzCheck, Refusal};
use crate::http::request_info::Verb;
use crate::http::status::ApiError;
use crate::http::table::{age, Column, AGE_COLUMN, NAME_COLUMN};
use crate::propagation::overwrites;
use crate::propagation::Propagation;
use crate::resources::render;
use crate::ssa::Shape;
use crate::state::{AppState, Context};
use crate::store::cache::Cache;
use crate::store::parent_lock::ParentLock;
use crate::store::writer::Writer;

/// The resource's plural name.
pub const PLURAL: &str = "hierarchyconfigurations";

/// How `hierarchyconfigurations` are served.
pub const DEF: ResourceDef = ResourceDef {
    plural: PLURAL,
    kind: "HierarchyConfiguration",
    namespaced: true,
    handlers: Handlers {
        get: Some(|c| Box::pin(ready(get(c)))),
        list: Some(List::Current(current)),
        watch: Some(current),
        // HNC's plugin POSTs a configuration it could not find: a create is the first write.
        create: Some(write::handler::<Hierarchy>),
        update: Some(write::handler::<Hierarchy>),
        patch: Some(write::handler::<Hierarchy>),
        // The configuration is its namespace's: it goes with the namespace.
        ..Handlers::NONE
    },
    name_is_namespace: false,
    short_names: &[],
    columns: &[
        NAME_COLUMN,
        Column {
            name: "Parent",
            kind: "string",
            format: "",
            description: "The parent namespace; empty for a root.",
            priority: 0,
        },
        Column {
            name: "Children",
            kind: "string",
            format: "",
            description: "The child namespaces.",
            priority: 0,
        },
        Column {
            name: "Conditions",
            kind: "string",
            format: "",
            description: "Problems with the namespace's place in the hierarchy, as Type(Reason); first \
                          Terminating while the namespace is being deleted.",
            priority: 0,
        },
        AGE_COLUMN,
        Column {
            name: "Cascading-Deletion",
            kind: "boolean",
            format: "",
            description: "Whether deleting the namespace may delete its subnamespaces.",
            priority: 1,
        },
    ],
    cells,
    derived: Derived::HierarchyConfiguration,
    description: "The hierarchical configuration of a namespace: its parent, whether cascading deletion is \
                  allowed, and its children. Every namespace has exactly one, named `hierarchy`.",
    schemas: |g| {
        (
            g.subschema_for::<HierarchyConfigurationSpec>(),
            Some(g.subschema_for::<HierarchyConfigurationStatus>()),
        )
    },
};

/// The fields of a HierarchyConfiguration that writers own.
const SHAPE: Shape = Shape::Struct(&[
    ("metadata", METADATA),
    (
        "spec",
        Shape::Struct(&[
            ("parent", Shape::Atomic),
            ("allowCascadingDeletion", Shape::Atomic),
            ("labels", META_KVPS),
            ("annotations", META_KVPS),
        ]),
    ),
]);

/// What serving hierarchy configurations touches of the server's state.
struct HierarchyContext<'a> {
    cache: &'a Cache,
    policy: &'a Policy,
    writer: &'a Writer,
    authz: &'a Authorizer,
    /// For the objects a move would put in the way of its new ancestors' sources.
    propagation: &'a Propagation,
    /// Moves that could close a cycle take turns.
    parent_lock: &'a ParentLock,
}

impl<'a> Context<'a> for HierarchyContext<'a> {
    fn of(state: &'a AppState) -> Self {
        HierarchyContext {
            cache: &state.cache,
            policy: &state.policy,
            writer: &state.writer,
            authz: &state.authz,
            propagation: &state.propagation,
            parent_lock: &state.parent_lock,
        }
    }
}

/// The configurations of `namespace`, or of every namespace when empty.
fn current(_: &Reads<'_>, forest: &Forest, _: &ResourceDef, namespace: &str) -> Vec<Item> {
    let node = forest.get(namespace);
    node.map(|n| Item::Hierarchy(objects::hierarchy_configuration(forest, n))).into_iter().collect()
}

fn get(call: &Call<'_>) -> Result<Reply, ApiError> {
    let forest = call.context::<HierarchyContext>().cache.read();
    let obj = objects::hierarchy_configuration_value(&forest, &call.req.namespace)
        .filter(|_| call.req.name == HIERARCHY_SINGLETON)
        .ok_or_else(|| ApiError::not_found(DEF.group_resource(), &call.req.name))?;
    Ok(Reply::ok(render::object(&DEF, obj, call.render)?))
}

/// Whether the namespace has never been configured: HNC's plugin POSTs a configuration it could
/// not find, so a POST onto one is taken as its first write.
fn is_pristine(node: &Node) -> bool {
    // Quotas live on the namespace too, but are no part of its hierarchy configuration.
    HierarchyState { quotas: Default::default(), ..HierarchyState::of(node) } == HierarchyState::default()
}

/// A write of the configuration is one patch of its namespace.
struct Hierarchy;

impl Strategy for Hierarchy {
    type Context<'a> = HierarchyContext<'a>;
    type Object = HierarchyConfiguration;
    /// The namespace's hierarchy as it was.
    type Before = HierarchyState;
    const SHAPE: Shape = SHAPE;

    async fn start(cx: &Self::Context<'_>, call: &Call<'_>) -> Result<Start<HierarchyState>, ApiError> {
        let ns = call.req.namespace.as_str();
        let forest = cx.cache.read();
        let node =
            forest.get(ns).ok_or_else(|| ApiError::not_found(DEF.group_resource(), HIERARCHY_SINGLETON))?;
        if call.req.verb == Verb::Create && !is_pristine(node) {
            return Err(ApiError::already_exists(DEF.group_resource(), HIERARCHY_SINGLETON));
        }
        Ok(Start {
            name: call.req.name.clone(),
            current: Some(objects::hierarchy_configuration_value(&forest, ns).unwrap_or_default()),
            before: HierarchyState::of(node),
        })
    }

    async fn validate(attempt: &Attempt<'_, Self>) -> Result<(), ApiError> {
        let Attempt { cx, call, start, name, obj: hc, .. } = attempt;
        if name != HIERARCHY_SINGLETON {
            let why = format!(
                "Invalid value: \"{name}\": a HierarchyConfiguration must be named \"{HIERARCHY_SINGLETON}\""
            );
            return Err(refused(&DEF, name, Refusal::Invalid(vec![("metadata.name".into(), why)])));
        }
        authorize_and_validate(cx, call, &start.before, &desired_state(&start.before, hc)).await
    }

    async fn store(attempt: &Attempt<'_, Self>) -> Result<Value, ApiError> {
        let Attempt { cx, call, start, obj: hc, dry_run, .. } = attempt;
        let desired = desired_state(&start.before, hc);
        let written = apply(cx, &call.req.namespace, &desired, *dry_run).await?;
        let obj = match written {
            Some(updated) => {
                let forest = cx.cache.read();
                serde_json::to_value(objects::hierarchy_configuration(&forest, &forest.node_of(updated)))
                    .unwrap_or_default()
            }
            None => start.current.clone().unwrap_or_default(),
        };
        Ok(dry_run_view(obj, &desired, *dry_run))
    }
}

/// The namespace's hierarchy as `hc` asks for it; what the configuration does not hold (its
/// namespace's subnamespace metadata and quotas) stays as it was.
fn desired_state(before: &HierarchyState, hc: &HierarchyConfiguration) -> HierarchyState {
    HierarchyState {
        parent: hc.spec.parent.clone().filter(|p| !p.is_empty()),
        allow_cascading_deletion: hc.spec.allow_cascading_deletion,
        managed_labels: hc.spec.labels.clone(),
        managed_annotations: hc.spec.annotations.clone(),
        hierarchy_meta: ObjectLabels::of(&hc.metadata),
        subnamespace_meta: before.subnamespace_meta.clone(),
        quotas: before.quotas.clone(),
    }
}

/// Checks the change against the hierarchy rules and HNC's permission rule for moves.
async fn authorize_and_validate(
    cx: &HierarchyContext<'_>,
    call: &Call<'_>,
    current: &HierarchyState,
    desired: &HierarchyState,
) -> Result<(), ApiError> {
    let ns = call.req.namespace.as_str();
    let checks = {
        let forest = cx.cache.read();
        rules::check_parent_change(&forest, cx.policy, ns, desired.parent.as_deref())
            .map_err(|r| refused(&DEF, HIERARCHY_SINGLETON, r))?
    };
    if (&current.managed_labels, &current.managed_annotations)
        != (&desired.managed_labels, &desired.managed_annotations)
    {
        rules::check_managed(cx.policy, &desired.managed_labels, &desired.managed_annotations)
            .map_err(|r| refused(&DEF, HIERARCHY_SINGLETON, r))?;
    }
    for AuthzCheck { namespace, reason } in checks {
        let attrs = ResourceAttributes {
            verb: Some("update".into()),
            group: Some(hns_api::GROUP.into()),
            version: Some(hns_api::VERSION.into()),
            resource: Some(PLURAL.into()),
            namespace: Some(namespace.clone()),
            name: Some(HIERARCHY_SINGLETON.into()),
            ..Default::default()
        };
        if !cx.authz.can(call.who, attrs).await? {
            return Err(ApiError::forbidden(
                DEF.group_resource(),
                HIERARCHY_SINGLETON,
                format!(
                    "User \"{}\" is not authorized to modify the subtree of {namespace}, which is the {reason} (needs update on hierarchyconfigurations in {namespace})",
                    call.who.user
                ),
            ));
        }
    }
    // Named only to callers allowed to make the move: the objects' names are in the subtree
    // and the new ancestry.
    check_overwrites(cx, ns, current, desired).await.map_err(|r| refused(&DEF, HIERARCHY_SINGLETON, r))
}

/// HNC's rule: a move may not put a namespace's own object (not a copy) in the way of a source
/// of the same name in a new ancestor, which would silently win over the ancestor's policy.
/// Becoming a root adds no ancestor, and a new subnamespace has no objects yet.
async fn check_overwrites(
    cx: &HierarchyContext<'_>,
    ns: &str,
    current: &HierarchyState,
    desired: &HierarchyState,
) -> Result<(), Refusal> {
    let Some(parent) = desired.parent.as_deref().filter(|p| current.parent.as_deref() != Some(*p)) else {
        return Ok(());
    };
    let before = cx.cache.snapshot();
    let after = plan::moved(&before, cx.policy, ns, Some(parent));
    let found = cx.propagation.overwrites_of_move(&before, &after, cx.policy, ns).await?;
    overwrites::move_refusal(&found).map_or(Ok(()), Err)
}

/// Writes the new state: first marks the new parent as a hierarchy member, then patches the
/// namespace in one write guarded by its resourceVersion. Returns the namespace as written, if
/// anything had to change.
async fn apply(
    cx: &HierarchyContext<'_>,
    ns: &str,
    desired: &HierarchyState,
    dry_run: bool,
) -> Result<Option<Namespace>, ApiError> {
    let (mark, patch, moves) = {
        let forest = cx.cache.read();
        let node =
            forest.get(ns).ok_or_else(|| ApiError::not_found(DEF.group_resource(), HIERARCHY_SINGLETON))?;
        let mark = desired.parent.as_deref().and_then(|p| forest.get(p)).and_then(|p| {
            plan::mark_member(&forest, p, jiff::Timestamp::now()).map(|m| (p.name().to_string(), m))
        });
        let moves = desired.parent.clone().filter(|p| node.parent.as_ref() != Some(p));
        (mark, plan::hierarchy_patch(&forest, cx.policy, node, desired), moves)
    };
    let Some(patch) = patch else {
        return Ok(None);
    };
    if dry_run {
        cx.writer.patch(ns, &patch, true).await?;
        return Ok(None);
    }
    let writer = cx.writer;
    if let Some((parent, m)) = &mark {
        writer.patch(parent, m, false).await?;
    }
    let Some(parent) = moves else {
        let updated = writer.patch(ns, &patch, false).await?;
        await_write(cx.cache, &updated).await;
        return Ok(Some(updated));
    };
    // Gaining a parent may close a cycle with a concurrent move: such writes take turns. The
    // patch is worked out again from the namespace as it is now: while we waited, the other
    // mover may have marked it as a member, and a patch from before that would only conflict.
    let updated = cx
        .parent_lock
        .serialized(|held| async move {
            held.check_ancestry(writer, cx.cache, ns, &parent)
                .await?
                .map_err(|r| refused(&DEF, HIERARCHY_SINGLETON, r))?;
            let fresh = writer
                .get(ns)
                .await?
                .ok_or_else(|| ApiError::not_found(DEF.group_resource(), HIERARCHY_SINGLETON))?;
            let patch = {
                let forest = cx.cache.read();
                plan::hierarchy_patch(&forest, cx.policy, &forest.node_of(fresh), desired)
            };
            let Some(patch) = patch else { return Ok(None) };
            held.confirm()?;
            let updated = writer.patch(ns, &patch, false).await?;
            await_write(cx.cache, &updated).await;
            Ok(Some(updated))
        })
        .await?;
    Ok(updated)
}

/// With `dryRun`, nothing was stored: show the configuration as it would be.
fn dry_run_view(mut obj: Value, desired: &HierarchyState, dry_run: bool) -> Value {
    if dry_run {
        obj["spec"]["parent"] = desired.parent.clone().map_or(Value::Null, Value::String);
        obj["spec"]["allowCascadingDeletion"] = desired.allow_cascading_deletion.into();
        if let Ok(mut meta) = serde_json::from_value::<ObjectMeta>(obj["metadata"].clone()) {
            desired.hierarchy_meta.fill(&mut meta);
            obj["metadata"] = serde_json::to_value(meta).unwrap_or_default();
        }
    }
    obj
}

/// How many children the Children column names before it abbreviates.
const CHILDREN_SHOWN: usize = 3;

fn cells(item: &Item, now: jiff::Timestamp) -> Vec<Value> {
    let Item::Hierarchy(hc) = item else { return Vec::new() };
    let (children, conditions) = match &hc.status {
        Some(s) => (&s.children[..], &s.conditions[..]),
        None => (&[][..], &[][..]),
    };
    let mut shown = children.iter().take(CHILDREN_SHOWN).cloned().collect::<Vec<_>>().join(",");
    if children.len() > CHILDREN_SHOWN {
        shown.push_str(&format!(" + {} more", children.len() - CHILDREN_SHOWN));
    }
    // A terminating namespace is no condition (nothing is wrong, and HNC's clients read
    // conditions as problems), but whoever lists configurations during a deletion must see it,
    // as `kubectl get namespaces` and `kubectl get pods` show Terminating in a column.
    let terminating = hc.metadata.deletion_timestamp.is_some().then(|| "Terminating".to_string());
    let conditions: Vec<String> = terminating
        .into_iter()
        .chain(conditions.iter().map(|c| format!("{}({})", c.type_, c.reason)))
        .collect();
    vec![
        hc.metadata.name.clone().unwrap_or_default().into(),
        hc.spec.parent.clone().unwrap_or_default().into(),
        shown.into(),
        conditions.join(",").into(),
        age(hc.metadata.creation_timestamp.as_ref(), now),
        hc.spec.allow_cascading_deletion.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;
    use crate::resources::testing::{send, state};
    use serde_json::json;

    /// A configuration of `ns` as a client would write it.
    fn written(ns: &str, name: &str, rv: Option<&str>, parent: &str) -> Value {
        json!({
            "apiVersion": hns_api::API_VERSION, "kind": "HierarchyConfiguration",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
            "spec": {"parent": parent},
        })
    }

    // Each of these is decided from the cache: the state's client reaches nothing, so a retry's
    // fresh read or a write would answer with a connection error instead.

    #[tokio::test]
    async fn a_stale_resource_version_is_the_clients_conflict_and_not_retried() {
        let state = state("acme team-a:acme dev");
        let stale = written("dev", "hierarchy", Some("999"), "team-a");
        let e = send(&state, &DEF, Verb::Update, ("dev", "hierarchy"), &stale).await.err().unwrap();
        assert_eq!((e.code, e.reason), (409, "Conflict"), "{}", e.message);
    }

    #[tokio::test]
    async fn a_post_onto_a_configured_namespace_already_exists() {
        let state = state("acme team-a:acme");
        let again = written("team-a", "hierarchy", None, "acme");
        let e = send(&state, &DEF, Verb::Create, ("team-a", ""), &again).await.err().unwrap();
        assert_eq!((e.code, e.reason), (409, "AlreadyExists"), "{}", e.message);
    }

    #[tokio::test]
    async fn only_hierarchy_and_the_urls_namespace_are_accepted() {
        let state = state("acme dev");
        let misnamed = written("dev", "config", None, "acme");
        let e = send(&state, &DEF, Verb::Create, ("dev", ""), &misnamed).await.err().unwrap();
        assert_eq!((e.code, e.reason), (422, "Invalid"), "{}", e.message);
        let elsewhere = written("acme", "hierarchy", None, "acme");
        let e = send(&state, &DEF, Verb::Update, ("dev", "hierarchy"), &elsewhere).await.err().unwrap();
        assert_eq!(e.code, 400, "{}", e.message);
    }

    #[tokio::test]
    async fn a_cycle_is_refused_before_anything_is_asked_of_kube_apiserver() {
        let state = state("acme team-a:acme dev:team-a");
        let cycle = written("acme", "hierarchy", None, "dev");
        let e = send(&state, &DEF, Verb::Update, ("acme", "hierarchy"), &cycle).await.err().unwrap();
        assert!(e.code == 409 || e.code == 422 || e.code == 403, "{} {}", e.code, e.message);
        assert!(e.message.contains("dev"), "{}", e.message);
    }

    #[test]
    fn derived_from_the_namespace() {
        let f = forest("acme team-a:acme team-b:~acme");
        let hc = objects::hierarchy_configuration(&f, f.get("acme").unwrap());
        assert_eq!(hc.metadata.name.as_deref(), Some("hierarchy"));
        assert_eq!(hc.metadata.namespace.as_deref(), Some("acme"));
        assert_eq!(hc.spec.parent, None);
        assert_eq!(hc.status.unwrap().children, ["team-a", "team-b"]);
        let hc = objects::hierarchy_configuration(&f, f.get("team-b").unwrap());
        assert_eq!(hc.spec.parent.as_deref(), Some("acme"));
    }

    #[test]
    fn table_cells() {
        let f = forest("p a:p b:p c:p d:p");
        let c = cells(
            &Item::Hierarchy(objects::hierarchy_configuration(&f, f.get("p").unwrap())),
            jiff::Timestamp::now(),
        );
        assert_eq!(c[0], "hierarchy");
        assert_eq!(c[1], "");
        assert_eq!(c[2], "a,b,c + 1 more");
        assert_eq!(c.len(), DEF.columns.len());
        assert_eq!(c[3], "");
    }

    #[test]
    fn a_terminating_namespace_shows_in_the_conditions_column() {
        let mut v = json!({"kind": "HierarchyConfiguration", "metadata": {"name": "hierarchy", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}});
        let conditions =
            |v: &Value| cells(&Item::from_value(v.clone()).unwrap(), jiff::Timestamp::now())[3].clone();
        assert_eq!(conditions(&v), "Terminating");
        v["status"]["conditions"] = json!([{"type": "ActivitiesHalted", "reason": "ParentMissing", "status": "True",
                                            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        assert_eq!(conditions(&v), "Terminating,ActivitiesHalted(ParentMissing)");
    }

    #[test]
    fn only_unconfigured_namespaces_take_a_post() {
        let mut f = forest("a b:a");
        assert!(is_pristine(f.get("a").unwrap()));
        assert!(!is_pristine(f.get("b").unwrap()));
        crate::hierarchy::forest::testing::with_quota(&mut f, "a", "q", r#"{"pods":"1"}"#);
        assert!(is_pristine(f.get("a").unwrap()), "a quota configures no hierarchy");
    }
}
