//! Which kind a word on the command line names, resolved as kubectl resolves it: through the
//! cluster's discovery, by plural (`pods`), singular (`pod`), short name (`po`), Kind (`Pod`), and
//! `resource.group` (`deployments.apps`) or `resource.version.group` (`deployments.v1.apps`).
//!
//! Discovery is the aggregated kind (two requests, `/api` and `/apis`, whatever the number of
//! groups). kube's own `Discovery` drops the singular and short names, so the documents are read
//! as they come.

use kube::core::discovery::v2::{APIGroupDiscovery, APIResourceDiscovery};
use kube::Client;

use crate::hns;

/// A kind the cluster serves, in the version the command uses (the group's preferred one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name, as in URLs: `pods`.
    pub plural: String,
    /// Kind: `Pod`.
    pub kind: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

impl Kind {
    /// `v1`, or `apps/v1`.
    pub fn api_version(&self) -> String {
        match self.group.as_str() {
            "" => self.version.clone(),
            group => format!("{group}/{}", self.version),
        }
    }

    /// The URL of its objects in namespace `ns`.
    pub fn collection(&self, ns: &str) -> String {
        match self.group.as_str() {
            "" => format!("/api/{}/namespaces/{ns}/{}", self.version, self.plural),
            group => format!("/apis/{group}/{}/namespaces/{ns}/{}", self.version, self.plural),
        }
    }

    /// Whether it is the core group's namespaces.
    pub fn is_namespaces(&self) -> bool {
        self.group.is_empty() && self.plural == "namespaces"
    }

    /// How kubectl names it in messages: `pods`, `deployments.apps`.
    pub fn resource(&self) -> String {
        match self.group.as_str() {
            "" => self.plural.clone(),
            group => format!("{}.{group}", self.plural),
        }
    }

    /// How `kubectl get -o name` prefixes its objects' names: `pod`, `deployment.apps`.
    pub fn name_prefix(&self) -> String {
        let kind = self.kind.to_lowercase();
        match self.group.as_str() {
            "" => kind,
            group => format!("{kind}.{group}"),
        }
    }
}

/// Why a word names no kind we can list.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing the cluster serves has that name (kubectl's words).
    #[error("the server doesn't have a resource type \"{0}\"")]
    Unknown(String),
    /// The discovery requests failed.
    #[error("cannot read the cluster's kinds (discovery): {0}")]
    Discovery(String),
}

/// The groups the cluster serves, in kubectl's order of preference: the core group first, then
/// `/apis` in the order the server gives (its priority order).
pub async fn discover(client: &Client) -> Result<Vec<APIGroupDiscovery>, Error> {
    let (core, apis) =
        tokio::try_join!(client.list_core_api_versions_aggregated(), client.list_api_groups_aggregated())
            .map_err(|e| Error::Discovery(hns::message(&e)))?;
    Ok(core.items.into_iter().chain(apis.items).collect())
}

/// The kind `word` names among `groups`. A short name wins over other names, as kubectl expands
/// short names first; otherwise the first group (and, within it, version) in preference order
/// that has a resource of that plural, singular or Kind.
pub fn resolve(groups: &[APIGroupDiscovery], word: &str) -> Result<Kind, Error> {
    let lower = word.to_lowercase();
    let candidates = [(lower.as_str(), None, None)]
        .into_iter()
        .chain(qualified(groups, &lower))
        .collect::<Vec<(&str, Option<&str>, Option<&str>)>>();
    for by_short_name in [true, false] {
        for &(name, group, version) in &candidates {
            if let Some(kind) = find(groups, name, group, version, by_short_name) {
                return Ok(kind);
            }
        }
    }
    Err(Error::Unknown(word.to_string()))
}

/// The readings of `resource.group` and `resource.version.group` that `word` allows, as
/// (resource, group, version).
fn qualified<'a>(
    groups: &[APIGroupDiscovery],
    word: &'a str,
) -> Vec<(&'a str, Option<&'a str>, Option<&'a str>)> {
    let Some((resource, rest)) = word.split_once('.') else { return Vec::new() };
    let mut readings = Vec::new();
    if let Some((version, group)) = rest.split_once('.') {
        let served = groups.iter().any(|g| {
            group_name(g) == group && g.versions.iter().any(|v| v.version.as_deref() == Some(version))
        });
        if served {
            readings.push((resource, Some(group), Some(version)));
        }
    }
    readings.push((resource, Some(rest), None));
    readings
}

/// The first resource named `name` in `group` (any, if `None`) and `version` (the group's
/// preferred one that has it, if `None`).
fn find(
    groups: &[APIGroupDiscovery],
    name: &str,
    group: Option<&str>,
    version: Option<&str>,
    by_short_name: bool,
) -> Option<Kind> {
    for g in groups.iter().filter(|g| group.is_none_or(|want| group_name(g) == want)) {
        for v in g.versions.iter().filter(|v| version.is_none_or(|want| v.version.as_deref() == Some(want))) {
            let found = v.resources.iter().find(|r| match by_short_name {
                true => r.short_names.iter().any(|s| s.eq_ignore_ascii_case(name)),
                false => names(r).iter().any(|n| n.eq_ignore_ascii_case(name)),
            });
            if let Some(r) = found {
                return Some(Kind {
                    group: group_name(g).to_string(),
                    version: v.version.clone().unwrap_or_default(),
                    plural: r.resource.clone().unwrap_or_default(),
                    kind: kind_of(r),
                    namespaced: r.scope.as_deref() == Some("Namespaced"),
                });
            }
        }
    }
    None
}

/// A group's name; the core group's is empty.
fn group_name(g: &APIGroupDiscovery) -> &str {
    g.metadata.as_ref().and_then(|m| m.name.as_deref()).unwrap_or("")
}

fn kind_of(r: &APIResourceDiscovery) -> String {
    r.response_kind.as_ref().and_then(|k| k.kind.clone()).unwrap_or_default()
}

/// The plural, singular and Kind of a resource (the singular defaults to the lower-cased Kind,
/// as kubectl's mapper does for servers that do not say it).
fn names(r: &APIResourceDiscovery) -> Vec<String> {
    let kind = kind_of(r);
    let singular =
        r.singular_resource.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| kind.to_lowercase());
    [r.resource.clone().unwrap_or_default(), singular, kind].into_iter().filter(|n| !n.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(plural: &str, singular: &str, kind: &str, short: &[&str], scope: &str) -> serde_json::Value {
        json!({
            "resource": plural, "singularResource": singular, "shortNames": short, "scope": scope,
            "responseKind": {"kind": kind}, "verbs": ["get", "list"],
        })
    }

    /// The core group, apps (v1 preferred over v1beta1), events.k8s.io (whose `events` the core
    /// group's shadows) and a group whose short name is another's plural.
    fn groups() -> Vec<APIGroupDiscovery> {
        serde_json::from_value(json!([
            {"versions": [{"version": "v1", "resources": [
                resource("pods", "pod", "Pod", &["po"], "Namespaced"),
                resource("events", "event", "Event", &["ev"], "Namespaced"),
                resource("namespaces", "namespace", "Namespace", &["ns"], "Cluster"),
                resource("nodes", "node", "Node", &["no"], "Cluster"),
            ]}]},
            {"metadata": {"name": "apps"}, "versions": [
                {"version": "v1", "resources": [
                    resource("deployments", "deployment", "Deployment", &["deploy"], "Namespaced"),
                ]},
                {"version": "v1beta1", "resources": [
                    resource("deployments", "deployment", "Deployment", &["deploy"], "Namespaced"),
                    resource("oldthings", "", "OldThing", &[], "Namespaced"),
                ]},
            ]},
            {"metadata": {"name": "events.k8s.io"}, "versions": [{"version": "v1", "resources": [
                resource("events", "event", "Event", &["ev"], "Namespaced"),
            ]}]},
            {"metadata": {"name": "example.com"}, "versions": [{"version": "v1", "resources": [
                resource("widgets", "widget", "Widget", &["deployment"], "Namespaced"),
            ]}]},
        ]))
        .unwrap()
    }

    fn named(word: &str) -> String {
        match resolve(&groups(), word) {
            Ok(k) => format!("{}/{} {} {}", k.api_version(), k.plural, k.kind, k.namespaced),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_spelling_kubectl_takes() {
        for word in ["pods", "pod", "po", "Pod", "PODS"] {
            assert_eq!(named(word), "v1/pods Pod true", "{word}");
        }
        assert_eq!(named("deploy"), "apps/v1/deployments Deployment true");
        assert_eq!(named("deployments.apps"), "apps/v1/deployments Deployment true");
        assert_eq!(named("deployments.v1beta1.apps"), "apps/v1beta1/deployments Deployment true");
        assert_eq!(named("Deployment.apps"), "apps/v1/deployments Deployment true");
        assert_eq!(named("oldthing"), "apps/v1beta1/oldthings OldThing true", "singular from the Kind");
        assert_eq!(named("ns"), "v1/namespaces Namespace false");
        assert_eq!(named("no"), "v1/nodes Node false");
    }

    #[test]
    fn the_preferred_group_and_short_names_win() {
        assert_eq!(named("events"), "v1/events Event true");
        assert_eq!(named("events.events.k8s.io"), "events.k8s.io/v1/events Event true");
        assert_eq!(named("deployment"), "example.com/v1/widgets Widget true", "a short name first");
        assert_eq!(named("deployments"), "apps/v1/deployments Deployment true");
    }

    #[test]
    fn unknown_words_are_named_as_kubectl_names_them() {
        assert_eq!(named("foo"), "the server doesn't have a resource type \"foo\"");
        assert_eq!(named("pods.apps"), "the server doesn't have a resource type \"pods.apps\"");
        assert_eq!(
            named("deployments.v9.apps"),
            "the server doesn't have a resource type \"deployments.v9.apps\""
        );
    }

    #[test]
    fn urls_and_names_of_a_kind() {
        let pods = resolve(&groups(), "po").unwrap();
        assert_eq!(pods.collection("team"), "/api/v1/namespaces/team/pods");
        assert_eq!((pods.resource(), pods.name_prefix()), ("pods".into(), "pod".into()));
        let deploy = resolve(&groups(), "deploy").unwrap();
        assert_eq!(deploy.collection("team"), "/apis/apps/v1/namespaces/team/deployments");
        assert_eq!(
            (deploy.resource(), deploy.name_prefix()),
            ("deployments.apps".into(), "deployment.apps".into())
        );
        assert!(resolve(&groups(), "namespace").unwrap().is_namespaces());
        assert!(!pods.is_namespaces());
    }
}
