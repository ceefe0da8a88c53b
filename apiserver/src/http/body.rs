//! Request bodies of writes: decoding with field validation, and patches.
//!
//! Bodies are JSON (`application/json`). Patches are JSON merge patches (RFC 7386, what kubectl
//! apply/edit/label use for kinds it does not know) and JSON patches (RFC 6902), applied by
//! [`crate::http::patch`], and server-side apply configurations (`application/apply-patch+yaml`, YAML
//! or JSON; merged by [`crate::ssa`]). Strategic merge is refused with 415, which makes clients
//! fall back to merge patch. Unknown fields are handled as `fieldValidation` asks: `Strict` refuses them, `Warn`
//! (the default) answers with a `Warning` header, `Ignore` drops them silently.

use std::collections::HashMap;

use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::http::status::ApiError;

/// How unknown fields are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them.
    Ignore,
    /// Drop them and warn.
    Warn,
    /// Refuse the request.
    Strict,
}

/// The write options of a request (`dryRun`, `fieldValidation`, `fieldManager`, `force`).
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// `dryRun=All`: validate everything, persist nothing.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `fieldManager`: who makes the change, for managedFields.
    pub field_manager: Option<String>,
    /// `force=true`: an apply takes conflicting fields from their managers.
    pub force: bool,
}

/// Largest request body accepted (kube-apiserver's default for JSON is 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The Content-Type of server-side apply.
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// The Content-Type of a JSON merge patch (RFC 7386).
pub const MERGE_PATCH: &str = "application/merge-patch+json";

/// The Content-Type of a JSON patch (RFC 6902).
pub const JSON_PATCH: &str = "application/json-patch+json";

/// The patch types hns applies (strategic merge is not one: clients fall back to merge patch).
pub const PATCH_TYPES: &[&str] = &[JSON_PATCH, MERGE_PATCH, APPLY_PATCH];

/// The longest `fieldManager` kube-apiserver takes.
const MAX_FIELD_MANAGER: usize = 128;

impl WriteOptions {
    /// Reads the options from the query, refusing unknown values with a 400.
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: unsupported value \"{other}\": supported values are All"
                )))
            }
        };
        let field_validation = match q.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                "fieldValidation: unsupported value \"{other}\": supported values are Ignore, Warn, Strict"
            )))
            }
        };
        let force = match q.get("force").map(String::as_str) {
            None | Some("") | Some("false") => false,
            Some("true") => true,
            Some(other) => return Err(ApiError::bad_request(format!("force: invalid value \"{other}\""))),
        };
        let field_manager = q.get("fieldManager").filter(|m| !m.is_empty()).cloned();
        if let Some(m) = &field_manager {
            check_field_manager(m)?;
        }
        Ok(WriteOptions { dry_run, field_validation, field_manager, force })
    }

    /// The manager of an ordinary write: `fieldManager`, else the User-Agent up to its first `/`
    /// (printable characters, at most 128), as kube-apiserver derives it.
    pub fn update_manager(&self, user_agent: Option<&str>) -> String {
        self.field_manager.clone().unwrap_or_else(|| {
            let prefix = user_agent.unwrap_or_default().split('/').next().unwrap_or_default();
            prefix.chars().filter(|c| !c.is_control()).take(MAX_FIELD_MANAGER).collect()
        })
    }
}

/// kube-apiserver's limits on `fieldManager`.
fn check_field_manager(m: &str) -> Result<(), ApiError> {
    if m.chars().count() > MAX_FIELD_MANAGER {
        return Err(ApiError::bad_request(format!(
            "fieldManager: Too long: may not be more than {MAX_FIELD_MANAGER} bytes"
        )));
    }
    if m.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "fieldManager: Invalid value: {m:?}: must only contain printable characters"
        )));
    }
    Ok(())
}

/// The media type of a Content-Type header, without parameters.
pub fn essence(content_type: Option<&str>) -> &str {
    content_type.map(|c| c.split(';').next().unwrap_or("").trim()).unwrap_or("")
}

/// A write's body, read once: a whole object, a patch or an apply configuration.
#[derive(Debug)]
pub enum Sent {
    /// A whole object (POST, PUT).
    Object(Value),
    /// A JSON merge patch.
    MergePatch(Value),
    /// A JSON patch's operations.
    JsonPatch(Vec<json_patch::PatchOperation>),
    /// A server-side apply configuration.
    Apply(Value),
}

impl Sent {
    /// Reads `bytes`: a PATCH's (`patch`) as its Content-Type says, any other write's as a JSON
    /// object. A body that does not parse is a 400; a patch type hns does not apply, a 415.
    pub fn read(patch: bool, bytes: &[u8], content_type: Option<&str>) -> Result<Sent, ApiError> {
        if !patch {
            return parse_json(bytes, content_type).map(Sent::Object);
        }
        let json = || -> Result<Value, ApiError> {
            serde_json::from_slice(bytes)
                .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))
        };
        match essence(content_type) {
            APPLY_PATCH => parse_apply(bytes).map(Sent::Apply),
            MERGE_PATCH => json().map(Sent::MergePatch),
            JSON_PATCH => serde_json::from_value(json()?)
                .map(Sent::JsonPatch)
                .map_err(|e| ApiError::bad_request(format!("the JSON patch is not valid: {e}"))),
            other => Err(ApiError::unsupported_media_type(other, PATCH_TYPES)),
        }
    }

    /// The resourceVersion the client names as its precondition, if any. kube-apiserver applies
    /// a patch to the newest object and tries again when that changed under it, so a patch
    /// names one only if it sets it itself (a JSON patch, by an operation that adds or replaces
    /// it); the patched object carries the current one otherwise, which is not the client's.
    pub fn resource_version(&self) -> Option<String> {
        let named =
            |v: &Value| v.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_string);
        match self {
            Sent::Object(v) | Sent::MergePatch(v) | Sent::Apply(v) => named(v),
            Sent::JsonPatch(ops) => ops.iter().rev().find_map(|op| match op {
                json_patch::PatchOperation::Add(o) if o.path.as_str() == "/metadata/resourceVersion" => {
                    o.value.as_str().map(str::to_string)
                }
                json_patch::PatchOperation::Replace(o) if o.path.as_str() == "/metadata/resourceVersion" => {
                    o.value.as_str().map(str::to_string)
                }
                _ => None,
            }),
        }
    }
}

/// Parses a server-side apply configuration: one YAML document (JSON is YAML too).
pub fn parse_apply(bytes: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_saphyr::from_slice_with_options(bytes, apply_options())
        .map_err(|e: serde_saphyr::Error| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the applied configuration must be an object"));
    }
    Ok(value)
}

/// How an apply configuration is read, set here rather than left to the crate's defaults: as
/// kube-apiserver reads one (a key given twice is an error, `<<` merge keys are expanded), in
/// one document, within the crate's budget for untrusted input (250,000 nodes, 64 levels, far
/// beyond any object that fits in [`MAX_BODY_BYTES`]), and with errors on one line (the crate
/// would otherwise quote the input around the error over several).
fn apply_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.merge_keys = serde_saphyr::MergeKeyPolicy::Merge;
    options.with_snippet = false;
    options
}

/// Decodes an object of kind `kind`, checking its type fields and unknown fields. Returns the
/// object and the warnings to send.
pub fn decode<T: DeserializeOwned>(
    value: Value,
    kind: &str,
    validation: FieldValidation,
) -> Result<(T, Vec<String>), ApiError> {
    check_type_fields(&value, kind)?;
    let mut unknown = Vec::new();
    let mut note_unknown = |path: serde_ignored::Path<'_>| unknown.push(path.to_string());
    let fields = serde_ignored::Deserializer::new(value, &mut note_unknown);
    let obj: T = serde_path_to_error::deserialize(fields).map_err(|e| cannot_handle(kind, &e))?;
    // The type fields were checked above; the derived types read them without storing them.
    let messages: Vec<String> = unknown
        .iter()
        .filter(|p| !matches!(p.as_str(), "apiVersion" | "kind"))
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    match validation {
        FieldValidation::Strict if !messages.is_empty() => {
            Err(ApiError::bad_request(format!("strict decoding error: {}", messages.join(", "))))
        }
        FieldValidation::Warn => Ok((obj, messages)),
        _ => Ok((obj, Vec::new())),
    }
}

/// kube-apiserver's words for a body of the right kind whose fields do not decode, naming the
/// field: `HierarchyConfiguration in version "v1alpha2" cannot be handled as a
/// HierarchyConfiguration: spec.parent: invalid type: integer `5`, expected a string`.
fn cannot_handle(kind: &str, e: &serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let version = hns_api::API_VERSION.rsplit('/').next().unwrap_or(hns_api::API_VERSION);
    let path = e.path().to_string();
    let at = if path == "." { String::new() } else { format!("{path}: ") };
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {at}{}; fix the field and retry",
        e.inner()
    ))
}

fn check_type_fields(value: &Value, kind: &str) -> Result<(), ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_request("the body of the request must be a JSON object"));
    }
    for field in ["apiVersion", "kind"] {
        if value.get(field).is_some_and(|v| !v.is_string()) {
            return Err(ApiError::bad_request(format!("{field} in the data must be a string")));
        }
    }
    match value.get("apiVersion").and_then(Value::as_str) {
        None | Some(hns_api::API_VERSION) => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({other}) does not match the expected API version ({})",
                hns_api::API_VERSION
            )))
        }
    }
    match value.get("kind").and_then(Value::as_str) {
        None => Ok(()),
        Some(k) if k == kind => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "the kind in the data ({other}) does not match the expected kind ({kind})"
        ))),
    }
}

/// Refuses a Content-Type other than JSON with 415, even for an empty body: a request that
/// names a format hns does not read was not meant for it.
pub fn require_json(content_type: Option<&str>) -> Result<(), ApiError> {
    let essence =
        content_type.map(|c| c.split(';').next().unwrap_or("").trim()).unwrap_or("application/json");
    if !matches!(essence, "application/json" | "") {
        return Err(ApiError::unsupported_media_type(essence, &["application/json"]));
    }
    Ok(())
}

/// Parses a JSON body.
pub fn parse_json(bytes: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
    require_json(content_type)?;
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the body of the request is not valid JSON: {e}")))
}

/// Reads the body up to [`MAX_BODY_BYTES`], answering 413 beyond.
pub async fn read(mut payload: actix_web::web::Payload) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::too_large(MAX_BODY_BYTES));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hns_api::HierarchyConfiguration;
    use serde_json::json;

    fn hc(extra: Value) -> Value {
        let mut v = json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
            "metadata": {"name": "hierarchy"}, "spec": {"parent": "a"}});
        json_patch::merge(&mut v, &extra);
        v
    }

    #[test]
    fn unknown_fields_by_validation_mode() {
        let body = hc(json!({"spec": {"parnet": "typo"}}));
        let (_, warnings) =
            decode::<HierarchyConfiguration>(body.clone(), "HierarchyConfiguration", FieldValidation::Warn)
                .unwrap();
        assert_eq!(warnings, ["unknown field \"spec.parnet\""]);
        let err =
            decode::<HierarchyConfiguration>(body.clone(), "HierarchyConfiguration", FieldValidation::Strict)
                .unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("spec.parnet"), "{}", err.message);
        let (_, warnings) =
            decode::<HierarchyConfiguration>(body, "HierarchyConfiguration", FieldValidation::Ignore)
                .unwrap();
        assert!(warnings.is_empty());
    }

    #[test]
    fn type_errors_name_the_field() {
        let cases = [
            (json!({"spec": {"parent": 5}}), "spec.parent: invalid type: integer `5`, expected a string"),
            (
                json!({"spec": {"labels": [{"key": "k", "value": true}]}}),
                "spec.labels[0].value: invalid type: boolean `true`",
            ),
            (json!({"spec": "x"}), "spec: invalid type: string \"x\""),
        ];
        for (bad, expected) in cases {
            let e =
                decode::<HierarchyConfiguration>(hc(bad), "HierarchyConfiguration", FieldValidation::Warn)
                    .unwrap_err();
            assert_eq!(e.code, 400);
            assert!(
                e.message.starts_with(
                    "HierarchyConfiguration in version \"v1alpha2\" cannot be handled as a HierarchyConfiguration: "
                ),
                "{}",
                e.message
            );
            assert!(e.message.contains(expected), "{}", e.message);
        }
    }

    #[test]
    fn wrong_kind_or_version_is_400() {
        for bad in [
            json!({"kind": "Subnamespace"}),
            json!({"apiVersion": "hnc.x-k8s.io/v1alpha1"}),
            json!([1]),
            json!({"apiVersion": true}),
            json!({"kind": 3}),
        ] {
            let body = if bad.is_array() { bad } else { hc(bad) };
            let e = decode::<HierarchyConfiguration>(body, "HierarchyConfiguration", FieldValidation::Warn)
                .unwrap_err();
            assert_eq!(e.code, 400);
        }
    }

    #[test]
    fn options() {
        let q = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        assert!(WriteOptions::from_query(&q("dryRun", "All")).unwrap().dry_run);
        assert_eq!(WriteOptions::from_query(&q("dryRun", "Some")).unwrap_err().code, 400);
        assert_eq!(
            WriteOptions::from_query(&q("fieldValidation", "Strict")).unwrap().field_validation,
            FieldValidation::Strict
        );
        assert_eq!(
            WriteOptions::from_query(&HashMap::new()).unwrap().field_validation,
            FieldValidation::Warn
        );
        assert!(WriteOptions::from_query(&q("force", "true")).unwrap().force);
        assert_eq!(WriteOptions::from_query(&q("force", "yes")).unwrap_err().code, 400);
        assert_eq!(WriteOptions::from_query(&q("fieldManager", &"m".repeat(129))).unwrap_err().code, 400);
        assert_eq!(WriteOptions::from_query(&q("fieldManager", "a\u{7}")).unwrap_err().code, 400);
    }

    #[test]
    fn managers_of_updates() {
        let none = WriteOptions::from_query(&HashMap::new()).unwrap();
        assert_eq!(none.update_manager(Some("kubectl/v1.31.0 (linux/amd64) kubernetes/abc")), "kubectl");
        assert_eq!(none.update_manager(None), "");
        let named =
            WriteOptions::from_query(&HashMap::from([("fieldManager".into(), "flux".into())])).unwrap();
        assert_eq!(named.update_manager(Some("kubectl/v1.31.0")), "flux");
    }

    #[test]
    fn apply_configurations_are_yaml_or_json() {
        let yaml =
            parse_apply(b"apiVersion: hnc.x-k8s.io/v1alpha2\nkind: Subnamespace\nmetadata: {name: a}\n")
                .unwrap();
        assert_eq!(yaml["metadata"]["name"], "a");
        assert_eq!(parse_apply(br#"{"kind":"Subnamespace"}"#).unwrap()["kind"], "Subnamespace");
        assert_eq!(parse_apply(b"- 1").unwrap_err().code, 400);
        let broken = parse_apply(b"a: [").unwrap_err();
        assert_eq!(broken.code, 400);
        assert_eq!(
            broken.message, "error decoding YAML: unclosed bracket '[' at line 1, column 4",
            "one line"
        );
        // As kube-apiserver reads them: a key given twice is an error, merge keys are expanded.
        let twice = parse_apply(b"kind: Subnamespace\nkind: HierarchyConfiguration\n").unwrap_err();
        assert_eq!(twice.code, 400, "{}", twice.message);
        let merged = parse_apply(b"base: &b {parent: a}\nspec:\n  <<: *b\n").unwrap();
        assert_eq!(merged["spec"]["parent"], "a");
        assert_eq!(parse_apply(b"kind: A\n---\nkind: B\n").unwrap_err().code, 400, "one document");
    }

    #[test]
    fn a_patch_names_a_resource_version_only_by_setting_it() {
        let named =
            |body: &[u8], content_type| Sent::read(true, body, content_type).unwrap().resource_version();
        let merge = Some("application/merge-patch+json");
        assert_eq!(named(br#"{"spec":{"parent":"a"}}"#, merge), None);
        let guarded = br#"{"metadata":{"resourceVersion":"7"},"spec":{}}"#;
        assert_eq!(named(guarded, merge).as_deref(), Some("7"));
        let json_patch = Some("application/json-patch+json");
        let ops = br#"[{"op":"replace","path":"/spec/parent","value":"a"}]"#;
        assert_eq!(named(ops, json_patch), None);
        let ops = br#"[{"op":"test","path":"/metadata/resourceVersion","value":"6"},
                      {"op":"replace","path":"/metadata/resourceVersion","value":"7"}]"#;
        assert_eq!(named(ops, json_patch).as_deref(), Some("7"));
        let apply = Some("application/apply-patch+yaml");
        let config = b"apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchyConfiguration\nmetadata:\n  name: hierarchy\n";
        assert_eq!(named(config, apply), None);
        let config = b"metadata:\n  name: hierarchy\n  resourceVersion: \"9\"\n";
        assert_eq!(named(config, apply).as_deref(), Some("9"));
    }

    #[test]
    fn a_whole_object_names_its_own() {
        let put = br#"{"metadata":{"name":"hierarchy","resourceVersion":"5"}}"#;
        assert_eq!(Sent::read(false, put, None).unwrap().resource_version().as_deref(), Some("5"));
        assert_eq!(Sent::read(false, br#"{"metadata":{}}"#, None).unwrap().resource_version(), None);
    }

    #[test]
    fn a_patch_is_read_by_its_type() {
        let read = |body: &[u8], content_type| Sent::read(true, body, content_type);
        assert!(matches!(read(b"{}", Some(MERGE_PATCH)), Ok(Sent::MergePatch(_))));
        assert!(matches!(read(b"[]", Some(JSON_PATCH)), Ok(Sent::JsonPatch(ops)) if ops.is_empty()));
        assert!(matches!(read(b"kind: A\n", Some(APPLY_PATCH)), Ok(Sent::Apply(_))));
        assert_eq!(read(b"{}", Some("application/strategic-merge-patch+json")).unwrap_err().code, 415);
        assert_eq!(read(b"{nope", Some(MERGE_PATCH)).unwrap_err().code, 400);
        assert_eq!(read(br#"[{"op":"jump"}]"#, Some(JSON_PATCH)).unwrap_err().code, 400);
    }
}
