//! The webhooks that make hierarchical quotas impossible to overspend (`docs/quotas.md`):
//!
//! - `/mutate-quota-status` (`resourcequotas.hns.hnc.x-k8s.io`, mutating): a `status.used`
//!   update of a ResourceQuota labelled `hnc.x-k8s.io/hrq` that goes beyond the allocation
//!   annotated on it (kube-apiserver admits the others without asking, by the webhook's
//!   matchConditions) is decided by [`ledger::approve`] against its tree's ledger; a grant is
//!   written (compare-and-swap) before it is answered, and the answer raises the allocation in
//!   the same update (a JSONPatch). Only Kubernetes' quota admission (user `system:apiserver`)
//!   can be refused; recalculations (kube-controller-manager's quota controller) are allowed
//!   and recorded.
//! - `/validate-quota-objects` (`resourcequota-objects.hns.hnc.x-k8s.io`): those ResourceQuotas
//!   are hns's; nobody else creates, edits or deletes them, except that they go with their
//!   namespace.
//! - `/validate-quota-pending` (`hrq-pending.hns.hnc.x-k8s.io`): nothing is created in a
//!   namespace labelled `hnc.x-k8s.io/hrq-pending` (kube-apiserver sends only those).
//!
//! Answer codes: over a quota is 403 Forbidden, as HNC answers; "try again" (the ledger is
//! being filled, a namespace is joining, the ledger is contended) is 429 TooManyRequests.
//! Kubernetes' quota admission retries a refused status update 3 times with a fresh
//! ResourceQuota whatever the code, then fails the request with the webhook's message and code;
//! 429 tells the client that the same request may pass later, where 409 would claim its object
//! conflicts.

use std::collections::BTreeMap;

use actix_web::{web, HttpResponse};
use hns_api::keys::HRQ_LABEL;
use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::Api;

use super::review::{invalid, Review};
use super::{reply, Denial};
use crate::hierarchy::quotas::ledger::{self, Observed, Refusal, ResourceList, StatusUpdate, Verdict};
use crate::hierarchy::quotas::quantity::{self, Amounts};
use crate::resource_version;
use crate::state::AppState;
use crate::store::quota_allocations;
use crate::store::quota_ledgers::{Change, StoreError};
use crate::store::quota_usage::allocation_annotation;

/// Kubernetes' quota admission, updating `status.used` before it admits an object.
pub const QUOTA_ADMISSION_USER: &str = "system:apiserver";

/// Kubernetes' namespace controller (kube-controller-manager with
/// `--use-service-account-credentials`, as kubeadm and most distributions run it).
pub const NAMESPACE_CONTROLLER_USERS: [&str; 2] =
    ["system:serviceaccount:kube-system:namespace-controller", "system:kube-controller-manager"];

impl Denial {
    fn try_again(message: String) -> Self {
        Denial { code: 429, reason: "TooManyRequests", message }
    }
}

/// `POST /mutate-quota-status`.
pub async fn admit_status(state: web::Data<AppState>, review: Review<ResourceQuota>) -> HttpResponse {
    let request = review.request;
    let started = std::time::Instant::now();
    let decided = decide_status(&state, &request).await;
    tracing::debug!(
        namespace = request.namespace.as_deref().unwrap_or_default(),
        ms = started.elapsed().as_millis() as u64,
        outcome = match &decided {
            Ok(Some(_)) => "granted",
            Ok(None) => "allowed",
            Err(d) => d.reason,
        },
        why = decided.as_ref().err().map(|d| d.message.as_str()).unwrap_or_default(),
        "quota status update decided"
    );
    match decided {
        Ok(Some(allocation)) => match raise(&request, &allocation) {
            Ok(response) => HttpResponse::Ok().json(response.into_review()),
            Err(e) => invalid(e),
        },
        Ok(None) => reply(&request, Ok(())),
        Err(denial) => reply(&request, Err(denial)),
    }
}

/// The answer that admits the update and sets the allocation annotation on its object.
fn raise(
    request: &AdmissionRequest<ResourceQuota>,
    allocation: &ResourceList,
) -> Result<AdmissionResponse, String> {
    let text = serde_json::Value::String(ledger::allocation_text(allocation));
    let has_annotations = request.object.as_ref().is_some_and(|o| o.metadata.annotations.is_some());
    let op = if has_annotations {
        serde_json::json!({"op": "add", "path": format!("/metadata/annotations/{}", ledger::ALLOCATION_ANNOTATION.replace('/', "~1")), "value": text})
    } else {
        serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {ledger::ALLOCATION_ANNOTATION: text}})
    };
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::json!([op])).map_err(|e| e.to_string())?;
    AdmissionResponse::from(request).with_patch(patch).map_err(|e| e.to_string())
}

/// The decision on one update: allowed (with the allocation to set, if the ledger granted one)
/// or refused.
async fn decide_status(
    state: &AppState,
    req: &AdmissionRequest<ResourceQuota>,
) -> Result<Option<ResourceList>, Denial> {
    let (Some(old), Some(new), Some(ns)) = (&req.old_object, &req.object, &req.namespace) else {
        return Ok(None);
    };
    if req.name != RESOURCE_QUOTA_NAME {
        return Ok(None);
    }
    // Compared as written, not as read: an annotation that does not parse is hns's all the same.
    if allocation_annotation(old) != allocation_annotation(new) {
        return Err(Denial::forbidden(format!(
            "the annotation {} on ResourceQuota {RESOURCE_QUOTA_NAME} is hns's: it holds what namespace {ns:?} may use without asking hns, and no status update may change it",
            ledger::ALLOCATION_ANNOTATION
        )));
    }
    let update = StatusUpdate {
        namespace: ns.clone(),
        old_version: resource_version::number(&old.metadata),
        old_used: used(old)?,
        new_used: used(new)?,
        from_admission: req.user_info.username.as_deref() == Some(QUOTA_ADMISSION_USER),
    };
    // Everything below answers from hns's state, so it is asked only of an update of the
    // ResourceQuota as stored (anyone who reaches the port may send a review): any other is
    // allowed, doing nothing, whatever it names, as an update that can no longer commit is.
    if !committed_now(state, &update, old.metadata.uid.as_deref()).await? {
        return Ok(None);
    }
    let (root, chain) = {
        let forest = state.cache.read();
        let chain: Vec<String> =
            forest.quotas_covering(ns).into_iter().map(|(n, q, _)| ledger::quota_key(n, q)).collect();
        (ledger::root_of(&forest, ns), chain)
    };
    if req.dry_run {
        // A dry run records nothing (sideEffects: NoneOnDryRun): judged against the cache.
        return answer(Ok(decide_with(&state.ledgers.get(&root), &update, &chain).map(|_| None)));
    }
    if !update.from_admission && quantity::grew(&update.new_used, &update.old_used) {
        recount_settled(state, &update)?;
    }
    let decided = state.ledgers.modify(&root, |l| decide_with(l, &update, &chain)).await;
    if !matches!(decided, Ok(Err(Refusal::Exceeded(_)))) {
        return answer(decided);
    }
    // Over a quota by the grants: take back what the other namespaces hold beyond their usage,
    // then decide again against the ledger as stored now (others may have lowered grants too).
    let observed = observed_members(state, &state.ledgers.get(&root));
    reclaim_slack(state, &root, &chain, ns, &observed).await;
    state.ledgers.refresh(&root).await;
    let decided = state.ledgers.modify(&root, |l| decide_with(l, &update, &chain)).await;
    if matches!(decided, Ok(Err(Refusal::Exceeded(_))))
        && ledger::fits_by_usage(&state.ledgers.get(&root), &observed, &update)
    {
        return Err(Denial::try_again(format!(
            "namespace {ns:?}: the usage under its hierarchical quotas leaves room, but other namespaces' grants are still being taken back: try again in a moment"
        )));
    }
    answer(decided)
}

/// The ResourceQuotas of the namespaces of `ledger`, as hns's watch last saw them.
fn observed_members(state: &AppState, ledger: &ledger::Ledger) -> BTreeMap<String, Observed> {
    let forest = state.cache.read();
    ledger
        .namespaces
        .keys()
        .filter_map(|m| {
            let q = forest.observed_quota(m)?;
            let version = q.version()?;
            let observed = Observed { version, used: Some(q.used.clone()), allocation: q.allocation.clone() };
            Some((m.clone(), observed))
        })
        .collect()
}

/// How long after hns saw a ResourceQuota's usage rise a recount may lower it.
const RECOUNT_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Refuses a recount (kube-controller-manager's quota controller) that lowers usage less than
/// [`RECOUNT_SETTLE`] after hns saw it rise. That controller counts from its own cache of the
/// objects: recounting a namespace just after an admission (a deletion there prompts it), it may
/// not have the admitted object yet and write too little, the latent-list race of Kubernetes'
/// quota (kubernetes/kubernetes#24494). Such a count would stay until the next recount and let
/// the grant be taken back while the object exists. The controller retries a refused update with
/// a backoff, by then from a cache that has caught up (its lag is milliseconds on a healthy
/// cluster).
fn recount_settled(state: &AppState, update: &StatusUpdate) -> Result<(), Denial> {
    let settled = state.cache.read().observed_quota(&update.namespace).is_some_and(|q| {
        let version = q.version().unwrap_or(0);
        version >= update.old_version && q.increased_at.is_none_or(|t| t.elapsed() >= RECOUNT_SETTLE)
    });
    if settled {
        return Ok(());
    }
    Err(Denial::try_again(format!(
        "the usage of namespace {:?} rose less than {} s ago; a recount now may miss what was just admitted: recount in a moment",
        update.namespace,
        RECOUNT_SETTLE.as_secs()
    )))
}

/// A decision as the webhook answers it.
fn answer(
    decided: Result<Result<Option<ResourceList>, Refusal>, StoreError>,
) -> Result<Option<ResourceList>, Denial> {
    match decided {
        Ok(Ok(allocation)) => Ok(allocation),
        Ok(Err(Refusal::Exceeded(m))) => Err(Denial::forbidden(m)),
        Ok(Err(r @ Refusal::NotReady { .. })) => Err(Denial::try_again(r.to_string())),
        Ok(Err(r @ Refusal::Unreadable { .. })) => {
            Err(Denial { code: 500, reason: "InternalError", message: r.to_string() })
        }
        Err(e @ StoreError::Contended { .. }) => Err(Denial::try_again(e.to_string())),
        Err(e @ StoreError::Api { .. }) => {
            Err(Denial { code: 500, reason: "InternalError", message: e.to_string() })
        }
    }
}

/// Before refusing an increase over a quota of `chain`, lowers what the other namespaces under
/// those quotas hold beyond their usage as hns last saw it (their grants' headroom, or usage
/// since deleted).
async fn reclaim_slack(
    state: &AppState,
    root: &str,
    chain: &[String],
    ns: &str,
    observed: &BTreeMap<String, Observed>,
) {
    let plan = ledger::slack(&state.ledgers.get(root), observed, chain, ns);
    if plan.is_empty() {
        return;
    }
    if let Err(error) = quota_allocations::lower(&state.client, &state.ledgers, root, plan, 0).await {
        tracing::warn!(%error, namespace = ns, "cannot take back quota grants held beyond their usage");
    }
}

/// Whether oldObject, which has uid `uid`, is the ResourceQuota as stored now. The webhook's
/// endpoint answers anyone who reaches it (as kube-apiserver calls it without a client
/// certificate by default), so oldObject is checked before hns answers from its state: the
/// ledger must not trust a forged usage, and a stranger must learn nothing of a namespace's
/// quotas. The uid, which only those who may read the ResourceQuota know, binds the review to
/// it: a review naming another uid, or a version the ResourceQuota has moved past (or that it
/// never had: gone), cannot commit, and is allowed without a look at anything else, all alike.
/// At the stored uid and version with other usage, the review is refused as forged.
///
/// hns's watch of its ResourceQuotas answers first: at oldObject's uid and version it settles
/// the question without a request, and past that version the update cannot commit. Only when the
/// watch has not yet seen that version is the stored object read.
async fn committed_now(state: &AppState, update: &StatusUpdate, uid: Option<&str>) -> Result<bool, Denial> {
    let Some(uid) = uid else { return Ok(false) };
    let cached = state.cache.read().observed_quota(&update.namespace).map(|q| {
        let version = q.version().unwrap_or(0);
        (q.uid.as_deref() == Some(uid), version, q.used.clone())
    });
    match cached {
        Some((true, version, used)) if version == update.old_version => return checked(&used, update),
        // The ResourceQuota at that version or later is another object, or this one moved on.
        Some((_, version, _)) if version >= update.old_version => return Ok(false),
        _ => {}
    }
    let api: Api<ResourceQuota> = Api::namespaced(state.client.clone(), &update.namespace);
    let stored = api.get_opt(RESOURCE_QUOTA_NAME).await.map_err(|e| {
        Denial::try_again(format!(
            "cannot read ResourceQuota {RESOURCE_QUOTA_NAME} in namespace {:?} to check the update against it: {e}; try again in a moment",
            update.namespace
        ))
    })?;
    let Some(stored) = stored else { return Ok(false) };
    if stored.metadata.uid.as_deref() != Some(uid)
        || resource_version::number(&stored.metadata) != update.old_version
    {
        return Ok(false);
    }
    checked(&used(&stored)?, update)
}

/// Whether oldObject's usage is `stored`, the ResourceQuota's at oldObject's version: if not,
/// the review is forged.
fn checked(stored: &Amounts, update: &StatusUpdate) -> Result<bool, Denial> {
    if !quantity::same(stored, &update.old_used) {
        return Err(Denial {
            code: 400,
            reason: "BadRequest",
            message: "oldObject's status.used is not the stored ResourceQuota's at its resourceVersion"
                .into(),
        });
    }
    Ok(true)
}

/// [`ledger::approve`], after checking that the ledger and hns's forest agree on which quotas
/// cover the namespace (either may be a moment behind the other).
fn decide_with(
    l: &ledger::Ledger,
    update: &StatusUpdate,
    chain: &[String],
) -> Result<(Change, Option<ResourceList>), Refusal> {
    let increases = update.from_admission && update.increases();
    let recorded = l.namespaces.get(&update.namespace).map(|e| e.chain.as_slice());
    if increases && recorded.is_none() && chain.is_empty() {
        return Ok((Change::Keep, None)); // no quota covers it (its ResourceQuota is going away)
    }
    if increases && !chain.is_empty() && recorded != Some(chain) {
        return Err(Refusal::NotReady {
            namespace: update.namespace.clone(),
            why: "hns's view of the quotas covering it is changing".into(),
        });
    }
    match ledger::approve(l, update) {
        Verdict::Allow(Some(grant)) => Ok((Change::Write(grant.next), grant.allocation)),
        Verdict::Allow(None) => Ok((Change::Keep, None)),
        Verdict::Deny(refusal) => Err(refusal),
    }
}

/// A ResourceQuota's `status.used`, exactly.
fn used(rq: &ResourceQuota) -> Result<Amounts, Denial> {
    let list = rq.status.as_ref().and_then(|s| s.used.clone()).unwrap_or_default();
    quantity::parse_list(&list).map_err(|(resource, e)| Denial {
        code: 400,
        reason: "BadRequest",
        message: format!("status.used.{resource}: {e}"),
    })
}

/// `POST /validate-quota-objects`: hns's ResourceQuotas are hns's.
pub async fn validate_objects(state: web::Data<AppState>, review: Review<DynamicObject>) -> HttpResponse {
    let cluster_peer = review.cluster_peer;
    super::answer(review, |request| decide_object(&state, request, cluster_peer).map_err(Denial::forbidden))
}

fn decide_object(
    state: &AppState,
    req: &AdmissionRequest<DynamicObject>,
    cluster_peer: bool,
) -> Result<(), String> {
    let user = req.user_info.username.as_deref().unwrap_or_default();
    if user == state.policy.hns_user {
        return Ok(());
    }
    let ns = req.namespace.clone().unwrap_or_default();
    match req.operation {
        Operation::Delete if super::goes_with_its_namespace(state, user, &ns, cluster_peer) => Ok(()),
        Operation::Create => Err(format!(
            "cannot create a ResourceQuota labelled {HRQ_LABEL}: hns makes them for hierarchical quotas; create a HierarchicalResourceQuota instead, or a ResourceQuota without the label"
        )),
        Operation::Update | Operation::Delete => Err(format!(
            "resourcequotas {:?} in namespace {ns:?} belongs to hns: it enforces the hierarchical quotas covering the namespace; change or delete the HierarchicalResourceQuota instead (kubectl hns hrq -n {ns})",
            req.name
        )),
        Operation::Connect => Ok(()),
    }
}

/// `POST /validate-quota-pending`: kube-apiserver sends creations in namespaces labelled
/// `hnc.x-k8s.io/hrq-pending` only (hns's own skip the webhook, so it can make the
/// ResourceQuota there).
pub async fn validate_pending(review: Review<DynamicObject>) -> HttpResponse {
    super::answer(review, |request| {
        let ns = request.namespace.clone().unwrap_or_default();
        Err(Denial::try_again(pending_message(&ns)))
    })
}

fn pending_message(ns: &str) -> String {
    format!("namespace {ns} is joining a hierarchical quota; hns is setting up its ResourceQuota: try again in a moment")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::quotas::ledger::{Entry, Ledger};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn update(ns: &str) -> StatusUpdate {
        let pods =
            |n: &str| quantity::parse_list(&[("pods".to_string(), Quantity(n.into()))].into()).unwrap();
        StatusUpdate {
            namespace: ns.into(),
            old_version: 5,
            old_used: pods("0"),
            new_used: pods("1"),
            from_admission: true,
        }
    }

    fn ledger() -> Ledger {
        Ledger {
            quotas: [("acme/q".to_string(), [("pods".to_string(), Quantity("2".into()))].into())].into(),
            namespaces: [(
                "a".to_string(),
                Entry {
                    chain: vec!["acme/q".into()],
                    granted: Some([("pods".to_string(), Quantity("1".into()))].into()),
                    approvals: 0,
                },
            )]
            .into(),
        }
    }

    #[test]
    fn the_ledger_and_the_forest_must_agree_on_the_quotas() {
        let chain = vec!["acme/q".to_string()];
        let (change, allocation) = decide_with(&ledger(), &update("a"), &chain).unwrap();
        assert!(matches!(change, Change::Write(_)), "granted and counted");
        assert_eq!(allocation, Some([("pods".to_string(), Quantity("1".into()))].into()));
        let other = vec!["acme/other".to_string()];
        assert!(matches!(decide_with(&ledger(), &update("a"), &other), Err(Refusal::NotReady { .. })));
        let none: Vec<String> = Vec::new();
        assert_eq!(decide_with(&Ledger::default(), &update("lone"), &none), Ok((Change::Keep, None)));
        // The forest no longer sees a quota but the ledger does: the ledger decides.
        assert!(matches!(decide_with(&ledger(), &update("a"), &none), Ok((Change::Write(_), Some(_)))));
    }

    /// `request` as kube-apiserver sends it, in its AdmissionReview, decoded as the webhooks do.
    fn admission_request<T: kube::Resource + serde::de::DeserializeOwned>(
        request: serde_json::Value,
    ) -> AdmissionRequest<T> {
        let review: kube::core::admission::AdmissionReview<T> = serde_json::from_value(serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request,
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    #[test]
    fn the_allocation_is_raised_by_a_patch_of_the_update() {
        let request: AdmissionRequest<ResourceQuota> = admission_request(serde_json::json!({
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "ResourceQuota"},
            "resource": {"group": "", "version": "v1", "resource": "resourcequotas"},
            "subResource": "status", "name": RESOURCE_QUOTA_NAME, "namespace": "a",
            "operation": "UPDATE", "userInfo": {"username": QUOTA_ADMISSION_USER},
            "object": {"metadata": {"name": RESOURCE_QUOTA_NAME, "namespace": "a"}},
        }));
        let response = raise(&request, &[("pods".to_string(), Quantity("3".into()))].into()).unwrap();
        let json = serde_json::to_value(response.into_review()).unwrap();
        // kube-rs writes the patch's bytes as a JSON array, which kube-apiserver reads as []byte.
        let bytes = json["response"]["patch"].as_array().unwrap().iter();
        let patch: Vec<u8> = bytes.map(|b| b.as_u64().unwrap() as u8).collect();
        assert_eq!(
            String::from_utf8(patch).unwrap(),
            r#"[{"op":"add","path":"/metadata/annotations","value":{"hnc.x-k8s.io/hrq-allocation":"pods=3"}}]"#
        );
    }

    #[test]
    fn a_try_again_denial_tells_the_client_when() {
        let request: AdmissionRequest<DynamicObject> = admission_request(serde_json::json!({
            "uid": "u2", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "settings", "namespace": "a", "operation": "CREATE", "userInfo": {},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}},
        }));
        let answer = |denial| {
            let body = actix_web::body::to_bytes(reply(&request, Err(denial)).into_body());
            let body = futures::executor::block_on(body).unwrap();
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()["response"]["status"].clone()
        };
        let status = answer(Denial::try_again(pending_message("a")));
        assert_eq!(status["code"], 429);
        assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");
        assert_eq!(status["details"]["kind"], "configmaps", "{status}");
        let status = answer(Denial::forbidden("no".into()));
        assert_eq!(status["code"], 403);
        assert_eq!(status.get("details"), None, "no retry for a refusal: {status}");
    }

    #[test]
    fn the_pending_message_says_what_to_do() {
        assert_eq!(
            pending_message("team-a"),
            "namespace team-a is joining a hierarchical quota; hns is setting up its ResourceQuota: try again in a moment"
        );
    }
}
