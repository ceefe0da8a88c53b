//! Kubernetes' Table output (server-side printing for kubectl) as far as it is the same for every
//! resource: column definitions, the standard Name and Age columns, and what a request asked to
//! be rendered.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::http::negotiation::{IncludeObject, Representation};

/// A Table column (`metav1.TableColumnDefinition`).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header, e.g. `Parent`; kubectl prints it upper-case.
    pub name: &'static str,
    /// OpenAPI type of the cells: `string`, `integer`, …
    pub kind: &'static str,
    /// `name` for the object name column, otherwise empty.
    pub format: &'static str,
    /// What the column shows.
    pub description: &'static str,
    /// 0: always shown; higher: only with `-o wide`.
    pub priority: i32,
}

/// The standard first column.
pub const NAME_COLUMN: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    description: "Name must be unique within a namespace.",
    priority: 0,
};

/// The standard last column.
pub const AGE_COLUMN: Column = Column {
    name: "Age",
    kind: "string",
    format: "",
    description: "Time since the object was created.",
    priority: 0,
};

/// Everything a render needs besides the data.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    /// The negotiated representation.
    pub representation: Representation,
    /// What Table rows carry.
    pub include: IncludeObject,
    /// The time ages are computed from.
    pub now: jiff::Timestamp,
}

/// The age of an object created at `created`, as kubectl prints it.
pub fn age(created: Option<&Time>, now: jiff::Timestamp) -> Value {
    match created {
        Some(t) => hns_api::duration::human_duration(now.as_second() - t.0.as_second()).into(),
        None => "<unknown>".into(),
    }
}
