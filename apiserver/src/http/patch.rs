//! PATCH bodies: JSON merge patches (RFC 7386) and JSON patches (RFC 6902), applied within
//! bounds so that a small patch cannot make hns allocate without limit.
//!
//! A JSON patch's `copy` duplicates a subtree of the document, so N copies of the document onto
//! itself make it 2^N times larger: 20 operations in a 2.6 KB patch ask for gigabytes. Like
//! kube-apiserver, hns refuses a patch of more than [`MAX_OPERATIONS`] operations, and it applies
//! the operations one at a time, refusing the patch (413, nothing changed) as soon as the document
//! could outgrow [`MAX_DOCUMENT_BYTES`]. The size is an upper bound kept without re-encoding the
//! document: what each `add`, `replace` or `copy` brings in is added, nothing removed is taken off,
//! so memory stays within a few times the request-size limit whatever the patch does. A merge
//! patch cannot grow a document by more than its own size, which the request-size limit already
//! bounds; its result is measured once.

use serde_json::Value;

use crate::http::body::{essence, PATCH_TYPES};
use crate::http::status::ApiError;

/// The most operations a JSON patch may have (kube-apiserver's `maxJSONPatchOperations`).
pub const MAX_OPERATIONS: usize = 10_000;

/// The largest document a patch may produce: the request-size limit, as an object hns stores
/// cannot be larger than one a client could send whole.
pub const MAX_DOCUMENT_BYTES: usize = crate::http::body::MAX_BODY_BYTES;

/// Refuses a PATCH of a type hns does not apply (strategic merge) with 415, before the object is
/// even looked up: a client must learn that the patch type is wrong, not that the object is
/// missing.
pub fn require_patch_type(content_type: Option<&str>) -> Result<(), ApiError> {
    match essence(content_type) {
        e if PATCH_TYPES.contains(&e) => Ok(()),
        other => Err(ApiError::unsupported_media_type(other, PATCH_TYPES)),
    }
}

/// Applies merge patch `patch` to `current`.
pub fn apply_merge_patch(current: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    json_patch::merge(&mut doc, patch);
    if encoded_size(&doc, MAX_DOCUMENT_BYTES).is_none() {
        return Err(too_large_result());
    }
    Ok(doc)
}

/// Applies `ops` in order to a copy of `current`, checking the bound before each operation.
pub fn apply_json_patch(current: &Value, ops: &[json_patch::PatchOperation]) -> Result<Value, ApiError> {
    use json_patch::PatchOperation as Op;
    if ops.len() > MAX_OPERATIONS {
        return Err(ApiError::too_large_with(format!(
            "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let mut doc = current.clone();
    let mut bound = encoded_size(&doc, MAX_DOCUMENT_BYTES).ok_or_else(too_large_result)?;
    for (i, op) in ops.iter().enumerate() {
        let added = match op {
            Op::Add(o) => encoded_size(&o.value, MAX_DOCUMENT_BYTES),
            Op::Replace(o) => encoded_size(&o.value, MAX_DOCUMENT_BYTES),
            // A copy whose source is missing fails in json_patch below, with its own message.
            Op::Copy(o) => {
                doc.pointer(o.from.as_str()).map_or(Some(0), |v| encoded_size(v, MAX_DOCUMENT_BYTES))
            }
            Op::Remove(_) | Op::Move(_) | Op::Test(_) => Some(0),
        };
        bound = added.map_or(usize::MAX, |a| bound.saturating_add(a));
        if bound > MAX_DOCUMENT_BYTES {
            return Err(ApiError::too_large_with(format!(
                "operation {i} of the JSON patch would make the object larger than \
                 {MAX_DOCUMENT_BYTES} bytes; send fewer or smaller operations"
            )));
        }
        json_patch::patch(&mut doc, std::slice::from_ref(op)).map_err(|e| {
            ApiError::unprocessable_patch(format!("operation {i} ({}) failed: {}", e.path, e.kind))
        })?;
    }
    Ok(doc)
}

fn too_large_result() -> ApiError {
    ApiError::too_large_with(format!("the patched object would be larger than {MAX_DOCUMENT_BYTES} bytes"))
}

/// The length of `value` encoded as JSON, or `None` past `cap` (counted without building the
/// encoding, and stopping at the cap).
fn encoded_size(value: &Value, cap: usize) -> Option<usize> {
    struct Counter {
        n: usize,
        cap: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.cap {
                return Err(std::io::Error::other("over the cap"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { n: 0, cap };
    serde_json::to_writer(&mut counter, value).ok().map(|()| counter.n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::Sent;
    use serde_json::json;

    fn hc() -> Value {
        json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
            "metadata": {"name": "hierarchy"}, "spec": {"parent": "a"}})
    }

    /// A patch body of `content_type`, read as a write reads it, applied to `cur`.
    fn apply_patch(cur: &Value, bytes: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
        match Sent::read(true, bytes, content_type)? {
            Sent::MergePatch(patch) => apply_merge_patch(cur, &patch),
            Sent::JsonPatch(ops) => apply_json_patch(cur, &ops),
            other => panic!("not a merge or JSON patch: {other:?}"),
        }
    }

    fn json_patch(cur: &Value, ops: &Value) -> Result<Value, ApiError> {
        apply_patch(cur, ops.to_string().as_bytes(), Some("application/json-patch+json"))
    }

    #[test]
    fn patches() {
        let cur = hc();
        let merged = apply_patch(
            &cur,
            br#"{"spec":{"parent":null,"allowCascadingDeletion":true}}"#,
            Some("application/merge-patch+json"),
        )
        .unwrap();
        assert_eq!(merged["spec"], json!({"allowCascadingDeletion": true}));
        let patched = json_patch(&cur, &json!([{"op":"replace","path":"/spec/parent","value":"b"}])).unwrap();
        assert_eq!(patched["spec"]["parent"], "b");
        let e = json_patch(&cur, &json!([{"op":"test","path":"/spec/parent","value":"zzz"}])).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("operation 0"), "{}", e.message);
        let smp = apply_patch(&cur, b"{}", Some("application/strategic-merge-patch+json")).unwrap_err();
        assert_eq!(smp.code, 415);
        assert!(smp.message.contains("application/apply-patch+yaml"), "{}", smp.message);
        assert_eq!(require_patch_type(Some("application/strategic-merge-patch+json")).unwrap_err().code, 415);
        assert!(require_patch_type(Some("application/apply-patch+yaml; charset=utf-8")).is_ok());
        assert_eq!(apply_patch(&cur, b"{nope", Some("application/merge-patch+json")).unwrap_err().code, 400);
    }

    /// The patch of the advisory: 1,000 bytes, then the annotations copied into themselves.
    fn doubling_patch(copies: usize) -> Value {
        let mut ops =
            vec![json!({"op": "add", "path": "/metadata/annotations", "value": {"a": "x".repeat(1000)}})];
        ops.extend((0..copies).map(|i| {
            json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/a{i}")})
        }));
        Value::Array(ops)
    }

    #[test]
    fn doubling_copies_are_refused_before_they_grow() {
        // 2^11 KB = 2 MB fits; 2^12 KB does not.
        assert!(json_patch(&hc(), &doubling_patch(11)).is_ok());
        let e = json_patch(&hc(), &doubling_patch(40)).unwrap_err();
        assert_eq!((e.code, e.reason), (413, "RequestEntityTooLarge"));
        assert!(e.message.contains("operation 12"), "{}", e.message);
    }

    #[test]
    fn too_many_operations() {
        let ops: Vec<Value> = (0..=MAX_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/spec/parent", "value": "a"}))
            .collect();
        let e = json_patch(&hc(), &Value::Array(ops)).unwrap_err();
        assert_eq!(e.code, 413);
        assert!(e.message.contains("10000, got 10001"), "{}", e.message);
    }

    #[test]
    fn failed_operation_changes_nothing() {
        let cur = hc();
        let ops = json!([{"op": "replace", "path": "/spec/parent", "value": "b"},
                         {"op": "remove", "path": "/spec/missing"}]);
        assert_eq!(json_patch(&cur, &ops).unwrap_err().code, 422);
        assert_eq!(cur["spec"]["parent"], "a");
    }

    #[test]
    fn sizes_are_capped() {
        assert_eq!(encoded_size(&json!({"a": 1}), 100), Some(7));
        assert_eq!(encoded_size(&json!("x".repeat(200)), 100), None);
        let big = json!({"metadata": {"annotations": {"a": "x".repeat(MAX_DOCUMENT_BYTES)}}});
        let merge = apply_patch(&hc(), big.to_string().as_bytes(), Some("application/merge-patch+json"));
        assert_eq!(merge.unwrap_err().code, 413);
    }
}
