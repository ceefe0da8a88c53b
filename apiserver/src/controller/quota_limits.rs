//! The ResourceQuota `hrq.hnc.x-k8s.io` hns keeps in each namespace a hierarchical quota
//! covers: its `spec.hard` is, per resource, the smallest limit of the quotas above, so
//! Kubernetes counts the namespace's usage and refuses what the namespace alone could never
//! hold. What to do is a pure function of the forest ([`plan`]); [`apply`] writes it.

use std::collections::BTreeMap;

use hns_api::quota::RESOURCE_QUOTA_NAME;
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use crate::hierarchy::forest::{Forest, StoredQuota};
use crate::hierarchy::quotas;
use crate::hierarchy::quotas::quantity::{Amount, Amounts};
use crate::http::status::ApiError;

/// What namespace's ResourceQuota needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing: it is right, or the namespace is terminating (its objects go with it).
    None,
    /// Create it with these limits, naming who requires each resource every container must
    /// declare ([`quotas::required_by`]).
    Create(BTreeMap<String, Quantity>, BTreeMap<String, String>),
    /// Change its limits and annotations by this merge patch, guarded by the resourceVersion
    /// observed: only its limits, label and `required-by` annotations are hns's to set, whatever
    /// else others put on it stays.
    Update(serde_json::Value),
    /// Delete it (no quota covers the namespace any more); guarded by the uid observed.
    Delete(Option<String>),
}

/// Limits compared as amounts: Kubernetes stores quantities in its canonical form, which may be
/// written differently from ours.
fn same_limits(a: &BTreeMap<String, Quantity>, b: &BTreeMap<String, Quantity>) -> bool {
    let read = |l: &BTreeMap<String, Quantity>| -> Option<Amounts> {
        l.iter().map(|(n, q)| Amount::parse(&q.0).ok().map(|a| (n.clone(), a))).collect()
    };
    a.len() == b.len()
        && read(a).zip(read(b)).is_some_and(|(a, b)| {
            a.iter().zip(b.iter()).all(|(x, y)| x.0 == y.0 && !x.1.exceeds(*y.1) && !y.1.exceeds(*x.1))
        })
}

/// A merge patch setting `want` and removing (`null`) the keys of `have` it lacks.
fn replacing<V: Clone + Into<serde_json::Value>>(
    have: impl Iterator<Item = String>,
    want: BTreeMap<String, V>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut patch: serde_json::Map<String, serde_json::Value> =
        have.filter(|k| !want.contains_key(k)).map(|k| (k, serde_json::Value::Null)).collect();
    patch.extend(want.into_iter().map(|(k, v)| (k, v.into())));
    patch
}

/// What `ns`'s ResourceQuota needs, from the forest and the quotas covering `ns`
/// ([`Forest::quotas_covering`], which the caller also names in its Events).
pub fn plan(forest: &Forest, ns: &str, covering: &[(&str, &str, &StoredQuota)]) -> Action {
    let Some(node) = forest.get(ns) else { return Action::None };
    if node.is_terminating() {
        return Action::None;
    }
    let required_by = quotas::required_by(covering);
    match (quotas::resource_quota_hard(covering), forest.observed_quota(ns)) {
        (None, None) => Action::None,
        (Some(hard), None) => Action::Create(hard, required_by),
        (Some(hard), Some(o)) if same_limits(&hard, &o.hard) && o.required_by == required_by => Action::None,
        (Some(hard), Some(o)) => {
            let hard: BTreeMap<String, String> = hard.into_iter().map(|(k, q)| (k, q.0)).collect();
            let annotations = quotas::required_by_annotations(&required_by);
            let observed_annotations = quotas::required_by_annotations(&o.required_by);
            Action::Update(serde_json::json!({
                "metadata": {
                    "resourceVersion": o.resource_version,
                    "labels": {hns_api::keys::HRQ_LABEL: "true"},
                    "annotations": replacing(observed_annotations.into_keys(), annotations),
                },
                "spec": {"hard": replacing(o.hard.keys().cloned(), hard)},
            }))
        }
        (None, Some(o)) => Action::Delete(o.uid.clone()),
    }
}

/// Makes `action`'s write in `ns`. Gone already or made already counts as done: the watch
/// brings what is there.
pub async fn apply(client: &kube::Client, ns: &str, action: Action) -> Result<(), ApiError> {
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    let pp = PostParams { dry_run: false, field_manager: Some(crate::store::writer::FIELD_MANAGER.into()) };
    let outcome = match action {
        Action::None => return Ok(()),
        Action::Create(hard, required_by) => {
            api.create(&pp, &quotas::resource_quota(ns, hard, &required_by)).await.map(drop)
        }
        Action::Update(patch) => {
            let pp = PatchParams { field_manager: pp.field_manager, ..Default::default() };
            api.patch(RESOURCE_QUOTA_NAME, &pp, &Patch::Merge(&patch)).await.map(drop)
        }
        Action::Delete(uid) => {
            let dp = DeleteParams {
                preconditions: Some(Preconditions { uid, resource_version: None }),
                ..Default::default()
            };
            api.delete(RESOURCE_QUOTA_NAME, &dp).await.map(drop)
        }
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || (s.code == 409 && s.reason == "AlreadyExists") => Ok(()),
        Err(e) => Err(ApiError::from_kube(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::{forest, sealed};
    use crate::hierarchy::forest::ObservedQuota;

    fn with_quota(f: &mut Forest, ns: &str, hard: &str) {
        crate::hierarchy::forest::testing::with_quota(f, ns, "q", hard);
    }

    /// The plan for `ns`, with the quotas covering it read from `f`.
    fn planned(f: &Forest, ns: &str) -> Action {
        plan(f, ns, &f.quotas_covering(ns))
    }

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs.iter().map(|(n, q)| (n.to_string(), Quantity(q.to_string()))).collect()
    }

    fn observe(f: &mut Forest, ns: &str, hard: &[(&str, &str)]) {
        let o = ObservedQuota {
            hard: list(hard),
            uid: Some("rq".into()),
            resource_version: Some("5".into()),
            ..Default::default()
        };
        f.observe_quota(ns, Some(o));
    }

    #[test]
    fn covered_namespaces_get_the_smallest_limits_and_uncovered_ones_none() {
        let mut f = forest("acme team-a:~acme dev:~team-a other");
        with_quota(&mut f, "acme", r#"{"pods":"10"}"#);
        with_quota(&mut f, "team-a", r#"{"pods":"4"}"#);
        assert_eq!(planned(&f, "dev"), Action::Create(list(&[("pods", "4")]), BTreeMap::new()));
        assert_eq!(planned(&f, "acme"), Action::Create(list(&[("pods", "10")]), BTreeMap::new()));
        assert_eq!(planned(&f, "other"), Action::None);
        observe(&mut f, "dev", &[("pods", "4")]);
        assert_eq!(planned(&f, "dev"), Action::None, "converged");
        observe(&mut f, "team-a", &[("pods", "10"), ("services", "1")]);
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": "5", "labels": {hns_api::keys::HRQ_LABEL: "true"}, "annotations": {}},
            "spec": {"hard": {"pods": "4", "services": null}},
        });
        assert_eq!(planned(&f, "team-a"), Action::Update(patch), "a limit no quota sets any more is removed");
        observe(&mut f, "other", &[("pods", "1")]);
        assert_eq!(planned(&f, "other"), Action::Delete(Some("rq".into())));
    }

    #[test]
    fn the_nearest_quota_is_named_for_each_resource_every_container_must_declare() {
        let mut f = forest("acme team-a:~acme dev:~team-a");
        with_quota(&mut f, "acme", r#"{"requests.cpu":"10","limits.memory":"10Gi","pods":"10"}"#);
        with_quota(&mut f, "team-a", r#"{"requests.cpu":"4"}"#);
        let hard = list(&[("limits.memory", "10Gi"), ("pods", "10"), ("requests.cpu", "4")]);
        let named = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(r, q)| (r.to_string(), q.to_string())).collect()
        };
        let required_by = named(&[("limits.memory", "acme/q"), ("requests.cpu", "team-a/q")]);
        assert_eq!(
            planned(&f, "dev"),
            Action::Create(hard.clone(), required_by),
            "pods is not declared per container"
        );
        let o = ObservedQuota {
            hard,
            required_by: named(&[("requests.cpu", "acme/q"), ("memory", "acme/old")]),
            resource_version: Some("5".into()),
            ..Default::default()
        };
        f.observe_quota("dev", Some(o));
        let prefix = hns_api::keys::REQUIRED_BY_PREFIX;
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": "5",
                "labels": {hns_api::keys::HRQ_LABEL: "true"},
                "annotations": {
                    format!("{prefix}memory"): null,
                    format!("{prefix}limits.memory"): "acme/q",
                    format!("{prefix}requests.cpu"): "team-a/q",
                },
            },
            "spec": {"hard": {"limits.memory": "10Gi", "pods": "10", "requests.cpu": "4"}},
        });
        assert_eq!(planned(&f, "dev"), Action::Update(patch), "same limits, stale names");
    }

    #[test]
    fn limits_written_differently_are_the_same() {
        assert!(same_limits(&list(&[("requests.cpu", "1000m")]), &list(&[("requests.cpu", "1")])));
        assert!(!same_limits(&list(&[("requests.cpu", "2")]), &list(&[("requests.cpu", "1")])));
        assert!(!same_limits(&list(&[("pods", "1")]), &list(&[("pods", "1"), ("services", "1")])));
    }

    #[test]
    fn terminating_namespaces_are_left_alone() {
        let mut f = forest("acme");
        with_quota(&mut f, "acme", r#"{"pods":"10"}"#);
        let mut ns = f.get("acme").unwrap().namespace();
        ns.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
        f.upsert(sealed(ns));
        assert_eq!(planned(&f, "acme"), Action::None);
    }
}
