//! Server-side apply, as Kubernetes' structured-merge-diff does it, for hns's small schemas:
//! field sets and their FieldsV1 encoding, the merge of an applied configuration with its
//! conflicts, and the ownership changes an ordinary update makes.
//!
//! Everything here is a pure function of JSON values, so it is tested without a server. The
//! resources hand in their [`Shape`]: which fields are the object's (only those are owned and
//! merged: names, uids and status never are), which maps are granular and which lists are
//! associative. Empty maps and lists are treated as absent, as hns's serializers omit them.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The manager kube-apiserver names for fields that existed before the first apply to an
/// object without managedFields: an apply then conflicts with them instead of taking them.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The shape of an object's writable fields.
#[derive(Debug)]
pub enum Shape {
    /// Replaced as a whole: a scalar or an atomic list.
    Atomic,
    /// Known fields, each with its shape; other fields are not owned and not merged.
    Struct(&'static [(&'static str, Shape)]),
    /// A map of scalars whose every key is a field (labels, annotations).
    Map,
    /// A list of structs identified by the values of `keys` (`x-kubernetes-list-type: map`).
    AssocList {
        /// The key fields, e.g. `["group", "resource"]`.
        keys: &'static [&'static str],
        /// The shape of an item, a [`Shape::Struct`].
        item: &'static Shape,
    },
}

/// One step of a path: a struct field or map key (`f:name`), or an associative list item
/// (`k:{"key":"x"}`, its key fields as JSON with sorted keys).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    /// A field of a struct or a key of a map.
    Field(String),
    /// An associative list item, by its canonical key JSON.
    Key(String),
}

impl Element {
    fn encode(&self) -> String {
        match self {
            Element::Field(f) => format!("f:{f}"),
            Element::Key(k) => format!("k:{k}"),
        }
    }

    fn decode(s: &str) -> Result<Self, InvalidFields> {
        if let Some(f) = s.strip_prefix("f:") {
            return Ok(Element::Field(f.to_string()));
        }
        let invalid = || InvalidFields(format!("unsupported path element {s:?}"));
        let key = s.strip_prefix("k:").ok_or_else(invalid)?;
        match serde_json::from_str::<Value>(key) {
            Ok(Value::Object(fields)) => Ok(Element::Key(canonical_key(fields.iter()))),
            _ => Err(invalid()),
        }
    }
}

/// A field path, e.g. `spec` `parent`.
pub type Path = Vec<Element>;

/// `.spec.parent`, `.metadata.labels.team`, `.spec.labels[key="env"]`: structured-merge-diff's
/// notation, used in conflict messages.
pub fn path_string(path: &[Element]) -> String {
    let mut out = String::new();
    for e in path {
        match e {
            Element::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Element::Key(k) => {
                let fields: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let shown: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
                out.push_str(&format!("[{}]", shown.join(",")));
            }
        }
    }
    out
}

/// The key JSON of a list item: its key fields with sorted names.
fn canonical_key<'a>(fields: impl Iterator<Item = (&'a String, &'a Value)>) -> String {
    let mut sorted: Vec<(&String, &Value)> = fields.collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = sorted
        .iter()
        .map(|(n, v)| {
            format!("{}:{}", Value::String((*n).clone()), serde_json::to_string(v).unwrap_or_default())
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// The key element of list item `item`; a missing key field counts as `""`, which is what
/// hns's types (whose key fields are strings omitted when empty) mean by it.
fn key_of(keys: &[&str], item: &Value) -> Option<Element> {
    let obj = item.as_object()?;
    let empty = Value::String(String::new());
    let fields: Vec<(String, Value)> =
        keys.iter().map(|k| (k.to_string(), obj.get(*k).unwrap_or(&empty).clone())).collect();
    Some(Element::Key(canonical_key(fields.iter().map(|(n, v)| (n, v)))))
}

/// A set of field paths, as one manager owns them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(pub BTreeSet<Path>);

/// FieldsV1 that hns cannot read (another format, or malformed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid managedFields: {0}")]
pub struct InvalidFields(pub String);

impl FieldSet {
    /// The fields `value` sets, by `shape`: leaves, map entries and associative list items.
    pub fn of(shape: &Shape, value: &Value) -> Self {
        let mut set = FieldSet::default();
        collect(shape, value, &mut Vec::new(), &mut set.0);
        set
    }

    fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    fn minus(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    fn intersect(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// Whether `path` or anything under it is in the set.
    fn covers(&self, path: &[Element]) -> bool {
        self.0.range(path.to_vec()..).next().is_some_and(|p| p.starts_with(path))
    }

    /// The FieldsV1 JSON: a tree of `f:`/`k:` keys, `{}` for an owned leaf, `".": {}` for an
    /// owned path that also has owned children.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for e in path {
                let child = node.entry(e.encode()).or_insert_with(|| Value::Object(Map::new()));
                let Value::Object(child) = child else { unreachable!("only objects are inserted") };
                node = child;
            }
            node.insert(".".into(), Value::Object(Map::new()));
        }
        let mut root = Value::Object(root);
        compact(&mut root);
        root
    }

    /// Reads FieldsV1 JSON.
    pub fn from_fields_v1(v: &Value) -> Result<Self, InvalidFields> {
        let mut set = FieldSet::default();
        read_fields_v1(v, &mut Vec::new(), &mut set.0)?;
        Ok(set)
    }
}

/// `{".": {}}` alone becomes `{}`: a leaf.
fn compact(v: &mut Value) {
    if let Value::Object(m) = v {
        m.values_mut().for_each(compact);
        if m.len() == 1 && m.contains_key(".") {
            m.clear();
        }
    }
}

fn read_fields_v1(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) -> Result<(), InvalidFields> {
    let Value::Object(m) = v else {
        return Err(InvalidFields("fieldsV1 must be a JSON object".into()));
    };
    if m.is_empty() && !prefix.is_empty() {
        out.insert(prefix.clone());
    }
    for (k, child) in m {
        if k == "." {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            continue;
        }
        prefix.push(Element::decode(k)?);
        read_fields_v1(child, prefix, out)?;
        prefix.pop();
    }
    Ok(())
}

fn collect(shape: &Shape, value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match (shape, value) {
        (_, Value::Null) => {}
        (Shape::Struct(fields), Value::Object(m)) => {
            for (name, s) in *fields {
                if let Some(v) = m.get(*name) {
                    prefix.push(Element::Field(name.to_string()));
                    collect(s, v, prefix, out);
                    prefix.pop();
                }
            }
        }
        (Shape::Map, Value::Object(m)) => {
            for (k, v) in m.iter().filter(|(_, v)| !v.is_null()) {
                prefix.push(Element::Field(k.clone()));
                collect(&Shape::Atomic, v, prefix, out);
                prefix.pop();
            }
        }
        (Shape::AssocList { keys, item }, Value::Array(items)) => {
            for it in items {
                if let Some(k) = key_of(keys, it) {
                    prefix.push(k);
                    out.insert(prefix.clone());
                    collect(item, it, prefix, out);
                    prefix.pop();
                }
            }
        }
        (Shape::Atomic, Value::Array(a)) if a.is_empty() => {}
        (Shape::Atomic, Value::Object(m)) if m.is_empty() => {}
        (Shape::Atomic, _) => {
            out.insert(prefix.clone());
        }
        // A value of the wrong type: decoding the object refuses it.
        _ => {}
    }
}

/// The shape under `e` in `shape`.
fn child<'s>(shape: &'s Shape, e: &Element) -> Option<&'s Shape> {
    match (shape, e) {
        (Shape::Struct(fields), Element::Field(f)) => fields.iter().find(|(n, _)| n == f).map(|(_, s)| s),
        (Shape::Map, Element::Field(_)) => Some(&Shape::Atomic),
        (Shape::AssocList { item, .. }, Element::Key(_)) => Some(item),
        _ => None,
    }
}

/// The value under `e` in `value` (of shape `shape`).
fn step<'v>(shape: &Shape, value: &'v Value, e: &Element) -> Option<&'v Value> {
    match (shape, e) {
        (Shape::AssocList { keys, .. }, Element::Key(_)) => {
            value.as_array()?.iter().find(|it| key_of(keys, it).as_ref() == Some(e))
        }
        (_, Element::Field(f)) => value.get(f).filter(|v| !v.is_null()),
        _ => None,
    }
}

/// The value at `path`, if set.
fn get<'v>(shape: &Shape, value: &'v Value, path: &[Element]) -> Option<&'v Value> {
    let (mut shape, mut value) = (shape, value);
    for e in path {
        value = step(shape, value, e)?;
        shape = child(shape, e)?;
    }
    Some(value)
}

/// Removes the field or list item at `path` from `value`.
fn remove(shape: &Shape, value: &mut Value, path: &[Element]) {
    let Some((last, parents)) = path.split_last() else { return };
    let (mut shape, mut value) = (shape, value);
    for e in parents {
        let next = match (shape, e) {
            (Shape::AssocList { keys, .. }, Element::Key(_)) => value
                .as_array_mut()
                .and_then(|items| items.iter_mut().find(|it| key_of(keys, it).as_ref() == Some(e))),
            (_, Element::Field(f)) => value.get_mut(f),
            _ => None,
        };
        let (Some(next), Some(s)) = (next, child(shape, e)) else { return };
        (shape, value) = (s, next);
    }
    match (shape, last) {
        (Shape::AssocList { keys, .. }, Element::Key(_)) => {
            if let Some(items) = value.as_array_mut() {
                items.retain(|it| key_of(keys, it).as_ref() != Some(last));
            }
        }
        (_, Element::Field(f)) => {
            value.as_object_mut().map(|m| m.remove(f));
        }
        _ => {}
    }
}

/// `config` laid over `live`: struct fields and map entries one by one, associative list items
/// by key (new ones appended), everything else replaced. Fields outside the shape and nulls in
/// `config` are not taken; `live` keeps its own.
fn merge(shape: &Shape, live: Option<&Value>, config: &Value) -> Value {
    match (shape, config) {
        (Shape::Struct(fields), Value::Object(c)) => {
            let mut out = live.and_then(Value::as_object).cloned().unwrap_or_default();
            for (name, s) in *fields {
                if let Some(cv) = c.get(*name).filter(|v| !v.is_null()) {
                    let merged = merge(s, out.get(*name), cv);
                    out.insert(name.to_string(), merged);
                }
            }
            Value::Object(out)
        }
        (Shape::Map, Value::Object(c)) => {
            let mut out = live.and_then(Value::as_object).cloned().unwrap_or_default();
            out.extend(c.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())));
            Value::Object(out)
        }
        (Shape::AssocList { keys, item }, Value::Array(c)) => {
            let mut out = live.and_then(Value::as_array).cloned().unwrap_or_default();
            for ci in c {
                let k = key_of(keys, ci);
                match out.iter_mut().find(|it| k.is_some() && key_of(keys, it) == k) {
                    Some(existing) => *existing = merge(item, Some(existing), ci),
                    None => out.push(merge(item, None, ci)),
                }
            }
            Value::Array(out)
        }
        _ => config.clone(),
    }
}

/// Whether a struct field's value is the zero value hns's serializers omit (`false`, `""`):
/// absent and zero are the same value, so setting one where the other was changes nothing.
fn zero(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Bool(false))) || v.and_then(Value::as_str) == Some("")
}

/// The fields of `new` whose value differs from `old`'s: added or modified. A list item counts
/// only when added (its fields say what changed in it).
fn changed(shape: &Shape, old: &Value, new: &Value) -> FieldSet {
    let differs = |p: &Path| {
        let (before, after) = (get(shape, old, p), get(shape, new, p));
        let in_struct = p.split_last().is_some_and(|(_, parent)| {
            parents_shape(shape, parent).is_some_and(|s| matches!(s, Shape::Struct(_)))
        });
        match p.last() {
            Some(Element::Key(_)) => before.is_none(),
            _ if in_struct && zero(before) && zero(after) => false,
            _ => before != after,
        }
    };
    FieldSet(FieldSet::of(shape, new).0.into_iter().filter(differs).collect())
}

/// Whether `path` is a key field of a list item: it identifies the item, which stays as long
/// as anyone owns part of it.
fn is_list_key(shape: &Shape, path: &[Element]) -> bool {
    match (path.len().checked_sub(2).map(|n| parents_shape(shape, &path[..n])), path.last()) {
        (Some(Some(Shape::AssocList { keys, .. })), Some(Element::Field(f))) => keys.contains(&f.as_str()),
        _ => false,
    }
}

fn parents_shape<'s>(shape: &'s Shape, path: &[Element]) -> Option<&'s Shape> {
    path.iter().try_fold(shape, |s, e| child(s, e))
}

/// Overwrites the shape's fields of `target` with those of `view` (removing those `view` lacks),
/// keeping everything outside the shape (name, uid, status, …).
fn overlay(shape: &Shape, target: &mut Value, view: &Value) {
    let Shape::Struct(fields) = shape else {
        *target = view.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    for (name, s) in *fields {
        match view.get(*name) {
            Some(v) if matches!(s, Shape::Struct(_)) => {
                let t = &mut target[*name];
                overlay(s, t, v);
            }
            Some(v) => target[*name] = v.clone(),
            None => {
                target.as_object_mut().map(|m| m.remove(*name));
            }
        }
    }
}

/// How a manager last wrote: `Apply` or an ordinary `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or a non-apply patch.
    Update,
}

/// One manager's fields, as hns stores them (compactly: the apiVersion and fieldsType every
/// entry would repeat are added when the object is served).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Who (`fieldManager`).
    pub manager: String,
    /// How.
    pub operation: Operation,
    /// When the entry last gained or changed a field (RFC 3339, seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// What, as FieldsV1.
    #[serde(with = "fields_v1")]
    pub fields: FieldSet,
}

mod fields_v1 {
    use super::*;

    pub fn serialize<S: Serializer>(set: &FieldSet, s: S) -> Result<S::Ok, S::Error> {
        set.to_fields_v1().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FieldSet, D::Error> {
        FieldSet::from_fields_v1(&Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl Entry {
    fn is(&self, manager: &str, operation: Operation) -> bool {
        self.manager == manager && self.operation == operation
    }

    /// The entry as `metadata.managedFields` shows it.
    pub fn to_k8s(&self) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            api_version: Some(hns_api::API_VERSION.into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(self.fields.to_fields_v1())),
            manager: Some(self.manager.clone()),
            operation: Some(format!("{:?}", self.operation)),
            subresource: None,
            time: self.time.as_deref().and_then(|t| t.parse().ok()).map(Time),
        }
    }

    /// Reads an entry a client sent; hns serves no other version nor subresources.
    pub fn from_k8s(e: &ManagedFieldsEntry) -> Result<Self, InvalidFields> {
        let invalid = |why: &str| InvalidFields(why.to_string());
        let operation = match e.operation.as_deref() {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            _ => return Err(invalid("operation must be Apply or Update")),
        };
        if e.fields_type.as_deref() != Some("FieldsV1") {
            return Err(invalid("fieldsType must be FieldsV1"));
        }
        if e.api_version.as_deref() != Some(hns_api::API_VERSION)
            || e.subresource.as_deref().is_some_and(|s| !s.is_empty())
        {
            return Err(invalid("only hnc.x-k8s.io/v1alpha2 without a subresource is served"));
        }
        let fields = e.fields_v1.as_ref().map(|f| FieldSet::from_fields_v1(&f.0)).transpose()?;
        Ok(Entry {
            manager: e.manager.clone().unwrap_or_default(),
            operation,
            time: e.time.as_ref().map(|t| t.0.to_string()),
            fields: fields.unwrap_or_default(),
        })
    }
}

/// Reads a client's managedFields; duplicate managers are refused as kube-apiserver does.
pub fn from_k8s(entries: &[ManagedFieldsEntry]) -> Result<Vec<Entry>, InvalidFields> {
    let mut out: Vec<Entry> = Vec::new();
    for e in entries {
        let entry = Entry::from_k8s(e)?;
        if out.iter().any(|o| o.is(&entry.manager, entry.operation)) {
            return Err(InvalidFields(format!("duplicate entry for manager {:?}", entry.manager)));
        }
        out.push(entry);
    }
    Ok(out)
}

/// A field an apply would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager, as kube-apiserver prints it (`"flux"`, or for an update
    /// `"kubectl-edit" using hnc.x-k8s.io/v1alpha2 at 2024-05-01T10:00:00Z`).
    pub manager: String,
    /// The field, e.g. `.spec.parent`.
    pub field: String,
}

/// The conflicts of a refused apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Conflicts(pub Vec<Conflict>);

impl fmt::Display for Conflicts {
    /// kube-apiserver's words: one conflict on one line, several grouped by manager.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.0.as_slice() {
            return write!(f, "Apply failed with 1 conflict: conflict with {}: {}", only.manager, only.field);
        }
        let mut managers: Vec<&str> = self.0.iter().map(|c| c.manager.as_str()).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            lines.extend(self.0.iter().filter(|c| c.manager == m).map(|c| format!("- {}", c.field)));
        }
        write!(f, "Apply failed with {} conflicts: {}", self.0.len(), lines.join("\n"))
    }
}

fn printed(e: &Entry) -> String {
    match (e.operation, &e.time) {
        (Operation::Apply, _) => format!("{:?}", e.manager),
        (Operation::Update, None) => format!("{:?} using {}", e.manager, hns_api::API_VERSION),
        (Operation::Update, Some(t)) => format!("{:?} using {} at {t}", e.manager, hns_api::API_VERSION),
    }
}

/// An object and its managedFields after a write.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The object.
    pub object: Value,
    /// Its managedFields.
    pub managed: Vec<Entry>,
}

/// Applies `config` as `manager` to `live` (owned as `managed` says) at time `now`.
///
/// Fields in `config` whose value would change and that another manager owns are conflicts;
/// with `force` they are taken from their owners. Fields `manager` applied before and no longer
/// applies are removed unless another manager owns them. `manager`'s apply entry becomes exactly
/// the fields of `config`.
pub fn apply(
    shape: &Shape,
    live: &Value,
    managed: &[Entry],
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Outcome, Conflicts> {
    let mut managed = managed.to_vec();
    let live_fields = FieldSet::of(shape, live);
    if managed.is_empty() && !live_fields.0.is_empty() {
        managed.push(Entry {
            manager: BEFORE_FIRST_APPLY.into(),
            operation: Operation::Update,
            time: None,
            fields: live_fields,
        });
    }
    let applied = FieldSet::of(shape, config);
    let mut merged = merge(shape, Some(live), config);
    let changes = changed(shape, live, &merged);
    let others = |e: &&mut Entry| !e.is(manager, Operation::Apply);
    let conflicts: Vec<Conflict> = managed
        .iter()
        .filter(|e| !e.is(manager, Operation::Apply))
        .flat_map(|e| {
            e.fields
                .intersect(&changes)
                .0
                .into_iter()
                .map(|p| Conflict { manager: printed(e), field: path_string(&p) })
        })
        .collect();
    if !conflicts.is_empty() && !force {
        return Err(Conflicts(conflicts));
    }
    for e in managed.iter_mut().filter(others) {
        e.fields = e.fields.minus(&changes);
    }
    let previous = managed.iter().find(|e| e.is(manager, Operation::Apply)).map(|e| e.fields.clone());
    let kept = managed
        .iter()
        .filter(|e| !e.is(manager, Operation::Apply))
        .fold(FieldSet::default(), |a, e| a.union(&e.fields));
    // Parents first: removing a list item removes its fields too.
    for p in previous.unwrap_or_default().minus(&applied).0.iter() {
        if !kept.covers(p) && !is_list_key(shape, p) {
            remove(shape, &mut merged, p);
        }
    }
    let gone = FieldSet::of(shape, live).minus(&FieldSet::of(shape, &merged));
    for e in managed.iter_mut() {
        e.fields = e.fields.minus(&gone);
    }
    set_entry(&mut managed, manager, Operation::Apply, applied, now);
    managed.retain(|e| !e.fields.0.is_empty());
    let mut object = live.clone();
    overlay(shape, &mut object, &merged);
    Ok(Outcome { object, managed })
}

/// Records an ordinary write by `manager` taking `old` to `new`: fields it added or changed
/// become its own and no longer anyone else's, and fields it removed are no one's.
pub fn update(
    shape: &Shape,
    old: &Value,
    new: &Value,
    managed: &[Entry],
    manager: &str,
    now: &str,
) -> Vec<Entry> {
    let changes = changed(shape, old, new);
    let gone = FieldSet::of(shape, old).minus(&FieldSet::of(shape, new));
    let mut managed = managed.to_vec();
    for e in managed.iter_mut() {
        e.fields = e.fields.minus(&gone);
        if !e.is(manager, Operation::Update) {
            e.fields = e.fields.minus(&changes);
        }
    }
    let own = managed
        .iter()
        .find(|e| e.is(manager, Operation::Update))
        .map(|e| e.fields.clone())
        .unwrap_or_default()
        .union(&changes);
    set_entry(&mut managed, manager, Operation::Update, own, now);
    managed.retain(|e| !e.fields.0.is_empty());
    managed
}

/// Sets `manager`'s entry for `operation` to `fields`; its time moves only when they change, so
/// a write that changes nothing leaves the stored object as it was.
fn set_entry(managed: &mut Vec<Entry>, manager: &str, operation: Operation, fields: FieldSet, now: &str) {
    match managed.iter_mut().find(|e| e.is(manager, operation)) {
        Some(e) if e.fields == fields => {}
        Some(e) => {
            e.fields = fields;
            e.time = Some(now.to_string());
        }
        None => managed.push(Entry { manager: manager.into(), operation, time: Some(now.into()), fields }),
    }
}

#[cfg(test)]
mod tests;
