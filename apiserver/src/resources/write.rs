//! The one write every resource makes, as kube-apiserver's generic registry Store makes it
//! for every storage: [`write`] runs the sequence, and a [`Strategy`] per resource says what is
//! its own (as `RESTCreateStrategy` and `RESTUpdateStrategy` do there).
//!
//! An attempt reads the object as the cache holds it, works out the object the client asks for
//! (its body, patch or apply configuration, with managed fields), decodes it, checks its
//! metadata and the client's resourceVersion, lets the resource validate it, and stores it; the
//! store waits for the cache to bring the write back. When the object changed between the read
//! and the write (a 409 the client did not ask for, e.g. the controller relabelled the
//! namespace), the attempt is made again from a fresh read; a client that named the
//! resourceVersion it wrote against gets its 409, as from kube-apiserver.

use std::future::Future;

use futures::future::LocalBoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::checks::{check_metadata, check_name, check_namespace};
use super::def::{Call, Reply};
use super::managed;
use super::render;
use crate::http::body::{self, Sent, WriteOptions};
use crate::http::request_info::Verb;
use crate::http::status::{ApiError, GroupResource};
use crate::ssa::Shape;
use crate::state::{AppState, Context};
use crate::store::cache::Cache;
use crate::store::config_store::{self, ConfigStore};
use crate::store::writer::Writer;

/// How often a write is tried when the object changed under it.
const WRITE_ATTEMPTS: usize = 10;

/// How often a write is tried when the store answered 503, most often because its turn of the
/// parent lock ran out (kube-apiserver slow to answer the ancestry check): the client asked
/// once, and the next turn usually goes through.
const UNAVAILABLE_ATTEMPTS: usize = 3;

/// Why an attempt failed, which decides whether another one is made.
#[derive(Debug)]
pub enum Failure {
    /// The answer to the client: its own precondition failed, or the request is wrong.
    Final(ApiError),
    /// The stored object changed under the attempt: read it again and retry.
    Changed(ApiError),
    /// The store answered 503 (the attempt's turn of the parent lock ran out): try again.
    Unavailable(ApiError),
}

/// Where a write starts from.
pub struct Start<B> {
    /// The object's name as the URL gives it (empty for a POST: the body names it).
    pub name: String,
    /// The object as served, or `None` when the write creates it.
    pub current: Option<Value>,
    /// What the resource read with it, for its validation and its store to compare against.
    pub before: B,
}

/// What is a resource's own in the one write. Everything else, in the same order for every
/// resource, is [`write`]'s: a new resource implements this and routes its create, update and
/// patch to `write::handler::<ItsStrategy>`.
//
// Not `Send`: handlers run on actix's single-threaded workers (`LocalBoxFuture`).
#[allow(async_fn_in_trait)]
pub trait Strategy {
    /// The parts of the server's state the resource's writes touch.
    type Context<'a>: Context<'a>;
    /// The object as clients write it.
    type Object: DeserializeOwned;
    /// What [`Strategy::start`] reads beside the object.
    type Before;
    /// The fields writers own, for managed fields and server-side apply.
    const SHAPE: Shape;

    /// Where the object named `name` is stored, to read it afresh after a conflict: by default
    /// the request's namespace, for an object kept on the namespace it is in.
    fn stored<'a>(call: &'a Call<'_>, _name: &'a str) -> Stored<'a> {
        Stored::Namespace(&call.req.namespace)
    }

    /// What the write starts from: 404 when there is nothing to update, and, where the URL names
    /// the object, 409 when a create finds it there already (a POST's name is its body's: the
    /// resource checks it in [`Strategy::validate`]).
    async fn start(cx: &Self::Context<'_>, call: &Call<'_>) -> Result<Start<Self::Before>, ApiError>;

    /// Checks of the object the client asks for, before it is decoded, where the decoder would
    /// say less. None by default.
    async fn check_desired(
        _cx: &Self::Context<'_>,
        _call: &Call<'_>,
        _name: &str,
        _desired: &Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// The resource's rules for the object as it would be written: names, the hierarchy's
    /// rules, the caller's rights beyond the request's own.
    async fn validate(attempt: &Attempt<'_, Self>) -> Result<(), ApiError>
    where
        Self: Sized;

    /// Stores the object (or, with `dry_run`, only checks that it could); returns it as served.
    /// A 409 means it changed since [`Strategy::start`].
    async fn store(attempt: &Attempt<'_, Self>) -> Result<Value, ApiError>
    where
        Self: Sized;
}

/// One attempt at a write, once the object is decoded and its metadata checked: what a
/// strategy validates and stores.
pub struct Attempt<'a, S: Strategy> {
    /// The parts of the server's state the resource touches.
    pub cx: S::Context<'a>,
    /// The request.
    pub call: &'a Call<'a>,
    /// What the attempt started from.
    pub start: Start<S::Before>,
    /// The object's name.
    pub name: String,
    /// The object as it would be written.
    pub obj: S::Object,
    /// Whether only to check that it could be stored (`dryRun`).
    pub dry_run: bool,
}

/// A create, update or patch of a resource, retried from a fresh read while the object changes
/// under it.
pub async fn write<S: Strategy>(call: &Call<'_>) -> Result<Reply, ApiError> {
    // Each attempt reads the object afresh itself after a conflict: it knows the name.
    retry(|| write_once::<S>(call), || async { Ok(()) }).await
}

/// [`write`] as the [`Handler`](super::def::Handler) of a resource's create, update and patch.
pub fn handler<'a, S: Strategy + 'static>(call: &'a Call<'a>) -> LocalBoxFuture<'a, Result<Reply, ApiError>> {
    Box::pin(write::<S>(call))
}

/// One attempt: everything before the store is the answer; only the store's own conflicts and
/// 503s are tried again.
async fn write_once<S: Strategy>(call: &Call<'_>) -> Result<Reply, Failure> {
    let opts = WriteOptions::from_query(call.query)?;
    let cx: S::Context<'_> = call.context();
    let start = S::start(&cx, call).await?;
    // Read after the start, so that a write to nothing is a 404 whatever its body.
    let sent = Sent::read(call.req.verb == Verb::Patch, call.body, call.content_type)?;
    let (desired, mut warnings) =
        managed::desired::<S::Object>(call, &opts, &sent, &S::SHAPE, start.current.as_ref(), &start.name)?;
    // The name first (a POST's is its body's), so that the resource's checks can name the object.
    let named = check_name(call.def, &start.name, desired.pointer("/metadata/name").and_then(Value::as_str))?;
    S::check_desired(&cx, call, &named, &desired).await?;
    // Every object's metadata is an ObjectMeta: once the object decodes, so does its metadata.
    // Read in place, not from a copy: managedFields can make it large.
    let meta = desired.get("metadata").and_then(|m| ObjectMeta::deserialize(m).ok()).unwrap_or_default();
    let (obj, more): (S::Object, _) = body::decode(desired, call.def.kind, opts.field_validation)?;
    warnings.extend(more);
    let name = check_metadata(call.def, &start.name, &meta)?;
    if call.def.namespaced {
        check_namespace(&call.req.namespace, meta.namespace.as_deref())?;
    }
    let gr = call.def.group_resource();
    let guarded = match &start.current {
        Some(current) => check_named(gr, &name, current, sent.resource_version().as_deref())?,
        None => false,
    };
    let attempt = Attempt::<S> { cx, call, start, name, obj, dry_run: opts.dry_run };
    S::validate(&attempt).await?;
    let written = match S::store(&attempt).await {
        Ok(written) => written,
        Err(e) => {
            let failure = write_failed(e, guarded.then_some((gr, attempt.name.as_str())));
            if matches!(failure, Failure::Changed(_)) {
                refresh(call, S::stored(call, &attempt.name)).await?;
            }
            return Err(failure);
        }
    };
    let code = if attempt.start.current.is_none() || call.req.verb == Verb::Create { 201 } else { 200 };
    Ok(Reply::json(code, render::object(call.def, written, call.render)?, warnings))
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
            Err(Failure::Unavailable(e)) if tries < UNAVAILABLE_ATTEMPTS => {
                tracing::info!(reason = %e, "write retried after a 503 (another turn of the parent lock)");
            }
            Err(Failure::Final(e) | Failure::Changed(e) | Failure::Unavailable(e)) => return Err(e),
        }
    }
}

/// Where objects are stored and cached: what a write reads afresh after a conflict.
struct Stores<'a> {
    writer: &'a Writer,
    cache: &'a Cache,
    client: &'a kube::Client,
    namespace: &'a str,
    config: &'a ConfigStore,
}

impl<'a> Context<'a> for Stores<'a> {
    fn of(state: &'a AppState) -> Self {
        Stores {
            writer: &state.writer,
            cache: &state.cache,
            client: &state.client,
            namespace: &state.namespace,
            config: &state.config,
        }
    }
}

/// Brings the cache up to the stored object as kube-apiserver has it now.
async fn refresh(call: &Call<'_>, stored: Stored<'_>) -> Result<(), ApiError> {
    let stores: Stores = call.context();
    match stored {
        Stored::Namespace(ns) => {
            if let Some(ns) = stores.writer.get(ns).await? {
                stores.cache.caught_up_with(&ns).await;
            }
        }
        Stored::Config => {
            let rv = config_store::stored_resource_version(stores.client, stores.namespace).await?;
            stores.config.caught_up(rv).await;
        }
    }
    Ok(())
}

/// Checks the resourceVersion the client named ([`Sent::resource_version`]), if any, against
/// the current one. Returns whether the client named one: a conflict of the write that follows
/// is then the client's to resolve, not retried.
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

/// A failed write: a conflict means the object changed since the attempt read it, and a 503
/// that the store asked to be tried again; both are retried unless the client guarded the
/// write with its own resourceVersion of `guarded` (its resource and name). Then a conflict is
/// the client's, and names what the client wrote rather than the Namespace or ConfigMap that
/// stores it.
pub fn write_failed(e: ApiError, guarded: Option<(GroupResource<'_>, &str)>) -> Failure {
    match guarded {
        None if e.code == 409 => Failure::Changed(e),
        None if e.code == 503 => Failure::Unavailable(e),
        Some((gr, name)) if e.code == 409 => Failure::Final(ApiError::stale(gr, name)),
        _ => Failure::Final(e),
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
        let turn = || Failure::Unavailable(ApiError::service_unavailable("turn ran out"));
        assert_eq!(run(vec![turn]), (Ok(2), 2, 0));
        assert_eq!(run(vec![turn; 5]), (Err(503), UNAVAILABLE_ATTEMPTS, 0));
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
        let busy = || ApiError::service_unavailable("turn ran out");
        assert!(matches!(write_failed(busy(), None), Failure::Unavailable(_)));
        assert!(matches!(write_failed(busy(), Some((GR, "x"))), Failure::Final(_)), "the client's to retry");
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
