//! `hncconfigurations`: the cluster-wide singleton `config`, stored in a ConfigMap.

use std::collections::BTreeSet;
use std::future::ready;

use hns_api::config::{Mode, CONFIG_SINGLETON};
use hns_api::{HNCConfiguration, HNCConfigurationSpec, HNCConfigurationStatus};
use kube::Client;
use serde_json::Value;

use super::checks::refused;
use super::def::{Call, Handlers, List, Reads, Reply, ResourceDef};
use super::item::Item;
use super::managed::METADATA;
use super::write::{self, Attempt, Start, Stored, Strategy};
use crate::hierarchy::forest::{Forest, ObjectLabels};
use crate::hierarchy::identity::Derived;
use crate::hierarchy::policy::Policy;
use crate::hierarchy::rules::Refusal;
use crate::http::list::{paginate, ListOptions};
use crate::http::status::{kube_message, ApiError};
use crate::http::table::{age, Column, AGE_COLUMN, NAME_COLUMN};
use crate::propagation::Propagation;
use crate::propagation::{overwrites, rights, ENFORCED};
use crate::resources::render;
use crate::ssa::Shape;
use crate::state::{AppState, Context};
use crate::store::cache::Cache;
use crate::store::config_store::{self, ConfigStore};

/// The resource's plural name.
pub const PLURAL: &str = "hncconfigurations";

/// How `hncconfigurations` are served.
pub const DEF: ResourceDef = ResourceDef {
    plural: PLURAL,
    kind: "HNCConfiguration",
    namespaced: false,
    handlers: Handlers {
        get: Some(|c| Box::pin(ready(get(c)))),
        list: Some(List::Handler(|c| Box::pin(ready(list(c))))),
        watch: Some(current),
        update: Some(write::handler::<Config>),
        patch: Some(write::handler::<Config>),
        // The one configuration always exists: it is neither created nor deleted.
        ..Handlers::NONE
    },
    name_is_namespace: false,
    short_names: &[],
    columns: &[
        NAME_COLUMN,
        Column { name: "Resources", kind: "string", format: "", description: "Configured kinds and their modes.", priority: 0 },
        AGE_COLUMN,
    ],
    cells,
    derived: Derived::HncConfiguration,
    description: "The cluster-wide configuration of hns: which kinds propagate down the hierarchy. One object, named `config`.",
    schemas: |g| (g.subschema_for::<HNCConfigurationSpec>(), Some(g.subschema_for::<HNCConfigurationStatus>())),
};

/// The fields of the HNCConfiguration that writers own: `spec.resources` items are identified by
/// group and resource.
const SHAPE: Shape = Shape::Struct(&[
    ("metadata", METADATA),
    (
        "spec",
        Shape::Struct(&[(
            "resources",
            Shape::AssocList {
                keys: &["group", "resource"],
                item: &Shape::Struct(&[
                    ("group", Shape::Atomic),
                    ("resource", Shape::Atomic),
                    ("mode", Shape::Atomic),
                ]),
            },
        )]),
    ),
]);

/// What serving the configuration touches of the server's state.
struct ConfigContext<'a> {
    config: &'a ConfigStore,
    /// For the ConfigMap that stores it, and for the kinds it names.
    client: &'a kube::Client,
    /// hns's own namespace, where the ConfigMap is.
    namespace: &'a str,
    /// For the status of each kind.
    propagation: &'a Propagation,
    /// For the namespaces' conditions in the status, and the objects a new kind would overwrite.
    cache: &'a Cache,
    policy: &'a Policy,
}

impl<'a> Context<'a> for ConfigContext<'a> {
    fn of(state: &'a AppState) -> Self {
        ConfigContext {
            config: &state.config,
            client: &state.client,
            namespace: &state.namespace,
            propagation: &state.propagation,
            cache: &state.cache,
            policy: &state.policy,
        }
    }
}

/// The configuration as stored, for a watch's first event.
fn current(reads: &Reads<'_>, _: &Forest, _: &ResourceDef, _: &str) -> Vec<Item> {
    vec![Item::Config(reads.config.object())]
}

/// The configuration with its status, as reads and writes start from it.
fn with_current_status(cx: &ConfigContext<'_>) -> Value {
    with_status(cx, config_store::value(cx.config))
}

fn get(call: &Call<'_>) -> Result<Reply, ApiError> {
    if call.req.name != CONFIG_SINGLETON {
        return Err(ApiError::not_found(DEF.group_resource(), &call.req.name));
    }
    Ok(Reply::ok(render::object(&DEF, with_current_status(&call.context()), call.render)?))
}

fn list(call: &Call<'_>) -> Result<Reply, ApiError> {
    let opts = ListOptions::from_query(call.query)?;
    let obj = Item::from_value(with_current_status(&call.context()))?;
    let rv = obj.metadata().resource_version.clone().unwrap_or_else(|| "0".into());
    Ok(Reply::ok(render::list(&DEF, paginate(vec![obj], &opts, &rv), &rv, call.render)))
}

/// The configuration is stored in a ConfigMap of hns's own namespace.
struct Config;

impl Strategy for Config {
    type Context<'a> = ConfigContext<'a>;
    type Object = HNCConfiguration;
    /// The configuration as it was.
    type Before = HNCConfigurationSpec;
    const SHAPE: Shape = SHAPE;

    fn stored<'a>(_: &'a Call<'_>, _: &'a str) -> Stored<'a> {
        Stored::Config
    }

    async fn start(cx: &Self::Context<'_>, call: &Call<'_>) -> Result<Start<HNCConfigurationSpec>, ApiError> {
        let current = with_current_status(cx);
        let before = serde_json::from_value(current["spec"].clone()).unwrap_or_default();
        Ok(Start { name: call.req.name.clone(), current: Some(current), before })
    }

    async fn validate(attempt: &Attempt<'_, Self>) -> Result<(), ApiError> {
        let Attempt { cx, start, name, obj, .. } = attempt;
        if name != CONFIG_SINGLETON {
            let why = format!("Invalid value: \"{name}\": the HNCConfiguration must be named \"config\"");
            return Err(refused(&DEF, name, Refusal::Invalid(vec![("metadata.name".into(), why)])));
        }
        let refusal = |r| refused(&DEF, CONFIG_SINGLETON, r);
        check_spec(cx.client, &obj.spec).await.map_err(refusal)?;
        check_rights(cx.client, &start.before, &obj.spec).await.map_err(refusal)?;
        check_overwrites(cx, &start.before, &obj.spec).await.map_err(refusal)
    }

    async fn store(attempt: &Attempt<'_, Self>) -> Result<Value, ApiError> {
        let Attempt { cx, obj, dry_run, .. } = attempt;
        let meta = ObjectLabels::of(&obj.metadata);
        let written = cx.config.write(cx.client, cx.namespace, &obj.spec, &meta, *dry_run).await?;
        Ok(with_status(cx, serde_json::to_value(written).map_err(ApiError::internal)?))
    }
}

fn with_status(cx: &ConfigContext<'_>, mut obj: Value) -> Value {
    let mut conditions = cx.propagation.conditions();
    conditions.extend(namespace_conditions(&cx.cache.read()));
    let status = HNCConfigurationStatus { resources: cx.propagation.status(), conditions };
    obj["status"] = serde_json::to_value(status).unwrap_or_default();
    obj
}

/// HNC's summary: one `NamespaceCondition` per namespace condition type and reason, naming the
/// namespaces affected, timed by the latest of their recorded transitions.
fn namespace_conditions(
    forest: &crate::hierarchy::forest::Forest,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    use std::collections::BTreeMap;
    let mut affected: BTreeMap<(String, String), (Vec<String>, Option<jiff::Timestamp>)> = BTreeMap::new();
    for node in forest.iter() {
        for c in crate::hierarchy::conditions::recorded(node.meta.annotation(hns_api::keys::CONDITIONS)) {
            let entry = affected.entry((c.type_.clone(), c.reason.clone())).or_default();
            entry.0.push(node.name().to_string());
            entry.1 = entry.1.max(Some(c.last_transition_time.0));
        }
    }
    affected
        .into_iter()
        .map(|((type_, reason), (names, since))| {
            let quoted: Vec<String> = names.iter().take(10).map(|n| format!("\"{n}\"")).collect();
            let more =
                if names.len() > 10 { format!(" and {} more", names.len() - 10) } else { String::new() };
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "NamespaceCondition".into(),
                status: "True".into(),
                reason: type_,
                message: format!(
                    "{} namespaces {}{more} are affected by \"{reason}\"",
                    names.len(),
                    quoted.join(", ")
                ),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    since.unwrap_or_default(),
                ),
                observed_generation: None,
            }
        })
        .collect()
}

/// HNC's rules for the configuration: known modes, no enforced kinds, no duplicates, and only
/// namespaced kinds the cluster serves.
async fn check_spec(client: &Client, spec: &HNCConfigurationSpec) -> Result<(), Refusal> {
    let mut causes = check_static(spec);
    if causes.is_empty() {
        let mut discovery = crate::propagation::Discovery::new(client);
        for (i, r) in spec.resources.iter().enumerate() {
            match discovery.find(&r.group, &r.resource).await.map(|d| d.map(|(_, n)| n)) {
                Ok(Some(true)) => {}
                Ok(Some(false)) => causes.push((
                    format!("spec.resources[{i}]"),
                    format!("resource \"{}\" in group \"{}\" is cluster-scoped; only namespaced kinds can propagate", r.resource, r.group),
                )),
                Ok(None) => {
                    // kubectl takes `secret`; resources here are plurals, as HNC's are.
                    let hint = match discovery.meant(&r.group, &r.resource).await {
                        Ok(Some(plural)) => format!("; did you mean \"{plural}\"? (resources are named in the plural, as in RBAC rules)"),
                        _ => String::new(),
                    };
                    causes.push((
                        format!("spec.resources[{i}]"),
                        format!("resource \"{}\" in group \"{}\" is not found in the cluster{hint}", r.resource, r.group),
                    ))
                }
                Err(e) => {
                    return Err(Refusal::NotSynced(format!(
                        "cannot check the cluster's resources: {}; retry in a few seconds",
                        kube_message(&e)
                    )))
                }
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Invalid(causes))
    }
}

/// The mode of `group`/`resource` in `spec`, if it lists it.
fn mode_in(spec: &HNCConfigurationSpec, group: &str, resource: &str) -> Option<Mode> {
    spec.resources
        .iter()
        .find(|x| x.group == group && x.resource == resource)
        .map(|x| Mode::effective(x.mode.as_deref()))
}

/// hns must be allowed to watch and write every kind it is newly told to propagate or remove;
/// otherwise the change is refused with the ClusterRole that grants it, and nothing changes.
async fn check_rights(
    client: &Client,
    before: &HNCConfigurationSpec,
    after: &HNCConfigurationSpec,
) -> Result<(), Refusal> {
    let unavailable = |e: kube::Error| {
        Refusal::NotSynced(format!(
            "cannot check hns-apiserver's own permissions: {}; retry in a few seconds",
            kube_message(&e)
        ))
    };
    for r in &after.resources {
        let mode = Mode::effective(r.mode.as_deref());
        let verbs = rights::needed(mode);
        if verbs.is_empty() || mode_in(before, &r.group, &r.resource) == Some(mode) {
            continue;
        }
        let Some(ar) =
            crate::propagation::resolve(client, &r.group, &r.resource).await.map_err(unavailable)?
        else {
            continue;
        };
        let missing = rights::missing(client, &ar, verbs).await.map_err(unavailable)?;
        if !missing.is_empty() {
            return Err(Refusal::Forbidden(rights::advice(&r.group, &r.resource, &missing)));
        }
    }
    Ok(())
}

/// HNC refuses to start propagating a kind where copies would overwrite namespaces' own objects
/// of the same name: the administrator must rename or remove those first.
async fn check_overwrites(
    cx: &ConfigContext<'_>,
    before: &HNCConfigurationSpec,
    after: &HNCConfigurationSpec,
) -> Result<(), Refusal> {
    let mut causes = Vec::new();
    for (i, r) in after.resources.iter().enumerate() {
        let now = Mode::effective(r.mode.as_deref());
        if !matches!(now, Mode::Propagate | Mode::AllowPropagate)
            || mode_in(before, &r.group, &r.resource) == Some(now)
        {
            continue;
        }
        let clashes = overwrites(cx, &r.group, &r.resource, now).await?;
        if !clashes.is_empty() {
            let listed = overwrites::listed(&clashes, ", ");
            causes.push((
                format!("spec.resources[{i}].mode"),
                format!(
                    "Cannot update configuration because it would overwrite the following object(s):{}; rename or delete them first",
                    listed.strip_prefix(',').unwrap_or(&listed)
                ),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Invalid(causes))
    }
}

/// `namespace/name` of every object that propagating `resource` in `mode` would overwrite.
async fn overwrites(
    cx: &ConfigContext<'_>,
    group: &str,
    resource: &str,
    mode: Mode,
) -> Result<Vec<String>, Refusal> {
    let unavailable = |e: kube::Error| {
        Refusal::NotSynced(format!("cannot list {resource}: {}; retry in a few seconds", kube_message(&e)))
    };
    let Some(ar) = crate::propagation::resolve(cx.client, group, resource).await.map_err(unavailable)? else {
        return Ok(Vec::new());
    };
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(cx.client.clone(), &ar);
    let listed = api.list(&Default::default()).await.map_err(unavailable)?;
    let objects: crate::propagation::Objects = listed
        .items
        .into_iter()
        .map(|o| {
            (
                (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                ),
                std::sync::Arc::new(o),
            )
        })
        .collect();
    let forest = cx.cache.read();
    let everywhere = forest.iter().map(|n| n.name());
    Ok(overwrites::find(&forest, cx.policy, &objects, &ar.kind, mode, everywhere)
        .into_iter()
        .map(|o| format!("{}/{} (from {})", o.namespace, o.name, o.source_namespace))
        .collect())
}

/// The checks that need no cluster.
fn check_static(spec: &HNCConfigurationSpec) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, r) in spec.resources.iter().enumerate() {
        let field = format!("spec.resources[{i}]");
        if ENFORCED.contains(&(r.group.as_str(), r.resource.as_str())) {
            causes.push((
                field.clone(),
                format!(
                    "{}.{} always uses the 'Propagate' mode and cannot be configured",
                    r.resource, r.group
                ),
            ));
        }
        if !seen.insert((r.group.clone(), r.resource.clone())) {
            causes.push((
                field.clone(),
                format!(
                    "Duplicate value: the resource \"{}\" in group \"{}\" is configured more than once",
                    r.resource, r.group
                ),
            ));
        }
        if let Some(Err(unknown)) = r.mode.as_deref().filter(|m| !m.is_empty()).map(str::parse::<Mode>) {
            causes.push((format!("{field}.mode"), unknown.to_string()));
        }
    }
    causes
}

fn cells(item: &Item, now: jiff::Timestamp) -> Vec<Value> {
    let obj = item.to_value();
    let resources: Vec<String> = obj["spec"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!("{}:{}", r["resource"].as_str().unwrap_or(""), r["mode"].as_str().unwrap_or("Propagate"))
        })
        .collect();
    vec![
        obj["metadata"]["name"].clone(),
        resources.join(",").into(),
        age(item.metadata().creation_timestamp.as_ref(), now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use hns_api::ResourceSpec;

    fn spec(items: &[(&str, &str, Option<&str>)]) -> HNCConfigurationSpec {
        HNCConfigurationSpec {
            resources: items
                .iter()
                .map(|(g, r, m)| ResourceSpec {
                    group: g.to_string(),
                    resource: r.to_string(),
                    mode: m.map(str::to_string),
                })
                .collect(),
        }
    }

    #[test]
    fn static_rules() {
        assert!(
            check_static(&spec(&[("", "secrets", Some("Propagate")), ("", "configmaps", None)])).is_empty()
        );
        let causes = check_static(&spec(&[
            ("rbac.authorization.k8s.io", "roles", None),
            ("", "secrets", Some("Sometimes")),
            ("", "secrets", None),
        ]));
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["spec.resources[0]", "spec.resources[1].mode", "spec.resources[2]"]);
        assert!(causes[0].1.contains("always uses the 'Propagate' mode"));
    }
}
