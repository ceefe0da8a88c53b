//! `/validate-sources`: a source whose copies would overwrite objects of descendants' own is
//! refused, as HNC's object webhook refuses it ("would overwrite objects in the following
//! descendant namespace(s): …", 409). Without this, the source would be written and the clash
//! reported afterwards as an event (`CannotPropagateObject`), as it still is for objects that
//! were there before hns, or written while hns could not answer (the entry fails open).
//!
//! kube-apiserver calls this entry (`sources.hns.hnc.x-k8s.io`, config/base/webhook.yaml) only
//! for the kinds that propagate, in namespaces that take part in a hierarchy, and not for
//! copies: the entry's `rules` are kept by [`keep_rules`] from the HNCConfiguration, as HNC
//! rewrites its own webhook's rules, so that creating a Pod or a ConfigMap that does not
//! propagate never waits on hns. The manifests ship the entry without rules (it matches
//! nothing until hns fills them in), so that `kubectl apply` and Helm's server-side apply never
//! fight hns over them. Only kube-apiserver's calls with a certificate of the cluster's are
//! judged ([`validate_sources`]).

use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpResponse};
use futures::StreamExt;
use hns_api::config::Mode;
use hns_api::HNCConfigurationSpec;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::admission::AdmissionRequest;
use serde_json::{json, Value};

use super::review::Review;
use super::{answer, users_source, Denial};
use crate::auth::certs::dynamic_api;
use crate::propagation::{overwrites, ENFORCED};
use crate::state::AppState;
use crate::store::config_store::ConfigStore;

/// The webhook entry whose rules [`keep_rules`] keeps.
pub const ENTRY: &str = "sources.hns.hnc.x-k8s.io";

/// `POST /validate-sources`. The answer depends on what descendants hold, which nobody may ask
/// hns about by a review they made up: a caller without a certificate of the cluster's (see
/// README, Security: kube-apiserver presents one when its admission configuration gives it) is
/// allowed, with the same answer whatever the review names. Without such a certificate, then,
/// nothing is refused here; the copy still never overwrites the object, and hns reports the
/// clash as an event.
pub async fn validate_sources(state: web::Data<AppState>, review: Review<DynamicObject>) -> HttpResponse {
    let from_the_cluster = review.cluster_peer;
    answer(review, |request| if from_the_cluster { decide(&state, request) } else { Ok(()) })
}

fn decide(state: &AppState, req: &AdmissionRequest<DynamicObject>) -> Result<(), Denial> {
    let Some((new, ns)) = users_source(state, req) else { return Ok(()) };
    let in_namespace = |o: &DynamicObject| {
        let mut o = o.clone();
        o.metadata.namespace = Some(ns.to_string());
        o
    };
    // A snapshot, not the cache's lock: the check copies objects, and writers must not wait.
    let forest = state.cache.snapshot();
    let found = state.propagation.overwrites_of_source(
        &forest,
        &state.policy,
        (&req.resource.group, &req.resource.resource),
        &in_namespace(new),
        req.old_object.as_ref().map(in_namespace).as_ref(),
    );
    overwrites::source_refusal(&found)
        .map_or(Ok(()), |message| Err(Denial { code: 409, reason: "Conflict", message }))
}

/// The entry's rules for `spec`: create and update of every kind in `Propagate` or
/// `AllowPropagate` mode, Roles and RoleBindings always.
pub fn rules(spec: &HNCConfigurationSpec) -> Vec<Value> {
    let mut kinds: Vec<(String, String)> =
        ENFORCED.iter().map(|(g, r)| (g.to_string(), r.to_string())).collect();
    for r in &spec.resources {
        let kind = (r.group.clone(), r.resource.clone());
        if matches!(Mode::effective(r.mode.as_deref()), Mode::Propagate | Mode::AllowPropagate)
            && !kinds.contains(&kind)
        {
            kinds.push(kind);
        }
    }
    kinds.sort();
    kinds
        .into_iter()
        .map(|(group, resource)| {
            json!({"apiGroups": [group], "apiVersions": ["*"], "resources": [resource],
                "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"})
        })
        .collect()
}

/// Keeps the rules of [`ENTRY`] in the ValidatingWebhookConfiguration `webhook` equal to
/// [`rules`] of the configuration, once it is loaded (not from the empty one a replica starts
/// with, which would drop every configured kind for a moment), on every change of it and of the
/// webhook configuration (which someone may replace, with the rules empty again), watched by
/// name: at rest this costs no request. Every replica does this; they compute the same rules from the same
/// configuration, and a write that races another's is tried again at once.
pub async fn keep_rules(client: kube::Client, webhook: String, config: Arc<ConfigStore>) {
    let api = dynamic_api(
        &client,
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    );
    let mut spec = config.spec.subscribe();
    let mut replaced = crate::watching::by_name(api.clone(), &webhook);
    while !config.is_synced() {
        tokio::select! {
            changed = spec.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    loop {
        let wanted = rules(&spec.borrow_and_update());
        match set_rules(&api, &webhook, &wanted).await {
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, %webhook, entry = ENTRY, "cannot set the sources webhook's rules; retrying")
            }
            Ok(()) => {}
        }
        tokio::select! {
            changed = spec.changed() => if changed.is_err() { return },
            _ = replaced.next() => {}
        }
    }
}

/// Replaces the rules of [`ENTRY`] where they differ (the replace carries the resourceVersion
/// read, so a concurrent edit is not lost). An install without the entry is left as it is.
async fn set_rules(api: &Api<DynamicObject>, webhook: &str, wanted: &[Value]) -> kube::Result<()> {
    let mut config = api.get(webhook).await?;
    let Some(entry) = config.data["webhooks"]
        .as_array_mut()
        .and_then(|entries| entries.iter_mut().find(|w| w["name"] == ENTRY))
    else {
        return Ok(());
    };
    if entry["rules"].as_array().map(Vec::as_slice).unwrap_or_default() == wanted {
        return Ok(());
    }
    entry["rules"] = Value::Array(wanted.to_vec());
    api.replace(webhook, &PostParams::default(), &config).await?;
    tracing::info!(%webhook, entry = ENTRY, kinds = wanted.len(), "sources webhook's rules updated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_cover_the_kinds_that_propagate_and_roles_always() {
        let spec: HNCConfigurationSpec = serde_json::from_value(json!({"resources": [
            {"resource": "secrets", "mode": "Propagate"},
            {"resource": "configmaps", "mode": "AllowPropagate"},
            {"group": "networking.k8s.io", "resource": "networkpolicies", "mode": "Ignore"},
            {"resource": "limitranges", "mode": "Remove"},
        ]}))
        .unwrap();
        let kinds: Vec<String> = rules(&spec)
            .iter()
            .map(|r| {
                format!("{}/{}", r["apiGroups"][0].as_str().unwrap(), r["resources"][0].as_str().unwrap())
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "/configmaps",
                "/secrets",
                "rbac.authorization.k8s.io/rolebindings",
                "rbac.authorization.k8s.io/roles"
            ]
        );
        assert_eq!(rules(&spec)[0]["operations"], json!(["CREATE", "UPDATE"]));
    }
}
