//! A new namespace's labels, given inside kube-apiserver: the MutatingAdmissionPolicy
//! `hns-namespace-labels` and its binding, which hns keeps as it wants them.
//!
//! Every namespace hns manages carries its own tree label at depth 0 and
//! `hnc.x-k8s.io/included-namespace` ([`plan::lone_labels`]). hns's mutating webhook
//! (`namespace-labels.hns.hnc.x-k8s.io`) can give them in the creating request, but that is a
//! round trip from kube-apiserver to hns for every namespace anyone creates: measured, a third
//! fewer namespaces created per second and a third more kube-apiserver CPU for each
//! (`hns-bench tax`). A MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes
//! 1.36 and later) gives the same labels in kube-apiserver's own process, without a round trip.
//! It is not free: kube-apiserver's CPU profile (1.37, 2026-11-29) puts the policy at about
//! 0.3 ms of kube-apiserver CPU per namespace created, and the garbage it and the webhook's
//! match conditions leave at 0.2 ms more: most of the 0.6 ms hns's labels cost (profile figures;
//! docs/install.md, "What installing hns costs your cluster").
//!
//! The policy covers only the common case, so that its few lines of CEL need no judgement: a
//! namespace with a name (not `generateName`), not excluded, created by anyone but hns, with
//! no label or annotation of hns's at all. Everything else still goes to the webhook, which
//! checks it and labels it: the webhook's matchConditions skip exactly the namespaces that carry
//! what the policy gives and nothing else of hns's (`config/base/mutating-webhook.yaml`). Nor
//! does it cover a name that an external hierarchy reserves
//! ([`crate::hierarchy::forest::Forest::reserved_by`]): its creation goes to the webhook, which
//! refuses it. The leader rewrites the policy when that list changes.
//!
//! Why hns writes the policy rather than the manifests: one manifest installs hns on every
//! supported Kubernetes version (kubectl refuses the whole kind where it is not served, and
//! before 1.36 it is not), and the policy's list of excluded namespaces and hns's user name come
//! from hns's flags, so they cannot drift from them. The leader applies both objects when it
//! starts leading and again whenever one of them, or the MutatingWebhookConfiguration hns, changes;
//! at rest this costs nothing (three watches by name). Both are owned by the
//! MutatingWebhookConfiguration, so the garbage collector removes them when hns is uninstalled;
//! without that configuration hns writes no policy. Where the kind is not served, or hns may not
//! write it, the webhook alone labels new namespaces, as before. With
//! `--label-lone-namespaces=false` lone namespaces get no labels, and the leader deletes both.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::hierarchy::policy::Policy;

/// The name of the policy and of its binding.
pub const NAME: &str = "hns-namespace-labels";
/// Group and version of the policy's kind.
const GROUP: &str = "admissionregistration.k8s.io";
const VERSION: &str = "v1";
/// Kinds (and plurals) of the three objects involved.
const WEBHOOKS: (&str, &str) = ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations");
const POLICIES: (&str, &str) = ("MutatingAdmissionPolicy", "mutatingadmissionpolicies");
const BINDINGS: (&str, &str) = ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings");
/// Field manager of hns's applies.
const MANAGER: &str = "hns";
/// After a failed apply, the next try.
const RETRY: Duration = Duration::from_secs(30);
/// Events of one change (the three watches, our own apply) are taken together.
const SETTLE: Duration = Duration::from_millis(500);

/// Keeps the policy and its binding while this replica leads.
pub struct LabelPolicy {
    pub client: Client,
    pub policy: Policy,
    /// Name of hns's MutatingWebhookConfiguration, which owns both objects.
    pub webhook: String,
    /// The names external hierarchies reserve ([`crate::store::cache::Cache::reserved_names`]):
    /// the policy does not match their creation, so that it goes to hns's webhook, which
    /// refuses it.
    pub reserved: watch::Receiver<Vec<String>>,
}

impl LabelPolicy {
    /// Runs until shutdown; does nothing where kube-apiserver does not serve the kind.
    pub async fn run(self, mut leading: watch::Receiver<bool>) {
        loop {
            if !wait_to_lead(&mut leading).await {
                return;
            }
            match self.served().await {
                Ok(true) => self.keep_while_leading(&mut leading).await,
                Ok(false) => {
                    tracing::info!("kube-apiserver serves no MutatingAdmissionPolicy {VERSION} (Kubernetes before 1.36): hns's webhook labels new namespaces");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read kube-apiserver's discovery; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    /// Whether kube-apiserver serves MutatingAdmissionPolicies in [`VERSION`].
    async fn served(&self) -> kube::Result<bool> {
        let resources = self.client.list_api_group_resources(&format!("{GROUP}/{VERSION}")).await?;
        Ok(resources.resources.iter().any(|r| r.name == POLICIES.1))
    }

    async fn keep_while_leading(&self, leading: &mut watch::Receiver<bool>) {
        let mut changes = self.changes();
        loop {
            // After a failure, the next try comes after RETRY whatever the watches say (they
            // fail too, for example where hns may not read the policy).
            let wake = async {
                match self.apply().await {
                    Ok(()) => drop(changes.next().await),
                    Err(error) => {
                        tracing::warn!(%error, policy = NAME, "cannot keep the namespace-labels admission policy as hns wants it (hns's webhook checks and labels new namespaces meanwhile); retrying in {}s", RETRY.as_secs());
                        tokio::time::sleep(RETRY).await
                    }
                }
            };
            tokio::select! {
                () = wake => {}
                changed = leading.changed() => if changed.is_err() || !*leading.borrow() { return },
            }
            tokio::time::sleep(SETTLE).await;
            while changes.next().now_or_never().flatten().is_some() {}
        }
    }

    /// The policy, its binding and their owner changed (or their watches began): merged.
    fn changes(&self) -> BoxStream<'static, ()> {
        let reserved = futures::stream::unfold(self.reserved.clone(), |mut names| async move {
            names.changed().await.ok().map(|()| ((), names))
        });
        futures::stream::select_all([
            crate::watching::by_name(api(&self.client, WEBHOOKS), &self.webhook),
            crate::watching::by_name(api(&self.client, POLICIES), NAME),
            crate::watching::by_name(api(&self.client, BINDINGS), NAME),
            reserved.boxed(),
        ])
        .boxed()
    }

    /// Applies both objects as hns wants them (no write when they already are), owned by the
    /// webhook configuration; none while it does not exist. With `--label-lone-namespaces=false`
    /// there is nothing to give, and both are deleted.
    async fn apply(&self) -> kube::Result<()> {
        if !self.policy.label_lone_namespaces {
            for kinds in [BINDINGS, POLICIES] {
                match api(&self.client, kinds).delete(NAME, &Default::default()).await {
                    Ok(_) => tracing::info!(
                        kind = kinds.0,
                        name = NAME,
                        "deleted: lone namespaces are not labelled"
                    ),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(());
        }
        let Some(owner) = api(&self.client, WEBHOOKS).get_opt(&self.webhook).await? else {
            return Ok(());
        };
        let owner = owner_reference(&self.webhook, owner.metadata.uid.as_deref().unwrap_or_default());
        let params = PatchParams::apply(MANAGER).force();
        let policy = policy_object(&self.policy, &owner, &self.reserved.borrow());
        api(&self.client, POLICIES).patch(NAME, &params, &Patch::Apply(policy)).await?;
        api(&self.client, BINDINGS).patch(NAME, &params, &Patch::Apply(binding_object(&owner))).await?;
        Ok(())
    }
}

/// Waits until `leading` says so; false once its sender is gone (shutdown).
async fn wait_to_lead(leading: &mut watch::Receiver<bool>) -> bool {
    while !*leading.borrow_and_update() {
        if leading.changed().await.is_err() {
            return false;
        }
    }
    true
}

/// The cluster-scoped objects of `kind` in admissionregistration.k8s.io/v1.
fn api(client: &Client, (kind, plural): (&str, &str)) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, VERSION, kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn owner_reference(webhook: &str, uid: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": WEBHOOKS.0,
        "name": webhook,
        "uid": uid,
    })
}

/// `s` as a CEL string literal (CEL's double-quoted strings take JSON's escapes).
fn cel_string(s: &str) -> String {
    Value::from(s).to_string()
}

/// The policy: the labels of [`crate::hierarchy::plan::lone_labels`], in CEL, for every new
/// namespace but those named `reserved`.
fn policy_object(policy: &Policy, owner: &Value, reserved: &[String]) -> Value {
    let mut object = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": POLICIES.0,
        "metadata": {"name": NAME, "ownerReferences": [owner]},
        "spec": {
            // A namespace the policy cannot label is labelled by the webhook, or the controller.
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["namespaces"],
            }]},
            "matchConditions": [
                {"name": "not-hns-itself", "expression": format!("request.userInfo.username != {}", cel_string(&policy.hns_user))},
                {"name": "named", "expression": "object.metadata.name != ''"},
                {"name": "managed", "expression": managed_expression(policy)},
                {"name": "no-hns-keys", "expression": concat!(
                    "!(has(object.metadata.labels) && object.metadata.labels.exists(k, k.contains('hnc.x-k8s.io'))) && ",
                    "!(has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.contains('hnc.x-k8s.io')))",
                )},
            ],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": labels_patch()}}],
        },
    });
    if !reserved.is_empty() {
        let names: Vec<String> = reserved.iter().map(|n| cel_string(n)).collect();
        let condition = json!({"name": "not-reserved", "expression": format!("!(object.metadata.name in [{}])", names.join(", "))});
        if let Some(conditions) = object["spec"]["matchConditions"].as_array_mut() {
            conditions.push(condition);
        }
    }
    object
}

/// The mutation, in CEL: a JSON Patch that adds the two labels (to the labels there are, or as
/// the whole map where there are none). A JSON Patch rather than an apply configuration: measured
/// with kube-apiserver's CPU profile (1.37), the policy cost a third to a half more with an apply
/// configuration (its structured merge), and left more garbage to collect.
fn labels_patch() -> String {
    let tree_label = format!("object.metadata.name + {}", cel_string(hns_api::keys::TREE_LABEL_SUFFIX));
    let included = hns_api::keys::INCLUDED_NAMESPACE;
    let included_path = cel_string(&format!("/metadata/labels/{}", json_pointer_escape(included)));
    let included = cel_string(included);
    format!(
        "has(object.metadata.labels) ? [\
         JSONPatch{{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey({tree_label}), value: '0'}}, \
         JSONPatch{{op: 'add', path: {included_path}, value: 'true'}}] : \
         [JSONPatch{{op: 'add', path: '/metadata/labels', value: {{{tree_label}: '0', {included}: 'true'}}}}]"
    )
}

/// `key` as one reference token of a JSON Pointer (RFC 6901): `~` and `/` escaped.
fn json_pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// CEL for "hns manages the namespace": not listed as excluded and, with
/// `--included-namespace-regex`, matching it (CEL's `matches` is RE2, the syntax of Rust's regex
/// crate but for look-around and backreferences, which neither has).
fn managed_expression(policy: &Policy) -> String {
    let excluded: Vec<String> = policy.excluded().map(cel_string).collect();
    let listed = format!("!(object.metadata.name in [{}])", excluded.join(", "));
    match policy.included_pattern() {
        Some(pattern) => format!("{listed} && object.metadata.name.matches({})", cel_string(pattern)),
        None => listed,
    }
}

/// The binding: the policy, everywhere.
fn binding_object(owner: &Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": BINDINGS.0,
        "metadata": {"name": NAME, "ownerReferences": [owner]},
        "spec": {"policyName": NAME},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::policy::testing::policy;

    fn conditions(p: &Value) -> Vec<(String, String)> {
        p["spec"]["matchConditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].as_str().unwrap().to_string(), c["expression"].as_str().unwrap().to_string()))
            .collect()
    }

    #[test]
    fn the_policy_speaks_for_hns_flags() {
        let p = policy_object(&policy(), &owner_reference("hns", "u-1"), &[]);
        let c = conditions(&p);
        let managed = &c.iter().find(|(n, _)| n == "managed").unwrap().1;
        for ns in crate::hierarchy::policy::DEFAULT_EXCLUDED {
            assert!(managed.contains(&format!("\"{ns}\"")), "{ns} is excluded: {managed}");
        }
        let hns = &c.iter().find(|(n, _)| n == "not-hns-itself").unwrap().1;
        assert!(hns.ends_with(&format!("\"{}\"", policy().hns_user)), "{hns}");
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "u-1");
    }

    #[test]
    fn the_policy_sets_exactly_a_lone_namespaces_labels() {
        let p = policy_object(&policy(), &owner_reference("hns", "u-1"), &[]);
        assert_eq!(p["spec"]["mutations"][0]["patchType"], "JSONPatch");
        let expression = p["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap();
        assert_eq!(
            expression,
            "has(object.metadata.labels) ? [\
             JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey(object.metadata.name + \".tree.hnc.x-k8s.io/depth\"), value: '0'}, \
             JSONPatch{op: 'add', path: \"/metadata/labels/hnc.x-k8s.io~1included-namespace\", value: 'true'}] : \
             [JSONPatch{op: 'add', path: '/metadata/labels', value: {object.metadata.name + \".tree.hnc.x-k8s.io/depth\": '0', \"hnc.x-k8s.io/included-namespace\": 'true'}}]"
        );
        // The same two labels the webhook and the controller give (plan::lone_labels).
        let lone = crate::hierarchy::plan::lone_labels(&policy(), "team-a");
        assert_eq!(lone.len(), 2);
        assert_eq!(lone[&hns_api::keys::tree_label("team-a")], "0");
        assert_eq!(lone[hns_api::keys::INCLUDED_NAMESPACE], "true");
    }

    #[test]
    fn an_included_pattern_is_part_of_the_policy() {
        let p = policy().with_included("team-.*").unwrap();
        assert!(managed_expression(&p).ends_with(" && object.metadata.name.matches(\"^(?:team-.*)$\")"));
        assert!(!managed_expression(&policy()).contains("matches"));
    }

    #[test]
    fn names_external_hierarchies_reserve_are_left_to_the_webhook() {
        let p = policy_object(&policy(), &owner_reference("hns", "u-1"), &["team-a".into(), "org".into()]);
        let c = conditions(&p);
        let reserved = &c.iter().find(|(n, _)| n == "not-reserved").unwrap().1;
        assert_eq!(reserved, "!(object.metadata.name in [\"team-a\", \"org\"])");
        let none = policy_object(&policy(), &owner_reference("hns", "u-1"), &[]);
        assert!(
            conditions(&none).iter().all(|(n, _)| n != "not-reserved"),
            "no condition without reserved names"
        );
    }

    #[test]
    fn json_pointer_tokens_are_escaped() {
        assert_eq!(json_pointer_escape("hnc.x-k8s.io/a~b"), "hnc.x-k8s.io~1a~0b");
    }

    #[test]
    fn cel_strings_are_quoted_and_escaped() {
        assert_eq!(cel_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
