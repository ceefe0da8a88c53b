//! `hierarchyconfigurations`: one singleton `hierarchy` per namespace, derived from the
//! namespace's annotations and the forest.

use std::collections::HashMap;

use hns_api::hierarchy::HIERARCHY_SINGLETON;
use hns_api::{HierarchyConfiguration, HierarchyConfigurationSpec, HierarchyConfigurationStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::ResourceDef;
use crate::forest::{Forest, Node};
use crate::list::{paginate, ListOptions};
use crate::render::{self, age, Column, RenderOptions, AGE_COLUMN, NAME_COLUMN};
use crate::request_info::ResourceRequest;
use crate::server::AppState;
use crate::status::ApiError;

/// The resource's plural name.
pub const PLURAL: &str = "hierarchyconfigurations";

/// How `hierarchyconfigurations` are served.
pub const DEF: ResourceDef = ResourceDef {
    plural: PLURAL,
    singular: "hierarchyconfiguration",
    kind: "HierarchyConfiguration",
    list_kind: "HierarchyConfigurationList",
    namespaced: true,
    verbs: &["get", "list"],
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
    description: "The hierarchical configuration of a namespace: its parent, whether cascading deletion is \
                  allowed, and its children. Every namespace has exactly one, named `hierarchy`.",
    schemas: |g| {
        (
            g.subschema_for::<HierarchyConfigurationSpec>(),
            Some(g.subschema_for::<HierarchyConfigurationStatus>()),
        )
    },
};

/// The hierarchy configuration of namespace `node`.
///
/// Its identity follows the namespace: same uid, resourceVersion and creation time, so a stale
/// update of the configuration is a stale update of the namespace.
pub fn from_forest(forest: &Forest, node: &Node) -> HierarchyConfiguration {
    let ns = &node.object.metadata;
    HierarchyConfiguration {
        metadata: ObjectMeta {
            name: Some(HIERARCHY_SINGLETON.to_string()),
            namespace: ns.name.clone(),
            uid: ns.uid.clone(),
            resource_version: ns.resource_version.clone(),
            creation_timestamp: ns.creation_timestamp.clone(),
            deletion_timestamp: ns.deletion_timestamp.clone(),
            generation: Some(1),
            ..Default::default()
        },
        spec: HierarchyConfigurationSpec {
            parent: node.parent.clone(),
            allow_cascading_deletion: node.allow_cascading_deletion,
            ..Default::default()
        },
        status: Some(HierarchyConfigurationStatus {
            children: forest.children(node.name()).map(str::to_string).collect(),
            conditions: Vec::new(),
        }),
    }
}

/// Serves `get` and `list` (one namespace or all) from the forest.
pub fn serve(
    state: &AppState,
    req: &ResourceRequest,
    query: &HashMap<String, String>,
    render: &RenderOptions,
) -> Result<Value, ApiError> {
    let forest = state.cache.read();
    match req.verb {
        "get" => {
            let node = forest
                .get(&req.namespace)
                .filter(|_| req.name == HIERARCHY_SINGLETON)
                .ok_or_else(|| ApiError::not_found(DEF.group_resource(), &req.name))?;
            Ok(render::object(&DEF, to_value(&forest, node)?, render))
        }
        "list" => {
            let opts = ListOptions::from_query(query)?;
            let nodes: Vec<&Node> = if req.namespace.is_empty() {
                forest.iter().collect()
            } else {
                forest.get(&req.namespace).into_iter().collect()
            };
            let items = nodes.into_iter().map(|n| to_value(&forest, n)).collect::<Result<Vec<_>, _>>()?;
            let rv = forest.resource_version();
            Ok(render::list(&DEF, paginate(items, &opts, &rv), &rv, render))
        }
        verb => Err(ApiError::method_not_allowed(DEF.group_resource(), verb)),
    }
}

fn to_value(forest: &Forest, node: &Node) -> Result<Value, ApiError> {
    serde_json::to_value(from_forest(forest, node)).map_err(ApiError::internal)
}

/// How many children the Children column names before it abbreviates.
const CHILDREN_SHOWN: usize = 3;

fn cells(obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let children: Vec<&str> =
        obj["status"]["children"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut shown = children.iter().take(CHILDREN_SHOWN).copied().collect::<Vec<_>>().join(",");
    if children.len() > CHILDREN_SHOWN {
        shown.push_str(&format!(" + {} more", children.len() - CHILDREN_SHOWN));
    }
    vec![
        obj["metadata"]["name"].clone(),
        obj["spec"]["parent"].as_str().unwrap_or("").into(),
        shown.into(),
        age(obj, now),
        obj["spec"]["allowCascadingDeletion"].as_bool().unwrap_or(false).into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::testing::forest;

    #[test]
    fn derived_from_the_namespace() {
        let f = forest("acme team-a:acme team-b:~acme");
        let hc = from_forest(&f, f.get("acme").unwrap());
        assert_eq!(hc.metadata.name.as_deref(), Some("hierarchy"));
        assert_eq!(hc.metadata.namespace.as_deref(), Some("acme"));
        assert_eq!(hc.spec.parent, None);
        assert_eq!(hc.status.unwrap().children, ["team-a", "team-b"]);
        let hc = from_forest(&f, f.get("team-b").unwrap());
        assert_eq!(hc.spec.parent.as_deref(), Some("acme"));
    }

    #[test]
    fn table_cells() {
        let f = forest("p a:p b:p c:p d:p");
        let v = serde_json::to_value(from_forest(&f, f.get("p").unwrap())).unwrap();
        let c = cells(&v, jiff::Timestamp::now());
        assert_eq!(c[0], "hierarchy");
        assert_eq!(c[1], "");
        assert_eq!(c[2], "a,b,c + 1 more");
        assert_eq!(c.len(), DEF.columns.len());
    }
}
