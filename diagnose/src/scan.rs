//! Gathering the evidence: read-only calls, in parallel where there are many (one metadata-only
//! list per namespaced type and Terminating namespace).

use std::collections::{BTreeSet, HashMap};

use futures::{stream, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde::Deserialize;

use super::controllers;
use super::discovery::discover;
use super::error::{error_text, is_not_found, Error, Result};
use super::evidence::{
    ApiServiceState, Condition, Evidence, Leftover, ListFailure, NamespaceState, Requirement, ResourceType,
    Rule, Selector, ServiceHealth, ServiceRef, Unreadable, Webhook, WebhookClient,
};
use super::nodes;

/// How many lists run at once: enough to scan a namespace in about the time of its slowest
/// type, few enough not to load the API server.
const CONCURRENCY: usize = 16;
/// Page size of the lists.
const PAGE: u32 = 500;
/// Up to this many namespaces, each type is listed in each namespace; beyond, each type is
/// listed once across all namespaces (1,000 stuck namespaces took 1,000 lists per type, and
/// every round of a fix scans again).
const LIST_EACH_UP_TO: usize = 32;

/// Which namespaces to diagnose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every Terminating namespace.
    AllTerminating,
    /// These namespaces.
    Named(Vec<String>),
}

/// Told what the scan is doing, for a progress indicator.
pub trait Progress: Sync {
    /// A new phase; `total` steps follow (0 when unknown).
    fn phase(&self, message: &str, total: u64);
    /// One step of the phase is done.
    fn advance(&self);
    /// The scan is over.
    fn done(&self);
}

impl Progress for () {
    fn phase(&self, _: &str, _: u64) {}
    fn advance(&self) {}
    fn done(&self) {}
}

/// Gathers the evidence about `target`.
pub async fn scan(client: &Client, target: &Target, progress: &dyn Progress) -> Result<Evidence> {
    let evidence = gather(client, target, progress).await;
    progress.done();
    evidence
}

async fn gather(client: &Client, target: &Target, progress: &dyn Progress) -> Result<Evidence> {
    progress.phase("reading namespaces and APIServices", 0);
    let namespaces = read_namespaces(client).await?;
    let targets = match target {
        Target::AllTerminating => {
            namespaces.iter().filter(|n| n.terminating()).map(|n| n.name.clone()).collect()
        }
        Target::Named(names) => names.clone(),
    };
    let mut evidence = Evidence::new(Timestamp::now(), targets, namespaces);
    let api_services = read_api_services(client).await;
    evidence.api_services = or_unreadable(api_services, &mut evidence.unreadable);
    let stuck = to_list(&evidence);
    if stuck.is_empty() {
        return Ok(evidence);
    }
    progress.phase("discovering API types", 0);
    let discovered = discover(client).await?;
    evidence.discovery_failures = discovered.failures;
    let (leftovers, list_failures) =
        list_leftovers(client, &stuck, &discovered.content_types, progress).await;
    evidence.leftovers = leftovers;
    evidence.list_failures = list_failures;
    progress.phase("reading the nodes of deleted pods", 0);
    let with_deleted_pods = evidence
        .leftovers
        .iter()
        .filter(|l| l.resource.group.is_empty() && l.resource.plural == "pods")
        .filter(|l| l.deletion_timestamp.is_some())
        .map(|l| l.namespace.clone())
        .collect();
    let (nodes, unreadable) = nodes::read(client, with_deleted_pods).await;
    evidence.nodes = nodes;
    evidence.unreadable.extend(unreadable.into_iter().map(|(what, message)| Unreadable { what, message }));
    progress.phase("reading the controllers of built-in finalizers", 0);
    let (services, claims) = waiting_for_controllers(&evidence.leftovers);
    let (controllers, unreadable) = controllers::read(client, services, claims).await;
    evidence.controllers = controllers;
    evidence.unreadable.extend(unreadable.into_iter().map(|(what, message)| Unreadable { what, message }));
    progress.phase("reading webhooks and CRDs", 0);
    let webhooks = read_webhooks(client).await;
    evidence.webhooks = or_unreadable(webhooks, &mut evidence.unreadable);
    evidence.crds = read_crd_names(client).await;
    Ok(evidence)
}

/// The deleted Services waiting for their cloud load balancer's cleanup (namespace, name), and
/// the namespaces holding deleted claims with `kubernetes.io/pvc-protection`: what the
/// controllers of those finalizers look at is read for them only.
fn waiting_for_controllers(leftovers: &[Leftover]) -> (Vec<(String, String)>, BTreeSet<String>) {
    let holding = |plural: &'static str, finalizer: &'static str| {
        leftovers.iter().filter(move |l| {
            l.deletion_timestamp.is_some()
                && l.resource.group.is_empty()
                && l.resource.plural == plural
                && l.finalizers.iter().any(|f| f == finalizer)
        })
    };
    let services = holding("services", "service.kubernetes.io/load-balancer-cleanup")
        .map(|l| (l.namespace.clone(), l.name.clone()))
        .collect();
    let claims = holding("persistentvolumeclaims", "kubernetes.io/pvc-protection")
        .map(|l| l.namespace.clone())
        .collect();
    (services, claims)
}

/// The namespaces whose content is listed: the Terminating targets, and the Terminating
/// namespaces below any target, which hns deleted with it and which may hold it (or be all
/// that is left of its deletion).
fn to_list(ev: &Evidence) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for target in &ev.targets {
        let below = ev.below(target);
        let found = ev.namespace(target).into_iter().chain(below);
        for ns in found.filter(|n| n.terminating()) {
            if !names.contains(&ns.name) {
                names.push(ns.name.clone());
            }
        }
    }
    names
}

/// Cluster-wide lists that a user with read rights in the namespaces only may lack: without
/// them the diagnosis sees less, and says so, rather than nothing.
fn or_unreadable<T: Default>(read: Result<T>, unreadable: &mut Vec<Unreadable>) -> T {
    match read {
        Ok(v) => v,
        Err(Error::Read { what, source }) => {
            unreadable.push(Unreadable { what, message: error_text(&source) });
            T::default()
        }
        Err(e) => {
            unreadable.push(Unreadable { what: "a cluster-wide list".into(), message: e.to_string() });
            T::default()
        }
    }
}

/// Every namespace, page by page: a cluster may have 100,000, and their whole list at once is
/// gigabytes in the plugin.
async fn read_namespaces(client: &Client) -> Result<Vec<NamespaceState>> {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut params = ListParams::default().limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|source| Error::Read { what: "listing namespaces".into(), source })?;
        out.extend(page.items.into_iter().map(namespace_state));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

fn namespace_state(ns: Namespace) -> NamespaceState {
    let m = ns.metadata;
    let terminating = m.deletion_timestamp.is_some();
    NamespaceState {
        name: m.name.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        deletion_timestamp: m.deletion_timestamp.map(|t| t.0),
        spec_finalizers: ns.spec.and_then(|s| s.finalizers).unwrap_or_default(),
        metadata_finalizers: m.finalizers.unwrap_or_default(),
        // Only a Terminating namespace's deletion is diagnosed, and only there do webhooks'
        // namespace selectors matter; in a deep hierarchy, tree labels are most of a
        // namespace's bytes.
        labels: m.labels.filter(|_| terminating).unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        conditions: ns
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| Condition {
                type_: c.type_,
                status: c.status,
                reason: c.reason.unwrap_or_default(),
                message: c.message.unwrap_or_default(),
            })
            .collect(),
    }
}

/// The parts of an APIService the diagnosis reads (kube-aggregator's types are not in
/// k8s-openapi).
#[derive(Deserialize, Default)]
#[serde(default)]
struct ApiServiceBody {
    spec: ApiServiceSpec,
    status: ApiServiceStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ApiServiceSpec {
    group: String,
    version: String,
    service: Option<ApiServiceService>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ApiServiceService {
    namespace: String,
    name: String,
    port: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ApiServiceStatus {
    conditions: Vec<ApiServiceCondition>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ApiServiceCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: String,
    message: String,
}

async fn read_api_services(client: &Client) -> Result<Vec<ApiServiceState>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiServiceState::api_resource());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Read { what: "listing APIServices".into(), source })?;
    Ok(list.items.into_iter().map(api_service_state).collect())
}

fn api_service_state(obj: DynamicObject) -> ApiServiceState {
    // A body that does not parse leaves the defaults: no service, no condition.
    let body: ApiServiceBody = serde_json::from_value(obj.data).unwrap_or_default();
    let available = body.status.conditions.into_iter().find(|c| c.type_ == "Available").map(|c| Condition {
        type_: c.type_,
        status: c.status,
        reason: c.reason,
        message: c.message,
    });
    ApiServiceState {
        name: obj.metadata.name.unwrap_or_default(),
        uid: obj.metadata.uid.unwrap_or_default(),
        resource_version: obj.metadata.resource_version.unwrap_or_default(),
        group: body.spec.group,
        version: body.spec.version,
        service: body.spec.service.map(|s| ServiceRef { namespace: s.namespace, name: s.name, port: s.port }),
        available,
    }
}

async fn list_leftovers(
    client: &Client,
    namespaces: &[String],
    types: &[ResourceType],
    progress: &dyn Progress,
) -> (Vec<Leftover>, Vec<ListFailure>) {
    let (mut leftovers, mut each) = (Vec::new(), Vec::new());
    if namespaces.len() > LIST_EACH_UP_TO {
        let (found, unlisted) = list_everywhere(client, namespaces, types, progress).await;
        leftovers = found;
        each = unlisted;
    } else {
        each.extend(types);
    }
    let jobs: Vec<(&String, &ResourceType)> =
        namespaces.iter().flat_map(|ns| each.iter().map(move |t| (ns, *t))).collect();
    progress.phase(
        &format!("listing {} types in {} namespace(s)", each.len(), namespaces.len()),
        jobs.len() as u64,
    );
    let results: Vec<_> = stream::iter(jobs)
        .map(|(ns, t)| async move {
            let r = list_type(client, ns, t).await;
            progress.advance();
            (ns, t, r)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut failures = Vec::new();
    for (ns, t, r) in results {
        match r {
            Ok(found) => leftovers.extend(found),
            Err(message) => {
                failures.push(ListFailure { namespace: ns.clone(), resource: t.clone(), message })
            }
        }
    }
    // Parallel lists finish in any order; the report should not.
    leftovers.sort_by(|a, b| (&a.namespace, &a.resource, &a.name).cmp(&(&b.namespace, &b.resource, &b.name)));
    failures.sort_by(|a, b| (&a.namespace, &a.resource).cmp(&(&b.namespace, &b.resource)));
    (leftovers, failures)
}

/// Lists each type once across all namespaces, keeping what is in `namespaces`; returns the
/// types that could not be listed so (a user with rights in the namespaces only), to be listed
/// namespace by namespace.
async fn list_everywhere<'t>(
    client: &Client,
    namespaces: &[String],
    types: &'t [ResourceType],
    progress: &dyn Progress,
) -> (Vec<Leftover>, Vec<&'t ResourceType>) {
    progress.phase(&format!("listing {} types across all namespaces", types.len()), types.len() as u64);
    let wanted: BTreeSet<&str> = namespaces.iter().map(String::as_str).collect();
    let wanted = &wanted;
    let results: Vec<_> = stream::iter(types)
        .map(|t| async move {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &t.api_resource());
            let r = list_pages(&api, t, |ns| wanted.contains(ns)).await;
            progress.advance();
            (t, r)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let (mut found, mut unlisted) = (Vec::new(), Vec::new());
    for (t, r) in results {
        match r {
            Ok(kept) => found.extend(kept),
            Err(_) => unlisted.push(t),
        }
    }
    (found, unlisted)
}

/// Lists the objects of one type in one namespace, metadata only, page by page.
async fn list_type(client: &Client, ns: &str, t: &ResourceType) -> Result<Vec<Leftover>, String> {
    list_pages(&Api::namespaced_with(client.clone(), ns, &t.api_resource()), t, |_| true).await
}

/// Lists the objects of type `t` that `api` reaches, metadata only, page by page, keeping those
/// in the namespaces `keep` accepts as each page arrives (a list across all namespaces reaches
/// every object of the type in the cluster).
async fn list_pages(
    api: &Api<DynamicObject>,
    t: &ResourceType,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<Leftover>, String> {
    let mut params = ListParams::default().limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page = match api.list_metadata(&params).await {
            Ok(page) => page,
            // Advertised but not served here (405), or gone since discovery (404).
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 405 => return Ok(out),
            Err(e) => return Err(error_text(&e)),
        };
        let kept = page.items.into_iter().filter(|o| o.metadata.namespace.as_deref().is_some_and(&keep));
        out.extend(kept.map(|o| leftover(t, o.metadata)));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

fn leftover(t: &ResourceType, m: ObjectMeta) -> Leftover {
    Leftover {
        resource: t.clone(),
        namespace: m.namespace.unwrap_or_default(),
        name: m.name.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        finalizers: m.finalizers.unwrap_or_default(),
        deletion_timestamp: m.deletion_timestamp.map(|t| t.0),
        owners: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|o| format!("{}/{}", o.kind, o.name))
            .collect(),
        labels: m.labels.unwrap_or_default(),
    }
}

/// The fields both kinds of webhook share.
struct WebhookParts {
    name: String,
    failure_policy: Option<String>,
    client_config: WebhookClientConfig,
    rules: Option<Vec<RuleWithOperations>>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
}

async fn read_webhooks(client: &Client) -> Result<Vec<Webhook>> {
    let read = |what: &str| {
        let what = what.to_string();
        move |source| Error::Read { what, source }
    };
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(read("listing ValidatingWebhookConfigurations"))?;
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(read("listing MutatingWebhookConfigurations"))?;
    // The two kinds of webhook are two types with the same fields.
    macro_rules! parts {
        ($cfg:expr) => {
            $cfg.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| WebhookParts {
                    name: w.name,
                    failure_policy: w.failure_policy,
                    client_config: w.client_config,
                    rules: w.rules,
                    namespace_selector: w.namespace_selector,
                    object_selector: w.object_selector,
                })
                .collect()
        };
    }
    let mut hooks = Vec::new();
    for cfg in validating.items {
        hooks.extend(webhooks_of(false, &cfg.metadata, parts!(cfg)));
    }
    for cfg in mutating.items {
        hooks.extend(webhooks_of(true, &cfg.metadata, parts!(cfg)));
    }
    check_services(client, &mut hooks).await;
    Ok(hooks)
}

fn webhooks_of(mutating: bool, meta: &ObjectMeta, parts: Vec<WebhookParts>) -> Vec<Webhook> {
    let siblings = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(index, p)| Webhook {
            mutating,
            configuration: meta.name.clone().unwrap_or_default(),
            configuration_version: meta.resource_version.clone().unwrap_or_default(),
            configuration_uid: meta.uid.clone().unwrap_or_default(),
            index,
            siblings,
            name: p.name,
            // admissionregistration/v1 defaults failurePolicy to Fail.
            fails_closed: p.failure_policy.as_deref().unwrap_or("Fail") == "Fail",
            client: match p.client_config.service {
                Some(s) => WebhookClient::Service(
                    ServiceRef { namespace: s.namespace, name: s.name, port: s.port },
                    ServiceHealth::Unknown,
                ),
                None => WebhookClient::Url(p.client_config.url.unwrap_or_default()),
            },
            rules: p.rules.unwrap_or_default().into_iter().map(rule).collect(),
            namespace_selector: p.namespace_selector.map(selector),
            object_selector: p.object_selector.map(selector),
        })
        .collect()
}

fn rule(r: RuleWithOperations) -> Rule {
    Rule {
        operations: r.operations.unwrap_or_default(),
        api_groups: r.api_groups.unwrap_or_default(),
        api_versions: r.api_versions.unwrap_or_default(),
        resources: r.resources.unwrap_or_default(),
        scope: r.scope.unwrap_or_default(),
    }
}

fn selector(s: LabelSelector) -> Selector {
    Selector {
        labels: s.match_labels.unwrap_or_default(),
        expressions: s
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .map(|e| Requirement { key: e.key, operator: e.operator, values: e.values.unwrap_or_default() })
            .collect(),
    }
}

/// Fills in the health of the Services that fail-closed webhooks call.
async fn check_services(client: &Client, hooks: &mut [Webhook]) {
    let mut refs: Vec<ServiceRef> = hooks
        .iter()
        .filter(|h| h.fails_closed)
        .filter_map(|h| match &h.client {
            WebhookClient::Service(s, _) => Some(ServiceRef { port: None, ..s.clone() }),
            WebhookClient::Url(_) => None,
        })
        .collect();
    refs.sort();
    refs.dedup();
    let health: HashMap<ServiceRef, ServiceHealth> = stream::iter(refs)
        .map(|r| async move {
            let h = service_health(client, &r).await;
            (r, h)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for h in hooks.iter_mut() {
        if let WebhookClient::Service(s, state) = &mut h.client {
            let key = ServiceRef { port: None, ..s.clone() };
            if let Some(found) = health.get(&key) {
                *state = *found;
            }
        }
    }
}

async fn service_health(client: &Client, r: &ServiceRef) -> ServiceHealth {
    let services: Api<Service> = Api::namespaced(client.clone(), &r.namespace);
    let svc = match services.get(&r.name).await {
        Ok(svc) => svc,
        Err(e) if is_not_found(&e) => return ServiceHealth::Missing,
        Err(_) => return ServiceHealth::Unknown,
    };
    // The API server dials an ExternalName's target itself; the API cannot judge it.
    if svc.spec.and_then(|s| s.type_).as_deref() == Some("ExternalName") {
        return ServiceHealth::Reachable;
    }
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &r.namespace);
    match endpoints.get(&r.name).await {
        Ok(ep) => {
            let ready = ep
                .subsets
                .unwrap_or_default()
                .iter()
                .any(|s| s.addresses.as_ref().is_some_and(|a| !a.is_empty()));
            if ready {
                ServiceHealth::Reachable
            } else {
                ServiceHealth::NoEndpoints
            }
        }
        Err(e) if is_not_found(&e) => ServiceHealth::NoEndpoints,
        Err(_) => ServiceHealth::Unknown,
    }
}

/// CRD names, for telling which controller owns a finalizer. Without the right to list them
/// the attribution falls back to the object's own group, so a failure is not fatal.
async fn read_crd_names(client: &Client) -> Vec<String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.list_metadata(&ListParams::default()).await {
        Ok(list) => list.items.into_iter().filter_map(|c| c.metadata.name).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn reads_an_api_service() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1.dead.example.com", "uid": "u", "resourceVersion": "3"},
            "spec": {"group": "dead.example.com", "version": "v1",
                     "service": {"namespace": "default", "name": "dead", "port": 1}},
            "status": {"conditions": [{"type": "Available", "status": "False",
                       "reason": "FailedDiscoveryCheck", "message": "no"}]}
        }))
        .unwrap();
        let s = api_service_state(obj);
        assert_eq!(s.group_version(), "dead.example.com/v1");
        assert_eq!(s.service.unwrap().to_string(), "default/dead:1");
        assert!(s.available.is_some());
    }

    #[test]
    fn reads_a_local_api_service_without_status() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}
        }))
        .unwrap();
        let s = api_service_state(obj);
        assert!(s.service.is_none() && s.available.is_none());
    }

    #[test]
    fn webhooks_default_to_failing_closed() {
        let meta = ObjectMeta { name: Some("cfg".into()), ..Default::default() };
        let parts = |policy: Option<&str>| WebhookParts {
            name: "w".into(),
            failure_policy: policy.map(str::to_string),
            client_config: WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: "ns".into(),
                    name: "svc".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            rules: None,
            namespace_selector: Some(LabelSelector {
                match_labels: Some(labels(&[("a", "b")])),
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "k".into(),
                    operator: "Exists".into(),
                    values: None,
                }]),
            }),
            object_selector: None,
        };
        let hooks = webhooks_of(false, &meta, vec![parts(None), parts(Some("Ignore"))]);
        assert!(hooks[0].fails_closed);
        assert!(!hooks[1].fails_closed);
        assert_eq!((hooks[1].index, hooks[1].siblings), (1, 2));
        let sel = hooks[0].namespace_selector.as_ref().unwrap();
        assert_eq!(sel.labels, labels(&[("a", "b")]));
        assert_eq!(sel.expressions[0].operator, "Exists");
    }
}
