//! A namespace's metadata as the forest holds it: compactly.
//!
//! The forest keeps every namespace of the cluster, 100,000 of them on a large one, so bytes per
//! namespace decide hns's memory. k8s-openapi's `ObjectMeta` is built for any object: some 300
//! bytes of mostly empty fields, and a `BTreeMap` for labels and for annotations that allocates
//! room for eleven pairs even when it holds one. [`NamespaceMeta`] keeps what namespaces carry
//! (name, uid, resourceVersion, timestamps, finalizers, labels and annotations) in exact-size
//! allocations, the label and annotation keys hns knows as shared static strings, and the
//! fields namespaces rarely set in a full `ObjectMeta` only when one is set. It converts back to
//! the `ObjectMeta` it was made from, so whatever reads a namespace sees the same object.

use std::collections::BTreeMap;
use std::sync::Arc;

use hns_api::keys;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// Label and annotation keys most namespaces carry: held as shared static strings.
const KNOWN_KEYS: &[&str] = &[
    "kubernetes.io/metadata.name",
    keys::CONDITIONS,
    keys::SUBNAMESPACE_OF,
    keys::PARENT,
    keys::ALLOW_CASCADING_DELETION,
    keys::MANAGED_LABELS,
    keys::MANAGED_ANNOTATIONS,
    keys::HIERARCHY_OBJECT_META,
    keys::SUBNAMESPACE_OBJECT_META,
    keys::RESOURCE_QUOTAS,
    keys::SEAL,
    keys::HIERARCHY_MEMBER,
    keys::INCLUDED_NAMESPACE,
    keys::HRQ_LABEL,
    keys::HRQ_PENDING_LABEL,
];

/// A label or annotation key: one of [`KNOWN_KEYS`], or the namespace's own copy.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Known(&'static str),
    Other(Box<str>),
}

impl Key {
    fn new(key: String) -> Self {
        match KNOWN_KEYS.iter().find(|k| **k == key) {
            Some(known) => Key::Known(known),
            None => Key::Other(key.into_boxed_str()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Key::Known(k) => k,
            Key::Other(k) => k,
        }
    }
}

/// Labels or annotations: pairs sorted by key, in one allocation of exactly their number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairs(Box<[(Key, Box<str>)]>);

impl Pairs {
    fn new(map: BTreeMap<String, String>) -> Self {
        Pairs(map.into_iter().map(|(k, v)| (Key::new(k), v.into_boxed_str())).collect())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let found = self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok()?;
        Some(&self.0[found].1)
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), &**v))
    }

    /// The pairs as k8s-openapi holds them.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}

/// The metadata of a namespace, without managed fields (see [`crate::hierarchy::forest::trimmed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceMeta {
    name: Arc<str>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Box<[Box<str>]>>,
    labels: Option<Pairs>,
    annotations: Option<Pairs>,
    /// The other fields (generateName, ownerReferences, …), when any is set: namespaces
    /// rarely have them.
    rest: Option<Box<ObjectMeta>>,
}

impl NamespaceMeta {
    /// Takes `meta` apart.
    pub fn new(mut meta: ObjectMeta) -> Self {
        let name: Arc<str> = meta.name.take().unwrap_or_default().into();
        let uid = meta.uid.take().map(String::into_boxed_str);
        let resource_version = meta.resource_version.take().map(String::into_boxed_str);
        let creation_timestamp = meta.creation_timestamp.take();
        let deletion_timestamp = meta.deletion_timestamp.take();
        let finalizers = meta.finalizers.take().map(|f| f.into_iter().map(String::into_boxed_str).collect());
        let labels = meta.labels.take().map(Pairs::new);
        let annotations = meta.annotations.take().map(Pairs::new);
        let rest = (meta != ObjectMeta::default()).then(|| Box::new(meta));
        NamespaceMeta {
            name,
            uid,
            resource_version,
            creation_timestamp,
            deletion_timestamp,
            finalizers,
            labels,
            annotations,
            rest,
        }
    }

    /// The `ObjectMeta` this was made from.
    pub fn to_object_meta(&self) -> ObjectMeta {
        let mut meta = self.rest.as_deref().cloned().unwrap_or_default();
        meta.name = (!self.name.is_empty()).then(|| self.name.to_string());
        meta.uid = self.uid.as_deref().map(str::to_string);
        meta.resource_version = self.resource_version.as_deref().map(str::to_string);
        meta.creation_timestamp = self.creation_timestamp.clone();
        meta.deletion_timestamp = self.deletion_timestamp.clone();
        meta.finalizers = self.finalizers.as_ref().map(|f| f.iter().map(|s| s.to_string()).collect());
        meta.labels = self.labels.as_ref().map(Pairs::to_map);
        meta.annotations = self.annotations.as_ref().map(Pairs::to_map);
        meta
    }

    /// The namespace's name, shared.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// `metadata.creationTimestamp`.
    pub fn creation_timestamp(&self) -> Option<&Time> {
        self.creation_timestamp.as_ref()
    }

    /// `metadata.deletionTimestamp`.
    pub fn deletion_timestamp(&self) -> Option<&Time> {
        self.deletion_timestamp.as_ref()
    }

    /// Whether the namespace is being deleted.
    pub fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// `metadata.finalizers`.
    pub fn finalizers(&self) -> impl Iterator<Item = &str> + '_ {
        self.finalizers.iter().flat_map(|f| f.iter().map(|s| &**s))
    }

    /// `metadata.labels` (tree labels are kept apart, see [`crate::hierarchy::forest::TreeLabels`]).
    pub fn labels(&self) -> Option<&Pairs> {
        self.labels.as_ref()
    }

    /// `metadata.annotations`.
    pub fn annotations(&self) -> Option<&Pairs> {
        self.annotations.as_ref()
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref().and_then(|a| a.get(key))
    }

    /// The same name as the forest's key for it, so the two share one allocation.
    pub fn share_name(&mut self, name: &Arc<str>) {
        if *self.name == **name {
            self.name = name.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn converts_back_to_the_same_object_meta() {
        let full = ObjectMeta {
            name: Some("team-a".into()),
            uid: Some("6f1b7a1e-0c7e-4a53-9d7e-000000000001".into()),
            resource_version: Some("42".into()),
            creation_timestamp: Some(Time(jiff::Timestamp::from_second(1_700_000_000).unwrap())),
            deletion_timestamp: Some(Time(jiff::Timestamp::from_second(1_700_000_100).unwrap())),
            finalizers: Some(vec!["example.com/keep".into()]),
            labels: Some(map(&[("kubernetes.io/metadata.name", "team-a"), ("zone", "eu")])),
            annotations: Some(map(&[(keys::PARENT, "acme"), ("note", "x")])),
            owner_references: Some(vec![OwnerReference { name: "owner".into(), ..Default::default() }]),
            generation: Some(3),
            ..Default::default()
        };
        let meta = NamespaceMeta::new(full.clone());
        assert_eq!(meta.to_object_meta(), full);
        assert!(meta.rest.is_some(), "owner references and generation are kept aside");
        assert_eq!(NamespaceMeta::new(ObjectMeta::default()).to_object_meta(), ObjectMeta::default());
    }

    #[test]
    fn empty_maps_stay_distinct_from_missing_ones() {
        let meta = ObjectMeta { labels: Some(BTreeMap::new()), ..Default::default() };
        let compact = NamespaceMeta::new(meta.clone());
        assert!(compact.rest.is_none());
        assert_eq!(compact.to_object_meta(), meta);
    }

    #[test]
    fn finds_known_and_other_keys() {
        let meta = NamespaceMeta::new(ObjectMeta {
            annotations: Some(map(&[(keys::PARENT, "acme"), ("a-note", "x"), ("z-note", "y")])),
            ..Default::default()
        });
        assert_eq!(meta.annotation(keys::PARENT), Some("acme"));
        assert_eq!(meta.annotation("a-note"), Some("x"));
        assert_eq!(meta.annotation("z-note"), Some("y"));
        assert_eq!(meta.annotation("missing"), None);
        let order: Vec<_> = meta.annotations().unwrap().iter().map(|(k, _)| k).collect();
        assert_eq!(order, ["a-note", keys::PARENT, "z-note"]);
    }
}
