//! What hns-apiserver may do to a kind it is asked to propagate, and how an administrator grants
//! what is missing.
//!
//! hns holds rights only for the kinds its manifests list (config/base/rbac.yaml): its ClusterRole
//! `hns-propagation` aggregates every ClusterRole labelled [`AGGREGATE_LABEL`]. Configuring a kind
//! beyond those would start a watch that fails forever, so the configuration is checked first
//! with SelfSubjectAccessReviews and refused with the ClusterRole to create.

use futures::future::try_join_all;
use hns_api::config::Mode;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{ApiResource, PostParams};
use kube::{Api, Client};

/// The label that aggregates a ClusterRole into hns's propagation rights.
pub const AGGREGATE_LABEL: &str = "hnc.x-k8s.io/aggregate-to-propagation";

/// The verbs the manifests grant for each kind hns propagates: what the advice asks for.
const GRANTED: &str = "get, list, watch, create, update, delete";

/// The verbs hns uses on a kind in `mode`, cluster-wide: it watches every object of the kind,
/// writes copies (Propagate, AllowPropagate) and deletes them (all but Ignore).
pub fn needed(mode: Mode) -> &'static [&'static str] {
    match mode {
        Mode::Propagate | Mode::AllowPropagate => &["list", "watch", "create", "update", "delete"],
        Mode::Remove => &["list", "watch", "delete"],
        Mode::Ignore => &[],
    }
}

/// Those of `verbs` hns-apiserver may not do on `resource` in all namespaces.
pub async fn missing(
    client: &Client,
    resource: &ApiResource,
    verbs: &[&'static str],
) -> Result<Vec<&'static str>, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answers = try_join_all(verbs.iter().map(|verb| {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some((*verb).to_string()),
                    group: Some(resource.group.clone()),
                    resource: Some(resource.plural.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api = api.clone();
        async move { api.create(&PostParams::default(), &review).await }
    }))
    .await?;
    Ok(verbs
        .iter()
        .zip(answers)
        .filter(|(_, a)| !a.status.as_ref().is_some_and(|s| s.allowed))
        .map(|(v, _)| *v)
        .collect())
}

/// Why hns cannot take `resource` in `group` and how to grant it, e.g. `hns-apiserver may not
/// list, watch services in the core group; grant it by creating a ClusterRole labelled …`.
pub fn advice(group: &str, resource: &str, missing: &[&str]) -> String {
    let (in_group, api_groups) = if group.is_empty() {
        ("in the core group".to_string(), "\"\"".to_string())
    } else {
        (format!("in API group \"{group}\""), format!("\"{group}\""))
    };
    format!(
        "hns-apiserver may not {} {resource} {in_group}; grant it by creating a ClusterRole labelled \
         {AGGREGATE_LABEL}: \"true\" with {GRANTED} on {resource} (rules: [{{apiGroups: [{api_groups}], \
         resources: [{resource}], verbs: [{GRANTED}]}}]), then set the mode again",
        missing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_names_the_verbs_the_group_and_the_label() {
        assert_eq!(
            advice("", "services", &["list", "watch"]),
            "hns-apiserver may not list, watch services in the core group; grant it by creating a \
             ClusterRole labelled hnc.x-k8s.io/aggregate-to-propagation: \"true\" with get, list, watch, \
             create, update, delete on services (rules: [{apiGroups: [\"\"], resources: [services], \
             verbs: [get, list, watch, create, update, delete]}]), then set the mode again"
        );
        assert!(advice("example.com", "widgets", &["create"])
            .starts_with("hns-apiserver may not create widgets in API group \"example.com\"; grant it"));
    }

    #[test]
    fn ignore_needs_nothing_and_remove_needs_no_writes() {
        assert!(needed(Mode::Ignore).is_empty());
        assert!(!needed(Mode::Remove).contains(&"create"));
        assert!(needed(Mode::AllowPropagate).contains(&"create"));
    }
}
