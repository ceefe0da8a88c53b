//! managedFields of writes: the desired object of a server-side apply (merged by
//! [`crate::ssa`]) or of an ordinary write, and the ownership each records, kept in the object's
//! `metadata.managedFields` on its way to the resource's usual checks and storage.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use super::checks::{check_name, check_namespace};
use super::def::Call;
use crate::http::body::{self, Sent, WriteOptions, APPLY_PATCH};
use crate::http::patch;
use crate::http::request_info::Verb;
use crate::http::status::ApiError;
use crate::ssa::{self, Entry, Shape};

/// The writable metadata of every kind: labels and annotations, granular maps.
pub const METADATA: Shape = Shape::Struct(&[("labels", Shape::Map), ("annotations", Shape::Map)]);

/// `spec.labels` and `spec.annotations`: lists of `{key, value}` identified by `key`.
pub const META_KVPS: Shape = Shape::AssocList {
    keys: &["key"],
    item: &Shape::Struct(&[("key", Shape::Atomic), ("value", Shape::Atomic)]),
};

/// Whether the request is a server-side apply.
pub fn is_apply(call: &Call<'_>) -> bool {
    call.req.verb == Verb::Patch && body::essence(call.content_type) == APPLY_PATCH
}

/// The object a write of `sent` asks for, with the managedFields it leaves, and the warnings
/// about an applied configuration's unknown fields: a POST's body as it is; a PUT's body, a
/// patch or an apply configuration over `current`, the object as served (over a bare one named
/// `name` for an apply that creates). `T`, the kind's type, checks that configuration.
pub fn desired<T: DeserializeOwned>(
    call: &Call<'_>,
    opts: &WriteOptions,
    sent: &Sent,
    shape: &Shape,
    current: Option<&Value>,
    name: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    let current: Cow<'_, Value> = match (current, call.req.verb) {
        (Some(current), _) => Cow::Borrowed(current),
        (None, Verb::Create) => Cow::Owned(json!({})),
        (None, _) => Cow::Owned(json!({
            "apiVersion": hns_api::API_VERSION,
            "kind": call.def.kind,
            "metadata": {"name": name, "namespace": call.req.namespace},
        })),
    };
    let current = current.as_ref();
    let new = match sent {
        Sent::Apply(config) => return apply::<T>(call, opts, shape, current, config),
        Sent::MergePatch(_) | Sent::JsonPatch(_) if opts.force => {
            return Err(ApiError::bad_request("force: Forbidden: may not be specified for non-apply patch"))
        }
        Sent::MergePatch(patch) => patch::apply_merge_patch(current, patch)?,
        Sent::JsonPatch(ops) => patch::apply_json_patch(current, ops)?,
        Sent::Object(object) => object.clone(),
    };
    Ok((track_update(call, opts, shape, current, new)?, Vec::new()))
}

/// Records an ordinary write (create, update, merge or JSON patch) taking `old` (`{}` for a
/// create) to `new` in `new`'s managedFields, as kube-apiserver does: managedFields the client
/// sent are the starting point when they read (clients may edit them), an empty list clears
/// them, and otherwise `old`'s are. managedFields that are not even of managedFields' types are
/// refused (400), as kube-apiserver's decoding of the body refuses them, not silently replaced;
/// so is a fieldsV1 that is not an object, which kube-apiserver would replace in silence: the
/// published schema says object, and a client that sent one should learn that it was not kept.
fn track_update(
    call: &Call<'_>,
    opts: &WriteOptions,
    shape: &Shape,
    old: &Value,
    new: Value,
) -> Result<Value, ApiError> {
    check_sent_managed_fields(&new)?;
    Ok(record_update(shape, old, new, &opts.update_manager(call.user_agent), &now()))
}

/// The managedFields in a written object, if any, decode as managedFields, and each entry's
/// fieldsV1 is an object, as the schema says. k8s-openapi's `FieldsV1` holds any JSON value, so
/// its decoding alone would take `"fieldsV1": true` and the write would silently keep the old
/// managedFields in its place.
fn check_sent_managed_fields(new: &Value) -> Result<(), ApiError> {
    let sent = match new.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => return Ok(()),
        Some(sent) => sent,
    };
    let entries = serde_json::from_value::<Vec<ManagedFieldsEntry>>(sent.clone())
        .map_err(|e| ApiError::bad_request(format!("metadata.managedFields: {e}")))?;
    match entries.iter().position(|e| e.fields_v1.as_ref().is_some_and(|f| !f.0.is_object())) {
        None => Ok(()),
        Some(i) => Err(ApiError::bad_request(format!(
            "metadata.managedFields[{i}].fieldsV1: must be an object of field paths, as hns wrote it; \
             send the managedFields read from the object, an empty list to clear them, or none"
        ))),
    }
}

fn record_update(shape: &Shape, old: &Value, mut new: Value, manager: &str, now: &str) -> Value {
    let base = match new.pointer("/metadata/managedFields") {
        Some(Value::Array(sent)) if sent.is_empty() => {
            set(&mut new, &[]);
            return new;
        }
        Some(sent @ Value::Array(_)) => read(sent).unwrap_or_else(|| entries(old)),
        _ => entries(old),
    };
    let managed = ssa::update(shape, old, &new, &base, manager, now);
    set(&mut new, &managed);
    new
}

/// A server-side apply of `config` to `current` (a bare object with only its name when the
/// apply creates it).
fn apply<T: DeserializeOwned>(
    call: &Call<'_>,
    opts: &WriteOptions,
    shape: &Shape,
    current: &Value,
    config: &Value,
) -> Result<(Value, Vec<String>), ApiError> {
    let manager = opts
        .field_manager
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("PATCH /apply requires fieldManager"))?;
    check_config(call, config)?;
    let warnings = decode_config::<T>(call, opts, config)?;
    Ok((merge_config(shape, current, config, manager, opts.force, &now())?, warnings))
}

/// `config` applied by `manager` to `current`, with the managedFields that leaves.
fn merge_config(
    shape: &Shape,
    current: &Value,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    let outcome = ssa::apply(shape, current, &entries(current), config, manager, force, now)
        .map_err(|c| ApiError::apply_conflict(&c))?;
    let mut object = outcome.object;
    set(&mut object, &outcome.managed);
    // A resourceVersion in the configuration is a precondition, as in any other write.
    let rv =
        config.pointer("/metadata/resourceVersion").filter(|rv| rv.as_str().is_some_and(|s| !s.is_empty()));
    if let (Some(rv), Some(meta)) = (rv, metadata_mut(&mut object)) {
        meta.insert("resourceVersion".into(), rv.clone());
    }
    Ok(object)
}

/// An applied configuration names its type and object fully, and leaves managedFields to the
/// server (kube-apiserver refuses them too).
fn check_config(call: &Call<'_>, config: &Value) -> Result<(), ApiError> {
    for field in ["apiVersion", "kind"] {
        if config.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(ApiError::bad_request(format!("{field} must be set in an applied configuration")));
        }
    }
    let str_at = |p: &str| config.pointer(p).and_then(Value::as_str);
    if str_at("/metadata/name").is_none_or(str::is_empty) {
        return Err(ApiError::bad_request("metadata.name must be set in an applied configuration"));
    }
    check_name(call.def, &call.req.name, str_at("/metadata/name"))?;
    if call.def.namespaced {
        check_namespace(&call.req.namespace, str_at("/metadata/namespace"))?;
    }
    if config.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    Ok(())
}

/// Decodes the configuration as the kind (with its type fields and unknown fields checked);
/// a configuration may leave out `spec`, which the kind's type requires.
fn decode_config<T: DeserializeOwned>(
    call: &Call<'_>,
    opts: &WriteOptions,
    config: &Value,
) -> Result<Vec<String>, ApiError> {
    let mut probe = config.clone();
    if let Some(m) = probe.as_object_mut() {
        m.entry("spec").or_insert_with(|| json!({}));
    }
    let (_, warnings): (T, _) = body::decode(probe, call.def.kind, opts.field_validation)?;
    Ok(warnings)
}

fn read(v: &Value) -> Option<Vec<Entry>> {
    let sent: Vec<ManagedFieldsEntry> = serde_json::from_value(v.clone()).ok()?;
    ssa::from_k8s(&sent).ok()
}

/// The managedFields of an object hns rendered.
fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields").and_then(read).unwrap_or_default()
}

fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.as_object_mut()?.entry("metadata").or_insert_with(|| json!({})).as_object_mut()
}

fn set(obj: &mut Value, managed: &[Entry]) {
    let Some(meta) = metadata_mut(obj) else { return };
    if managed.is_empty() {
        meta.remove("managedFields");
    } else {
        let shown: Vec<ManagedFieldsEntry> = managed.iter().map(Entry::to_k8s).collect();
        meta.insert("managedFields".into(), serde_json::to_value(shown).unwrap_or_default());
    }
}

/// Now, to the second, as managedFields times are.
fn now() -> String {
    let t = jiff::Timestamp::now();
    jiff::Timestamp::from_second(t.as_second()).unwrap_or(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape::Struct(&[
        ("metadata", METADATA),
        ("spec", Shape::Struct(&[("parent", Shape::Atomic), ("labels", META_KVPS)])),
    ]);
    const NOW: &str = "2024-05-01T10:00:00Z";

    fn object(spec: Value) -> Value {
        json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
               "metadata": {"name": "hierarchy", "namespace": "a", "resourceVersion": "7"}, "spec": spec})
    }

    fn managers(obj: &Value) -> Vec<(String, String)> {
        entries(obj).into_iter().map(|e| (e.manager, format!("{:?}", e.operation))).collect()
    }

    #[test]
    fn applies_leave_managed_fields_in_the_object_and_conflicts_as_status() {
        let created =
            record_update(&SHAPE, &json!({}), object(json!({"parent": "p"})), "kubectl-create", NOW);
        assert_eq!(managers(&created), [("kubectl-create".to_string(), "Update".to_string())]);
        let config = json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
                            "metadata": {"name": "hierarchy"}, "spec": {"parent": "q"}});
        let err = merge_config(&SHAPE, &created, &config, "flux", false, NOW).unwrap_err();
        assert_eq!((err.code, err.reason), (409, "Conflict"));
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using hnc.x-k8s.io/v1alpha2 at 2024-05-01T10:00:00Z: .spec.parent"
        );
        let cause = &err.details.as_ref().unwrap().causes.as_ref().unwrap()[0];
        assert_eq!(cause.reason.as_deref(), Some("FieldManagerConflict"));
        assert_eq!(cause.field.as_deref(), Some(".spec.parent"));
        let forced = merge_config(&SHAPE, &created, &config, "flux", true, NOW).unwrap();
        assert_eq!(forced["spec"]["parent"], "q");
        assert_eq!(forced["metadata"]["resourceVersion"], "7");
        assert_eq!(managers(&forced), [("flux".to_string(), "Apply".to_string())]);
    }

    #[test]
    fn an_applied_resource_version_is_a_precondition() {
        let config =
            json!({"metadata": {"name": "hierarchy", "resourceVersion": "3"}, "spec": {"parent": "q"}});
        let applied = merge_config(&SHAPE, &object(json!({})), &config, "flux", false, NOW).unwrap();
        assert_eq!(applied["metadata"]["resourceVersion"], "3");
    }

    #[test]
    fn updates_keep_reset_or_take_the_managed_fields_sent() {
        let created =
            record_update(&SHAPE, &json!({}), object(json!({"parent": "p"})), "kubectl-create", NOW);
        // A PUT sending them back unchanged (kubectl edit) keeps them, plus its own change.
        let mut edited = created.clone();
        edited["spec"]["labels"] = json!([{"key": "env", "value": "dev"}]);
        let edited = record_update(&SHAPE, &created, edited, "kubectl-edit", NOW);
        assert_eq!(managers(&edited).len(), 2);
        // An empty list resets them, and records nothing.
        let mut reset = edited.clone();
        reset["metadata"]["managedFields"] = json!([]);
        let reset = record_update(&SHAPE, &edited, reset, "kubectl-edit", NOW);
        assert_eq!(reset["metadata"].get("managedFields"), None);
        // Readable entries sent are the starting point; unreadable ones are ignored.
        let mut sent = edited.clone();
        sent["metadata"]["managedFields"] = json!([created["metadata"]["managedFields"][0]]);
        assert_eq!(managers(&record_update(&SHAPE, &edited, sent, "x", NOW)).len(), 1);
        let mut garbage = edited.clone();
        garbage["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Sideways"}]);
        assert_eq!(managers(&record_update(&SHAPE, &edited, garbage, "x", NOW)), managers(&edited));
        // A body that is not an object is left to the decoder to refuse.
        assert_eq!(record_update(&SHAPE, &edited, json!([1]), "x", NOW), json!([1]));
    }
}
