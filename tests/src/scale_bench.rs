//! `hns-bench scale` (`make bench-scale`, not part of CI: it takes most of an hour): hns with
//! 100,000 namespaces ($HNS_BENCH_SCALE_NAMESPACES), in the order a cluster grows.
//!
//! The cluster: ten trees made of subnamespaces, each 10 levels deep with at most 5 children per
//! namespace, a tree of 1,000 to move, and plain namespaces made before and after the trees (the
//! baseline of creation rates), then five rounds of a block of plain namespaces and a tree of
//! subnamespaces each, in alternating order, on the full cluster. Then, measured: creation rates (the ratio of the
//! rounds' median, and each control-plane process's CPU time per namespace); one RoleBinding at a root
//! reaching its whole tree vs the best client writing the copies itself; hns-apiserver's memory,
//! steady and while 5 clients list everything at once; GET and LIST against kube-apiserver's own
//! namespaces; `kubectl hns tree -A`; a move of the 1,000-namespace tree; a restart.
//! Prints figures and the targets beside them; asserts nothing about time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

use crate::bench::{copies, time_copies};
use crate::reliability::processes::Processes;
use crate::timing::quantile_ms;
use crate::{create_namespace, create_subns, role_binding, Env, Subject};

const PREFIX: &str = "scale";
const TREES: usize = 10;
const DEPTH: usize = 10;
const WIDTH: usize = 5;
/// Namespaces in the tree that is moved.
const MOVED: usize = 1_000;
/// Clients creating namespaces at once, both sides.
const CREATORS: usize = 16;
/// kube-apiserver's default `--max-mutating-requests-inflight`: the most writes a client can
/// have in flight before it is throttled, so the best a client writing copies itself can do.
const BEST_CLIENT: usize = 200;

/// How many namespaces each level of a tree of `size` holds, root first: each level at most
/// `WIDTH` times the one above, the rest spread evenly so that the tree is `DEPTH` levels deep.
fn levels(size: usize) -> Vec<usize> {
    let mut levels = vec![1];
    let mut left = size - 1;
    while levels.len() <= DEPTH && left > 0 {
        let to_place = DEPTH + 1 - levels.len();
        let level = (levels[levels.len() - 1] * WIDTH).min(left.div_ceil(to_place));
        levels.push(level);
        left -= level;
    }
    levels
}

/// A tree: its namespaces level by level, each with its parent.
struct Tree {
    root: String,
    /// Level by level below the root: (namespace, parent).
    levels: Vec<Vec<(String, String)>>,
}

impl Tree {
    fn new(root: String, size: usize) -> Tree {
        let sizes = levels(size);
        let mut out: Vec<Vec<(String, String)>> = Vec::new();
        let mut above = vec![root.clone()];
        for (depth, &n) in sizes.iter().enumerate().skip(1) {
            let level: Vec<(String, String)> =
                (0..n).map(|j| (format!("{root}-l{depth}-{j}"), above[j % above.len()].clone())).collect();
            above = level.iter().map(|(name, _)| name.clone()).collect();
            out.push(level);
        }
        Tree { root, levels: out }
    }

    fn descendants(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    fn namespaces(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.root.as_str()).chain(self.levels.iter().flatten().map(|(n, _)| n.as_str()))
    }
}

/// Creates a tree's root, then its subnamespaces, each as soon as its parent exists and at most
/// `CREATORS` at once (as a client making a tree would: waiting for a whole level before the
/// next leaves requests unsent behind each level's slowest); returns how long the
/// subnamespaces took.
async fn grow(client: &Client, tree: &Tree) -> Duration {
    create_namespace(client, &tree.root, &[]).await;
    let mut below: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, parent) in tree.levels.iter().flatten() {
        below.entry(parent.as_str()).or_default().push(name.as_str());
    }
    let started = Instant::now();
    let mut ready: Vec<(&str, &str)> = Vec::new();
    let mut made = vec![tree.root.as_str()];
    let mut in_flight = futures::stream::FuturesUnordered::new();
    loop {
        for parent in made.drain(..) {
            ready.extend(below.remove(parent).unwrap_or_default().into_iter().map(|c| (parent, c)).rev());
        }
        while in_flight.len() < CREATORS {
            let Some((parent, name)) = ready.pop() else { break };
            in_flight.push(async move {
                create_subns(client, parent, name)
                    .await
                    .unwrap_or_else(|e| panic!("subnamespace {name}: {e}"));
                name
            });
        }
        match in_flight.next().await {
            Some(name) => made.push(name),
            None => return started.elapsed(),
        }
    }
}

/// Creates `n` plain namespaces `<prefix>-<i>`; returns how long they took.
async fn plain(client: &Client, prefix: &str, n: usize) -> Duration {
    crate::bench::create_plain_namespaces(client, prefix, 0..n, CREATORS).await
}

fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

/// Rounds of creation at full size, each a block of plain namespaces and a tree of
/// subnamespaces, so that both kinds meet the same cluster and the same machine. The order
/// alternates from round to round: the second block of a round meets the first one's aftermath
/// (kube-controller-manager writing a ServiceAccount and a ConfigMap into each new namespace),
/// so each kind goes second as often as the other, give or take one round.
const ROUNDS: usize = 5;
/// Namespaces in each block of a round.
const ROUND: usize = 1_000;
/// The processes whose CPU time a round splits between the namespaces it made.
pub const COMPONENTS: [&str; 4] = ["kube-apiserver", "etcd", "hns-apiserver", "kube-controller-manager"];
/// kube-apiserver's place in [`COMPONENTS`].
pub const KUBE_APISERVER: usize = 0;
/// etcd's place in [`COMPONENTS`].
pub const ETCD: usize = 1;
/// hns-apiserver's place in [`COMPONENTS`].
const HNS: usize = 2;
/// kube-controller-manager's place in [`COMPONENTS`].
pub const KUBE_CONTROLLER_MANAGER: usize = 3;

/// The CPU seconds each of [`COMPONENTS`] has used (0 without a local control plane).
fn cpu(env: &Env) -> [f64; 4] {
    let Some(dir) = env.control_plane_dir() else { return [0.0; 4] };
    let processes = Processes::new(&dir);
    COMPONENTS.map(|c| {
        match c {
            // hns on the nodes (hack/nodes.sh) has no process here: its CPU is its pods'.
            "hns-apiserver" if processes.pid(c).is_none() => processes.node_pods_cpu_seconds(),
            _ => processes.cpu_seconds(c),
        }
        .unwrap_or(0.0)
    })
}

/// Waits until hns-apiserver is done with a block (under 2% of a core over a second), at most a
/// minute: it goes on after the block's last request (new parents get their finalizer), and the
/// next block must not pay for it.
pub async fn settle(env: &Env) {
    let started = Instant::now();
    let mut last = cpu(env);
    while started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cpu(env);
        if now[HNS] - last[HNS] < 0.02 {
            return;
        }
        last = now;
    }
}

/// CPU seconds per second each component uses meanwhile, over 3 seconds without a request of
/// ours: kube-controller-manager writes a ConfigMap and a ServiceAccount into every namespace
/// made, at 20 writes a second, so after many namespaces it is busy for long after them.
async fn background(env: &Env) -> [f64; 4] {
    let before = cpu(env);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = cpu(env);
    std::array::from_fn(|i| (after[i] - before[i]) / 3.0)
}

/// The CPU a block cost each component, in milliseconds per namespace: what it used from
/// `before` until `after`, `took` later, less the background meanwhile.
fn per_namespace(before: [f64; 4], after: [f64; 4], took: Duration, idle: [f64; 4], n: usize) -> [f64; 4] {
    std::array::from_fn(|i| (after[i] - before[i] - idle[i] * took.as_secs_f64()).max(0.0) * 1e3 / n as f64)
}

/// Runs `block` (which makes `n` namespaces and returns how long it took), waits for hns to be
/// done with it, and returns how long it took and its CPU per namespace.
pub async fn measured<F: std::future::Future<Output = Duration>>(
    env: &Env,
    n: usize,
    block: F,
) -> (Duration, [f64; 4]) {
    let idle = background(env).await;
    let (before, started) = (cpu(env), Instant::now());
    let took = block.await;
    settle(env).await;
    (took, per_namespace(before, cpu(env), started.elapsed(), idle, n))
}

/// Runs `block` (minutes of work on `n` namespaces, after which the cluster has nothing left to
/// do), waits for hns to be done with it, and returns its CPU per namespace less the background
/// sampled after it. Sampled before, as [`measured`] does, the background would catch
/// kube-controller-manager still writing into the namespaces just made, and count that rate
/// against every second of the block.
pub async fn measured_then_idle<F: std::future::Future<Output = ()>>(
    env: &Env,
    n: usize,
    block: F,
) -> [f64; 4] {
    let (before, started) = (cpu(env), Instant::now());
    block.await;
    settle(env).await;
    let (after, took) = (cpu(env), started.elapsed());
    per_namespace(before, after, took, background(env).await, n)
}

/// Interleaved rounds of plain namespaces and subnamespaces on the cluster as it is, named
/// `<prefix>-round<r>…`: the rate of each, their ratio per round (the median is the figure; the
/// ratio of all the rounds' namespaces over all their time is printed beside it), and where each
/// costs CPU.
pub async fn creation_rounds(client: &Client, env: &Env, prefix: &str) {
    println!("creation in {ROUNDS} rounds at full size, {ROUND} of each kind a round, {CREATORS} clients");
    let (mut ratios, mut plain_cpu, mut sub_cpu) = (Vec::new(), [0.0; 4], [0.0; 4]);
    let (mut plain_time, mut sub_time, mut subs) = (0.0, 0.0, 0);
    for r in 0..ROUNDS {
        let tree = Tree::new(format!("{prefix}-round{r}"), ROUND + 1);
        let plain_prefix = format!("{prefix}-round{r}-plain");
        let plain_block = || measured(env, ROUND, plain(client, &plain_prefix, ROUND));
        let sub_block = || measured(env, tree.descendants(), grow(client, &tree));
        let ((plain_took, plain_used), (sub_took, sub_used), order) = if r % 2 == 0 {
            let p = plain_block().await;
            (p, sub_block().await, "plain first")
        } else {
            let s = sub_block().await;
            (plain_block().await, s, "subnamespaces first")
        };
        let (plain_rate, sub_rate) = (rate(ROUND, plain_took), rate(tree.descendants(), sub_took));
        println!(
            "  round {r} ({order}): plain {plain_rate:.0}/s, subnamespaces {sub_rate:.0}/s, ratio {:.2}",
            sub_rate / plain_rate
        );
        ratios.push(sub_rate / plain_rate);
        (plain_time, sub_time, subs) = (
            plain_time + plain_took.as_secs_f64(),
            sub_time + sub_took.as_secs_f64(),
            subs + tree.descendants(),
        );
        for i in 0..COMPONENTS.len() {
            plain_cpu[i] += plain_used[i] / ROUNDS as f64;
            sub_cpu[i] += sub_used[i] / ROUNDS as f64;
        }
    }
    ratios.sort_by(f64::total_cmp);
    let pooled = (subs as f64 / sub_time) / ((ROUNDS * ROUND) as f64 / plain_time);
    println!(
        "  median ratio {:.2} (target >= 0.8); all rounds together {pooled:.2}; spread {:.2}-{:.2}",
        ratios[ROUNDS / 2],
        ratios[0],
        ratios[ROUNDS - 1]
    );
    println!("  CPU ms per namespace, less the background   plain   subnamespace");
    for (i, c) in COMPONENTS.iter().enumerate() {
        println!("    {c:<42} {:7.2} {:14.2}", plain_cpu[i], sub_cpu[i]);
    }
    let total = |v: [f64; 4]| v.iter().sum::<f64>();
    println!("    {:<42} {:7.2} {:14.2}", "all", total(plain_cpu), total(sub_cpu));
    // On a machine the blocks keep busy, rates go as the inverse of CPU per namespace: what the
    // ratio could be at best if hns-apiserver spent on a subnamespace only what it spends on a
    // plain namespace (its webhook call and tree labels), the rest of the cost unchanged.
    let others = total(sub_cpu) - (sub_cpu[HNS] - plain_cpu[HNS]).max(0.0);
    println!(
        "  if hns-apiserver cost a subnamespace what it costs a plain namespace: ratio at most {:.2} by CPU",
        total(plain_cpu) / others
    );
}

/// Polls `check` (a count) every half second until it reaches `want` or `limit` passes;
/// returns how long it took, or `None` on timeout.
async fn until_count<F, Fut>(want: usize, limit: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let started = Instant::now();
    while started.elapsed() < limit {
        if check().await >= want {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Namespaces carrying the tree label of `root` (hns labels every descendant).
async fn labelled_below(client: &Client, root: &str) -> usize {
    let selector = hns_api::keys::tree_label(root);
    let api: Api<Namespace> = Api::all(client.clone());
    api.list_metadata(&ListParams::default().labels(&selector)).await.map_or(0, |l| l.items.len())
}

/// The best client: RoleBinding `name` written into every namespace of `tree` below its root,
/// `BEST_CLIENT` at a time, each write retried when kube-apiserver answers 429 (too many in
/// flight), as client-go retries.
async fn by_hand(client: &Client, tree: &Tree, name: &str) -> Duration {
    let started = Instant::now();
    stream::iter(tree.namespaces().skip(1))
        .for_each_concurrent(BEST_CLIENT, |ns| async move {
            let api: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
            // Kept from hns's propagation (HNC's exception annotation): written into parents
            // and children alike, the parents' would otherwise be copied into the children.
            let mut binding = role_binding(name, "view", Subject::Group("bench"));
            binding.metadata.annotations =
                Some([("propagate.hnc.x-k8s.io/none".to_string(), "true".to_string())].into());
            loop {
                match api.create(&PostParams::default(), &binding).await {
                    Ok(_) => break,
                    Err(kube::Error::Api(s)) if s.code == 429 => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    Err(e) => panic!("RoleBinding {name} in {ns}: {e}"),
                }
            }
        })
        .await;
    started.elapsed()
}

fn rss(env: &Env) -> Option<f64> {
    Processes::new(&env.local.as_ref()?.dir).rss_mib("hns-apiserver")
}

fn mib(v: Option<f64>) -> String {
    v.map_or("n/a (needs the local control plane)".into(), |v| format!("{v:.1} MiB"))
}

/// Runs `kubectl` (or, with `hns` first, the plugin through it) without colour; returns how
/// long it took and what it printed.
fn run_kubectl(env: &Env, args: &[&str]) -> (Duration, std::io::Result<std::process::Output>) {
    let started = Instant::now();
    let out = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &env.kubeconfig)
        .env("PATH", crate::path_with(&crate::plugin_dir()))
        .env("NO_COLOR", "1")
        .args(args)
        .output();
    (started.elapsed(), out)
}

/// How long `kubectl ARGS` took, which must succeed.
fn timed_kubectl(env: &Env, args: &[&str]) -> anyhow::Result<Duration> {
    let (took, out) = run_kubectl(env, args);
    let out = out?;
    anyhow::ensure!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(took)
}

pub async fn run(client: &Client, env: &Env, total: usize) -> anyhow::Result<()> {
    let existing = Api::<Namespace>::all(client.clone()).list_metadata(&ListParams::default()).await?;
    if existing.items.iter().any(|n| n.metadata.name.as_deref().is_some_and(|n| n.starts_with(PREFIX))) {
        anyhow::bail!(
            "namespaces named {PREFIX}-* exist already: run on a fresh cluster (make bench-scale starts one)"
        );
    }
    let plain_block = (total / 100).max(100);
    // The rounds of creation add their namespaces later: the trees leave room for them.
    let tree_size = (total - 2 * plain_block - MOVED - ROUNDS * (2 * ROUND + 1)) / TREES;
    let trees: Vec<Tree> = (0..TREES).map(|t| Tree::new(format!("{PREFIX}-t{t}"), tree_size)).collect();
    let moved = Tree::new(format!("{PREFIX}-move"), MOVED);
    println!(
        "{total} namespaces: {TREES} trees of {tree_size} ({} levels below the root, at most {WIDTH} children each), a tree of {MOVED} to move, 2 x {plain_block} plain",
        trees[0].levels.len()
    );

    // Creation, plain namespaces before and after the trees, so both sides see small and large.
    let first = plain(client, &format!("{PREFIX}-plain-a"), plain_block).await;
    let mut sub_took = Duration::ZERO;
    for (t, tree) in trees.iter().enumerate() {
        let took = grow(client, tree).await;
        println!("  tree {t}: {} subnamespaces in {:.1} s", tree.descendants(), took.as_secs_f64());
        sub_took += took;
    }
    sub_took += grow(client, &moved).await;
    let last = plain(client, &format!("{PREFIX}-plain-b"), plain_block).await;
    let subs = TREES * trees[0].descendants() + moved.descendants();
    let plain_rate = rate(2 * plain_block, first + last);
    let sub_rate = rate(subs, sub_took);
    println!();
    println!("creation, {CREATORS} clients       per second");
    println!(
        "  plain namespaces           {plain_rate:8.0}   ({:.0} first, {:.0} last)",
        rate(plain_block, first),
        rate(plain_block, last)
    );
    println!(
        "  subnamespaces              {sub_rate:8.0}   ratio {:.2} (target >= 0.8)",
        sub_rate / plain_rate
    );

    // Settled: every tree labelled to its leaves.
    for tree in trees.iter().chain([&moved]) {
        let want = tree.descendants() + 1;
        until_count(want, Duration::from_secs(600), || labelled_below(client, &tree.root))
            .await
            .ok_or_else(|| anyhow::anyhow!("{} did not get its tree labels in 10 minutes", tree.root))?;
    }

    creation_rounds(client, env, PREFIX).await;
    propagation(client, &trees).await?;
    memory_and_reads(client, env).await?;
    move_subtree(client, &trees[0], &moved).await?;
    stuck(client, env).await?;
    restart(env).await
}

/// One RoleBinding at a root reaching its tree vs the best client, then a second one, so the
/// cluster holds about 20,000 propagated objects from here on.
async fn propagation(client: &Client, trees: &[Tree]) -> anyhow::Result<()> {
    let n = trees[0].descendants();
    let baseline = by_hand(client, &trees[1], "by-hand").await;
    let hns = time_copies(client, &trees[0].root, "inherited-0", n).await?;
    time_copies(client, &trees[0].root, "inherited-1", n).await?;
    println!();
    println!("one RoleBinding to {n} descendants       s");
    println!("  best client ({BEST_CLIENT} at once)         {:8.2}", baseline.as_secs_f64());
    println!(
        "  hns                              {:8.2}   ratio {:.2} (target <= 1.0)",
        hns.as_secs_f64(),
        hns.as_secs_f64() / baseline.as_secs_f64()
    );
    Ok(())
}

/// GET and LIST against kube-apiserver's own namespaces, memory steady and under 5 full lists
/// at once, and `tree -A`.
async fn memory_and_reads(client: &Client, env: &Env) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_secs(15)).await;
    println!();
    println!("hns-apiserver RSS, steady: {} (target < 160 MiB)", mib(rss(env)));

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names = crate::bench::namespace_names(client).await?;
    const GETS: usize = 500;
    let (mut hns, mut kube) = (Vec::new(), Vec::new());
    for i in 0..GETS {
        let name = &names[(i * 7919) % names.len()];
        let t = Instant::now();
        Api::<hns_api::HierarchyConfiguration>::namespaced(client.clone(), name).get("hierarchy").await?;
        hns.push(t.elapsed());
        let t = Instant::now();
        namespaces.get(name).await?;
        kube.push(t.elapsed());
    }
    hns.sort();
    kube.sort();
    let hcs: Api<hns_api::HierarchyConfiguration> = Api::all(client.clone());
    let (mut hns_lists, mut kube_lists) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let t = Instant::now();
        hcs.list(&ListParams::default()).await?;
        hns_lists.push(t.elapsed());
        let t = Instant::now();
        namespaces.list(&ListParams::default()).await?;
        kube_lists.push(t.elapsed());
    }
    hns_lists.sort();
    kube_lists.sort();
    println!();
    println!("reads at {} namespaces          hns (ms)   namespaces (ms)   ratio", names.len());
    println!(
        "  GET p50 ({GETS})                  {:8.2}   {:15.2}   {:5.2} (target <= 1.5)",
        quantile_ms(&hns, 0.5),
        quantile_ms(&kube, 0.5),
        quantile_ms(&hns, 0.5) / quantile_ms(&kube, 0.5)
    );
    println!(
        "  LIST -A median of 3           {:8.0}   {:15.0}   {:5.2} (target <= 1.0)",
        quantile_ms(&hns_lists, 0.5),
        quantile_ms(&kube_lists, 0.5),
        quantile_ms(&hns_lists, 0.5) / quantile_ms(&kube_lists, 0.5)
    );

    // Five clients listing everything at once, as the OOM came from.
    let processes = env.local.as_ref().map(|l| Processes::new(&l.dir));
    let measured = processes.as_ref().is_some_and(|p| p.reset_peak_rss("hns-apiserver"));
    let started = Instant::now();
    let lists = [
        vec!["get", "hierarchyconfigurations", "-A"],
        vec!["get", "hierarchyconfigurations", "-A", "-o", "json"],
        vec!["get", "subnamespaces", "-A", "-o", "json"],
        vec!["get", "--raw", "/apis/hnc.x-k8s.io/v1alpha2/hierarchyconfigurations"],
        vec!["hns", "tree", "-A"],
    ];
    let runs = lists.iter().map(|args| async move { timed_kubectl(env, args) });
    for (args, took) in lists.iter().zip(futures::future::join_all(runs).await) {
        println!("  kubectl {:<55} {:6.0} ms (5 at once)", args.join(" "), took?.as_secs_f64() * 1000.0);
    }
    let peak = processes.as_ref().filter(|_| measured).and_then(|p| p.peak_rss_mib("hns-apiserver"));
    println!(
        "hns-apiserver peak RSS while 5 clients list everything at once ({:.1} s): {} (target < 256 MiB)",
        started.elapsed().as_secs_f64(),
        mib(peak)
    );

    let mut tree = Vec::new();
    for _ in 0..3 {
        tree.push(timed_kubectl(env, &["hns", "tree", "-A"])?);
    }
    tree.sort();
    println!("kubectl hns tree -A, median of 3: {:.0} ms (target < 500 ms)", quantile_ms(&tree, 0.5));
    tokio::time::sleep(Duration::from_secs(15)).await;
    println!("hns-apiserver RSS, steady again: {}", mib(rss(env)));
    Ok(())
}

/// Moves the 1,000-namespace tree under `to`'s root: converged when every namespace of it has
/// `to`'s tree label and both of its RoleBindings.
async fn move_subtree(client: &Client, to: &Tree, moved: &Tree) -> anyhow::Result<()> {
    let labelled = to.descendants() + 1 + moved.descendants() + 1;
    let copied = to.descendants() + moved.descendants() + 1;
    let started = Instant::now();
    crate::set_parent(client, &moved.root, Some(&to.root)).await?;
    let limit = Duration::from_secs(300);
    let labels = until_count(labelled, limit, || labelled_below(client, &to.root)).await;
    let copies = async {
        for name in ["inherited-0", "inherited-1"] {
            until_count(copied, limit, || async { copies(client, name).await.unwrap_or(0) }).await?;
        }
        Some(started.elapsed())
    }
    .await;
    let show = |d: Option<Duration>| {
        d.map_or("not within 5 minutes".into(), |d| format!("{:.1} s", d.as_secs_f64()))
    };
    println!();
    println!(
        "move of a {}-namespace tree under {}: tree labels exact after {}, copies after {} (target < 30 s)",
        moved.descendants() + 1,
        to.root,
        show(labels),
        show(copies)
    );
    Ok(())
}

/// Namespaces made stuck Terminating for `diagnose -A`.
const STUCK: usize = 1_000;

/// `kubectl hns diagnose -A` with `STUCK` namespaces held Terminating by a ConfigMap's finalizer
/// each, then `--fix --yes` until they are gone.
async fn stuck(client: &Client, env: &Env) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let names: Vec<String> = (0..STUCK).map(|i| format!("{PREFIX}-stuck-{i}")).collect();
    stream::iter(&names)
        .for_each_concurrent(CREATORS, |ns| async move {
            let mut namespace = Namespace::default();
            namespace.metadata.name = Some(ns.clone());
            Api::<Namespace>::all(client.clone())
                .create(&PostParams::default(), &namespace)
                .await
                .expect("namespace");
            let mut held = ConfigMap::default();
            held.metadata.name = Some("held".into());
            held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .create(&PostParams::default(), &held)
                .await
                .expect("ConfigMap");
            Api::<Namespace>::all(client.clone()).delete(ns, &Default::default()).await.expect("delete");
        })
        .await;
    // Stuck once the namespace controller has deleted every ConfigMap (and so met the finalizer).
    let held = || async {
        let lp = ListParams::default().fields("metadata.name=held");
        let list = Api::<ConfigMap>::all(client.clone()).list_metadata(&lp).await.map(|l| l.items);
        list.map_or(0, |items| {
            items
                .iter()
                .filter(|c| {
                    c.metadata.deletion_timestamp.is_some()
                        && c.metadata
                            .namespace
                            .as_deref()
                            .is_some_and(|n| n.starts_with(&format!("{PREFIX}-stuck-")))
                })
                .count()
        })
    };
    until_count(STUCK, Duration::from_secs(600), held)
        .await
        .ok_or_else(|| anyhow::anyhow!("{STUCK} namespaces did not get stuck in 10 minutes"))?;
    let diagnose = |args: &[&str]| run_kubectl(env, args);
    let (took, out) = diagnose(&["hns", "diagnose", "-A", "--details"]);
    let out = out?;
    anyhow::ensure!(
        out.status.code() == Some(2),
        "kubectl hns diagnose -A: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = out.stdout.iter().filter(|b| **b == b'\n').count();
    let summary = String::from_utf8_lossy(&out.stdout).lines().take_while(|l| !l.is_empty()).count();
    let (fix_took, fixed) = diagnose(&["hns", "diagnose", "-A", "--fix", "--yes"]);
    fixed?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let gone = until_count(STUCK, Duration::from_secs(600), || async {
        let left = namespaces.list_metadata(&ListParams::default()).await.map_or(STUCK, |l| {
            l.items
                .iter()
                .filter(|n| {
                    n.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{PREFIX}-stuck-")))
                })
                .count()
        });
        STUCK - left
    })
    .await;
    println!();
    println!(
        "kubectl hns diagnose -A with {STUCK} namespaces stuck (a finalizer each): {:.1} s, {lines} lines ({summary} of summary first)",
        took.as_secs_f64()
    );
    println!(
        "kubectl hns diagnose -A --fix --yes: {:.1} s; all {STUCK} gone {}",
        fix_took.as_secs_f64(),
        gone.map_or("not within 10 minutes".into(), |d| format!("{:.1} s after", d.as_secs_f64()))
    );
    Ok(())
}

/// hns-apiserver killed and started again: time until Ready, and memory then and once steady.
async fn restart(env: &Env) -> anyhow::Result<()> {
    let Some(local) = env.local.as_ref() else {
        println!("restart: not measurable here (needs the local control plane)");
        return Ok(());
    };
    let processes = Processes::new(&local.dir);
    let stopped = processes.kill("hns-apiserver").await?;
    let started = Instant::now();
    processes.start(stopped)?;
    let probe = local.direct_client(None);
    let url = format!("{}/readyz", local.hns_url());
    loop {
        if probe.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "hns-apiserver not Ready 5 minutes after a restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ready = started.elapsed();
    let at_ready = processes.rss_mib("hns-apiserver");
    tokio::time::sleep(Duration::from_secs(15)).await;
    println!();
    println!(
        "restart: Ready after {:.1} s (target < 30 s); RSS then {}, 15 s later {} (target < 160 MiB)",
        ready.as_secs_f64(),
        mib(at_ready),
        mib(processes.rss_mib("hns-apiserver"))
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_ten_levels_deep_at_most_five_wide_and_of_the_size_asked() {
        for size in [1_000, 9_700, 10_000] {
            let sizes = levels(size);
            assert_eq!(sizes.iter().sum::<usize>(), size);
            assert_eq!(sizes.len(), DEPTH + 1, "{sizes:?}");
            assert!(sizes.windows(2).all(|w| w[1] <= w[0] * WIDTH), "{sizes:?}");
        }
        let tree = Tree::new("t".into(), 1_000);
        assert_eq!(tree.namespaces().count(), 1_000);
        let mut children = std::collections::HashMap::<&str, usize>::new();
        for (_, parent) in tree.levels.iter().flatten() {
            *children.entry(parent).or_default() += 1;
        }
        assert!(children.values().all(|&c| c <= WIDTH));
    }
}
