//! Turning objects and lists into the representation a client negotiated: the object itself,
//! a `meta.k8s.io/v1` Table (server-side printing for kubectl), or `PartialObjectMetadata`.

use serde_json::{json, Map, Value};

use super::def::ResourceDef;
use crate::http::list::Page;
use crate::http::negotiation::{IncludeObject, Representation};
use crate::http::table::RenderOptions;

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

fn table(def: &ResourceDef, rows: &[Value], list_meta: Value, opts: &RenderOptions) -> Value {
    let columns: Vec<Value> = def
        .columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = rows
        .iter()
        .map(|obj| {
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array((def.cells)(obj, opts.now)));
            match opts.include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert("object".into(), partial_metadata(obj));
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns, "rows": rows})
}

/// Renders one object.
pub fn object(def: &ResourceDef, obj: Value, opts: &RenderOptions) -> Value {
    match opts.representation {
        Representation::Object => obj,
        Representation::Metadata => partial_metadata(&obj),
        Representation::Table => {
            let rv = obj["metadata"]["resourceVersion"].clone();
            table(def, &[obj], json!({"resourceVersion": rv}), opts)
        }
    }
}

/// Renders a page of a list cut at `resource_version`.
pub fn list(def: &ResourceDef, page: Page, resource_version: &str, opts: &RenderOptions) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), resource_version.into());
    if let Some(c) = page.continue_token {
        meta.insert("continue".into(), c.into());
    }
    if let Some(r) = page.remaining {
        meta.insert("remainingItemCount".into(), r.into());
    }
    let meta = Value::Object(meta);
    match opts.representation {
        Representation::Object => json!({
            "kind": def.list_kind, "apiVersion": hns_api::API_VERSION, "metadata": meta, "items": page.items,
        }),
        Representation::Metadata => json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "items": page.items.iter().map(partial_metadata).collect::<Vec<_>>(),
        }),
        Representation::Table => table(def, &page.items, meta, opts),
    }
}
