//! What a request asks for, in Kubernetes' authorization terms.
//!
//! The same parse as k8s.io/apiserver's `RequestInfoFactory`, limited to `/apis/...` paths: it
//! decides the verb (`get`, `list`, `watch`, `create`, …), the namespace, resource, name and
//! subresource. Authorization and routing both use it, so what is checked is what is served.

use std::collections::HashMap;

/// The parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestInfo {
    /// A request for an API resource, e.g. `GET /apis/g/v/namespaces/ns/things/x`.
    Resource(ResourceRequest),
    /// Anything else: discovery, OpenAPI, health, version.
    NonResource {
        /// Lower-case HTTP method (`get`, `post`, …) as RBAC's non-resource verbs.
        verb: String,
        /// The request path.
        path: String,
    },
}

/// The verb of a resource request, as RBAC names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read a collection.
    List,
    /// Follow a collection's changes.
    Watch,
    /// Make an object.
    Create,
    /// Replace an object.
    Update,
    /// Change part of an object (or server-side apply).
    Patch,
    /// Delete one object.
    Delete,
    /// Delete a collection.
    DeleteCollection,
}

impl Verb {
    /// Every verb, in the alphabetical order discovery lists them in.
    pub const ALL: [Verb; 8] = [
        Verb::Create,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Update,
        Verb::Watch,
    ];

    /// RBAC's name for it (`deletecollection`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether it names one object (and so, on a subnamespace, one namespace).
    pub fn is_single_object(self) -> bool {
        matches!(self, Verb::Get | Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request for an API resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    /// What is asked.
    pub verb: Verb,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace, empty for cluster-wide requests.
    pub namespace: String,
    /// Plural resource name.
    pub resource: String,
    /// Object name; empty for collections (unless a `metadata.name` field selector names one).
    pub name: String,
    /// Subresource, e.g. `status`; usually empty.
    pub subresource: String,
}

impl RequestInfo {
    /// Parses a request's method, path and query string.
    pub fn parse(method: &str, path: &str, query: &str) -> RequestInfo {
        let non_resource =
            || RequestInfo::NonResource { verb: method.to_ascii_lowercase(), path: path.to_string() };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        // /apis/<group>/<version>/<rest...>: anything shorter is discovery.
        if parts.len() < 4 || parts[0] != "apis" {
            return non_resource();
        }
        let (group, version) = (parts[1], parts[2]);
        let mut rest = &parts[3..];
        let mut namespace = "";
        // `namespaces/<ns>/<resource>...` is namespaced; `namespaces` or `namespaces/<ns>` alone
        // would be the Namespace resource itself.
        if rest[0] == "namespaces" && rest.len() >= 3 {
            namespace = rest[1];
            rest = &rest[2..];
        }
        if rest.iter().any(|p| p.is_empty()) {
            return non_resource();
        }
        let resource = rest[0];
        let name = rest.get(1).copied().unwrap_or_default();
        let subresource = rest.get(2).copied().unwrap_or_default();
        if rest.len() > 3 {
            return non_resource();
        }
        let params = query_params(query);
        let is_watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
        let verb = match (method, name.is_empty()) {
            ("GET" | "HEAD", false) => Verb::Get,
            ("GET" | "HEAD", true) if is_watch => Verb::Watch,
            ("GET" | "HEAD", true) => Verb::List,
            ("POST", _) => Verb::Create,
            ("PUT", _) => Verb::Update,
            ("PATCH", _) => Verb::Patch,
            ("DELETE", false) => Verb::Delete,
            ("DELETE", true) => Verb::DeleteCollection,
            _ => return non_resource(),
        };
        // RBAC lets `get` on one name cover `list`/`watch` narrowed to that name.
        let mut name = name.to_string();
        if matches!(verb, Verb::List | Verb::Watch) {
            if let Some(n) = params.get("fieldSelector").and_then(|s| single_name_selector(s)) {
                name = n;
            }
        }
        RequestInfo::Resource(ResourceRequest {
            verb,
            group: group.to_string(),
            version: version.to_string(),
            namespace: namespace.to_string(),
            resource: resource.to_string(),
            name,
            subresource: subresource.to_string(),
        })
    }
}

/// Decodes a query string into its last value per key.
pub fn query_params(query: &str) -> HashMap<String, String> {
    form_urlencoded::parse(query.as_bytes()).into_owned().collect()
}

/// `metadata.name=x` (or `==`) as the only term of a field selector.
fn single_name_selector(selector: &str) -> Option<String> {
    if selector.contains(',') {
        return None;
    }
    let (k, v) = selector.split_once("==").or_else(|| selector.split_once('='))?;
    (k.trim() == "metadata.name" && !k.ends_with('!')).then(|| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(method: &str, path: &str, query: &str) -> ResourceRequest {
        match RequestInfo::parse(method, path, query) {
            RequestInfo::Resource(r) => r,
            other => panic!("expected a resource request, got {other:?}"),
        }
    }

    #[test]
    fn discovery_paths_are_non_resource() {
        for p in ["/apis", "/apis/hnc.x-k8s.io", "/apis/hnc.x-k8s.io/v1alpha2", "/openapi/v2", "/healthz"] {
            assert!(matches!(RequestInfo::parse("GET", p, ""), RequestInfo::NonResource { .. }), "{p}");
        }
    }

    #[test]
    fn verbs() {
        let base = "/apis/hnc.x-k8s.io/v1alpha2/namespaces/a/hierarchyconfigurations";
        assert_eq!(res("GET", base, "").verb, Verb::List);
        assert_eq!(res("GET", base, "watch=true").verb, Verb::Watch);
        assert_eq!(res("GET", base, "watch=1").verb, Verb::Watch);
        assert_eq!(res("GET", &format!("{base}/hierarchy"), "").verb, Verb::Get);
        assert_eq!(res("POST", base, "").verb, Verb::Create);
        assert_eq!(res("PUT", &format!("{base}/hierarchy"), "").verb, Verb::Update);
        assert_eq!(res("PATCH", &format!("{base}/hierarchy"), "").verb, Verb::Patch);
        assert_eq!(res("DELETE", &format!("{base}/hierarchy"), "").verb, Verb::Delete);
        assert_eq!(res("DELETE", base, "").verb, Verb::DeleteCollection);
    }

    #[test]
    fn namespaced_and_cluster_wide() {
        let r = res("GET", "/apis/hnc.x-k8s.io/v1alpha2/namespaces/team-a/subnamespaces/dev/status", "");
        assert_eq!(
            (r.namespace.as_str(), r.resource.as_str(), r.name.as_str()),
            ("team-a", "subnamespaces", "dev")
        );
        assert_eq!(r.subresource, "status");
        let r = res("GET", "/apis/hnc.x-k8s.io/v1alpha2/hierarchyconfigurations", "");
        assert_eq!((r.namespace.as_str(), r.resource.as_str()), ("", "hierarchyconfigurations"));
        let r = res("GET", "/apis/hnc.x-k8s.io/v1alpha2/hncconfigurations/config", "");
        assert_eq!((r.resource.as_str(), r.name.as_str()), ("hncconfigurations", "config"));
    }

    #[test]
    fn name_field_selector_narrows_list_and_watch() {
        let r = res(
            "GET",
            "/apis/hnc.x-k8s.io/v1alpha2/namespaces/a/hierarchyconfigurations",
            "fieldSelector=metadata.name%3Dhierarchy&watch=true",
        );
        assert_eq!((r.verb, r.name.as_str()), (Verb::Watch, "hierarchy"));
        let r = res(
            "GET",
            "/apis/hnc.x-k8s.io/v1alpha2/hierarchyconfigurations",
            "fieldSelector=metadata.name!%3Dx",
        );
        assert_eq!(r.name, "");
    }

    #[test]
    fn query_decoding() {
        let q = query_params("labelSelector=a%3Db+c&limit=5&limit=6");
        assert_eq!(q["labelSelector"], "a=b c");
        assert_eq!(q["limit"], "6");
    }
}
