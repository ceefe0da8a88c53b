//! The hns API as the plugin uses it: typed calls on `hnc.x-k8s.io/v1alpha2`, and errors in the
//! user's terms: hns not installed, hns installed but not answering, a namespace that does not
//! exist, or else the server's own message (its `Status` objects say what went wrong).

use std::collections::BTreeSet;

use hns_api::config::CONFIG_SINGLETON;
use hns_api::hierarchy::HIERARCHY_SINGLETON;
use hns_api::{
    HNCConfiguration, HierarchicalResourceQuota, HierarchyConfiguration, ResourceSpec, Subnamespace,
    API_VERSION,
};
use k8s_openapi::api::core::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Api, Client};
/// Every error of the plugin is worded as the diagnoser words kube's.
pub use namespace_diagnose::error::message;
use namespace_diagnose::error::server_message;
use serde_json::json;

/// The items of a list, and nothing else of it.
#[derive(serde::Deserialize)]
struct Items<T> {
    items: Vec<T>,
}

/// The metadata of an object of which only some is read. At 100,000 namespaces the list of
/// configurations `tree -A` reads is tens of megabytes, and decoding every field of every
/// object's metadata was a good part of its time.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    name: Option<String>,
    namespace: Option<String>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// A server-side Table (`meta.k8s.io/v1`) of which only the cells of its rows are read.
#[derive(serde::Deserialize)]
struct Rows {
    rows: Vec<Row>,
}

#[derive(serde::Deserialize)]
struct Row {
    cells: Vec<serde_json::Value>,
}

/// What a Table asks for: rows of cells only, without their objects (`includeObject=None`).
const TABLE_WITHOUT_OBJECTS: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// What asks for hns's `HierarchyTree` of a list of hierarchy configurations: each namespace's
/// place in the hierarchy, and nothing else. Alone, so that a server without it answers 406.
const HIERARCHY_TREE: &str = "application/json;as=HierarchyTree;g=hnc.x-k8s.io;v=v1alpha2";

/// One namespace of a `HierarchyTree`, its names owned.
pub type TreeEntry = hns_api::HierarchyTreeEntry;

#[derive(serde::Deserialize)]
struct HierarchyTree {
    namespaces: Vec<TreeEntry>,
}

/// A HierarchyConfiguration with only that metadata.
#[derive(serde::Deserialize)]
struct LeanHierarchy {
    metadata: LeanMeta,
    #[serde(default)]
    spec: hns_api::HierarchyConfigurationSpec,
    status: Option<hns_api::HierarchyConfigurationStatus>,
}

impl LeanHierarchy {
    fn into_hierarchy(self) -> HierarchyConfiguration {
        let metadata = kube::api::ObjectMeta {
            name: self.metadata.name,
            namespace: self.metadata.namespace,
            deletion_timestamp: self.metadata.deletion_timestamp,
            ..Default::default()
        };
        HierarchyConfiguration { metadata, spec: self.spec, status: self.status }
    }
}

/// The APIService that routes the hns API to hns-apiserver.
pub const APISERVICE: &str = "v1alpha2.hnc.x-k8s.io";

/// What can go wrong talking to hns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster does not serve the group at all.
    #[error(
        "the hns API ({API_VERSION}) is not installed in this cluster. Check with: kubectl get apiservice {APISERVICE}"
    )]
    NotInstalled,
    /// The group is registered but kube-apiserver cannot reach hns-apiserver.
    #[error(
        "the hns API ({API_VERSION}) is unavailable: kube-apiserver cannot reach hns-apiserver ({detail}). Check with: kubectl get apiservice {APISERVICE}"
    )]
    Unavailable {
        /// What kube-apiserver answered.
        detail: String,
    },
    /// The namespace does not exist.
    #[error("namespace \"{0}\" not found")]
    NamespaceNotFound(String),
    /// The server refused or failed the request, and said why.
    #[error("{}", server_message(.0))]
    Server(Box<Status>),
    /// The request did not get an answer from the server.
    #[error("{}", message(.0))]
    Kube(kube::Error),
    /// An object whose spec is not of the API's shape.
    #[error("cannot read the spec of {what}: {detail}")]
    Unreadable {
        /// The object.
        what: String,
        /// Why.
        detail: String,
    },
}

impl Error {
    /// The HTTP code of a server's refusal.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Server(s) => Some(s.code),
            _ => None,
        }
    }
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The reason kube gives a `Status` it made up because the body was not one (plain text from
/// kube-apiserver's aggregation layer, or `404 page not found` for an unknown group).
const NOT_A_STATUS: &str = "Failed to parse error data";

/// Turns a kube error into one of ours.
///
/// kube-apiserver answers for a group nobody serves with a 404 that names no object, and for a
/// registered group whose server it cannot reach with a plain-text 503. A 404 that names an
/// object, and a 503 that is a `Status` (hns-apiserver's own "not ready yet"), come from hns
/// itself and keep their message.
pub fn classify(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(s) if s.code == 404 && s.details.as_ref().is_none_or(|d| d.name.is_empty()) => {
            Error::NotInstalled
        }
        kube::Error::Api(s) if s.code == 503 && s.reason == NOT_A_STATUS => {
            Error::Unavailable { detail: s.message.trim().to_string() }
        }
        kube::Error::Api(s) => Error::Server(s),
        e => Error::Kube(e),
    }
}

/// A client for the hns API.
#[derive(Clone)]
pub struct Hns {
    client: Client,
}

impl Hns {
    /// Wraps a kube client.
    pub fn new(client: Client) -> Hns {
        Hns { client }
    }

    /// The hierarchy configuration of `ns`.
    pub async fn hierarchy(&self, ns: &str) -> Result<HierarchyConfiguration> {
        let api: Api<HierarchyConfiguration> = Api::namespaced(self.client.clone(), ns);
        api.get(HIERARCHY_SINGLETON).await.map_err(|e| in_namespace(classify(e), ns))
    }

    /// Every namespace's hierarchy configuration, in one request. Of their metadata only the
    /// name, namespace and deletionTimestamp are read (see [`LeanMeta`]).
    pub async fn hierarchies(&self) -> Result<Vec<HierarchyConfiguration>> {
        let request = kube::core::Request::new(format!("/apis/{API_VERSION}/hierarchyconfigurations"))
            .list(&ListParams::default())
            .map_err(|e| classify(kube::Error::BuildRequest(e)))?;
        let list: Items<LeanHierarchy> = self.client.request(request).await.map_err(classify)?;
        Ok(list.items.into_iter().map(LeanHierarchy::into_hierarchy).collect())
    }

    /// Merge-patches the hierarchy configuration of `ns`, failing with a conflict if it changed
    /// since `resource_version` was read.
    pub async fn patch_hierarchy(
        &self,
        ns: &str,
        resource_version: Option<&str>,
        spec: serde_json::Value,
    ) -> Result<HierarchyConfiguration> {
        let api: Api<HierarchyConfiguration> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"metadata": {"resourceVersion": resource_version}, "spec": spec});
        api.patch(HIERARCHY_SINGLETON, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| in_namespace(classify(e), ns))
    }

    /// Every namespace's place in the hierarchy (of those the user may see), in one request for
    /// hns's `HierarchyTree`: at 100,000 namespaces some 5 MB, where their configurations are 34.
    /// A server without it answers 406.
    pub async fn tree(&self) -> Result<Vec<TreeEntry>> {
        let path = format!("/apis/{API_VERSION}/hierarchyconfigurations");
        let tree: HierarchyTree = self.get_as(&path, HIERARCHY_TREE).await?;
        Ok(tree.namespaces)
    }

    /// GET `path` answered as `accept`.
    async fn get_as<T: serde::de::DeserializeOwned>(&self, path: &str, accept: &'static str) -> Result<T> {
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| classify(kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e))))?;
        self.client.request(request).await.map_err(classify)
    }

    /// The names of every subnamespace in the cluster, in one request for a Table of them
    /// without their objects: the Name cell of each row is all that is read, and at 100,000
    /// namespaces even their metadata alone was some 27 MB.
    pub async fn all_subnamespace_names(&self) -> Result<BTreeSet<String>> {
        let path = format!("/apis/{API_VERSION}/subnamespaces?includeObject=None");
        let table: Rows = self.get_as(&path, TABLE_WITHOUT_OBJECTS).await?;
        Ok(table
            .rows
            .into_iter()
            .filter_map(|r| r.cells.into_iter().next()?.as_str().map(str::to_string))
            .collect())
    }

    /// The subnamespaces of `parent`.
    pub async fn subnamespaces(&self, parent: &str) -> Result<Vec<Subnamespace>> {
        let api: Api<Subnamespace> = Api::namespaced(self.client.clone(), parent);
        Ok(api.list(&ListParams::default()).await.map_err(classify)?.items)
    }

    /// Subnamespace `child` of `parent`.
    pub async fn subnamespace(&self, parent: &str, child: &str) -> Result<Subnamespace> {
        let api: Api<Subnamespace> = Api::namespaced(self.client.clone(), parent);
        api.get(child).await.map_err(classify)
    }

    /// Creates subnamespace `child` of `parent`.
    pub async fn create_subnamespace(&self, parent: &str, child: &str) -> Result<Subnamespace> {
        let api: Api<Subnamespace> = Api::namespaced(self.client.clone(), parent);
        api.create(&PostParams::default(), &Subnamespace::new(child, Default::default()))
            .await
            .map_err(classify)
    }

    /// Deletes subnamespace `child` of `parent`.
    pub async fn delete_subnamespace(&self, parent: &str, child: &str) -> Result<()> {
        let api: Api<Subnamespace> = Api::namespaced(self.client.clone(), parent);
        api.delete(child, &DeleteParams::default()).await.map_err(classify)?;
        Ok(())
    }

    /// The hierarchical resource quotas of `ns`.
    pub async fn quotas(&self, ns: &str) -> Result<Vec<HierarchicalResourceQuota>> {
        let api: Api<HierarchicalResourceQuota> = Api::namespaced(self.client.clone(), ns);
        Ok(api.list(&ListParams::default()).await.map_err(|e| in_namespace(classify(e), ns))?.items)
    }

    /// Every hierarchical resource quota in the cluster, in one request.
    pub async fn all_quotas(&self) -> Result<Vec<HierarchicalResourceQuota>> {
        let api: Api<HierarchicalResourceQuota> = Api::all(self.client.clone());
        Ok(api.list(&ListParams::default()).await.map_err(classify)?.items)
    }

    /// Quota `name` of `ns`.
    pub async fn quota(&self, ns: &str, name: &str) -> Result<HierarchicalResourceQuota> {
        let api: Api<HierarchicalResourceQuota> = Api::namespaced(self.client.clone(), ns);
        api.get(name).await.map_err(classify)
    }

    /// The cluster's HNCConfiguration.
    pub async fn config(&self) -> Result<HNCConfiguration> {
        let api: Api<HNCConfiguration> = Api::all(self.client.clone());
        api.get(CONFIG_SINGLETON).await.map_err(classify)
    }

    /// Replaces the configured kinds, failing with a conflict if the configuration changed since
    /// `resource_version` was read.
    pub async fn set_config_resources(
        &self,
        resource_version: Option<&str>,
        resources: &[ResourceSpec],
    ) -> Result<HNCConfiguration> {
        let api: Api<HNCConfiguration> = Api::all(self.client.clone());
        let patch =
            json!({"metadata": {"resourceVersion": resource_version}, "spec": {"resources": resources}});
        api.patch(CONFIG_SINGLETON, &PatchParams::default(), &Patch::Merge(patch)).await.map_err(classify)
    }

    /// The resources of the hns API, as discovery lists them.
    pub async fn served_resources(&self) -> Result<Vec<String>> {
        let list = self.client.list_api_group_resources(API_VERSION).await.map_err(classify)?;
        let mut names: Vec<String> =
            list.resources.into_iter().map(|r| r.name).filter(|n| !n.contains('/')).collect();
        names.sort();
        Ok(names)
    }

    /// Events reported by `component` about objects in `ns`, or about namespace `ns` itself
    /// (events about a cluster-scoped object live in `default`).
    pub async fn events(&self, ns: &str, component: &str) -> Events {
        let inside: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let about =
            ListParams::default().fields(&format!("involvedObject.kind=Namespace,involvedObject.name={ns}"));
        let elsewhere: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let mut found = Events::default();
        match inside.list(&ListParams::default()).await {
            Ok(list) => found.events.extend(list.items),
            Err(e) => {
                found.inside_unread = true;
                found.unreadable.push(format!("the events in namespace {ns} ({})", classify(e)))
            }
        }
        if ns != "default" {
            match elsewhere.list(&about).await {
                Ok(list) => found.events.extend(list.items),
                Err(e) => found.unreadable.push(format!(
                    "the events about namespace {ns} itself, which Kubernetes keeps in namespace default ({})",
                    classify(e)
                )),
            }
        }
        found.events.retain(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(component)
                || e.reporting_component.as_deref() == Some(component)
        });
        found
    }

    /// The version kube-apiserver reports (hns-apiserver publishes none through it).
    pub async fn kubernetes_version(&self) -> Result<String, kube::Error> {
        Ok(self.client.apiserver_version().await?.git_version)
    }
}

/// The events [`Hns::events`] could read, and what it could not.
#[derive(Debug, Default)]
pub struct Events {
    /// The events read.
    pub events: Vec<Event>,
    /// Which lists could not be read, and why: each can be forbidden on its own.
    pub unreadable: Vec<String>,
    /// Whether the events in the namespace (not those about it) could not be read.
    pub inside_unread: bool,
}

/// A 404 for the singleton of namespace `ns` means the namespace does not exist.
fn in_namespace(e: Error, ns: &str) -> Error {
    match e {
        Error::Server(s) if s.code == 404 => Error::NamespaceNotFound(ns.to_string()),
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::StatusDetails;

    fn status(code: u16, reason: &str, message: &str, name: Option<&str>) -> kube::Error {
        let mut s = Status::failure(message, reason).with_code(code);
        s.details = name.map(|n| serde_json::from_value::<StatusDetails>(json!({"name": n})).unwrap());
        kube::Error::Api(s.boxed())
    }

    #[test]
    fn kube_errors_read_as_their_status_message() {
        let e = status(403, "Forbidden", "events is forbidden: User \"bob\" cannot list", None);
        assert!(e.to_string().contains("Status {"), "kube's Display carries the Debug form");
        assert_eq!(message(&e), "events is forbidden: User \"bob\" cannot list");
        assert_eq!(Error::Kube(e).to_string(), "events is forbidden: User \"bob\" cannot list");
    }

    #[test]
    fn an_unknown_group_is_not_installed() {
        let e = classify(status(404, NOT_A_STATUS, "404 page not found", None));
        assert!(matches!(e, Error::NotInstalled));
        assert_eq!(
            e.to_string(),
            "the hns API (hnc.x-k8s.io/v1alpha2) is not installed in this cluster. Check with: kubectl get apiservice v1alpha2.hnc.x-k8s.io"
        );
        let newer =
            classify(status(404, "NotFound", "the server could not find the requested resource", None));
        assert!(matches!(newer, Error::NotInstalled));
    }

    #[test]
    fn an_unreachable_apiservice_is_unavailable() {
        let e = classify(status(503, NOT_A_STATUS, "service unavailable\n", None));
        assert_eq!(
            e.to_string(),
            "the hns API (hnc.x-k8s.io/v1alpha2) is unavailable: kube-apiserver cannot reach hns-apiserver (service unavailable). Check with: kubectl get apiservice v1alpha2.hnc.x-k8s.io"
        );
    }

    #[test]
    fn hns_own_answers_keep_their_message() {
        let e = classify(status(503, "ServiceUnavailable", "cannot check the cluster's resources: x", None));
        assert_eq!(e.to_string(), "cannot check the cluster's resources: x");
        let e =
            classify(status(404, "NotFound", "subnamespaces.hnc.x-k8s.io \"kid\" not found", Some("kid")));
        assert_eq!(e.code(), Some(404));
        assert_eq!(e.to_string(), "subnamespaces.hnc.x-k8s.io \"kid\" not found");
        let e = classify(status(403, "Forbidden", "", None));
        assert_eq!(e.to_string(), "the server answered 403 Forbidden");
    }

    #[test]
    fn a_missing_singleton_is_a_missing_namespace() {
        let e = classify(status(
            404,
            "NotFound",
            "hierarchyconfigurations.hnc.x-k8s.io \"hierarchy\" not found",
            Some("hierarchy"),
        ));
        assert_eq!(in_namespace(e, "nope").to_string(), "namespace \"nope\" not found");
        assert!(matches!(in_namespace(Error::NotInstalled, "nope"), Error::NotInstalled));
    }
}
