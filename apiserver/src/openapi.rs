//! OpenAPI v2 (`/openapi/v2`) and v3 (`/openapi/v3`) documents for the served resources.
//!
//! kube-apiserver merges the v2 document into its own, which is what `kubectl explain` and
//! client-side validation read; definitions carry `x-kubernetes-group-version-kind` so kubectl can
//! find them. Schemas come from the API types themselves (schemars), so they cannot drift from
//! what the server accepts. Both documents are built once and served with an ETag.

use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use hns_api::{GROUP, VERSION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Status};
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

use crate::http::request_info::Verb;
use crate::resources::{ResourceDef, ALL};

/// A document and its ETag.
pub struct Document {
    /// The JSON body.
    pub body: String,
    /// A strong validator of `body`.
    pub etag: String,
}

impl Document {
    fn new(v: &Value) -> Self {
        let body = v.to_string();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut h);
        Document { etag: format!("\"{:016X}\"", h.finish()), body }
    }
}

/// `/openapi/v2`.
pub fn v2() -> &'static Document {
    static DOC: OnceLock<Document> = OnceLock::new();
    DOC.get_or_init(|| Document::new(&build_v2()))
}

/// `/openapi/v3/apis/<group>/<version>`.
pub fn v3_group_version() -> &'static Document {
    static DOC: OnceLock<Document> = OnceLock::new();
    DOC.get_or_init(|| Document::new(&build_v3()))
}

/// `/openapi/v3`: the index of group-version documents.
pub fn v3_index() -> Value {
    let path = format!("apis/{GROUP}/{VERSION}");
    let etag = v3_group_version().etag.trim_matches('"').to_string();
    json!({"paths": {path.clone(): {"serverRelativeURL": format!("/openapi/v3/{path}?hash={etag}")}}})
}

/// The definition name of a kind, as kube-apiserver names CRD kinds: reversed group.
pub fn definition_name(kind: &str) -> String {
    let reversed: Vec<&str> = GROUP.split('.').rev().collect();
    format!("{}.{VERSION}.{kind}", reversed.join("."))
}

fn gvk(kind: &str) -> Value {
    json!([{"group": GROUP, "version": VERSION, "kind": kind}])
}

/// Schemas of every served kind, its list kind, and what they refer to, with references into
/// `#/components/schemas/` (OpenAPI v3 layout).
fn definitions() -> Map<String, Value> {
    let mut g = SchemaSettings::openapi3().with(|s| s.meta_schema = None).into_generator();
    let meta = g.subschema_for::<ObjectMeta>();
    let list_meta = g.subschema_for::<ListMeta>();
    // Error answers are Status objects; referenced from every operation.
    g.subschema_for::<Status>();
    let mut defs = Map::new();
    for def in ALL {
        let (spec, status) = (def.schemas)(&mut g);
        let mut props = json!({
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
            "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
            "metadata": meta,
            "spec": spec,
        });
        if let Some(status) = status {
            props["status"] = status.to_value();
        }
        defs.insert(
            definition_name(def.kind),
            json!({"description": def.description, "type": "object", "properties": props, "x-kubernetes-group-version-kind": gvk(def.kind)}),
        );
        defs.insert(
            definition_name(&def.list_kind()),
            json!({
                "description": format!("A list of {}.", def.kind),
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": list_meta,
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{}", definition_name(def.kind))}},
                },
                "x-kubernetes-group-version-kind": gvk(&def.list_kind()),
            }),
        );
    }
    defs.extend(g.take_definitions(true));
    defs
}

struct Op {
    method: &'static str,
    action: &'static str,
    verb: &'static str,
    op_id: &'static str,
    list: bool,
}

/// Each verb as kube-apiserver's OpenAPI shows it: its HTTP method, its `x-kubernetes-action`,
/// the start of its operation id, and whether it is on the collection's path (else the item's).
const OPERATIONS: [(Verb, &str, &str, &str, bool); 7] = [
    (Verb::List, "get", "list", "list", true),
    (Verb::Create, "post", "post", "create", true),
    (Verb::DeleteCollection, "delete", "deletecollection", "deleteCollection", true),
    (Verb::Get, "get", "get", "read", false),
    (Verb::Update, "put", "put", "replace", false),
    (Verb::Patch, "patch", "patch", "patch", false),
    (Verb::Delete, "delete", "delete", "delete", false),
];

/// The operations of a resource on its collection path and its item path.
fn operations(def: &ResourceDef) -> (Vec<Op>, Vec<Op>) {
    let (mut collection, mut item) = (Vec::new(), Vec::new());
    for (verb, method, action, op_id, on_collection) in OPERATIONS {
        if def.supports(verb) {
            let op = Op { method, action, verb: verb.as_str(), op_id, list: verb == Verb::List };
            if on_collection {
                collection.push(op)
            } else {
                item.push(op)
            }
        }
    }
    (collection, item)
}

fn query_params(op: &Op, def: &ResourceDef) -> Vec<Value> {
    let q = |name: &str, ty: &str, desc: &str| json!({"name": name, "in": "query", "type": ty, "uniqueItems": true, "description": desc});
    let mut params = Vec::new();
    if op.list {
        params.push(q(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels.",
        ));
        params.push(q("fieldSelector", "string", "A selector on metadata.name and metadata.namespace."));
        params.push(q(
            "limit",
            "integer",
            "Maximum number of items to return; the list continues with `continue`.",
        ));
        params.push(q("continue", "string", "The continue token of the previous page."));
        params.push(q("resourceVersion", "string", "Served from the cache at or after this version."));
        if def.supports(Verb::Watch) {
            params.push(q("watch", "boolean", "Watch for changes instead of listing."));
            params.push(q("allowWatchBookmarks", "boolean", "Request BOOKMARK events."));
            params.push(q("timeoutSeconds", "integer", "End the watch after this many seconds."));
        }
    }
    if matches!(op.method, "post" | "put" | "patch") {
        params.push(q("dryRun", "string", "`All` validates the request without persisting it."));
        params.push(q("fieldManager", "string", "The name of the actor making the change."));
        params.push(q("fieldValidation", "string", "Ignore, Warn or Strict handling of unknown fields."));
    }
    params
}

/// The v3 document; the v2 one is derived from it.
fn build_v3() -> Value {
    let mut paths = Map::new();
    for def in ALL {
        let (collection_ops, item_ops) = operations(def);
        let mut prefixes = vec![format!("/apis/{GROUP}/{VERSION}")];
        if def.namespaced {
            prefixes.insert(0, format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}"));
        }
        for (i, prefix) in prefixes.iter().enumerate() {
            let all_namespaces = def.namespaced && i == 1;
            let scope = if def.namespaced && !all_namespaces { "Namespaced" } else { "" };
            let collection_path = format!("{prefix}/{}", def.plural);
            let ops: Vec<&Op> = collection_ops.iter().filter(|o| !all_namespaces || o.list).collect();
            insert_path(&mut paths, &collection_path, def, &ops, scope, all_namespaces);
            if !all_namespaces {
                insert_path(
                    &mut paths,
                    &format!("{collection_path}/{{name}}"),
                    def,
                    &item_ops.iter().collect::<Vec<_>>(),
                    scope,
                    false,
                );
            }
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "hns", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": definitions()},
    })
}

fn insert_path(
    paths: &mut Map<String, Value>,
    path: &str,
    def: &ResourceDef,
    ops: &[&Op],
    scope: &str,
    all_ns: bool,
) {
    if ops.is_empty() {
        return;
    }
    let kind_ref = json!({"$ref": format!("#/components/schemas/{}", definition_name(def.kind))});
    let list_ref = json!({"$ref": format!("#/components/schemas/{}", definition_name(&def.list_kind()))});
    let status_ref = json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"});
    let mut item = Map::new();
    let mut params = Vec::new();
    if path.contains("{name}") {
        params.push(json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}, "description": format!("name of the {}", def.kind)}));
    }
    if path.contains("{namespace}") {
        params.push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}, "description": "object name and auth scope, such as for teams and projects"}));
    }
    item.insert("parameters".into(), params.into());
    for op in ops {
        let body = if op.list { list_ref.clone() } else { kind_ref.clone() };
        let suffix = if all_ns { "ForAllNamespaces" } else { "" };
        let mut o = json!({
            "operationId": format!("{}{scope}{}{suffix}", op.op_id, def.kind),
            "tags": [format!("{GROUP}_{VERSION}")],
            "parameters": query_params(op, def).into_iter().map(to_v3_param).collect::<Vec<_>>(),
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": body}}},
                "401": {"description": "Unauthorized", "content": {"application/json": {"schema": status_ref}}},
            },
            "x-kubernetes-action": op.action,
            "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": def.kind},
            "description": format!("{} {}", op.verb, def.kind),
        });
        if matches!(op.method, "post" | "put") {
            o["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": kind_ref}}});
        }
        if op.method == "patch" {
            o["requestBody"] = json!({"required": true, "content": {
                "application/merge-patch+json": {"schema": {"type": "object"}},
                "application/json-patch+json": {"schema": {"type": "array", "items": {"type": "object"}}},
                "application/apply-patch+yaml": {"schema": {"type": "object"}},
            }});
        }
        item.insert(op.method.into(), o);
    }
    paths.insert(path.to_string(), Value::Object(item));
}

fn to_v3_param(p: Value) -> Value {
    json!({"name": p["name"], "in": p["in"], "description": p["description"], "schema": {"type": p["type"], "uniqueItems": true}})
}

/// Swagger 2.0 from the v3 document: definitions move, bodies become parameters, and OpenAPI 3
/// keywords v2 lacks (`nullable`) are dropped.
fn build_v2() -> Value {
    let v3 = build_v3();
    let mut paths = Map::new();
    for (path, item) in v3["paths"].as_object().into_iter().flatten() {
        let mut out = Map::new();
        let params: Vec<Value> = item["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| json!({"name": p["name"], "in": p["in"], "required": p["required"], "type": "string", "uniqueItems": true, "description": p["description"]}))
            .collect();
        out.insert("parameters".into(), params.into());
        for (method, op) in item.as_object().into_iter().flatten().filter(|(m, _)| *m != "parameters") {
            let mut op = op.clone();
            let mut params: Vec<Value> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| json!({"name": p["name"], "in": p["in"], "description": p["description"], "type": p["schema"]["type"], "uniqueItems": true}))
                .collect();
            if let Some(body) = op.as_object_mut().and_then(|o| o.remove("requestBody")) {
                let schema = body["content"]["application/json"]["schema"].clone();
                let schema = if schema.is_null() { json!({"type": "object"}) } else { schema };
                params.insert(0, json!({"name": "body", "in": "body", "required": true, "schema": schema}));
                if method == "patch" {
                    op["consumes"] = json!([
                        "application/merge-patch+json",
                        "application/json-patch+json",
                        "application/apply-patch+yaml"
                    ]);
                }
            }
            op["parameters"] = params.into();
            let mut responses = Map::new();
            for (code, r) in op["responses"].as_object().into_iter().flatten() {
                responses.insert(code.clone(), json!({"description": r["description"], "schema": r["content"]["application/json"]["schema"]}));
            }
            op["responses"] = Value::Object(responses);
            op["produces"] = json!(["application/json"]);
            op["schemes"] = json!(["https"]);
            out.insert(method.clone(), op);
        }
        paths.insert(path.clone(), Value::Object(out));
    }
    let mut doc = json!({
        "swagger": "2.0",
        "info": {"title": "hns", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "definitions": v3["components"]["schemas"],
    });
    to_v2_schemas(&mut doc);
    doc
}

/// Rewrites references to `#/definitions/`, drops `nullable`, and turns schemars'
/// `anyOf: [X, null]` (optional fields) and `allOf: [X]` (a `$ref` with a description) into
/// plain `X`: Swagger 2.0 has neither, and kube-apiserver refuses a document that uses them.
fn to_v2_schemas(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("nullable");
            for combinator in ["anyOf", "allOf", "oneOf"] {
                let Some(Value::Array(options)) = m.get(combinator) else { continue };
                let is_null = |o: &&Value| {
                    o.get("type") == Some(&json!("null")) || o.get("enum") == Some(&json!([null]))
                };
                let real: Vec<&Value> = options.iter().filter(|o| !is_null(o)).collect();
                if let [only] = real.as_slice() {
                    let only = (*only).clone();
                    m.remove(combinator);
                    if let Value::Object(inner) = only {
                        for (k, val) in inner {
                            m.entry(k).or_insert(val);
                        }
                    }
                }
            }
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                *r = r.replace("#/components/schemas/", "#/definitions/");
            }
            m.values_mut().for_each(to_v2_schemas);
        }
        Value::Array(a) => a.iter_mut().for_each(to_v2_schemas),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    #[test]
    fn v2_every_reference_resolves() {
        let doc = build_v2();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(!all.is_empty());
        for r in all {
            let name = r.strip_prefix("#/definitions/").unwrap_or_else(|| panic!("bad ref {r}"));
            assert!(doc["definitions"].get(name).is_some(), "unresolved {r}");
        }
    }

    #[test]
    fn v3_every_reference_resolves() {
        let doc = build_v3();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        for r in all {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("bad ref {r}"));
            assert!(doc["components"]["schemas"].get(name).is_some(), "unresolved {r}");
        }
    }

    #[test]
    fn kinds_carry_their_group_version_kind() {
        let doc = build_v2();
        let hc = &doc["definitions"]["io.x-k8s.hnc.v1alpha2.HierarchyConfiguration"];
        assert_eq!(hc["x-kubernetes-group-version-kind"][0]["kind"], "HierarchyConfiguration");
        assert_eq!(
            hc["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        let spec_ref = hc["properties"]["spec"]["$ref"].as_str().unwrap();
        let spec = &doc["definitions"][spec_ref.trim_start_matches("#/definitions/")];
        assert!(spec["properties"]["parent"].is_object(), "{spec}");
        assert!(spec["properties"]["allowCascadingDeletion"].is_object());
        assert!(!doc.to_string().contains("nullable"));
    }

    fn keys_in(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                out.extend(m.keys().cloned());
                m.values().for_each(|x| keys_in(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| keys_in(x, out)),
            _ => {}
        }
    }

    #[test]
    fn v2_uses_only_swagger_2_keywords() {
        for (name, def) in build_v2()["definitions"].as_object().unwrap() {
            let mut keys = Vec::new();
            keys_in(def, &mut keys);
            for bad in ["anyOf", "oneOf", "allOf", "not", "nullable", "const"] {
                assert!(
                    !keys.iter().any(|k| k == bad),
                    "{bad} in {name} is not Swagger 2.0; kube-apiserver refuses it: {def}"
                );
            }
        }
    }

    /// What server-side apply clients read: managedFields in the metadata, and which lists are
    /// associative, by which keys.
    #[test]
    fn schemas_describe_managed_fields_and_list_types() {
        let doc = build_v2();
        let defs = &doc["definitions"];
        let meta = &defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
        assert!(meta["properties"]["managedFields"].is_object(), "{meta}");
        for (spec, list, keys) in [
            ("io.x-k8s.hnc.v1alpha2.HierarchyConfigurationSpec", "labels", json!(["key"])),
            ("io.x-k8s.hnc.v1alpha2.HierarchyConfigurationSpec", "annotations", json!(["key"])),
            ("io.x-k8s.hnc.v1alpha2.SubnamespaceSpec", "labels", json!(["key"])),
            ("io.x-k8s.hnc.v1alpha2.SubnamespaceAnchorSpec", "annotations", json!(["key"])),
            ("io.x-k8s.hnc.v1alpha2.HNCConfigurationSpec", "resources", json!(["group", "resource"])),
        ] {
            let field = &defs[spec]["properties"][list];
            assert_eq!(field["x-kubernetes-list-type"], "map", "{spec}.{list}: {field}");
            assert_eq!(field["x-kubernetes-list-map-keys"], keys, "{spec}.{list}");
        }
        let patch = &doc["paths"]["/apis/hnc.x-k8s.io/v1alpha2/hncconfigurations/{name}"]["patch"];
        assert!(patch["consumes"].as_array().unwrap().contains(&json!("application/apply-patch+yaml")));
    }

    #[test]
    fn only_served_verbs_have_paths() {
        let doc = build_v2();
        let ns_path = "/apis/hnc.x-k8s.io/v1alpha2/namespaces/{namespace}/hierarchyconfigurations/{name}";
        assert!(doc["paths"][ns_path]["get"].is_object());
        assert!(doc["paths"][ns_path]["put"].is_object());
        assert!(doc["paths"][ns_path]["delete"].is_null(), "a hierarchy configuration cannot be deleted");
        let subns = "/apis/hnc.x-k8s.io/v1alpha2/namespaces/{namespace}/subnamespaces/{name}";
        assert!(doc["paths"][subns]["delete"].is_object());
        assert!(doc["paths"]["/apis/hnc.x-k8s.io/v1alpha2/hierarchyconfigurations"]["get"].is_object());
    }
}
