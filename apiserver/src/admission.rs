//! The validating admission webhook for Namespace objects.
//!
//! Hierarchy state lives on namespaces, so direct edits must not corrupt it: only hns may
//! write tree labels, the membership label and hns's annotations, and `included-namespace` may
//! only say `"true"` on a managed namespace (HNC's rule), but for the tree labels an external
//! hierarchy's tool gives a root it manages (`hnc.x-k8s.io/managed-by`), whose names are reserved;
//! a subnamespace is deleted
//! through its parent; a namespace with subnamespaces is deleted only where cascading deletion
//! is allowed. Decisions come from the forest and [`crate::hierarchy::rules`]; this module only decodes
//! and answers, and holds a parent about to be deleted for its subnamespaces.
//!
//! Two webhook entries point here (see `config/base/webhook.yaml`): a fail-closed one for
//! namespaces labelled as hierarchy members, and a fail-open one for all others. Both run the
//! same checks; only what happens when hns is down differs.
//!
//! A third, `/mutate-namespaces`, checks the same on creation and gives a new namespace the
//! labels of a lone namespace in the creating request. Where kube-apiserver can give them itself
//! ([`namespace_labels`], Kubernetes 1.36 and later), a plain new namespace is not sent here.
//!
//! Three more cover other namespaced objects: `/validate-objects` keeps propagated copies hns's
//! own, `/validate-exceptions` refuses exception annotations
//! (`propagate.hnc.x-k8s.io/…`) that do not parse, as judged by
//! [`crate::propagation::exceptions`], and `/validate-sources` refuses a source that would
//! overwrite descendants' own objects ([`sources`]).
//!
//! Three more enforce hierarchical quotas: see [`quota_webhooks`].

use actix_web::{web, HttpResponse};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::response::StatusDetails;

use crate::hierarchy::plan;
use crate::hierarchy::rules::{self, Refusal};
use crate::propagation::copies::INHERITED_FROM;
use crate::propagation::exceptions;
use crate::propagation::ENFORCED;
use crate::state::AppState;
use review::{invalid, Review};

pub mod namespace_labels;
pub mod quota_webhooks;
pub mod review;
pub mod sources;

/// A refusal as kube-apiserver reports it: HTTP code, reason and message.
struct Denial {
    code: u16,
    reason: &'static str,
    message: String,
}

impl Denial {
    fn forbidden(message: String) -> Self {
        Denial { code: 403, reason: "Forbidden", message }
    }
}

/// The webhooks' one shape: ask `decide`, answer allowed or the denial.
fn answer<T: kube::Resource>(
    review: Review<T>,
    decide: impl FnOnce(&AdmissionRequest<T>) -> Result<(), Denial>,
) -> HttpResponse {
    let decision = decide(&review.request);
    reply(&review.request, decision)
}

/// How long a client refused with 429 ("try again") is told to wait. kube-apiserver turns the
/// denial's `details.retryAfterSeconds` into a `Retry-After` header, and client-go (kubectl,
/// controllers) then sends the same request again by itself, up to 10 times, so a namespace's
/// moment of joining a quota is a pause for the user rather than an error.
const TRY_AGAIN_AFTER_SECONDS: u32 = 1;

/// The answer to `request`: allowed, or the denial (logged).
fn reply<T: kube::Resource>(request: &AdmissionRequest<T>, decision: Result<(), Denial>) -> HttpResponse {
    reply_warned(request, decision, Vec::new())
}

/// [`reply`], with `warnings` for kubectl to print when the request is allowed.
fn reply_warned<T: kube::Resource>(
    request: &AdmissionRequest<T>,
    decision: Result<(), Denial>,
    warnings: Vec<String>,
) -> HttpResponse {
    let response = match decision {
        Ok(()) => {
            let mut allowed = AdmissionResponse::from(request);
            allowed.warnings = (!warnings.is_empty()).then_some(warnings);
            allowed
        }
        Err(denial) => {
            tracing::info!(namespace = ?request.namespace, name = %request.name, user = ?request.user_info.username,
                operation = ?request.operation, reason = %denial.message, "denied");
            let mut denied = AdmissionResponse::from(request).deny(denial.message);
            denied.result.code = denial.code;
            denied.result.reason = denial.reason.into();
            if denial.code == 429 {
                denied.result.details = Some(try_again_details(request));
            }
            denied
        }
    };
    HttpResponse::Ok().json(response.into_review())
}

/// The details of a 429 denial of `request`, named as kube-apiserver names them (the resource
/// and its group), with the wait.
fn try_again_details<T: kube::Resource>(request: &AdmissionRequest<T>) -> StatusDetails {
    StatusDetails {
        name: request.name.clone(),
        group: request.resource.group.clone(),
        kind: request.resource.resource.clone(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: TRY_AGAIN_AFTER_SECONDS,
    }
}

/// `POST /validate-namespaces`.
pub async fn validate_namespaces(state: web::Data<AppState>, review: Review<Namespace>) -> HttpResponse {
    // Only a caller with a certificate of the cluster's is told about namespaces other than the
    // one asked about.
    let Review { request, cluster_peer } = review;
    if !cluster_peer && !reviews_the_stored_namespace(&state, &request) {
        // Answered as for a namespace hns does not know, doing nothing: a stranger learns
        // nothing of a namespace by naming it, and cannot make hns hold it.
        return reply(&request, Ok(()));
    }
    let decision = match decide(&state, &request, cluster_peer) {
        Ok(()) => hold_for_subnamespaces(&state, &request).await,
        Err(refusal) => Err(denial(&request.name, refusal)),
    };
    let warnings = managed_label_warnings(&state, &request);
    reply_warned(&request, decision, warnings)
}

/// Warnings for an update that changes managed labels directly: kubectl prints them, so the
/// user learns at once that hns will undo the change, and where to make it instead.
fn managed_label_warnings(state: &AppState, request: &AdmissionRequest<Namespace>) -> Vec<String> {
    let (Some(old), Some(new)) = (&request.old_object, &request.object) else { return Vec::new() };
    if request.user_info.username.as_deref() == Some(state.policy.hns_user.as_str()) {
        return Vec::new();
    }
    rules::managed_label_edits(&state.policy, &request.name, old, new)
        .into_iter()
        .map(|k| format!("label {k:?} is managed by hns: it keeps the value the hierarchy gives (spec.labels of a hierarchyconfiguration) and undoes any other"))
        .collect()
}

/// `POST /mutate-namespaces`: a namespace created by anyone but hns is checked as
/// `/validate-namespaces` checks it and, if allowed, gets the labels of a lone namespace in the
/// same request ([`plan::lone_labels`]), so that hns does not write every new namespace a second
/// time (one more write, watch event and managedFields entry each). Fails open: while hns is
/// down, a new namespace comes without them and hns's controller adds them once it is back.
pub async fn mutate_namespaces(state: web::Data<AppState>, review: Review<Namespace>) -> HttpResponse {
    let Review { request, cluster_peer } = review;
    if !matches!(request.operation, Operation::Create) {
        return reply(&request, Ok(()));
    }
    if let Err(refusal) = decide(&state, &request, cluster_peer) {
        return reply(&request, Err(denial(&request.name, refusal)));
    }
    match with_lone_labels(&state, &request) {
        Ok(response) => HttpResponse::Ok().json(response.into_review()),
        Err(e) => invalid(e),
    }
}

/// Allows `request` (a creation), adding what it lacks of a lone namespace's labels.
fn with_lone_labels(
    state: &AppState,
    request: &AdmissionRequest<Namespace>,
) -> Result<AdmissionResponse, String> {
    let allowed = AdmissionResponse::from(request);
    // hns's own creations (subnamespaces) skip this webhook (matchConditions) and carry these
    // labels already; only what is missing is added in any case.
    let Some(object) = request.object.as_ref() else { return Ok(allowed) };
    // A namespace created with generateName has no name yet (kube-apiserver makes it up after
    // admission), so no tree label can be named: hns's controller labels it once it exists.
    if request.name.is_empty() {
        return Ok(allowed);
    }
    let has = object.metadata.labels.as_ref();
    let missing: serde_json::Map<String, serde_json::Value> = plan::lone_labels(&state.policy, &request.name)
        .into_iter()
        .filter(|(k, _)| !has.is_some_and(|l| l.contains_key(k)))
        .map(|(k, v)| (k, v.into()))
        .collect();
    if missing.is_empty() {
        return Ok(allowed);
    }
    let ops: Vec<serde_json::Value> = match has {
        None => vec![serde_json::json!({"op": "add", "path": "/metadata/labels", "value": missing})],
        Some(_) => missing
            .into_iter()
            .map(|(k, v)| serde_json::json!({"op": "add", "path": format!("/metadata/labels/{}", json_pointer_token(&k)), "value": v}))
            .collect(),
    };
    let patch: json_patch::Patch = serde_json::from_value(ops.into()).map_err(|e| e.to_string())?;
    allowed.with_patch(patch).map_err(|e| e.to_string())
}

/// `key` as one token of a JSON pointer (RFC 6901): `~` and `/` escaped.
fn json_pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether a review that depends on what hns knows of its namespace (a DELETE) names the namespace
/// as it is stored: its uid, which kube-apiserver sends in oldObject and which only those who may
/// read the namespace know. A review from a caller without a certificate of the cluster's is
/// answered from hns's state only then, so that a stranger cannot ask about, or have hns act on,
/// a namespace by its name alone. Other reviews are judged from what they carry.
fn reviews_the_stored_namespace(state: &AppState, request: &AdmissionRequest<Namespace>) -> bool {
    if !matches!(request.operation, Operation::Delete) {
        return true;
    }
    let claimed = request.old_object.as_ref().and_then(|o| o.metadata.uid.as_deref());
    let forest = state.cache.read();
    claimed.is_some() && forest.get(&request.name).is_some_and(|node| node.meta.uid() == claimed)
}

/// A namespace with subnamespaces that may be deleted gets HNC's `hasSubnamespace` finalizer
/// first, so that it stays Terminating until they are gone
/// ([`crate::hierarchy::forest::Forest::needs_hold`]). This is the webhook's one side effect,
/// skipped on a dry run (`sideEffects: NoneOnDryRun`); hns's own deletions skip the webhook and
/// hold for themselves. If the hold cannot be written the deletion is refused, changing nothing.
async fn hold_for_subnamespaces(
    state: &AppState,
    request: &AdmissionRequest<Namespace>,
) -> Result<(), Denial> {
    let deleting = matches!(request.operation, Operation::Delete) && !request.dry_run;
    if !deleting || !state.cache.read().needs_hold(&request.name, jiff::Timestamp::now()) {
        return Ok(());
    }
    state.writer.hold_for_subnamespaces(&request.name).await.map_err(|e| Denial {
        code: 500,
        reason: "InternalError",
        message: format!(
            "namespaces \"{}\" was not deleted: hns could not first mark it to wait for its subnamespaces ({}); try again",
            request.name, e.message
        ),
    })
}

/// `POST /validate-objects`: propagated copies belong to hns. Users may not change or delete
/// copies (edit the source instead), nor create objects labelled as copies or add the label to
/// theirs; the namespace controller may delete copies when their namespace goes.
pub async fn validate_objects(state: web::Data<AppState>, review: Review<DynamicObject>) -> HttpResponse {
    let cluster_peer = review.cluster_peer;
    answer(review, |request| {
        decide_object(&state, request, cluster_peer).map_or(Ok(()), |why| Err(Denial::forbidden(why)))
    })
}

/// Whether a deletion in namespace `ns` by `user` goes with its namespace: the namespace
/// controller's, or, told to a caller with a certificate of the cluster's only, anyone's in a
/// terminating namespace (a stranger is not told whether a namespace is terminating).
fn goes_with_its_namespace(state: &AppState, user: &str, ns: &str, cluster_peer: bool) -> bool {
    quota_webhooks::NAMESPACE_CONTROLLER_USERS.contains(&user)
        || (cluster_peer && state.cache.read().is_terminating(ns))
}

/// `POST /validate-exceptions`: a source's exception annotations must parse, as HNC requires.
/// kube-apiserver sends only objects carrying an annotation under HNC's prefixes, and fails
/// closed: a typo in `none` would otherwise copy the object (a Secret, say) into every
/// descendant. Answered 400 with what is wrong and what is accepted, as HNC answers.
pub async fn validate_exceptions(state: web::Data<AppState>, review: Review<DynamicObject>) -> HttpResponse {
    answer(review, |request| {
        decide_exceptions(&state, request).map_err(|e| Denial {
            code: 400,
            reason: "BadRequest",
            message: e.to_string(),
        })
    })
}

/// Judges sources of propagated kinds in namespaces that take part, as HNC does: copies are the
/// objects webhook's, and elsewhere the annotations decide nothing (the controller reports them
/// if the kind starts propagating later).
fn decide_exceptions(
    state: &AppState,
    req: &AdmissionRequest<DynamicObject>,
) -> Result<(), exceptions::Error> {
    let Some((new, _)) = users_source(state, req) else { return Ok(()) };
    let old = req.old_object.as_ref().and_then(|o| o.metadata.annotations.as_ref());
    exceptions::check_change(old, new.metadata.annotations.as_ref())
}

/// The object and namespace of a review that writes a source of a kind that propagates, by
/// someone other than hns, in a namespace hns manages; `None` for anything else (a delete, a
/// copy, hns's own write), which the source webhooks let through.
fn users_source<'a>(
    state: &AppState,
    req: &'a AdmissionRequest<DynamicObject>,
) -> Option<(&'a DynamicObject, &'a str)> {
    let new = req.object.as_ref()?;
    let hns = req.user_info.username.as_deref() == Some(state.policy.hns_user.as_str());
    let copy = source_of(Some(new)).is_some() || source_of(req.old_object.as_ref()).is_some();
    let ns = req.namespace.as_deref().unwrap_or_default();
    let propagates = ENFORCED.contains(&(req.resource.group.as_str(), req.resource.resource.as_str()))
        || state.propagation.propagating(&req.resource.group, &req.resource.resource).is_some();
    (!hns && !copy && !state.policy.is_excluded(ns) && propagates).then_some((new, ns))
}

fn source_of(obj: Option<&DynamicObject>) -> Option<String> {
    obj.and_then(|o| o.metadata.labels.as_ref()).and_then(|l| l.get(INHERITED_FROM)).cloned()
}

fn decide_object(
    state: &AppState,
    req: &AdmissionRequest<DynamicObject>,
    cluster_peer: bool,
) -> Option<String> {
    // hns makes no copies in excluded namespaces, so a label there marks nothing (HNC skips
    // them too).
    let excluded = state.policy.is_excluded(req.namespace.as_deref().unwrap_or_default());
    if excluded || req.user_info.username.as_deref() == Some(state.policy.hns_user.as_str()) {
        return None;
    }
    let old = source_of(req.old_object.as_ref());
    let new = source_of(req.object.as_ref());
    match (req.operation.clone(), old, new) {
        (Operation::Update, Some(from), _) => Some(format!(
            "cannot modify object propagated from namespace \"{from}\"; change the source object in {from} instead"
        )),
        (Operation::Update, None, Some(_)) => Some(format!("cannot add the label \"{INHERITED_FROM}\"; it marks copies made by hns")),
        (Operation::Create, _, Some(_)) => Some(format!(
            "cannot create objects with the label \"{INHERITED_FROM}\"; it marks copies made by hns: create the object without it, or create it in an ancestor namespace for hns to copy here"
        )),
        (Operation::Delete, Some(from), _) => {
            let ns = req.namespace.clone().unwrap_or_default();
            let user = req.user_info.username.as_deref().unwrap_or_default();
            (!goes_with_its_namespace(state, user, &ns, cluster_peer)).then(|| {
                format!("cannot delete object propagated from namespace \"{from}\"; delete the source object in {from}, or stop propagating it")
            })
        }
        _ => None,
    }
}

fn decide(state: &AppState, req: &AdmissionRequest<Namespace>, cluster_peer: bool) -> Result<(), Refusal> {
    if req.user_info.username.as_deref() == Some(state.policy.hns_user.as_str()) {
        return Ok(()); // hns's own writes keep the hierarchy consistent by construction
    }
    match req.operation {
        Operation::Create | Operation::Update => match &req.object {
            Some(new) => {
                rules::check_namespace_edit(&state.policy, &req.name, req.old_object.as_ref(), new)?;
                let forest = state.cache.read();
                rules::check_external_labels(&forest, &req.name, req.old_object.as_ref(), new)?;
                match req.operation {
                    Operation::Create => rules::check_namespace_create(&forest, &req.name),
                    _ => Ok(()),
                }
            }
            None => Ok(()),
        },
        Operation::Delete => rules::check_namespace_delete(&state.cache.read(), &req.name, cluster_peer),
        Operation::Connect => Ok(()),
    }
}

/// The denial of a change of namespace `ns`: a conflict with the cluster's state (a name an
/// external hierarchy reserves) is a 409, as HNC answers it; everything else a 403.
fn denial(ns: &str, refusal: Refusal) -> Denial {
    match refusal {
        Refusal::Conflict(m) => Denial { code: 409, reason: "Conflict", message: m },
        refusal => Denial::forbidden(message(ns, refusal)),
    }
}

fn message(ns: &str, refusal: Refusal) -> String {
    let why = match refusal {
        Refusal::Invalid(causes) => {
            causes.into_iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join("; ")
        }
        Refusal::Forbidden(m) | Refusal::Conflict(m) | Refusal::NotSynced(m) => m,
        Refusal::AlreadyExists => "already exists".into(),
        Refusal::NamespaceNotFound(n) => format!("namespace \"{n}\" not found"),
    };
    format!("namespaces \"{ns}\" is forbidden: {why}")
}
