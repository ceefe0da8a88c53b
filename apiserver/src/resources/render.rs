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

fn column_definitions(def: &ResourceDef) -> Value {
    def.columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect()
}

/// One row of a Table: the object's cells, with as much of the object as the client asked for.
fn row(def: &ResourceDef, obj: Value, opts: &RenderOptions) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array((def.cells)(&obj, opts.now)));
    match opts.include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row.insert("object".into(), partial_metadata(&obj));
        }
        IncludeObject::Object => {
            row.insert("object".into(), obj);
        }
    }
    Value::Object(row)
}

/// A list as the client negotiated it, without its items: the envelope (kind, apiVersion,
/// metadata, a Table's column definitions) and the name of the field the items go in.
pub fn list_envelope(
    def: &ResourceDef,
    list_meta: Value,
    opts: &RenderOptions,
) -> (Map<String, Value>, &'static str) {
    let envelope = match opts.representation {
        Representation::Object => {
            json!({"kind": def.list_kind, "apiVersion": hns_api::API_VERSION, "metadata": list_meta})
        }
        Representation::Metadata => {
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta})
        }
        Representation::Table => json!({
            "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": column_definitions(def),
        }),
    };
    let Value::Object(envelope) = envelope else { unreachable!("json! of an object is an object") };
    let items = if opts.representation == Representation::Table { "rows" } else { "items" };
    (envelope, items)
}

/// One item of a list as the client negotiated it: the object, its metadata, or a Table row.
pub fn list_item(def: &ResourceDef, obj: Value, opts: &RenderOptions) -> Value {
    match opts.representation {
        Representation::Object => obj,
        Representation::Metadata => partial_metadata(&obj),
        Representation::Table => row(def, obj, opts),
    }
}

fn list_of(def: &ResourceDef, items: Vec<Value>, list_meta: Value, opts: &RenderOptions) -> Value {
    let (mut envelope, field) = list_envelope(def, list_meta, opts);
    let items = items.into_iter().map(|obj| list_item(def, obj, opts)).collect();
    envelope.insert(field.into(), Value::Array(items));
    Value::Object(envelope)
}

/// The metadata of a list cut at `resource_version`.
pub fn list_meta(resource_version: &str, continue_token: Option<String>, remaining: Option<i64>) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), resource_version.into());
    if let Some(c) = continue_token {
        meta.insert("continue".into(), c.into());
    }
    if let Some(r) = remaining {
        meta.insert("remainingItemCount".into(), r.into());
    }
    Value::Object(meta)
}

/// Renders one object.
pub fn object(def: &ResourceDef, obj: Value, opts: &RenderOptions) -> Value {
    match opts.representation {
        Representation::Object => obj,
        Representation::Metadata => partial_metadata(&obj),
        Representation::Table => {
            let rv = obj["metadata"]["resourceVersion"].clone();
            list_of(def, vec![obj], json!({"resourceVersion": rv}), opts)
        }
    }
}

/// Renders a page of a list cut at `resource_version`.
pub fn list(def: &ResourceDef, page: Page, resource_version: &str, opts: &RenderOptions) -> Value {
    let meta = list_meta(resource_version, page.continue_token, page.remaining);
    list_of(def, page.items, meta, opts)
}
