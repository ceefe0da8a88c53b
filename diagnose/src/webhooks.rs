//! Which admission webhooks can reject the calls a namespace deletion makes: the namespace
//! controller's DELETEs of the content, and the remedies' PATCHes of finalizers.

use std::collections::BTreeMap;

use super::evidence::{Leftover, Rule, Selector, ServiceHealth, Webhook, WebhookClient};

/// Whether the webhook's backend is known to be down: its Service is missing or has no ready
/// endpoint. URL webhooks cannot be judged from the API.
pub fn backend_down(webhook: &Webhook) -> bool {
    matches!(webhook.client, WebhookClient::Service(_, ServiceHealth::Missing | ServiceHealth::NoEndpoints))
}

/// Why the backend is down, in words.
pub fn backend_state(webhook: &Webhook) -> String {
    match &webhook.client {
        WebhookClient::Service(svc, ServiceHealth::Missing) => format!("Service {svc} does not exist"),
        WebhookClient::Service(svc, ServiceHealth::NoEndpoints) => {
            format!("Service {svc} has no ready endpoints")
        }
        WebhookClient::Service(svc, ServiceHealth::Reachable) => {
            format!("Service {svc} has ready endpoints")
        }
        WebhookClient::Service(svc, ServiceHealth::Unknown) => {
            format!("Service {svc} could not be read")
        }
        WebhookClient::Url(url) => format!("URL {url}"),
    }
}

/// Whether `webhook` intercepts `operation` on `object` in a namespace labelled
/// `namespace_labels`.
pub fn intercepts(
    webhook: &Webhook,
    operation: &str,
    object: &Leftover,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    let rules_match = webhook.rules.iter().any(|r| rule_matches(r, operation, object));
    let ns_match = webhook.namespace_selector.as_ref().is_none_or(|s| selects(s, namespace_labels));
    let obj_match = webhook.object_selector.as_ref().is_none_or(|s| selects(s, &object.labels));
    rules_match && ns_match && obj_match
}

fn rule_matches(rule: &Rule, operation: &str, object: &Leftover) -> bool {
    let any = |list: &[String], want: &str| list.iter().any(|v| v == "*" || v == want);
    let resource = rule.resources.iter().any(|r| r == "*" || r == "*/*" || *r == object.resource.plural);
    any(&rule.operations, operation)
        && any(&rule.api_groups, &object.resource.group)
        && any(&rule.api_versions, &object.resource.version)
        && resource
        && (rule.scope.is_empty() || rule.scope == "*" || rule.scope == "Namespaced")
}

/// Whether a label selector selects a set of labels (an empty selector selects everything).
pub fn selects(selector: &Selector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector.labels.iter().all(|(k, v)| labels.get(k) == Some(v));
    let expressions_ok = selector.expressions.iter().all(|r| {
        let value = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| r.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            // The API server rejects other operators; match nothing rather than guess.
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Requirement, ResourceType, ServiceRef};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn configmap() -> Leftover {
        Leftover {
            resource: ResourceType {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
                kind: "ConfigMap".into(),
            },
            namespace: "ns".into(),
            name: "kube-root-ca.crt".into(),
            labels: labels(&[("app", "x")]),
            ..Default::default()
        }
    }

    fn hook(operations: &[&str], resources: &[&str]) -> Webhook {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Webhook {
            name: "deny.example.com".into(),
            fails_closed: true,
            client: WebhookClient::Service(
                ServiceRef { namespace: "default".into(), name: "gone".into(), port: Some(443) },
                ServiceHealth::Missing,
            ),
            rules: vec![Rule {
                operations: s(operations),
                api_groups: s(&[""]),
                api_versions: s(&["v1"]),
                resources: s(resources),
                scope: "*".into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn matches_operation_and_resource() {
        let cm = configmap();
        let ns = labels(&[]);
        assert!(intercepts(&hook(&["DELETE"], &["configmaps"]), "DELETE", &cm, &ns));
        assert!(intercepts(&hook(&["*"], &["*"]), "DELETE", &cm, &ns));
        assert!(!intercepts(&hook(&["CREATE"], &["configmaps"]), "DELETE", &cm, &ns));
        assert!(!intercepts(&hook(&["DELETE"], &["secrets"]), "DELETE", &cm, &ns));
        assert!(!intercepts(&hook(&["DELETE"], &["configmaps/status"]), "DELETE", &cm, &ns));
    }

    #[test]
    fn honours_namespace_and_object_selectors() {
        let cm = configmap();
        let mut h = hook(&["DELETE"], &["configmaps"]);
        h.namespace_selector = Some(Selector { labels: labels(&[("team", "a")]), ..Default::default() });
        assert!(intercepts(&h, "DELETE", &cm, &labels(&[("team", "a")])));
        assert!(!intercepts(&h, "DELETE", &cm, &labels(&[("team", "b")])));
        h.namespace_selector = None;
        h.object_selector = Some(Selector {
            expressions: vec![Requirement {
                key: "app".into(),
                operator: "NotIn".into(),
                values: vec!["x".into()],
            }],
            ..Default::default()
        });
        assert!(!intercepts(&h, "DELETE", &cm, &labels(&[])));
    }

    #[test]
    fn evaluates_every_selector_operator() {
        let l = labels(&[("a", "1")]);
        let req = |op: &str, values: &[&str]| Selector {
            expressions: vec![Requirement {
                key: "a".into(),
                operator: op.into(),
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            ..Default::default()
        };
        assert!(selects(&req("In", &["1", "2"]), &l));
        assert!(!selects(&req("In", &["2"]), &l));
        assert!(selects(&req("NotIn", &["2"]), &l));
        assert!(selects(&req("Exists", &[]), &l));
        assert!(!selects(&req("DoesNotExist", &[]), &l));
        assert!(!selects(&req("Bogus", &[]), &l));
        assert!(selects(&Selector::default(), &l));
    }

    #[test]
    fn judges_the_backend() {
        let mut h = hook(&["DELETE"], &["configmaps"]);
        assert!(backend_down(&h));
        assert_eq!(backend_state(&h), "Service default/gone:443 does not exist");
        h.client = WebhookClient::Url("https://example.com/x".into());
        assert!(!backend_down(&h));
    }
}
