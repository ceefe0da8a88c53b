//! A namespace's metadata as the forest holds it: compactly.
//!
//! The forest keeps every namespace of the cluster, 100,000 of them on a large one, so bytes per
//! namespace decide hns's memory. k8s-openapi's `ObjectMeta` is built for any object: some 300
//! bytes of mostly empty fields, a `String` for each field set, and a `BTreeMap` for labels and
//! for annotations that allocates room for eleven pairs even when it holds one. [`NamespaceMeta`]
//! keeps the name (shared with the forest's key for it) and timestamps as fields, and the rest
//! namespaces carry (uid, resourceVersion, finalizers, labels and annotations) packed in one
//! allocation of exactly their size: strings prefixed by their length, and the label and
//! annotation keys hns knows, `"true"` and the namespace's own name as one-byte tags. The fields
//! namespaces rarely set in a full `ObjectMeta` are kept only when one is set. It converts back to
//! the `ObjectMeta` it was made from, so whatever reads a namespace sees the same object.

use std::collections::BTreeMap;
use std::sync::Arc;

use hns_api::keys;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::seal;

/// Label and annotation keys most namespaces carry, besides the sealed annotations.
const OTHER_KNOWN_KEYS: [&str; 7] = [
    "kubernetes.io/metadata.name",
    keys::CONDITIONS,
    keys::SEAL,
    keys::HIERARCHY_MEMBER,
    keys::INCLUDED_NAMESPACE,
    keys::HRQ_LABEL,
    keys::HRQ_PENDING_LABEL,
];

/// Label and annotation keys written as their index: those above and every sealed annotation,
/// so that a key hns comes to seal is packed small without a second list to keep in step.
const KNOWN_KEYS: &[&str] = &{
    let mut all = [""; OTHER_KNOWN_KEYS.len() + seal::SEALED.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < OTHER_KNOWN_KEYS.len() {
            OTHER_KNOWN_KEYS[i]
        } else {
            seal::SEALED[i - OTHER_KNOWN_KEYS.len()]
        };
        i += 1;
    }
    all
};

/// A key or value tag: the string follows (its length first).
const LITERAL: u8 = 0;
/// A value tag: `"true"`.
const TRUE: u8 = 1;
/// A value tag: the namespace's own name (`kubernetes.io/metadata.name` has it).
const OWN_NAME: u8 = 2;
/// A key tag: `KNOWN_KEYS[tag - FIRST_KNOWN]`.
const FIRST_KNOWN: u8 = 1;
// Every known key's tag fits in its byte.
const _: () = assert!(KNOWN_KEYS.len() <= (u8::MAX - FIRST_KNOWN) as usize + 1, "a key's tag is a byte");

/// Which of the packed fields are present (the first byte).
const HAS_UID: u8 = 1;
const HAS_RESOURCE_VERSION: u8 = 2;
const HAS_FINALIZERS: u8 = 4;
const HAS_LABELS: u8 = 8;
const HAS_ANNOTATIONS: u8 = 16;

/// The metadata of a namespace, without managed fields (see [`crate::hierarchy::forest`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceMeta {
    name: Arc<str>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    /// uid, resourceVersion, finalizers, labels and annotations (see [`Writer`] and [`Reader`]).
    packed: Box<[u8]>,
    /// The other fields (generateName, ownerReferences, …), when any is set: namespaces
    /// rarely have them.
    rest: Option<Box<ObjectMeta>>,
}

impl NamespaceMeta {
    /// Takes `meta` apart.
    pub fn new(mut meta: ObjectMeta) -> Self {
        let name: Arc<str> = meta.name.take().unwrap_or_default().into();
        let mut w = Writer { out: vec![0], name: &name };
        let uid = meta.uid.take();
        let resource_version = meta.resource_version.take();
        let finalizers = meta.finalizers.take();
        let labels = meta.labels.take();
        let annotations = meta.annotations.take();
        w.flag_string(HAS_UID, uid.as_deref());
        w.flag_string(HAS_RESOURCE_VERSION, resource_version.as_deref());
        if let Some(f) = &finalizers {
            w.out[0] |= HAS_FINALIZERS;
            w.length(f.len());
            f.iter().for_each(|f| w.string(f));
        }
        w.pairs(HAS_LABELS, labels.as_ref());
        w.pairs(HAS_ANNOTATIONS, annotations.as_ref());
        let packed = w.out.into_boxed_slice();
        let creation_timestamp = meta.creation_timestamp.take();
        let deletion_timestamp = meta.deletion_timestamp.take();
        let rest = (meta != ObjectMeta::default()).then(|| Box::new(meta));
        NamespaceMeta { name, creation_timestamp, deletion_timestamp, packed, rest }
    }

    /// The `ObjectMeta` this was made from.
    pub fn to_object_meta(&self) -> ObjectMeta {
        let mut meta = self.rest.as_deref().cloned().unwrap_or_default();
        meta.name = (!self.name.is_empty()).then(|| self.name.to_string());
        meta.uid = self.uid().map(str::to_string);
        meta.resource_version = self.resource_version().map(str::to_string);
        meta.creation_timestamp = self.creation_timestamp.clone();
        meta.deletion_timestamp = self.deletion_timestamp.clone();
        meta.finalizers = self.has(HAS_FINALIZERS).then(|| self.finalizers().map(str::to_string).collect());
        meta.labels = self.labels().map(Pairs::to_map);
        meta.annotations = self.annotations().map(Pairs::to_map);
        meta
    }

    fn has(&self, flag: u8) -> bool {
        self.packed[0] & flag != 0
    }

    /// A reader past the fields before `flag`'s.
    fn reader_at(&self, flag: u8) -> Reader<'_> {
        let mut r = Reader { bytes: &self.packed[1..], name: &self.name };
        if flag > HAS_UID && self.has(HAS_UID) {
            r.string();
        }
        if flag > HAS_RESOURCE_VERSION && self.has(HAS_RESOURCE_VERSION) {
            r.string();
        }
        if flag > HAS_FINALIZERS && self.has(HAS_FINALIZERS) {
            (0..r.length()).for_each(|_| {
                r.string();
            });
        }
        if flag > HAS_LABELS && self.has(HAS_LABELS) {
            r = r.pairs().skip();
        }
        r
    }

    /// The namespace's name, shared.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.has(HAS_UID).then(|| self.reader_at(HAS_UID).string())
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.has(HAS_RESOURCE_VERSION).then(|| self.reader_at(HAS_RESOURCE_VERSION).string())
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
        let mut r = self.reader_at(HAS_FINALIZERS);
        let count = if self.has(HAS_FINALIZERS) { r.length() } else { 0 };
        (0..count).map(move |_| r.string())
    }

    /// `metadata.labels` (tree labels are kept apart, see [`crate::hierarchy::tree_labels`]).
    pub fn labels(&self) -> Option<Pairs<'_>> {
        self.has(HAS_LABELS).then(|| self.reader_at(HAS_LABELS).pairs())
    }

    /// `metadata.annotations`.
    pub fn annotations(&self) -> Option<Pairs<'_>> {
        self.has(HAS_ANNOTATIONS).then(|| self.reader_at(HAS_ANNOTATIONS).pairs())
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations().and_then(|a| a.get(key))
    }

    /// Whether `other` is the same but for its resourceVersion and finalizers.
    pub fn same_apart_from_bookkeeping(&self, other: &NamespaceMeta) -> bool {
        fn pairs(p: Option<Pairs<'_>>) -> impl Iterator<Item = (&str, &str)> {
            p.into_iter().flat_map(Pairs::iter)
        }
        self.name == other.name
            && self.creation_timestamp == other.creation_timestamp
            && self.deletion_timestamp == other.deletion_timestamp
            && self.rest == other.rest
            && self.uid() == other.uid()
            && pairs(self.labels()).eq(pairs(other.labels()))
            && pairs(self.annotations()).eq(pairs(other.annotations()))
    }

    /// The same name as the forest's key for it, so the two share one allocation.
    pub fn share_name(&mut self, name: &Arc<str>) {
        if *self.name == **name {
            self.name = name.clone();
        }
    }
}

/// Packs strings: a length (LEB128), then the bytes.
struct Writer<'a> {
    out: Vec<u8>,
    /// The namespace's name, written as [`OWN_NAME`].
    name: &'a str,
}

impl Writer<'_> {
    fn length(&mut self, mut n: usize) {
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.out.push(low);
                return;
            }
            self.out.push(low | 0x80);
        }
    }

    fn string(&mut self, s: &str) {
        self.length(s.len());
        self.out.extend_from_slice(s.as_bytes());
    }

    fn flag_string(&mut self, flag: u8, s: Option<&str>) {
        if let Some(s) = s {
            self.out[0] |= flag;
            self.string(s);
        }
    }

    fn pairs(&mut self, flag: u8, pairs: Option<&BTreeMap<String, String>>) {
        let Some(pairs) = pairs else { return };
        self.out[0] |= flag;
        self.length(pairs.len());
        for (k, v) in pairs {
            match KNOWN_KEYS.iter().position(|known| known == k) {
                Some(i) => self.out.push(FIRST_KNOWN + i as u8),
                None => {
                    self.out.push(LITERAL);
                    self.string(k);
                }
            }
            match v.as_str() {
                "true" => self.out.push(TRUE),
                v if v == self.name && !v.is_empty() => self.out.push(OWN_NAME),
                v => {
                    self.out.push(LITERAL);
                    self.string(v);
                }
            }
        }
    }
}

/// Reads what a [`Writer`] packed, from valid UTF-8 strings only.
#[derive(Clone, Copy)]
struct Reader<'a> {
    bytes: &'a [u8],
    name: &'a str,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.bytes.split_first().expect("packed metadata is read as it was written");
        self.bytes = rest;
        *first
    }

    fn length(&mut self) -> usize {
        let (mut n, mut shift) = (0, 0);
        loop {
            let b = self.byte();
            n |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return n;
            }
            shift += 7;
        }
    }

    fn string(&mut self) -> &'a str {
        let n = self.length();
        let (s, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        std::str::from_utf8(s).expect("packed from a str")
    }

    fn key(&mut self) -> &'a str {
        match self.byte() {
            LITERAL => self.string(),
            tag => KNOWN_KEYS[usize::from(tag - FIRST_KNOWN)],
        }
    }

    fn value(&mut self) -> &'a str {
        match self.byte() {
            TRUE => "true",
            OWN_NAME => self.name,
            _ => self.string(),
        }
    }

    fn pairs(mut self) -> Pairs<'a> {
        let count = self.length();
        Pairs { at: self, count }
    }
}

/// Labels or annotations, read in place, in key order.
#[derive(Clone, Copy)]
pub struct Pairs<'a> {
    at: Reader<'a>,
    count: usize,
}

impl<'a> Pairs<'a> {
    /// The value of `key`.
    pub fn get(self, key: &str) -> Option<&'a str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The pairs, in key order.
    pub fn iter(self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let mut r = self.at;
        (0..self.count).map(move |_| (r.key(), r.value()))
    }

    /// The pairs as k8s-openapi holds them.
    pub fn to_map(self) -> BTreeMap<String, String> {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// The reader past the pairs.
    fn skip(self) -> Reader<'a> {
        let mut r = self.at;
        for _ in 0..self.count {
            r.key();
            r.value();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::string_map as map;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

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
    fn packs_any_strings_and_gives_them_back() {
        let long = "x".repeat(300); // a length of two bytes
        let full = ObjectMeta {
            name: Some("dev".into()),
            uid: Some(String::new()),
            finalizers: Some(vec![
                keys::HAS_SUBNAMESPACE_FINALIZER.into(),
                "ünïcode/ß".into(),
                String::new(),
            ]),
            labels: Some(map(&[
                ("kubernetes.io/metadata.name", "dev"),
                ("same", "dev"),
                ("flag", "true"),
                ("l", &long),
            ])),
            annotations: Some(map(&[("empty", ""), (keys::SEAL, "v1.abc"), ("note", "ünïcode")])),
            ..Default::default()
        };
        let meta = NamespaceMeta::new(full.clone());
        assert_eq!(meta.to_object_meta(), full);
        assert_eq!(meta.uid(), Some(""));
        assert_eq!(meta.resource_version(), None);
        assert_eq!(
            meta.finalizers().collect::<Vec<_>>(),
            [keys::HAS_SUBNAMESPACE_FINALIZER, "ünïcode/ß", ""]
        );
        assert_eq!(meta.labels().unwrap().get("l"), Some(long.as_str()));
        assert_eq!(meta.annotation("note"), Some("ünïcode"));
        assert_eq!(meta.annotation("empty"), Some(""));
        let tagged = NamespaceMeta::new(ObjectMeta {
            name: Some("dev".into()),
            labels: Some(map(&[("kubernetes.io/metadata.name", "dev"), (keys::HIERARCHY_MEMBER, "true")])),
            ..Default::default()
        });
        assert_eq!(
            tagged.packed.len(),
            1 + 1 + 2 * 2,
            "flags, a count, and a byte for each known key and value"
        );
        assert_eq!(tagged.labels().unwrap().get("kubernetes.io/metadata.name"), Some("dev"));
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
