//! The one skeleton every write follows, as kube-apiserver's update does: an attempt reads the
//! object as the cache holds it, checks the client's resourceVersion, plans the change and
//! writes it, then waits for the cache to bring the write back. When the object changed between
//! the read and the write (a 409 the client did not ask for, e.g. the controller relabelled the
//! namespace), the attempt is made again from a fresh read; a client that named the
//! resourceVersion it wrote against gets its 409, as from kube-apiserver.

use std::future::Future;

use super::def::{Call, Reply};
use crate::http::body;
use crate::http::request_info::Verb;
use crate::http::status::{ApiError, GroupResource};
use crate::store::config_store;

/// How often a write is tried when the object changed under it.
const WRITE_ATTEMPTS: usize = 10;

/// How often a write is tried when its turn of the parent lock ran out (kube-apiserver slow to
/// answer the ancestry check): the client asked once, and the next turn usually goes through.
const LOCK_ATTEMPTS: usize = 3;

/// Why an attempt failed, which decides whether another one is made.
#[derive(Debug)]
pub enum Failure {
    /// The answer to the client: its own precondition failed, or the request is wrong.
    Final(ApiError),
    /// The stored object changed under the attempt: read it again and retry.
    Changed(ApiError),
    /// The attempt's turn of the parent lock ran out: take another turn.
    LockTurn(ApiError),
}

impl From<ApiError> for Failure {
    /// Errors before the write are the answer, conflicts included (an apply's conflicts with
    /// other managers, a name already taken): only [`write_failed`] says otherwise.
    fn from(e: ApiError) -> Self {
        Failure::Final(e)
    }
}

/// Where a resource's objects are stored, for the fresh read after a conflict.
#[derive(Debug, Clone, Copy)]
pub enum Stored<'a> {
    /// On this Namespace object.
    Namespace(&'a str),
    /// In the HNC configuration's ConfigMap.
    Config,
}

/// Makes `attempt` until it succeeds, fails for good, or runs out of tries.
pub async fn retrying<F, Fut>(call: &Call<'_>, stored: Stored<'_>, attempt: F) -> Result<Reply, ApiError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Reply, Failure>>,
{
    retry(attempt, || refresh(call, stored)).await
}

/// The retry policy, apart from what is retried: `refresh` runs before the attempt after a
/// change under the last one.
async fn retry<T, F, Fut, R, RFut>(mut attempt: F, mut refresh: R) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
    R: FnMut() -> RFut,
    RFut: Future<Output = Result<(), ApiError>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Ok(done) => return Ok(done),
            Err(Failure::Changed(_)) if tries < WRITE_ATTEMPTS => refresh().await?,
            Err(Failure::LockTurn(e)) if tries < LOCK_ATTEMPTS => {
                tracing::info!(reason = %e, "write retried for another turn of the parent lock");
            }
            Err(Failure::Final(e) | Failure::Changed(e) | Failure::LockTurn(e)) => return Err(e),
        }
    }
}

/// Brings the cache up to the stored object as kube-apiserver has it now.
async fn refresh(call: &Call<'_>, stored: Stored<'_>) -> Result<(), ApiError> {
    match stored {
        Stored::Namespace(ns) => {
            if let Some(ns) = call.state.writer.get(ns).await? {
                call.state.cache.caught_up_with(&ns).await;
            }
        }
        Stored::Config => {
            let rv = config_store::stored_resource_version(&call.state.client, &call.state.namespace).await?;
            call.state.config.caught_up(rv).await;
        }
    }
    Ok(())
}

/// Checks the resourceVersion the client named, if any, against the current one. `written` is
/// the resourceVersion of the object the request asks for; a patch names one only if it sets it
/// itself ([`patch_resource_version`]). Returns whether the client named one: a conflict of the
/// write that follows is then the client's to resolve, not retried.
pub fn check_resource_version(
    call: &Call<'_>,
    gr: GroupResource<'_>,
    name: &str,
    current: &serde_json::Value,
    written: Option<&str>,
) -> Result<bool, Failure> {
    let named = match call.req.verb {
        Verb::Patch => patch_resource_version(call.body, call.content_type),
        _ => written.map(str::to_string),
    };
    check_named(gr, name, current, named.as_deref())
}

fn check_named(
    gr: GroupResource<'_>,
    name: &str,
    current: &serde_json::Value,
    client_rv: Option<&str>,
) -> Result<bool, Failure> {
    let client_rv = client_rv.filter(|rv| !rv.is_empty());
    let current_rv = current["metadata"]["resourceVersion"].as_str().unwrap_or_default();
    if client_rv.is_some_and(|rv| rv != current_rv) {
        return Err(Failure::Final(ApiError::stale(gr, name)));
    }
    Ok(client_rv.is_some())
}

/// The resourceVersion a patch sets itself, if any. kube-apiserver applies a patch to the newest
/// object and tries again when that changed under it, so only a patch that names a
/// resourceVersion can be stale; the patched object carries the current one otherwise, which is
/// not the client's precondition.
pub fn patch_resource_version(body: &[u8], content_type: Option<&str>) -> Option<String> {
    let named = |v: &serde_json::Value| {
        v.pointer("/metadata/resourceVersion").and_then(serde_json::Value::as_str).map(str::to_string)
    };
    match body::essence(content_type) {
        body::APPLY_PATCH => body::parse_apply(body).ok().as_ref().and_then(named),
        "application/json-patch+json" => {
            let ops: Vec<serde_json::Value> = serde_json::from_slice(body).ok()?;
            ops.iter().rev().find_map(|op| {
                let sets = matches!(op["op"].as_str(), Some("add" | "replace"))
                    && op["path"] == "/metadata/resourceVersion";
                sets.then(|| op["value"].as_str().map(str::to_string)).flatten()
            })
        }
        _ => serde_json::from_slice(body).ok().as_ref().and_then(named),
    }
}

/// A failed write: a conflict means the object changed since the attempt read it, which is
/// retried unless the client guarded the write with its own resourceVersion of `guarded`
/// (its resource and name). Then the conflict is the client's, and names what the client wrote
/// rather than the Namespace or ConfigMap that stores it.
pub fn write_failed(e: ApiError, guarded: Option<(GroupResource<'_>, &str)>) -> Failure {
    match guarded {
        _ if e.code != 409 => Failure::Final(e),
        None => Failure::Changed(e),
        Some((gr, name)) => Failure::Final(ApiError::stale(gr, name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GR: GroupResource<'static> = GroupResource { group: "hnc.x-k8s.io", resource: "things" };

    #[test]
    fn the_clients_resource_version_is_a_precondition() {
        let current = json!({"metadata": {"resourceVersion": "7"}});
        assert!(!check_named(GR, "x", &current, None).unwrap());
        assert!(!check_named(GR, "x", &current, Some("")).unwrap(), "empty is none");
        assert!(check_named(GR, "x", &current, Some("7")).unwrap());
        assert!(matches!(
            check_named(GR, "x", &current, Some("6")),
            Err(Failure::Final(e)) if e.code == 409
        ));
    }

    #[test]
    fn a_patch_names_a_resource_version_only_by_setting_it() {
        let merge = Some("application/merge-patch+json");
        assert_eq!(patch_resource_version(br#"{"spec":{"parent":"a"}}"#, merge), None);
        let guarded = br#"{"metadata":{"resourceVersion":"7"},"spec":{}}"#;
        assert_eq!(patch_resource_version(guarded, merge).as_deref(), Some("7"));
        let json_patch = Some("application/json-patch+json");
        let ops = br#"[{"op":"replace","path":"/spec/parent","value":"a"}]"#;
        assert_eq!(patch_resource_version(ops, json_patch), None);
        let ops = br#"[{"op":"test","path":"/metadata/resourceVersion","value":"6"},
                      {"op":"replace","path":"/metadata/resourceVersion","value":"7"}]"#;
        assert_eq!(patch_resource_version(ops, json_patch).as_deref(), Some("7"));
        let apply = Some("application/apply-patch+yaml");
        let config = b"apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchyConfiguration\nmetadata:\n  name: hierarchy\n";
        assert_eq!(patch_resource_version(config, apply), None);
        let config = b"metadata:\n  name: hierarchy\n  resourceVersion: \"9\"\n";
        assert_eq!(patch_resource_version(config, apply).as_deref(), Some("9"));
    }

    /// Runs `retry` with attempts failing as `failures` says (then succeeding); returns the
    /// outcome, the attempts made and the refreshes.
    fn run(failures: Vec<fn() -> Failure>) -> (Result<usize, u16>, usize, usize) {
        let (attempts, refreshes) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        let outcome = futures::executor::block_on(retry(
            || {
                let n = attempts.get();
                attempts.set(n + 1);
                let result = failures.get(n).map_or(Ok(n + 1), |f| Err(f()));
                async move { result }
            },
            || {
                refreshes.set(refreshes.get() + 1);
                async { Ok(()) }
            },
        ));
        (outcome.map_err(|e| e.code), attempts.get(), refreshes.get())
    }

    #[test]
    fn changes_under_an_attempt_are_retried_from_a_fresh_read() {
        let changed = || Failure::Changed(ApiError::stale(GR, "x"));
        assert_eq!(run(vec![changed, changed]), (Ok(3), 3, 2));
        assert_eq!(run(vec![changed; 20]), (Err(409), WRITE_ATTEMPTS, WRITE_ATTEMPTS - 1), "bounded");
    }

    #[test]
    fn final_answers_are_not_retried_and_lock_turns_are_few() {
        assert_eq!(run(vec![|| Failure::Final(ApiError::stale(GR, "x"))]), (Err(409), 1, 0));
        let turn = || Failure::LockTurn(ApiError::service_unavailable("turn ran out"));
        assert_eq!(run(vec![turn]), (Ok(2), 2, 0));
        assert_eq!(run(vec![turn; 5]), (Err(503), LOCK_ATTEMPTS, 0));
    }

    #[test]
    fn conflicts_are_retried_unless_the_client_guarded_the_write() {
        let conflict = || ApiError::stale(GR, "x");
        assert!(matches!(write_failed(conflict(), None), Failure::Changed(_)));
        let namespaces = GroupResource { group: "", resource: "namespaces" };
        match write_failed(ApiError::stale(namespaces, "team-a"), Some((GR, "hierarchy"))) {
            Failure::Final(e) => assert_eq!(e.message, ApiError::stale(GR, "hierarchy").message),
            _ => panic!("a guarded write's conflict is the client's"),
        }
        assert!(matches!(write_failed(ApiError::bad_request("no"), None), Failure::Final(_)));
    }
}

/// `DeleteOptions` fields hns honours.
#[derive(serde::Deserialize, Default)]
struct DeleteOptions {
    #[serde(default)]
    preconditions: Option<Preconditions>,
    #[serde(default, rename = "dryRun")]
    dry_run: Vec<String>,
}

/// A delete's preconditions.
#[derive(serde::Deserialize, Default)]
pub struct Preconditions {
    /// The uid the object must have.
    pub uid: Option<String>,
    /// The resourceVersion the object must be at.
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<String>,
}

/// The preconditions of a delete, and whether it is a dry run (asked in the query or in the
/// DeleteOptions body).
pub fn delete_options(call: &Call<'_>) -> Result<(Preconditions, bool), ApiError> {
    let opts = body::WriteOptions::from_query(call.query)?;
    body::require_json(call.content_type)?;
    let options: DeleteOptions = if call.body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        serde_json::from_slice(call.body)
            .map_err(|e| ApiError::bad_request(format!("the DeleteOptions body is not valid: {e}")))?
    };
    let dry_run = opts.dry_run || options.dry_run.iter().any(|d| d == "All");
    Ok((options.preconditions.unwrap_or_default(), dry_run))
}
