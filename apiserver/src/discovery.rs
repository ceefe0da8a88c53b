//! Discovery documents: `/apis`, `/apis/<group>` and `/apis/<group>/<version>`, plus aggregated
//! discovery (`apidiscovery.k8s.io`) for clients that ask for it. All built from
//! [`crate::resources::ALL`], so discovery lists exactly what is served.

use hns_api::{API_VERSION, GROUP, VERSION};
use serde_json::{json, Value};

use crate::resources::ALL;

fn group_version() -> Value {
    json!({"groupVersion": API_VERSION, "version": VERSION})
}

/// `APIGroup` for `/apis/<group>`.
pub fn api_group() -> Value {
    json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
        "versions": [group_version()], "preferredVersion": group_version(),
    })
}

/// `APIGroupList` for `/apis`.
pub fn api_group_list() -> Value {
    let mut group = api_group();
    if let Some(g) = group.as_object_mut() {
        g.remove("kind");
        g.remove("apiVersion");
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})
}

/// `APIResourceList` for `/apis/<group>/<version>`: the document kube-apiserver's availability
/// check and every discovery client read.
pub fn api_resource_list() -> Value {
    let resources: Vec<Value> = ALL
        .iter()
        .map(|d| {
            json!({
                "name": d.plural, "singularName": d.singular(), "namespaced": d.namespaced, "kind": d.kind,
                "verbs": d.verbs(), "shortNames": d.short_names,
            })
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION, "resources": resources})
}

/// The `Content-Type` of an aggregated discovery answer at `version` (`v2` or `v2beta1`).
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// `APIGroupDiscoveryList` at `version` (`v2` or `v2beta1`: the same shape).
pub fn aggregated(version: &str) -> Value {
    let resources: Vec<Value> = ALL
        .iter()
        .map(|d| {
            json!({
                "resource": d.plural, "singularResource": d.singular(),
                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                // Always set: a missing responseKind crashed client-go 0.26.0–0.26.3.
                "responseKind": {"group": GROUP, "version": VERSION, "kind": d.kind},
                "verbs": d.verbs(), "shortNames": d.short_names,
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {},
        "items": [{"metadata": {"name": GROUP}, "versions": [{"version": VERSION, "freshness": "Current", "resources": resources}]}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_list_is_never_empty_and_lists_only_served_verbs() {
        let l = api_resource_list();
        let rs = l["resources"].as_array().unwrap();
        assert!(!rs.is_empty(), "an empty list breaks every kubectl command");
        let hc = rs.iter().find(|r| r["name"] == "hierarchyconfigurations").unwrap();
        assert_eq!(
            hc["verbs"],
            json!(["create", "get", "list", "patch", "update", "watch"]),
            "no delete: every namespace has one"
        );
        let subns = rs.iter().find(|r| r["name"] == "subnamespaces").unwrap();
        assert_eq!(subns["shortNames"], json!(["subns"]));
        assert_eq!(hc["namespaced"], true);
    }

    #[test]
    fn aggregated_sets_response_kind() {
        let a = aggregated("v2");
        let r = &a["items"][0]["versions"][0]["resources"][0];
        assert_eq!(r["responseKind"]["kind"], "HierarchyConfiguration");
        assert_eq!(a["apiVersion"], "apidiscovery.k8s.io/v2");
    }
}
