//! `hierarchicalresourcequotas` (short `hrq`): budgets for whole subtrees, stored on their
//! namespace's annotation [`hns_api::keys::RESOURCE_QUOTAS`] and served with a status derived
//! from the usage observed below them ([`crate::hierarchy::quotas`]). Writes become one patch of
//! the namespace, guarded by its resourceVersion.

use std::collections::BTreeMap;
use std::future::ready;

use hns_api::{HierarchicalResourceQuota, HierarchicalResourceQuotaSpec, HierarchicalResourceQuotaStatus};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use super::checks::{await_write, refused};
use super::def::{Call, Handlers, List, Reads, Reply, ResourceDef};
use super::item::Item;
use super::listing;
use super::managed::{self, METADATA};
use super::write::{self, Attempt, Failure, Start, Stored, Strategy};
use crate::auth::authz::Authorizer;
use crate::hierarchy::forest::{Forest, ObjectLabels, StoredQuota};
use crate::hierarchy::identity::Derived;
use crate::hierarchy::plan::{self, HierarchyState};
use crate::hierarchy::policy::Policy;
use crate::hierarchy::quotas;
use crate::hierarchy::quotas::ledger;
use crate::hierarchy::quotas::quantity::Amount;
use crate::hierarchy::rules::{is_dns1123_label, Refusal};
use crate::http::list::{paginate, ListOptions, Selectable};
use crate::http::request_info::{RequestInfo, ResourceRequest, Verb};
use crate::http::status::ApiError;
use crate::http::table::{age, Column, AGE_COLUMN, NAME_COLUMN};
use crate::resources::render;
use crate::ssa::Shape;
use crate::state::{AppState, Context};
use crate::store::cache::Cache;
use crate::store::quota_ledgers::LedgerStore;
use crate::store::writer::Writer;

/// The resource's plural name.
pub const PLURAL: &str = "hierarchicalresourcequotas";

/// How `hierarchicalresourcequotas` are served.
pub const DEF: ResourceDef = ResourceDef {
    plural: PLURAL,
    kind: "HierarchicalResourceQuota",
    namespaced: true,
    handlers: Handlers {
        get: Some(|c| Box::pin(ready(get(c)))),
        list: Some(List::Current(current)),
        watch: Some(current),
        create: Some(write::handler::<Quota>),
        update: Some(write::handler::<Quota>),
        patch: Some(write::handler::<Quota>),
        delete: Some(|c| Box::pin(delete(c))),
        delete_collection: Some(|c| Box::pin(delete_collection(c))),
    },
    name_is_namespace: false,
    short_names: &["hrq"],
    columns: &[
        NAME_COLUMN,
        Column {
            name: "Request",
            kind: "string",
            format: "",
            description: "Usage of the subtree and limit, for each resource not named limits.*: \
                          `requests.cpu: 1500m/20, pods: 3/100`.",
            priority: 0,
        },
        Column {
            name: "Limit",
            kind: "string",
            format: "",
            description: "Usage of the subtree and limit, for each resource named limits.*.",
            priority: 0,
        },
        AGE_COLUMN,
    ],
    cells,
    derived: Derived::HierarchicalResourceQuota,
    description: "A hard limit on what the namespace it lives in and every namespace below it use together. \
                  spec.hard takes ResourceQuota's resource names; status.used is the usage of the whole subtree.",
    schemas: |g| {
        (
            g.subschema_for::<HierarchicalResourceQuotaSpec>(),
            Some(g.subschema_for::<HierarchicalResourceQuotaStatus>()),
        )
    },
};

/// The fields of a HierarchicalResourceQuota that writers own: each limit on its own.
const SHAPE: Shape =
    Shape::Struct(&[("metadata", METADATA), ("spec", Shape::Struct(&[("hard", Shape::Map)]))]);

/// What serving hierarchical quotas touches of the server's state.
struct QuotaContext<'a> {
    cache: &'a Cache,
    policy: &'a Policy,
    writer: &'a Writer,
    /// For a server-side apply that creates, which needs `create` on top of `patch`.
    authz: &'a Authorizer,
    /// For the room a quota takes in its tree's ledger.
    ledgers: &'a LedgerStore,
    /// For kube-apiserver's own validation of the limits (a dry-run ResourceQuota).
    client: &'a kube::Client,
}

impl<'a> Context<'a> for QuotaContext<'a> {
    fn of(state: &'a AppState) -> Self {
        QuotaContext {
            cache: &state.cache,
            policy: &state.policy,
            writer: &state.writer,
            authz: &state.authz,
            ledgers: &state.ledgers,
            client: &state.client,
        }
    }
}

/// The quotas of `namespace`, or of every namespace when empty, in key order.
fn current(_: &Reads<'_>, forest: &Forest, _: &ResourceDef, namespace: &str) -> Vec<Item> {
    quota_items(forest, namespace)
}

fn quota_items(forest: &Forest, namespace: &str) -> Vec<Item> {
    match forest.get(namespace) {
        Some(node) if !node.quotas().is_empty() => {
            quotas::quotas_in(forest, namespace).into_iter().map(Item::Quota).collect()
        }
        _ => Vec::new(),
    }
}

fn get(call: &Call<'_>) -> Result<Reply, ApiError> {
    let forest = call.context::<QuotaContext>().cache.read();
    let obj = quotas::quota_value(&forest, &call.req.namespace, &call.req.name)
        .ok_or_else(|| ApiError::not_found(DEF.group_resource(), &call.req.name))?;
    Ok(Reply::ok(render::object(&DEF, obj, call.render)?))
}

/// The object a write starts from and the quota's name as the URL gives it: nothing for a
/// create (or an apply creating one), the quota as served otherwise. A POST's URL names none
/// (`""`): its name is the body's, and whether it is taken is `validate`'s check.
async fn starting_point(cx: &QuotaContext<'_>, call: &Call<'_>) -> Result<(String, Option<Value>), ApiError> {
    let gr = DEF.group_resource();
    let ns = call.req.namespace.as_str();
    if cx.cache.read().get(ns).is_none() {
        return Err(ApiError::not_found(
            crate::http::status::GroupResource { group: "", resource: "namespaces" },
            ns,
        ));
    }
    if call.req.verb == Verb::Create {
        // The body names it: whether that name is taken is for `validate`.
        return Ok((String::new(), None));
    }
    let name = call.req.name.clone();
    // Bound first: the cache's lock must not be held across the authorization below.
    let found = quotas::quota_value(&cx.cache.read(), ns, &name);
    match found {
        Some(current) => Ok((name, Some(current))),
        None if managed::is_apply(call) => {
            // An apply that creates needs `create` on top of `patch`, as kube-apiserver asks.
            let create = ResourceRequest { verb: Verb::Create, ..call.req.clone() };
            cx.authz.authorize(call.who, &RequestInfo::Resource(create)).await?;
            Ok((name, None))
        }
        None => Err(ApiError::not_found(gr, &name)),
    }
}

/// A quota is stored on its namespace, beside its hierarchy.
struct Quota;

impl Strategy for Quota {
    type Context<'a> = QuotaContext<'a>;
    type Object = HierarchicalResourceQuota;
    type Before = ();
    const SHAPE: Shape = SHAPE;

    async fn start(cx: &Self::Context<'_>, call: &Call<'_>) -> Result<Start<()>, ApiError> {
        let (name, current) = starting_point(cx, call).await?;
        Ok(Start { name, current, before: () })
    }

    async fn check_desired(
        cx: &Self::Context<'_>,
        call: &Call<'_>,
        name: &str,
        desired: &Value,
    ) -> Result<(), ApiError> {
        check_hard_syntax(cx, call, name, &desired["spec"]["hard"]).await?;
        check_hard_size(name, &desired["spec"]["hard"])
    }

    async fn validate(attempt: &Attempt<'_, Self>) -> Result<(), ApiError> {
        let Attempt { cx, call, name, obj: hrq, .. } = attempt;
        check_subdomain(name)?;
        validate_hard(cx, call, name, &hrq.spec.hard).await?;
        // As kube-apiserver answers: an invalid object is a 422 before its name is found taken.
        let taken =
            || cx.cache.read().get(&call.req.namespace).is_some_and(|n| n.quotas().contains_key(name));
        if call.req.verb == Verb::Create && taken() {
            return Err(ApiError::already_exists(DEF.group_resource(), name));
        }
        Ok(())
    }

    async fn store(attempt: &Attempt<'_, Self>) -> Result<Value, ApiError> {
        let Attempt { cx, call, start, name, obj: hrq, dry_run } = attempt;
        let uid = start.current.as_ref().and_then(|c| c["metadata"]["uid"].as_str());
        write_quota(cx, call, name, uid, hrq, *dry_run).await
    }
}

/// Writes quota `hrq` onto its namespace (keeping the uid and creation time of the one it
/// replaces, whose uid the write started from: `None` for a create) and returns it as served.
async fn write_quota(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    name: &str,
    uid: Option<&str>,
    hrq: &HierarchicalResourceQuota,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let ns = call.req.namespace.as_str();
    let patch = {
        let forest = cx.cache.read();
        let node = forest.get(ns).ok_or_else(|| ApiError::not_found(DEF.group_resource(), name))?;
        let mut desired = HierarchyState::of(node);
        let meta = ObjectLabels::of(&hrq.metadata);
        let stored = match node.quotas().get(name) {
            // Made, replaced or deleted while the limits were validated: a conflict, so the
            // write starts again from what is there now.
            found if found.map(|q| q.uid.as_str()) != uid => {
                return Err(ApiError::conflict(DEF.group_resource(), name, "the quota changed meanwhile"))
            }
            Some(old) => {
                crate::hierarchy::forest::StoredQuota { hard: hrq.spec.hard.clone(), meta, ..old.clone() }
            }
            None => quotas::new_stored(hrq.spec.hard.clone(), meta),
        };
        desired.quotas.insert(name.to_string(), stored);
        check_ledger_room(cx, call, &forest, name, &desired.quotas)?;
        plan::hierarchy_patch(&forest, cx.policy, node, &desired)
    };
    let Some(patch) = patch else {
        return served(cx, call, name, None);
    };
    let updated = cx.writer.patch(ns, &patch, dry_run).await?;
    if !dry_run {
        await_write(cx.cache, &updated).await;
        return served(cx, call, name, None);
    }
    served(cx, call, name, Some(updated))
}

/// Refuses a quota that would take its tree's ledger beyond [`ledger::BUDGET_BYTES`] (422, with
/// what to do), unless the namespace's quotas `quotas` (as they would be after the write) take
/// no more room than they do now: a tree already that full may still lower and remove quotas.
fn check_ledger_room(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    forest: &Forest,
    name: &str,
    quotas: &BTreeMap<String, StoredQuota>,
) -> Result<(), ApiError> {
    let ns = call.req.namespace.as_str();
    let root = ledger::root_of(forest, ns);
    let current = cx.ledgers.get(&root);
    let projected = |quotas: &BTreeMap<String, StoredQuota>| {
        let limits = quotas.iter().map(|(name, q)| (name.clone(), q.hard.clone())).collect();
        ledger::projected_size(&ledger::keep_grants(
            ledger::skeleton_with(forest, &root, ns, &limits),
            &current,
        ))
    };
    let after = projected(quotas);
    if after <= ledger::BUDGET_BYTES || forest.get(ns).is_some_and(|node| after <= projected(node.quotas())) {
        return Ok(());
    }
    Err(invalid_hard(
        name,
        format!(
            "Too long: the quota ledger of the tree under namespace {root:?} would hold {} KiB with this quota, over its limit of {} KiB (it holds the limits of every hierarchical quota in the tree and a grant of each limited resource for every namespace under one): limit fewer resources, or put the quota on a smaller subtree",
            after.div_ceil(1024),
            ledger::BUDGET_BYTES / 1024
        ),
    ))
}

/// The quota as served now, or as it would be with the namespace `as_if` (a dry run).
fn served(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    name: &str,
    as_if: Option<Namespace>,
) -> Result<Value, ApiError> {
    let ns = call.req.namespace.as_str();
    let forest = cx.cache.read();
    let found = match as_if {
        Some(written) => {
            let mut forest = Forest::clone(&forest);
            forest.upsert(written);
            quotas::quota_value(&forest, ns, name)
        }
        None => quotas::quota_value(&forest, ns, name),
    };
    found.ok_or_else(|| ApiError::not_found(DEF.group_resource(), name))
}

/// A 422 for quota `name` with one cause per field.
fn invalid(name: &str, causes: Vec<(String, String)>) -> ApiError {
    refused(&DEF, name, Refusal::Invalid(causes))
}

/// A 422 for quota `name` whose `spec.hard` as a whole is wrong, saying why.
fn invalid_hard(name: &str, message: String) -> ApiError {
    invalid(name, vec![("spec.hard".into(), message)])
}

/// Every limit of `spec.hard` (as written) is a quantity: a string Kubernetes reads or a JSON
/// integer. Checked before decoding so the answer is a 422 naming each field, not a 400; the
/// limits that are quantities are checked as Kubernetes checks them ([`validate_hard`]) in the
/// same answer, so that every bad field is named at once.
async fn check_hard_syntax(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    name: &str,
    hard: &Value,
) -> Result<(), ApiError> {
    let Some(hard) = hard.as_object() else { return Ok(()) };
    let mut causes = Vec::new();
    let mut quantities = BTreeMap::new();
    for (resource, value) in hard {
        match hard_value_problem(resource, value) {
            Some(m) => causes.push((format!("spec.hard.{resource}"), m)),
            None => {
                let text = value.as_str().map_or_else(|| value.to_string(), str::to_string);
                quantities.insert(resource.clone(), Quantity(text));
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    causes.extend(kube_hard_causes(cx, call, &quantities).await?);
    causes.sort();
    Err(invalid(name, causes))
}

/// At most [`ledger::MAX_RESOURCES_PER_QUOTA`] resources.
fn check_hard_size(name: &str, hard: &Value) -> Result<(), ApiError> {
    let count = hard.as_object().map_or(0, serde_json::Map::len);
    if count <= ledger::MAX_RESOURCES_PER_QUOTA {
        return Ok(());
    }
    Err(invalid_hard(
        name,
        format!(
            "Too many: {count}: must have at most {} resources; split the limits over several quotas only if the tree's ledger has room for them",
            ledger::MAX_RESOURCES_PER_QUOTA
        ),
    ))
}

/// What is wrong with one written limit, if anything.
fn hard_value_problem(resource: &str, value: &Value) -> Option<String> {
    // The type's own reading decides what a JSON value may be (and says what to write).
    let one = json!({ "hard": { resource: value } });
    if let Err(e) = serde_json::from_value::<HierarchicalResourceQuotaSpec>(one) {
        return Some(format!("Invalid value: {value}: {e}"));
    }
    let text = value.as_str().map_or_else(|| value.to_string(), str::to_string);
    match Amount::parse(&text) {
        Ok(a) if Amount::ZERO.exceeds(a) => Some(format!("Invalid value: \"{text}\": a limit must not be negative")),
        Ok(_) => None,
        Err(_) => Some(format!(
            "Invalid value: \"{text}\": not a quantity; write a number with an optional suffix, such as \"10\", \"500m\" or \"2Gi\""
        )),
    }
}

/// The name must be a DNS-1123 subdomain, as Kubernetes' object names.
fn check_subdomain(name: &str) -> Result<(), ApiError> {
    if name.len() <= 253 && name.split('.').all(is_dns1123_label) {
        return Ok(());
    }
    Err(invalid(
        name,
        vec![(
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
        )],
    ))
}

/// Validates `spec.hard` exactly as Kubernetes validates a ResourceQuota's: a server-side dry
/// run of one with these limits in the quota's namespace (nothing is stored). Its field causes
/// are mapped onto `spec.hard.<resource>`.
async fn validate_hard(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    name: &str,
    hard: &BTreeMap<String, Quantity>,
) -> Result<(), ApiError> {
    let causes = kube_hard_causes(cx, call, hard).await?;
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(name, causes))
    }
}

/// What Kubernetes finds wrong with limits `hard` (see [`validate_hard`]), as causes.
async fn kube_hard_causes(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    hard: &BTreeMap<String, Quantity>,
) -> Result<Vec<(String, String)>, ApiError> {
    if hard.is_empty() {
        return Ok(Vec::new());
    }
    let api: Api<ResourceQuota> = Api::namespaced(cx.client.clone(), &call.req.namespace);
    let probe = ResourceQuota {
        metadata: ObjectMeta { generate_name: Some("hns-hrq-validation-".into()), ..Default::default() },
        spec: Some(k8s_openapi::api::core::v1::ResourceQuotaSpec {
            hard: Some(hard.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pp = PostParams { dry_run: true, field_manager: Some(crate::store::writer::FIELD_MANAGER.into()) };
    match api.create(&pp, &probe).await {
        Ok(_) => Ok(Vec::new()),
        Err(kube::Error::Api(s)) if s.code == 422 => Ok(hard_causes(&s.message)),
        // Quota admission comes after validation: a namespace that may hold no more
        // ResourceQuotas has validated the limits already.
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("exceeded quota") => Ok(Vec::new()),
        Err(e) => Err(ApiError::from_kube(e)),
    }
}

/// The causes of a refused ResourceQuota (`... is invalid: [spec.hard[foo]: Invalid value:
/// "foo": must be a standard resource for quota, ...]`) as causes at `spec.hard.<resource>`.
fn hard_causes(message: &str) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find("spec.hard[") {
        let after = &rest[at + "spec.hard[".len()..];
        let Some(close) = after.find("]: ") else { break };
        let resource = &after[..close];
        let text = &after[close + 3..];
        let end = text.find(", spec.").or_else(|| text.rfind(']')).unwrap_or(text.len());
        causes.push((format!("spec.hard.{resource}"), text[..end].to_string()));
        rest = &text[end..];
    }
    if causes.is_empty() {
        causes.push(("spec.hard".into(), message.to_string()));
    }
    causes
}

/// Deletes a quota: one patch of its namespace. Answers the quota as it was.
async fn delete(call: &Call<'_>) -> Result<Reply, ApiError> {
    let (pre, dry_run) = write::delete_options(call)?;
    let cx: QuotaContext = call.context();
    let stored = Stored::Namespace(&call.req.namespace);
    write::retrying(call, stored, || delete_once(&cx, call, &pre, dry_run)).await
}

async fn delete_once(
    cx: &QuotaContext<'_>,
    call: &Call<'_>,
    pre: &write::Preconditions,
    dry_run: bool,
) -> Result<Reply, Failure> {
    let (ns, name) = (call.req.namespace.as_str(), call.req.name.as_str());
    let gr = DEF.group_resource();
    let (shown, patch) = {
        let forest = cx.cache.read();
        let shown = quotas::quota_value(&forest, ns, name).ok_or_else(|| ApiError::not_found(gr, name))?;
        if pre.uid.as_deref().is_some_and(|u| Some(u) != shown["metadata"]["uid"].as_str()) {
            return Err(Failure::Final(ApiError::conflict(
                gr,
                name,
                "Precondition failed: UID in precondition does not match the UID of the object",
            )));
        }
        if pre
            .resource_version
            .as_deref()
            .is_some_and(|rv| Some(rv) != shown["metadata"]["resourceVersion"].as_str())
        {
            return Err(Failure::Final(ApiError::stale(gr, name)));
        }
        let node = forest.get(ns).ok_or_else(|| ApiError::not_found(gr, name))?;
        let mut desired = HierarchyState::of(node);
        desired.quotas.remove(name);
        (shown, plan::hierarchy_patch(&forest, cx.policy, node, &desired))
    };
    if let Some(patch) = patch {
        let updated = cx.writer.patch(ns, &patch, dry_run).await.map_err(|e| write::write_failed(e, None))?;
        if !dry_run {
            await_write(cx.cache, &updated).await;
        }
    }
    Ok(Reply::ok(render::object(&DEF, shown, call.render).map_err(Failure::Final)?))
}

/// Deletes every selected quota: one patch per namespace, each guarded by its resourceVersion
/// (a namespace that changed meanwhile is read again and its selection deleted again).
async fn delete_collection(call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    let (_, dry_run) = write::delete_options(call)?;
    let cx: QuotaContext = call.context();
    let selected: Vec<Item> = {
        let forest = cx.cache.read();
        let all = listing::objects(&forest, &DEF, |ns| quota_items(&forest, ns), &call.req.namespace, None);
        paginate(all, &ListOptions { limit: None, after: None, ..opts }, "").items
    };
    let mut by_namespace: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in &selected {
        by_namespace.entry(item.namespace().to_string()).or_default().push(item.name().to_string());
    }
    for (ns, names) in &by_namespace {
        write::retrying(call, Stored::Namespace(ns), || remove_quotas(&cx, ns, names, dry_run)).await?;
    }
    let rv = cx.cache.read().resource_version();
    let page = crate::http::list::Page { items: selected, ..Default::default() };
    Ok(Reply::ok(render::list(&DEF, page, &rv, call.render)))
}

/// One attempt at removing quotas `names` (those still there) from namespace `ns`.
async fn remove_quotas(
    cx: &QuotaContext<'_>,
    ns: &str,
    names: &[String],
    dry_run: bool,
) -> Result<Reply, Failure> {
    let patch = {
        let forest = cx.cache.read();
        let Some(node) = forest.get(ns) else { return Ok(Reply::ok(Value::Null)) };
        let mut desired = HierarchyState::of(node);
        desired.quotas.retain(|q, _| !names.contains(q));
        plan::hierarchy_patch(&forest, cx.policy, node, &desired)
    };
    if let Some(patch) = patch {
        let updated = cx.writer.patch(ns, &patch, dry_run).await.map_err(|e| write::write_failed(e, None))?;
        if !dry_run {
            await_write(cx.cache, &updated).await;
        }
    }
    Ok(Reply::ok(Value::Null))
}

fn cells(item: &Item, now: jiff::Timestamp) -> Vec<Value> {
    let (request, limit) = quotas::summary(&item.to_value());
    let meta = item.metadata();
    vec![
        meta.name.clone().unwrap_or_default().into(),
        request.into(),
        limit.into(),
        age(meta.creation_timestamp.as_ref(), now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::resources::testing::{send, state};

    fn written(name: &str, hard: Value) -> Value {
        json!({"apiVersion": hns_api::API_VERSION, "kind": "HierarchicalResourceQuota",
               "metadata": {"name": name}, "spec": {"hard": hard}})
    }

    // Decided before kube-apiserver is asked anything: the state's client reaches nothing.

    #[tokio::test]
    async fn bad_writes_are_refused_at_their_field_before_anything_is_asked() {
        let state = state("team-a");
        let refused = |body: Value| {
            let state = &state;
            async move { send(state, &DEF, Verb::Create, ("team-a", ""), &body).await.err().unwrap() }
        };
        let e = refused(written("q", json!({"requests.cpu": 1.5}))).await;
        assert_eq!(e.code, 422, "{}", e.message);
        assert!(e.message.contains("\"q\" is invalid"), "a POST's quota is named by its body: {}", e.message);
        assert!(e.message.contains("spec.hard.requests.cpu"), "{}", e.message);
        let e = refused(written("q", json!({"pods": "ten", "services": "-1"}))).await;
        assert_eq!(e.code, 422, "{}", e.message);
        assert!(
            e.message.contains("spec.hard.pods") && e.message.contains("spec.hard.services"),
            "{}",
            e.message
        );
        let e = refused(written("Bad_Name", json!({}))).await;
        assert_eq!((e.code, e.reason), (422, "Invalid"), "{}", e.message);
        let e = refused(json!({"metadata": {}, "spec": {}})).await;
        assert_eq!(e.code, 422, "a name is required: {}", e.message);
    }

    #[tokio::test]
    async fn missing_quotas_and_namespaces_are_not_found() {
        let state = state("team-a");
        let e = send(&state, &DEF, Verb::Get, ("team-a", "nope"), &json!({})).await.err().unwrap();
        assert_eq!(e.code, 404);
        let body = written("nope", json!({"pods": "1"}));
        let e = send(&state, &DEF, Verb::Update, ("team-a", "nope"), &body).await.err().unwrap();
        assert_eq!(e.code, 404, "an update does not create: {}", e.message);
        let e = send(&state, &DEF, Verb::Create, ("gone", ""), &body).await.err().unwrap();
        assert_eq!(e.code, 404, "{}", e.message);
        assert!(e.message.contains("namespaces \"gone\""), "{}", e.message);
    }

    #[test]
    fn limits_are_strings_kubernetes_reads_or_integers() {
        assert_eq!(hard_value_problem("pods", &json!(10)), None);
        assert_eq!(hard_value_problem("requests.cpu", &json!("1500m")), None);
        let fraction = hard_value_problem("requests.cpu", &json!(1.5)).unwrap();
        assert!(fraction.contains("write the quantity as a string (\"1.5\")"), "{fraction}");
        let bad = hard_value_problem("pods", &json!("ten")).unwrap();
        assert!(bad.contains("not a quantity"), "{bad}");
        assert!(hard_value_problem("pods", &json!("-1")).unwrap().contains("negative"));
        assert!(hard_value_problem("pods", &json!(true)).is_some());
    }

    #[test]
    fn a_refused_resource_quota_names_each_limit() {
        let message = "ResourceQuota \"x\" is invalid: [spec.hard[foo]: Invalid value: \"foo\": must be a standard resource for quota, spec.hard[bar.io/x]: Invalid value: \"bar.io/x\": must be a standard resource for quota]";
        let causes = hard_causes(message);
        assert_eq!(
            causes,
            [
                (
                    "spec.hard.foo".to_string(),
                    "Invalid value: \"foo\": must be a standard resource for quota".to_string()
                ),
                (
                    "spec.hard.bar.io/x".to_string(),
                    "Invalid value: \"bar.io/x\": must be a standard resource for quota".to_string()
                ),
            ]
        );
        let one = "ResourceQuota \"x\" is invalid: spec.hard[foo]: Invalid value: \"foo\": must be a standard resource for quota";
        assert_eq!(hard_causes(one)[0].0, "spec.hard.foo");
        assert!(hard_causes(one)[0].1.ends_with("for quota"));
    }

    #[test]
    fn names_are_subdomains() {
        assert!(check_subdomain("team-budget").is_ok());
        assert!(check_subdomain("team.budget").is_ok());
        assert_eq!(check_subdomain("Team_Budget").unwrap_err().code, 422);
    }

    #[test]
    fn table_cells_split_requests_and_limits() {
        let obj = json!({"kind": "HierarchicalResourceQuota", "metadata": {"name": "b"}, "spec": {}, "status": {
            "hard": {"requests.cpu": "20", "pods": "100", "limits.cpu": "40"},
            "used": {"requests.cpu": "1500m", "pods": "3"}}});
        let c = cells(&Item::from_value(obj).unwrap(), jiff::Timestamp::now());
        assert_eq!(c[1], "pods: 3/100, requests.cpu: 1500m/20");
        assert_eq!(c[2], "limits.cpu: 0/40");
        assert_eq!(c.len(), DEF.columns.len());
    }
}
