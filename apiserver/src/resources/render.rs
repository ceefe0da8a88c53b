//! Turning objects and lists into the representation a client negotiated: the object itself,
//! a `meta.k8s.io/v1` Table (server-side printing for kubectl), or `PartialObjectMetadata`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::def::ResourceDef;
use super::item::Item;
use crate::http::list::Page;
use crate::http::negotiation::{IncludeObject, Representation};
use crate::http::status::ApiError;
use crate::http::table::RenderOptions;

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

/// `meta.k8s.io/v1` `PartialObjectMetadata` of a typed object.
#[derive(Serialize)]
struct PartialObjectMetadata<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: &'a ObjectMeta,
}

fn partial(metadata: &ObjectMeta) -> PartialObjectMetadata<'_> {
    PartialObjectMetadata { kind: "PartialObjectMetadata", api_version: "meta.k8s.io/v1", metadata }
}

fn column_definitions(def: &ResourceDef) -> Value {
    def.columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect()
}

/// One row of a Table: the object's cells, with as much of the object as the client asked for.
#[derive(Serialize)]
struct Row<'a> {
    cells: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<RowObject<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum RowObject<'a> {
    Metadata(PartialObjectMetadata<'a>),
    Object(&'a Item),
}

fn row<'a>(def: &ResourceDef, item: &'a Item, opts: &RenderOptions) -> Row<'a> {
    let object = match opts.include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(RowObject::Metadata(partial(item.metadata()))),
        IncludeObject::Object => Some(RowObject::Object(item)),
    };
    Row { cells: (def.cells)(item, opts.now), object }
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
            json!({"kind": def.list_kind(), "apiVersion": hns_api::API_VERSION, "metadata": list_meta})
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

/// How an item is written on its own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One item of a list: a Table's row is the item.
    InList,
    /// An object alone (a watch event's): a Table of its one row.
    Alone,
}

/// Writes one item as the client negotiated it to `out`: the object, its metadata, or a Table
/// row (alone, in a Table of its own), serialized straight from the typed object.
pub fn write_item(
    def: &ResourceDef,
    item: &Item,
    opts: &RenderOptions,
    framing: Framing,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    match opts.representation {
        Representation::Object => serde_json::to_writer(out, item),
        Representation::Metadata => serde_json::to_writer(out, &partial(item.metadata())),
        Representation::Table if framing == Framing::InList => {
            serde_json::to_writer(out, &row(def, item, opts))
        }
        Representation::Table => {
            let rv = item.metadata().resource_version.clone();
            let table = list_of(def, std::slice::from_ref(item), json!({"resourceVersion": rv}), opts);
            serde_json::to_writer(out, &table)
        }
    }
}

fn list_item(def: &ResourceDef, item: &Item, opts: &RenderOptions) -> Value {
    let rendered = match opts.representation {
        Representation::Object => serde_json::to_value(item),
        Representation::Metadata => serde_json::to_value(partial(item.metadata())),
        Representation::Table => serde_json::to_value(row(def, item, opts)),
    };
    rendered.unwrap_or_default()
}

fn list_of(def: &ResourceDef, items: &[Item], list_meta: Value, opts: &RenderOptions) -> Value {
    let (mut envelope, field) = list_envelope(def, list_meta, opts);
    let items = items.iter().map(|item| list_item(def, item, opts)).collect();
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

/// Renders one object, given as JSON (reads and writes work on it as JSON); a Table reads its
/// cells from the typed object.
pub fn object(def: &ResourceDef, obj: Value, opts: &RenderOptions) -> Result<Value, ApiError> {
    Ok(match opts.representation {
        Representation::Object => obj,
        Representation::Metadata => partial_metadata(&obj),
        Representation::Table => {
            let rv = obj["metadata"]["resourceVersion"].clone();
            list_of(def, &[Item::from_value(obj)?], json!({"resourceVersion": rv}), opts)
        }
    })
}

/// Renders a page of a list cut at `resource_version`.
pub fn list(def: &ResourceDef, page: Page<Item>, resource_version: &str, opts: &RenderOptions) -> Value {
    let meta = list_meta(resource_version, page.continue_token, page.remaining);
    list_of(def, &page.items, meta, opts)
}
