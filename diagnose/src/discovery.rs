//! Discovery that survives broken group-versions: one request per group-version, so an
//! unavailable APIService costs only its own group (kube's `Discovery` fails as a whole).

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIResourceList};
use kube::Client;

use super::error::{error_text, Error, Result};
use super::evidence::{DiscoveryFailure, ResourceType};

/// How many discovery requests run at once.
const CONCURRENCY: usize = 16;

/// What discovery found.
#[derive(Debug, Default)]
pub struct Discovered {
    /// Namespaced types that support `list` and `delete`, one version per group and resource.
    pub content_types: Vec<ResourceType>,
    /// Group-versions whose discovery failed.
    pub failures: Vec<DiscoveryFailure>,
}

/// Discovers every namespaced type that can be listed and deleted, tolerating failing
/// group-versions.
pub async fn discover(client: &Client) -> Result<Discovered> {
    let core = client
        .list_core_api_resources("v1")
        .await
        .map_err(|source| Error::Read { what: "discovery of the core API (/api/v1)".into(), source })?;
    let groups = client
        .list_api_groups()
        .await
        .map_err(|source| Error::Read { what: "discovery of the API groups (/apis)".into(), source })?;
    // Every version of every group is asked, not only the preferred one: the namespace
    // controller's discovery fails when any of them fails, and so must ours.
    let versions: Vec<(String, String)> = groups
        .groups
        .iter()
        .flat_map(|g| ordered_versions(g).into_iter().map(move |gv| (g.name.clone(), gv)))
        .collect();
    // `buffered` keeps the order, so a group's preferred version is added first.
    let answers: Vec<(String, String, Result<APIResourceList, kube::Error>)> = stream::iter(versions)
        .map(|(group, gv)| async move {
            let r = client.list_api_group_resources(&gv).await;
            (group, gv, r)
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut found = Discovered::default();
    add_content_types(&mut found.content_types, "", &core);
    for (group, gv, answer) in answers {
        match answer {
            Ok(list) => add_content_types(&mut found.content_types, &group, &list),
            Err(e) => found.failures.push(DiscoveryFailure { group_version: gv, message: error_text(&e) }),
        }
    }
    Ok(found)
}

/// A group's versions, the preferred one first (its types win over other versions').
fn ordered_versions(g: &APIGroup) -> Vec<String> {
    let preferred = g.preferred_version.as_ref().map(|p| p.group_version.clone());
    let mut out: Vec<String> = preferred.iter().cloned().collect();
    out.extend(
        g.versions.iter().map(|v| v.group_version.clone()).filter(|gv| Some(gv) != preferred.as_ref()),
    );
    out
}

/// Adds the namespaced resources of `list` that support `list` and `delete`, not already known
/// for `group`. The namespace controller deletes, and waits for, exactly the deletable types:
/// objects of other types (hns's `hierarchyconfigurations`, for one) never hold a namespace.
fn add_content_types(into: &mut Vec<ResourceType>, group: &str, list: &APIResourceList) {
    let version =
        list.group_version.rsplit_once('/').map(|(_, v)| v).unwrap_or(&list.group_version).to_string();
    for r in &list.resources {
        let content = r.namespaced
            && !r.name.contains('/')
            && ["list", "delete"].iter().all(|verb| r.verbs.iter().any(|v| v == verb));
        let known = into.iter().any(|t| t.group == group && t.plural == r.name);
        if content && !known {
            into.push(ResourceType {
                group: group.to_string(),
                version: version.clone(),
                plural: r.name.clone(),
                kind: r.kind.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, GroupVersionForDiscovery};

    fn resource(name: &str, namespaced: bool, verbs: &[&str]) -> APIResource {
        APIResource {
            name: name.into(),
            kind: "Kind".into(),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn keeps_namespaced_deletable_types_once_per_group() {
        let mut types = Vec::new();
        let v1 = APIResourceList {
            group_version: "stable.example.com/v1".into(),
            resources: vec![
                resource("widgets", true, &["list", "delete"]),
                resource("widgets/status", true, &["get"]),
                resource("clusterwidgets", false, &["list", "delete"]),
                resource("tokens", true, &["create"]),
            ],
        };
        let v1beta1 = APIResourceList {
            group_version: "stable.example.com/v1beta1".into(),
            resources: vec![
                resource("widgets", true, &["list", "delete"]),
                resource("old", true, &["list", "delete"]),
                resource("readonly", true, &["get", "list"]),
            ],
        };
        add_content_types(&mut types, "stable.example.com", &v1);
        add_content_types(&mut types, "stable.example.com", &v1beta1);
        let got: Vec<String> = types.iter().map(|t| format!("{}/{}", t.version, t.plural)).collect();
        assert_eq!(got, ["v1/widgets", "v1beta1/old"]);
    }

    #[test]
    fn asks_the_preferred_version_first() {
        let gv = |s: &str| GroupVersionForDiscovery {
            group_version: s.into(),
            version: s.rsplit('/').next().unwrap().into(),
        };
        let g = APIGroup {
            name: "g".into(),
            versions: vec![gv("g/v1beta1"), gv("g/v1")],
            preferred_version: Some(gv("g/v1")),
            ..Default::default()
        };
        assert_eq!(ordered_versions(&g), ["g/v1", "g/v1beta1"]);
    }
}
