//! What propagates where (HNC's rules), and what a copy looks like. Pure functions.
//!
//! An object is a *source* unless it carries `hnc.x-k8s.io/inherited-from`, the label every
//! copy gets. A source propagates to every descendant of its namespace unless a rule says
//! otherwise: the kind's mode, the object's exception annotations (read in
//! [`super::exceptions`]), or HNC's never-propagate list (service-account tokens,
//! `kube-root-ca.crt`, objects with finalizers, …).

use std::borrow::Cow;
use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde_json::{Map, Value};

use crate::hierarchy::policy::Policy;

/// Label on every copy: the namespace of its source (HNC's key).
pub const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";
/// Whether `obj` is a copy made by hns.
pub fn is_copy(obj: &DynamicObject) -> bool {
    source_namespace(obj).is_some()
}

/// Where a copy was copied from (its `inherited-from` label); `None` for a source.
pub fn source_namespace(obj: &DynamicObject) -> Option<&str> {
    match compacted(obj) {
        Some((origin, _)) => Some(origin),
        None => obj.metadata.labels.as_ref().and_then(|l| l.get(INHERITED_FROM)).map(String::as_str),
    }
}

fn annotation<'a>(obj: &'a DynamicObject, key: &str) -> Option<&'a str> {
    obj.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Why a source never propagates, whatever the target (HNC's list and `policy`'s
/// `--nopropagation-label`s), if it does not.
pub fn never_propagates(policy: &Policy, obj: &DynamicObject, kind: &str) -> Option<&'static str> {
    if obj.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
        return Some("Objects with finalizers cannot be propagated");
    }
    if obj.metadata.deletion_timestamp.is_some() {
        return Some("the object is being deleted");
    }
    let name = obj.metadata.name.as_deref().unwrap_or("");
    match kind {
        "Secret"
            if matches!(
                content_of(obj)["type"].as_str(),
                Some("kubernetes.io/service-account-token" | "helm.sh/release.v1")
            ) =>
        {
            return Some("service-account tokens and Helm releases are never propagated")
        }
        "ConfigMap" if matches!(name, "kube-root-ca.crt" | "istio-ca-root-cert") => {
            return Some("cluster CA bundles are never propagated")
        }
        // Every covered namespace has its own, with the limits of the quotas above it.
        "ResourceQuota" if name == hns_api::quota::RESOURCE_QUOTA_NAME => {
            return Some("hns's ResourceQuotas of hierarchical quotas are never propagated")
        }
        _ => {}
    }
    if annotation(obj, "openshift.io/description").is_some() {
        return Some("OpenShift-managed objects are never propagated");
    }
    let labels = obj.metadata.labels.as_ref();
    if policy.no_propagation_labels.iter().any(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)) {
        return Some("objects with a --nopropagation-label label (by default Rancher's cattle.io/creator=norman) are never propagated");
    }
    None
}

/// The copy of `source` (in namespace `from`) for namespace `to`: the source's content, its
/// labels plus `inherited-from`, its annotations without kubectl's last-applied record; neither
/// with the keys `policy` leaves out (by default those by which GitOps tools claim objects).
pub fn copy_of(policy: &Policy, source: &DynamicObject, from: &str, to: &str) -> DynamicObject {
    let mut labels = source.metadata.labels.clone().unwrap_or_default();
    labels.retain(|k, _| !policy.unpropagated_labels.contains(k));
    labels.insert(INHERITED_FROM.to_string(), from.to_string());
    let mut annotations = source.metadata.annotations.clone().unwrap_or_default();
    annotations.retain(|k, _| !policy.unpropagated_annotations.contains(k));
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    let mut data = content_of(source).into_owned();
    if let Some(m) = data.as_object_mut() {
        m.remove("status");
    }
    DynamicObject {
        types: source.types.clone(),
        metadata: kube::api::ObjectMeta {
            name: source.metadata.name.clone(),
            namespace: Some(to.to_string()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        data,
    }
}

fn content(data: &Value) -> Map<String, Value> {
    let mut m = data.as_object().cloned().unwrap_or_default();
    m.remove("status");
    m
}

/// A digest of what makes two copies equal: labels, annotations and content.
fn digest(obj: &DynamicObject) -> String {
    use std::hash::{Hash, Hasher};
    let norm = |m: &Option<BTreeMap<String, String>>| m.clone().unwrap_or_default();
    let annotations = norm(&obj.metadata.annotations);
    let canonical =
        serde_json::to_string(&(norm(&obj.metadata.labels), annotations, content(&content_of(obj))))
            .unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    canonical.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// A copy reduced to what planning needs: identity, its origin and a digest of its content.
/// Copies are most of the objects hns holds (one per source per descendant), and their content
/// is already known from the source; this keeps memory proportional to the sources. Origin and
/// digest are kept as one string in place of the content, which for any object read from the
/// cluster is a JSON object (labels and annotations in maps would cost a kilobyte a copy).
pub fn compact(copy: DynamicObject) -> DynamicObject {
    let origin = source_namespace(&copy).unwrap_or_default().to_string();
    let digest = digest(&copy);
    DynamicObject {
        types: None,
        metadata: kube::api::ObjectMeta {
            name: copy.metadata.name,
            namespace: copy.metadata.namespace,
            uid: copy.metadata.uid,
            resource_version: copy.metadata.resource_version,
            deletion_timestamp: copy.metadata.deletion_timestamp,
            ..Default::default()
        },
        data: Value::String(format!("{origin} {digest}")),
    }
}

/// The origin and digest of a [`compact`]ed copy; `None` for any other object. (A namespace
/// name has no space and does not start with `{`, and a digest is hexadecimal.)
fn compacted(obj: &DynamicObject) -> Option<(&str, &str)> {
    obj.data.as_str().filter(|text| !text.starts_with('{'))?.split_once(' ')
}

/// An object as propagation holds it: a copy [`compact`]ed; a source without its managed
/// fields (most of the bytes of a small object) and with its content as JSON text, read back
/// when needed (see [`content_of`]): a RoleBinding's content in `serde_json`'s maps took some
/// two kilobytes, as text a tenth of that, and sources are read only to plan their copies.
pub fn held(mut obj: DynamicObject) -> DynamicObject {
    if is_copy(&obj) {
        return compact(obj);
    }
    obj.metadata.managed_fields = None;
    if obj.data.is_object() {
        obj.data = Value::String(obj.data.to_string());
    }
    obj
}

/// The content of `obj` (all but its metadata), whether [`held`] or as read.
fn content_of(obj: &DynamicObject) -> Cow<'_, Value> {
    match obj.data.as_str() {
        Some(text) if text.starts_with('{') => Cow::Owned(serde_json::from_str(text).unwrap_or_default()),
        _ => Cow::Borrowed(&obj.data),
    }
}

/// Whether `actual` (a copy found in the cluster, possibly compacted) already equals `wanted`.
pub fn same_copy(actual: &DynamicObject, wanted: &DynamicObject) -> bool {
    match compacted(actual) {
        Some((_, d)) => d == digest(wanted),
        None => digest(actual) == digest(wanted),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// An object named `name` in `ns` with `labels`, `annotations` and `data`.
    pub fn obj(
        ns: &str,
        name: &str,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
        data: Value,
    ) -> DynamicObject {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
        };
        DynamicObject {
            types: None,
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: map(labels),
                annotations: map(annotations),
                ..Default::default()
            },
            data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::obj;
    use super::*;
    use crate::hierarchy::policy::testing::policy;
    use serde_json::json;

    #[test]
    fn never_propagated() {
        let token = obj("a", "t", &[], &[], json!({"type": "kubernetes.io/service-account-token"}));
        assert!(never_propagates(&policy(), &token, "Secret").is_some());
        assert!(never_propagates(&policy(), &obj("a", "kube-root-ca.crt", &[], &[], json!({})), "ConfigMap")
            .is_some());
        let mut f = obj("a", "x", &[], &[], json!({}));
        f.metadata.finalizers = Some(vec!["example.com/f".into()]);
        assert_eq!(
            never_propagates(&policy(), &f, "Role"),
            Some("Objects with finalizers cannot be propagated")
        );
        let rancher = obj("a", "x", &[("cattle.io/creator", "norman")], &[], json!({}));
        assert!(
            never_propagates(&policy(), &rancher, "Role").is_some(),
            "HNC's default --nopropagation-label"
        );
        let mine = policy().with_no_propagation_labels(vec![("team.io/local".into(), "true".into())]);
        assert!(never_propagates(&mine, &rancher, "Role").is_none(), "the list replaces the default");
        let local = obj("a", "x", &[("team.io/local", "true")], &[], json!({}));
        assert!(never_propagates(&mine, &local, "Role").is_some());
        assert!(never_propagates(&policy(), &local, "Role").is_none());
        assert!(never_propagates(
            &policy(),
            &obj("a", "x", &[("cattle.io/creator", "norman")], &[], json!({})),
            "Role"
        )
        .is_some());
        assert!(never_propagates(&policy(), &obj("a", "ok", &[], &[], json!({"type": "Opaque"})), "Secret")
            .is_none());
        assert!(never_propagates(
            &policy(),
            &obj("a", "hrq.hnc.x-k8s.io", &[], &[], json!({})),
            "ResourceQuota"
        )
        .is_some());
        assert!(
            never_propagates(&policy(), &obj("a", "compute", &[], &[], json!({})), "ResourceQuota").is_none()
        );
    }

    #[test]
    fn copies_carry_their_origin_and_compare_by_content() {
        let mut src = obj(
            "org",
            "readers",
            &[("team", "a")],
            &[("kubectl.kubernetes.io/last-applied-configuration", "{}"), ("note", "n")],
            json!({"rules": [{"verbs": ["get"]}]}),
        );
        src.metadata.uid = Some("u1".into());
        src.metadata.resource_version = Some("5".into());
        let c = copy_of(&policy(), &src, "org", "team-a");
        assert_eq!(c.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(c.metadata.labels.as_ref().unwrap()[INHERITED_FROM], "org");
        assert!(c.metadata.uid.is_none() && c.metadata.resource_version.is_none());
        assert!(!c
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert!(is_copy(&c) && !is_copy(&src));
        let mut found = c.clone();
        found.metadata.resource_version = Some("9".into());
        assert!(same_copy(&found, &c));
        assert!(same_copy(&compact(found.clone()), &c), "a compacted copy compares the same");
        assert!(is_copy(&compact(found.clone())));
        found.data["rules"][0]["verbs"] = json!(["get", "delete"]);
        assert!(!same_copy(&found, &c), "a tampered copy differs");
        assert!(!same_copy(&compact(found), &c), "also when compacted");
    }

    #[test]
    fn copies_leave_out_the_keys_gitops_tools_claim_objects_by() {
        let src = obj(
            "org",
            "readers",
            &[
                ("app.kubernetes.io/instance", "org-app"),
                ("kustomize.toolkit.fluxcd.io/name", "org"),
                ("team", "a"),
            ],
            &[("argocd.argoproj.io/tracking-id", "org-app:rbac/RoleBinding:org/readers"), ("note", "n")],
            json!({}),
        );
        let c = copy_of(&policy(), &src, "org", "team-a");
        let labels = c.metadata.labels.clone().unwrap();
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["hnc.x-k8s.io/inherited-from", "team"]);
        assert_eq!(c.metadata.annotations.clone().unwrap().keys().collect::<Vec<_>>(), ["note"]);
        let none = policy().with_unpropagated(Default::default(), Default::default());
        let all = copy_of(&none, &src, "org", "team-a");
        assert_eq!(all.metadata.labels.as_ref().unwrap().len(), 4, "an empty list copies every key");
        assert!(!same_copy(&all, &c), "a changed list changes the wanted copy, so it is rewritten");
    }

    #[test]
    fn a_held_source_copies_and_compares_as_read() {
        let src = obj(
            "org",
            "t",
            &[],
            &[],
            json!({"type": "kubernetes.io/service-account-token", "data": {"k": "v"}}),
        );
        let held_src = held(src.clone());
        assert!(held_src.data.is_string(), "kept as text");
        assert!(!is_copy(&held_src));
        assert_eq!(
            never_propagates(&policy(), &held_src, "Secret"),
            never_propagates(&policy(), &src, "Secret")
        );
        assert!(never_propagates(&policy(), &held_src, "Secret").is_some());
        let (from_held, from_read) =
            (copy_of(&policy(), &held_src, "org", "a"), copy_of(&policy(), &src, "org", "a"));
        assert_eq!(from_held.data, from_read.data, "the content comes back whole");
        assert!(same_copy(&held(from_read.clone()), &from_held));
    }
}
