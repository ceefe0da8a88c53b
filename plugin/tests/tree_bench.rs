//! Not a check but figures, for `make bench` (`hack/bench.sh plugin-tree`, no cluster needed):
//! the plugin's own work in `kubectl hns tree -A` at 100,000 namespaces, step by step, on a
//! `HierarchyTree` shaped as `make bench-scale`'s cluster (ten trees of 9,099 namespaces, 10
//! levels deep with at most 5 children each, and 9,000 namespaces outside any tree), beside a
//! baseline measured in the same run: reading the same bytes as untyped JSON, which any client
//! of the answer pays.
//! Run with `cargo test --release -p kubectl-hns --test tree_bench -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use kubectl_hns::forest::Forest;
use kubectl_hns::hns::TreeEntry;
use kubectl_hns::paint::Paint;
use kubectl_hns::tree;

const TREES: usize = 10;
/// Namespaces per tree, its root included.
const TREE: usize = 9_099;
/// How many namespaces each level of a tree holds, root first: what `make bench-scale`'s rule
/// makes of 9,099 namespaces, 10 levels deep with at most 5 children each
/// (tests/src/scale_bench.rs).
const LEVELS: [usize; 11] = [1, 5, 25, 125, 625, 1_387, 1_387, 1_386, 1_386, 1_386, 1_386];
/// Namespaces outside any tree.
const LONE: usize = 9_000;
const RUNS: usize = 7;

/// The `HierarchyTree` hns-apiserver would answer for these trees, as JSON.
fn hierarchy_tree() -> Vec<u8> {
    let mut namespaces: Vec<serde_json::Value> =
        (0..LONE).map(|i| serde_json::json!({"name": format!("scale-plain-{i}")})).collect();
    for t in 0..TREES {
        let name = |depth: usize, j: usize| format!("scale-t{t}-l{depth}-{j}");
        namespaces.push(serde_json::json!({"name": name(0, 0)}));
        for depth in 1..LEVELS.len() {
            for j in 0..LEVELS[depth] {
                let parent = name(depth - 1, j % LEVELS[depth - 1]);
                namespaces.push(
                    serde_json::json!({"name": name(depth, j), "parent": parent, "subnamespace": true}),
                );
            }
        }
    }
    serde_json::to_vec(&serde_json::json!({"kind": "HierarchyTree", "namespaces": namespaces})).expect("JSON")
}

#[derive(serde::Deserialize)]
struct HierarchyTree {
    namespaces: Vec<TreeEntry>,
}

/// One pass of the plugin's work; the time of each step, and the drawing.
fn pass(body: &[u8]) -> ([Duration; 5], String) {
    let started = Instant::now();
    let parsed: HierarchyTree = serde_json::from_slice(body).expect("a HierarchyTree");
    let parse = started.elapsed();
    let started = Instant::now();
    let forest = Forest::from_tree(parsed.namespaces);
    let build = started.elapsed();
    let started = Instant::now();
    let tops = forest.tops();
    let find_tops = started.elapsed();
    let started = Instant::now();
    let drawing = tree::text(&forest, &tops, &Paint::new(false));
    let draw = started.elapsed();
    // What `tree -A` leaves to the system at exit (commands/tree.rs), timed here for the record.
    let started = Instant::now();
    drop(tops);
    drop(forest);
    let free = started.elapsed();
    ([parse, build, find_tops, draw, free], drawing)
}

fn median(mut runs: Vec<Duration>) -> f64 {
    runs.sort();
    runs[runs.len() / 2].as_secs_f64() * 1e3
}

// Ignored in `make test` because it is a benchmark (figures, no assertion on time);
// `make bench` (hack/bench.sh) runs it with --ignored.
#[test]
#[ignore = "benchmark: prints figures"]
fn tree_drawing_bench() {
    assert_eq!(LEVELS.iter().sum::<usize>(), TREE);
    let body = hierarchy_tree();
    let mut steps: [Vec<Duration>; 5] = Default::default();
    let mut baseline = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let untyped: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        drop(untyped);
        baseline.push(started.elapsed());
        let (times, drawing) = pass(&body);
        // Every namespace drawn once: the roots at the margin, the rest marked as subnamespaces.
        assert_eq!(drawing.lines().filter(|l| l.starts_with("scale-")).count(), TREES + LONE);
        assert_eq!(drawing.matches("[s] scale-t").count(), TREES * (TREE - 1));
        for (all, t) in steps.iter_mut().zip(times) {
            all.push(t);
        }
    }
    let [parse, build, find_tops, draw, free] = steps.map(median);
    let work = parse + build + find_tops + draw + free;
    let baseline = median(baseline);
    println!(
        "bench tree -A's plugin work, {} namespaces ({:.1} MB of HierarchyTree), median of {RUNS}",
        TREES * TREE + LONE,
        body.len() as f64 / 1e6
    );
    println!(
        "bench   parse {parse:.1} ms, forest {build:.1}, tops {find_tops:.1}, drawing {draw:.1}, freeing {free:.1}: {work:.1} ms"
    );
    println!(
        "bench   baseline, reading the same bytes as untyped JSON: {baseline:.1} ms; plugin's work {:.2}x that",
        work / baseline
    );
}
