//! Admission webhooks that fail closed with their backend down: they reject the namespace
//! controller's DELETEs of the content, and the remedies' PATCHes of finalizers.

use super::{listing, single, Cause, CauseKind};
use crate::conditions::{self, CONTENT_FAILURE};
use crate::evidence::{Evidence, Leftover, NamespaceState, Webhook};
use crate::remedy::{Action, RemedyId};
use crate::webhooks::{backend_down, backend_state, intercepts};

/// Webhooks that block this namespace: named by its content-failure condition as failing, or
/// failing closed with a dead backend while intercepting the calls its leftovers need.
pub fn dead_webhooks(ns: &NamespaceState, ev: &Evidence) -> Vec<Cause> {
    let failure = conditions::failing(&ns.conditions, CONTENT_FAILURE);
    let named = failure.map(|c| conditions::failed_webhooks(&c.message)).unwrap_or_default();
    let leftovers: Vec<&Leftover> = ev.leftovers_in(&ns.name).collect();
    ev.webhooks
        .iter()
        .filter(|w| w.fails_closed)
        .filter_map(|w| {
            // DELETE: what the namespace controller does to content never deleted;
            // UPDATE: what removing a finalizer from deleted content is.
            let deletes = blocked(w, "DELETE", &leftovers, ns, |l| l.deletion_timestamp.is_none());
            let updates = blocked(w, "UPDATE", &leftovers, ns, |l| {
                l.deletion_timestamp.is_some() && !l.finalizers.is_empty()
            });
            let is_named = named.contains(&w.name);
            let down = backend_down(w) && !(deletes.is_empty() && updates.is_empty());
            (is_named || down).then(|| {
                let mut evidence = vec![format!(
                    "{} {}, webhook {}: failurePolicy Fail, {}",
                    configuration_kind(w),
                    w.configuration,
                    w.name,
                    backend_state(w)
                )];
                if is_named {
                    let message = failure.map(|c| c.message.as_str()).unwrap_or_default();
                    evidence.push(format!("condition {CONTENT_FAILURE}: {message}"));
                }
                for (op, objects) in [("DELETE", deletes), ("UPDATE", updates)] {
                    if !objects.is_empty() {
                        evidence.push(format!(
                            "it intercepts {op} of {} object(s) here: {}",
                            objects.len(),
                            listing(&objects, 5)
                        ));
                    }
                }
                webhook_cause(w, evidence)
            })
        })
        .collect()
}

fn blocked(
    w: &Webhook,
    operation: &str,
    leftovers: &[&Leftover],
    ns: &NamespaceState,
    relevant: impl Fn(&Leftover) -> bool,
) -> Vec<String> {
    leftovers
        .iter()
        .filter(|l| relevant(l) && intercepts(w, operation, l, &ns.labels))
        .map(|l| l.display_name())
        .collect()
}

fn configuration_kind(w: &Webhook) -> &'static str {
    if w.mutating {
        "MutatingWebhookConfiguration"
    } else {
        "ValidatingWebhookConfiguration"
    }
}

fn webhook_cause(w: &Webhook, evidence: Vec<String>) -> Cause {
    let what = if w.siblings == 1 {
        format!("delete {} {}", configuration_kind(w), w.configuration)
    } else {
        format!("remove webhook {} from {}", w.name, w.configuration)
    };
    Cause {
        kind: CauseKind::DeadWebhook,
        summary: format!("admission webhook {} fails closed and cannot be called", w.name),
        evidence,
        advice: format!(
            "Repair its backend ({}), or remove the webhook if its component was uninstalled.",
            backend_state(w)
        ),
        risk: "The checks this webhook makes stop until its component is reinstalled (whose installer may re-create it): requests it would have rejected are admitted meanwhile.".into(),
        remedy: single(
            RemedyId::RemoveWebhook {
                mutating: w.mutating,
                configuration: w.configuration.clone(),
                webhook: w.name.clone(),
            },
            what,
            Action::RemoveWebhook {
                mutating: w.mutating,
                configuration: w.configuration.clone(),
                uid: w.configuration_uid.clone(),
                resource_version: w.configuration_version.clone(),
                index: w.index,
                webhook: w.name.clone(),
                only: w.siblings == 1,
            },
        ),
    }
}

/// The content-failure condition is set, and neither a webhook nor hns's subnamespaces
/// explain it.
pub fn unexplained_content_failure(
    ns: &NamespaceState,
    webhooks: &[Cause],
    subnamespaces: &[Cause],
) -> Option<Cause> {
    let c = conditions::failing(&ns.conditions, CONTENT_FAILURE)?;
    if !webhooks.is_empty() || !subnamespaces.is_empty() {
        return None;
    }
    Some(Cause::advice_only(
        CauseKind::ContentDeletionFailure,
        "the namespace controller could not delete some content",
        vec![c.quoted()],
        "The message names what refused the DELETE calls (a webhook that denies them, an aggregated API that fails): fix that.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::fixtures::*;
    use crate::evidence::{Rule, ServiceHealth, ServiceRef, WebhookClient};

    fn dead_hook(health: ServiceHealth) -> Webhook {
        Webhook {
            configuration: "deny-configmaps".into(),
            configuration_version: "11".into(),
            configuration_uid: "uid-cfg".into(),
            siblings: 1,
            name: "deny.example.com".into(),
            fails_closed: true,
            client: WebhookClient::Service(
                ServiceRef { namespace: "default".into(), name: "gone".into(), port: Some(443) },
                health,
            ),
            rules: vec![Rule {
                operations: vec!["DELETE".into()],
                api_groups: vec!["".into()],
                api_versions: vec!["v1".into()],
                resources: vec!["configmaps".into()],
                scope: "*".into(),
            }],
            ..Default::default()
        }
    }

    fn with_configmap(hook: Webhook) -> (NamespaceState, Evidence) {
        let ns = terminating("ns");
        let mut ev = evidence(vec![ns.clone()]);
        ev.leftovers.push(leftover(core("configmaps", "ConfigMap"), "ns", "kube-root-ca.crt"));
        ev.webhooks.push(hook);
        (ns, ev)
    }

    #[test]
    fn a_dead_webhook_that_intercepts_leftovers_blocks() {
        let (ns, ev) = with_configmap(dead_hook(ServiceHealth::Missing));
        let causes = dead_webhooks(&ns, &ev);
        assert_eq!(causes.len(), 1);
        let c = &causes[0];
        assert!(c.evidence[0].contains("Service default/gone:443 does not exist"), "{c:?}");
        assert!(c.evidence[1].contains("DELETE of 1 object(s) here: configmaps/kube-root-ca.crt"));
        assert!(matches!(&c.remedy.as_ref().unwrap().actions[0], Action::RemoveWebhook { only: true, .. }));
        assert_eq!(
            c.remedy.as_ref().unwrap().id,
            RemedyId::RemoveWebhook {
                mutating: false,
                configuration: "deny-configmaps".into(),
                webhook: "deny.example.com".into()
            }
        );
        assert!(unexplained_content_failure(&ns, &causes, &[]).is_none());
    }

    #[test]
    fn a_healthy_or_open_webhook_does_not() {
        let (ns, ev) = with_configmap(dead_hook(ServiceHealth::Reachable));
        assert!(dead_webhooks(&ns, &ev).is_empty());
        let mut open = dead_hook(ServiceHealth::Missing);
        open.fails_closed = false;
        let (ns, ev) = with_configmap(open);
        assert!(dead_webhooks(&ns, &ev).is_empty());
    }

    #[test]
    fn a_webhook_named_by_the_condition_blocks_even_behind_a_url() {
        let mut hook = dead_hook(ServiceHealth::Missing);
        hook.client = WebhookClient::Url("https://x.example/v".into());
        hook.siblings = 2;
        let (mut ns, mut ev) = with_configmap(hook);
        ns.conditions = vec![cond(
            CONTENT_FAILURE,
            "True",
            "Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook \"deny.example.com\": connection refused",
        )];
        ev.namespaces = vec![ns.clone()];
        let causes = dead_webhooks(&ns, &ev);
        assert_eq!(causes.len(), 1);
        assert!(causes[0].remedy.as_ref().unwrap().summary.starts_with("remove webhook"));
    }

    #[test]
    fn other_content_failures_are_reported_with_their_message() {
        let mut ns = terminating("ns");
        ns.conditions = vec![cond(CONTENT_FAILURE, "True", "something else")];
        let c = unexplained_content_failure(&ns, &[], &[]).unwrap();
        assert!(c.evidence[0].ends_with("something else"));
    }
}
