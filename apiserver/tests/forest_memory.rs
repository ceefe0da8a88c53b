//! How many bytes the forest holds per namespace, counted by the allocator: the figure that
//! decides hns-apiserver's memory on a cluster of 100,000 namespaces. The namespaces are shaped
//! as `make bench-scale` makes them (trees 10 levels deep and at most 5 wide, subnamespaces
//! carrying the labels, annotations and finalizers hns gives them), and the forest is filled
//! both ways a replica fills it: a namespace at a time as they are created, and from a re-list
//! at start. Bytes, unlike seconds, are the same on every run of the same code, so the ceiling
//! below fails only when the representation grows.

use std::alloc::System;
use std::collections::BTreeMap;

use hns_api::keys;
use hns_apiserver::hierarchy::forest::Forest;
use hns_apiserver::hierarchy::seal::Sealer;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Namespaces per tree, and trees.
const TREE: usize = 10_000;
const TREES: usize = 2;
const DEPTH: usize = 10;
const WIDTH: usize = 5;

/// The ceiling: bytes allocated per namespace, the representation's, not the allocator's own
/// rounding (576 and 586 when it was set; 1,155 and 1,164 before the compact representation).
const CEILING: usize = 700;

/// Level sizes of a tree of `size`, root first: each level at most `WIDTH` times the one above,
/// the rest spread evenly so that the tree is `DEPTH` levels deep (as `make bench-scale`).
fn levels(size: usize) -> Vec<usize> {
    let (mut levels, mut left) = (vec![1], size - 1);
    while levels.len() <= DEPTH && left > 0 {
        let level = (levels[levels.len() - 1] * WIDTH).min(left.div_ceil(DEPTH + 1 - levels.len()));
        levels.push(level);
        left -= level;
    }
    levels
}

/// Tree `t`'s namespaces with their ancestors (nearest first), root first.
fn tree(t: usize) -> Vec<(String, Vec<String>)> {
    let mut out = vec![(format!("hns-scale-t{t}"), Vec::new())];
    let mut above = vec![0];
    for (depth, &n) in levels(TREE).iter().enumerate().skip(1) {
        let first = out.len();
        for j in 0..n {
            let parent = &out[above[j % above.len()]];
            let ancestors = std::iter::once(parent.0.clone()).chain(parent.1.iter().cloned()).collect();
            out.push((format!("hns-scale-t{t}-l{depth}-{j}"), ancestors));
        }
        above = (first..out.len()).collect();
    }
    out
}

/// Namespace `name` as hns makes it, below `ancestors`.
fn namespace(sealer: &Sealer, i: usize, name: &str, ancestors: &[String], parent_of_some: bool) -> Namespace {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/metadata.name".to_string(), name.to_string()),
        (keys::HIERARCHY_MEMBER.to_string(), "true".to_string()),
        (keys::INCLUDED_NAMESPACE.to_string(), "true".to_string()),
        (keys::tree_label(name), "0".to_string()),
    ]);
    for (depth, a) in ancestors.iter().enumerate() {
        labels.insert(keys::tree_label(a), (depth + 1).to_string());
    }
    let mut annotations = BTreeMap::new();
    if let Some(parent) = ancestors.first() {
        annotations.insert(keys::SUBNAMESPACE_OF.to_string(), parent.clone());
        let seal = sealer.seal(name, &annotations).expect("a subnamespace's state is sealed");
        annotations.insert(keys::SEAL.to_string(), seal);
    }
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(format!("{:08x}-5bbb-413b-ab73-ea58bc7695d9", i)),
            resource_version: Some((1_000_000 + i).to_string()),
            creation_timestamp: Some(Time(jiff::Timestamp::from_second(1_790_000_000).expect("a time"))),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: parent_of_some.then(|| vec![keys::HAS_SUBNAMESPACE_FINALIZER.to_string()]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn namespaces(sealer: &Sealer) -> Vec<Namespace> {
    let trees: Vec<_> = (0..TREES).flat_map(tree).collect();
    let parents: std::collections::HashSet<&str> =
        trees.iter().filter_map(|(_, a)| a.first().map(String::as_str)).collect();
    trees
        .iter()
        .enumerate()
        .map(|(i, (name, ancestors))| namespace(sealer, i, name, ancestors, parents.contains(name.as_str())))
        .collect()
}

/// Bytes allocated per namespace while `fill` holds a forest of `n` namespaces.
fn per_namespace(n: usize, fill: impl FnOnce() -> Forest) -> usize {
    let region = Region::new(GLOBAL);
    let forest = fill();
    let change = region.change();
    drop(forest);
    // A reallocation's growth or shrinking is counted in bytes_allocated or bytes_deallocated.
    change.bytes_allocated.saturating_sub(change.bytes_deallocated) / n
}

#[test]
fn a_namespace_costs_the_forest_little() {
    let sealer = Sealer::new(b"forest-memory-key-32-bytes-long!").expect("an HMAC key");
    let all = namespaces(&sealer);
    let n = all.len();
    let created = per_namespace(n, || {
        let mut f = Forest::new(sealer.clone());
        for ns in all.iter().cloned() {
            f.upsert(ns);
        }
        f
    });
    // A re-list brings namespaces in name order: descendants before their ancestors, often.
    let mut listed = all.clone();
    listed.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let relisted = per_namespace(n, || {
        let mut f = Forest::new(sealer.clone());
        f.replace_all(listed.iter().cloned());
        f
    });
    println!(
        "forest: {created} bytes per namespace filled as created, {relisted} from a re-list ({n} namespaces)"
    );
    assert!(created <= CEILING && relisted <= CEILING, "over {CEILING} bytes per namespace");
}
