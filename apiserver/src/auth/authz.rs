//! Authorization delegated to kube-apiserver with SubjectAccessReviews, as k8s.io/apiserver's
//! delegating authorizer does: `system:masters` is allowed outright, everything else is asked,
//! and both answers are cached for ten seconds so a burst of requests costs one review.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::auth::authn::Identity;
use crate::http::request_info::RequestInfo;
use crate::http::status::{kube_message, ApiError, GroupResource};

/// How long an answer is reused (k8s.io/apiserver's default for allow and deny alike).
const CACHE_TTL: Duration = Duration::from_secs(10);

/// The outcome of a review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied, with the authorizer's reason (may be empty).
    Deny(String),
}

/// Asks kube-apiserver whether a user may do something.
#[derive(Clone)]
pub struct Authorizer {
    client: Client,
    cache: moka::sync::Cache<SubjectAccessReviewSpecKey, Decision>,
}

/// Cache key: the review's spec, serialized (specs are not `Hash`).
type SubjectAccessReviewSpecKey = String;

impl Authorizer {
    /// An authorizer asking through `client`.
    pub fn new(client: Client) -> Self {
        let cache = moka::sync::Cache::builder().max_capacity(10_000).time_to_live(CACHE_TTL).build();
        Authorizer { client, cache }
    }

    /// Allows the request or explains, as a `Status`, why not.
    pub async fn authorize(&self, who: &Identity, what: &RequestInfo) -> Result<(), ApiError> {
        if who.in_group("system:masters") {
            return Ok(());
        }
        match self.decide(review_spec(who, what)).await? {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(denial(who, what, &reason)),
        }
    }

    /// Whether `who` may do what `attrs` describe: for checks beyond the request itself, such as
    /// HNC's rule that a move needs rights on the trees it leaves and joins.
    pub async fn can(&self, who: &Identity, attrs: ResourceAttributes) -> Result<bool, ApiError> {
        if who.in_group("system:masters") {
            return Ok(true);
        }
        let spec = SubjectAccessReviewSpec { resource_attributes: Some(attrs), ..identity_spec(who) };
        Ok(self.decide(spec).await? == Decision::Allow)
    }

    async fn decide(&self, spec: SubjectAccessReviewSpec) -> Result<Decision, ApiError> {
        let key = serde_json::to_string(&spec).map_err(ApiError::internal)?;
        if let Some(d) = self.cache.get(&key) {
            return Ok(d);
        }
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = SubjectAccessReview { spec, ..Default::default() };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ApiError::internal(format!("authorizer error: {}", kube_message(&e))))?;
        let status = answer.status.unwrap_or_default();
        let decision =
            if status.allowed { Decision::Allow } else { Decision::Deny(status.reason.unwrap_or_default()) };
        self.cache.insert(key, decision.clone());
        Ok(decision)
    }
}

fn identity_spec(who: &Identity) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: Some(who.user.clone()),
        groups: Some(who.groups.clone()),
        extra: (!who.extra.is_empty()).then(|| who.extra.clone()),
        ..Default::default()
    }
}

/// The review kube-apiserver would make for this request.
pub fn review_spec(who: &Identity, what: &RequestInfo) -> SubjectAccessReviewSpec {
    let mut spec = identity_spec(who);
    match what {
        RequestInfo::Resource(r) => {
            spec.resource_attributes = Some(ResourceAttributes {
                verb: Some(r.verb.to_string()),
                group: Some(r.group.clone()),
                version: Some(r.version.clone()),
                resource: Some(r.resource.clone()),
                subresource: (!r.subresource.is_empty()).then(|| r.subresource.clone()),
                namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
                name: (!r.name.is_empty()).then(|| r.name.clone()),
                ..Default::default()
            })
        }
        RequestInfo::NonResource { verb, path } => {
            spec.non_resource_attributes =
                Some(NonResourceAttributes { verb: Some(verb.clone()), path: Some(path.clone()) })
        }
    }
    spec
}

/// kube-apiserver's wording for a denial, so users see the same message as for built-in kinds.
pub fn denial(who: &Identity, what: &RequestInfo, reason: &str) -> ApiError {
    let suffix = if reason.is_empty() { String::new() } else { format!(": {reason}") };
    match what {
        RequestInfo::Resource(r) => {
            let gr = GroupResource { group: &r.group, resource: &r.resource };
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{}\"", r.namespace)
            };
            ApiError::forbidden(
                gr,
                &r.name,
                format!(
                    "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}{suffix}",
                    who.user, r.verb, r.group
                ),
            )
        }
        RequestInfo::NonResource { verb, path } => ApiError::forbidden_path(&who.user, verb, path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bob() -> Identity {
        Identity {
            user: "bob".into(),
            groups: vec!["system:authenticated".into()],
            extra: Default::default(),
        }
    }

    #[test]
    fn resource_review_carries_the_request() {
        let info = RequestInfo::parse(
            "GET",
            "/apis/hnc.x-k8s.io/v1alpha2/namespaces/a/hierarchyconfigurations/hierarchy",
            "",
        );
        let spec = review_spec(&bob(), &info);
        let ra = spec.resource_attributes.unwrap();
        assert_eq!(ra.verb.as_deref(), Some("get"));
        assert_eq!(ra.namespace.as_deref(), Some("a"));
        assert_eq!(ra.name.as_deref(), Some("hierarchy"));
        assert_eq!(spec.user.as_deref(), Some("bob"));
    }

    #[test]
    fn denial_reads_like_rbac() {
        let info =
            RequestInfo::parse("GET", "/apis/hnc.x-k8s.io/v1alpha2/namespaces/a/hierarchyconfigurations", "");
        let e = denial(&bob(), &info, "");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "hierarchyconfigurations.hnc.x-k8s.io is forbidden: User \"bob\" cannot list resource \"hierarchyconfigurations\" in API group \"hnc.x-k8s.io\" in the namespace \"a\""
        );
        let e = denial(&bob(), &RequestInfo::parse("GET", "/apis", ""), "");
        assert_eq!(e.message, "forbidden: User \"bob\" cannot get path \"/apis\"");
    }
}
