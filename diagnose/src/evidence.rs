//! What the scan found: plain data with no I/O, so the diagnosis is a pure function of it and can
//! be tested without a cluster.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::OnceLock;

use hns_api::keys::{PARENT, SUBNAMESPACE_OF};

use k8s_openapi::jiff::Timestamp;
use kube::api::ApiResource;
use serde::Serialize;

use super::controllers::ControllerEvidence;
use super::nodes::NodeEvidence;

/// Everything the diagnosis is decided from.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// When the scan ran; ages are measured from here.
    pub now: Timestamp,
    /// The namespaces to diagnose: every Terminating one, or the ones named.
    pub targets: Vec<String>,
    /// Every namespace in the cluster (the hns hierarchy spans namespaces).
    pub namespaces: Vec<NamespaceState>,
    /// Every APIService.
    pub api_services: Vec<ApiServiceState>,
    /// Group-versions whose discovery failed.
    pub discovery_failures: Vec<DiscoveryFailure>,
    /// Objects left in the target namespaces that are Terminating.
    pub leftovers: Vec<Leftover>,
    /// Types that could not be listed in a target namespace.
    pub list_failures: Vec<ListFailure>,
    /// Every admission webhook, with the health of its Service.
    pub webhooks: Vec<Webhook>,
    /// Names of the CustomResourceDefinitions (`<plural>.<group>`).
    pub crds: Vec<String>,
    /// What the scan could not read (usually for lack of rights), and why.
    pub unreadable: Vec<Unreadable>,
    /// Deleted pods bound to a node in the target namespaces, and those nodes.
    pub nodes: NodeEvidence,
    /// Whether the controllers that remove built-in finalizers run.
    pub controllers: ControllerEvidence,
    /// The namespaces by name and by parent, made on the first query: a cluster has 100,000
    /// namespaces, and the diagnosis asks after each stuck one's family many times.
    index: OnceLock<Index>,
}

/// Positions in [`Evidence::namespaces`].
#[derive(Debug, Clone, Default)]
struct Index {
    by_name: HashMap<String, usize>,
    /// By the parent each records (subnamespaces included).
    children: HashMap<String, Vec<usize>>,
    /// By `subnamespace-of`.
    subnamespaces: HashMap<String, Vec<usize>>,
}

impl Index {
    fn new(namespaces: &[NamespaceState]) -> Index {
        let mut index = Index::default();
        for (i, n) in namespaces.iter().enumerate() {
            index.by_name.entry(n.name.clone()).or_insert(i);
            if let Some(parent) = n.parent() {
                index.children.entry(parent.to_string()).or_default().push(i);
            }
            if let Some(parent) = n.annotations.get(SUBNAMESPACE_OF) {
                index.subnamespaces.entry(parent.clone()).or_default().push(i);
            }
        }
        index
    }
}

/// Something the scan could not read.
#[derive(Debug, Clone, Default)]
pub struct Unreadable {
    /// What.
    pub what: String,
    /// The error.
    pub message: String,
}

impl Evidence {
    /// The evidence of a scan at `now` of `targets` among `namespaces` (every one in the
    /// cluster), before anything else is read.
    pub fn new(now: Timestamp, targets: Vec<String>, namespaces: Vec<NamespaceState>) -> Evidence {
        Evidence { now, targets, namespaces, ..Default::default() }
    }

    fn index(&self) -> &Index {
        self.index.get_or_init(|| Index::new(&self.namespaces))
    }

    fn at<'a>(&'a self, positions: Option<&'a Vec<usize>>) -> impl Iterator<Item = &'a NamespaceState> + 'a {
        positions.into_iter().flatten().map(|&i| &self.namespaces[i])
    }

    /// The namespace called `name`, if it exists.
    pub fn namespace(&self, name: &str) -> Option<&NamespaceState> {
        self.index().by_name.get(name).map(|&i| &self.namespaces[i])
    }

    /// The namespaces naming `name` as their parent.
    pub fn children<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a NamespaceState> + 'a {
        self.at(self.index().children.get(name))
    }

    /// The subnamespaces of `name` (annotation `subnamespace-of`).
    pub fn subnamespaces<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a NamespaceState> + 'a {
        self.at(self.index().subnamespaces.get(name))
    }

    /// Every namespace below `name`, nearest first, cycle-safe, through the parent each
    /// records. (A parent stays until its subnamespaces are gone, hns's finalizer
    /// `hasSubnamespace`, so the way down from a Terminating namespace is all there.)
    pub fn below<'a>(&'a self, name: &'a str) -> Vec<&'a NamespaceState> {
        let mut seen = HashSet::from([name]);
        let mut out = Vec::new();
        let mut queue = VecDeque::from([name]);
        while let Some(parent) = queue.pop_front() {
            for child in self.children(parent) {
                if seen.insert(child.name.as_str()) {
                    out.push(child);
                    queue.push_back(child.name.as_str());
                }
            }
        }
        out
    }

    /// The way down from `ancestor` to `ns`, both included, through the parents they record.
    /// Empty when `ns` is not below `ancestor`.
    pub fn path(&self, ancestor: &str, ns: &NamespaceState) -> Vec<String> {
        let mut up = vec![ns.name.clone()];
        let mut current = ns;
        while let Some(parent) = current.parent() {
            if up.iter().any(|n| n == parent) {
                break;
            }
            up.push(parent.to_string());
            if parent == ancestor {
                up.reverse();
                return up;
            }
            match self.namespace(parent) {
                Some(p) => current = p,
                None => break,
            }
        }
        Vec::new()
    }

    /// The leftovers in namespace `ns`.
    pub fn leftovers_in<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Leftover> + 'a {
        self.leftovers.iter().filter(move |l| l.namespace == ns)
    }
}

/// A namespace as the API server has it.
#[derive(Debug, Clone, Default)]
pub struct NamespaceState {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its resourceVersion when read.
    pub resource_version: String,
    /// Set once the namespace was deleted (it is then Terminating).
    pub deletion_timestamp: Option<Timestamp>,
    /// `spec.finalizers`: `kubernetes` is the namespace controller's.
    pub spec_finalizers: Vec<String>,
    /// `metadata.finalizers`, which other controllers may add.
    pub metadata_finalizers: Vec<String>,
    /// Its labels (webhook namespace selectors match on them), read only while it is
    /// Terminating.
    pub labels: BTreeMap<String, String>,
    /// Its annotations (hns keeps the hierarchy there).
    pub annotations: BTreeMap<String, String>,
    /// `status.conditions`.
    pub conditions: Vec<Condition>,
}

impl NamespaceState {
    /// Whether the namespace was deleted and is waiting to go.
    pub fn terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// Its parent as hns records it: `subnamespace-of` for a subnamespace, `parent` otherwise.
    pub fn parent(&self) -> Option<&str> {
        self.annotations.get(SUBNAMESPACE_OF).or_else(|| self.annotations.get(PARENT)).map(String::as_str)
    }
}

/// A status condition (namespace or APIService).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Condition {
    /// `type`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The machine-readable reason.
    pub reason: String,
    /// The human-readable message.
    pub message: String,
}

impl Condition {
    /// Whether the condition's status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// The condition as the evidence of a cause quotes it: `condition TYPE: message`.
    pub fn quoted(&self) -> String {
        format!("condition {}: {}", self.type_, self.message)
    }
}

/// An APIService and its availability.
#[derive(Debug, Clone, Default)]
pub struct ApiServiceState {
    /// Its name, `<version>.<group>`.
    pub name: String,
    /// Its uid (a precondition for deleting it).
    pub uid: String,
    /// Its resourceVersion (a precondition for deleting it).
    pub resource_version: String,
    /// The group it serves.
    pub group: String,
    /// The version it serves.
    pub version: String,
    /// The Service behind it; `None` for the API server's own groups.
    pub service: Option<ServiceRef>,
    /// The `Available` condition, when set.
    pub available: Option<Condition>,
}

impl ApiServiceState {
    /// The APIService type, which k8s-openapi does not carry (it belongs to kube-aggregator).
    pub fn api_resource() -> ApiResource {
        ApiResource {
            group: "apiregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiregistration.k8s.io/v1".into(),
            kind: "APIService".into(),
            plural: "apiservices".into(),
        }
    }

    /// `group/version`, as discovery and the namespace conditions name it.
    pub fn group_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// Whether the aggregator reports it unavailable.
    pub fn unavailable(&self) -> bool {
        self.available.as_ref().is_some_and(|c| c.status == "False")
    }
}

/// A reference to a Service.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The port, when given.
    pub port: Option<i32>,
}

impl std::fmt::Display for ServiceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// A group-version whose discovery failed.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryFailure {
    /// `group/version`.
    pub group_version: String,
    /// The error.
    pub message: String,
}

/// A namespaced resource type that supports `list` and `delete`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name, as in URLs.
    pub plural: String,
    /// Kind.
    pub kind: String,
}

impl ResourceType {
    /// Pods (`v1`).
    pub fn pods() -> ResourceType {
        ResourceType { group: String::new(), version: "v1".into(), plural: "pods".into(), kind: "Pod".into() }
    }

    /// `plural.group` (`configmaps` for the core group), as kubectl names types.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The URL of an object of this type.
    pub fn object_path(&self, namespace: &str, name: &str) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        format!("{base}/namespaces/{namespace}/{}/{name}", self.plural)
    }

    /// The type as kube's dynamic API takes it.
    pub fn api_resource(&self) -> ApiResource {
        let api_version = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version,
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// An object left in a Terminating namespace.
#[derive(Debug, Clone, Default)]
pub struct Leftover {
    /// Its type.
    pub resource: ResourceType,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its resourceVersion when listed.
    pub resource_version: String,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// Set once it was deleted.
    pub deletion_timestamp: Option<Timestamp>,
    /// Its owners, as `Kind/name`.
    pub owners: Vec<String>,
    /// Its labels (webhook object selectors match on them).
    pub labels: BTreeMap<String, String>,
}

impl Leftover {
    /// `plural.group/name`, as kubectl prints it.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.resource.qualified(), self.name)
    }
}

/// A type that could not be listed in a namespace.
#[derive(Debug, Clone, Default)]
pub struct ListFailure {
    /// The namespace.
    pub namespace: String,
    /// The type.
    pub resource: ResourceType,
    /// The error.
    pub message: String,
}

/// One admission webhook of a Validating- or MutatingWebhookConfiguration.
#[derive(Debug, Clone, Default)]
pub struct Webhook {
    /// Whether it is a mutating webhook.
    pub mutating: bool,
    /// The configuration's name.
    pub configuration: String,
    /// The configuration's resourceVersion (a precondition for changing it).
    pub configuration_version: String,
    /// The configuration's uid.
    pub configuration_uid: String,
    /// The webhook's position in the configuration.
    pub index: usize,
    /// How many webhooks the configuration has.
    pub siblings: usize,
    /// The webhook's name.
    pub name: String,
    /// Whether a call that fails rejects the request (`failurePolicy: Fail`, the v1 default).
    pub fails_closed: bool,
    /// Where the API server sends the review.
    pub client: WebhookClient,
    /// Which requests it intercepts.
    pub rules: Vec<Rule>,
    /// `namespaceSelector`, as matchLabels and matchExpressions.
    pub namespace_selector: Option<Selector>,
    /// `objectSelector`.
    pub object_selector: Option<Selector>,
}

/// Where a webhook's reviews go.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookClient {
    /// A Service in the cluster, and what the scan found about it.
    Service(ServiceRef, ServiceHealth),
    /// A URL; its health cannot be told from the API.
    Url(String),
}

impl Default for WebhookClient {
    fn default() -> Self {
        WebhookClient::Url(String::new())
    }
}

/// What the API says about a Service a webhook calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceHealth {
    /// The Service does not exist.
    Missing,
    /// The Service exists but no endpoint is ready.
    NoEndpoints,
    /// The Service has ready endpoints, or is an ExternalName whose target the API cannot judge.
    Reachable,
    /// The scan could not read the Service or its Endpoints.
    Unknown,
}

/// One rule of a webhook.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    pub operations: Vec<String>,
    /// API groups, `*` for all.
    pub api_groups: Vec<String>,
    /// API versions, `*` for all.
    pub api_versions: Vec<String>,
    /// Resources, `*` or `*/*` for all, `x/y` for subresources.
    pub resources: Vec<String>,
    /// `Namespaced`, `Cluster` or `*`.
    pub scope: String,
}

/// A label selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    /// `matchLabels`.
    pub labels: BTreeMap<String, String>,
    /// `matchExpressions`.
    pub expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values for `In` and `NotIn`.
    pub values: Vec<String>,
}
