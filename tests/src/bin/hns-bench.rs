//! `hns-bench`: benchmarks against a live cluster (started by `make bench`). Prints figures and
//! ratios against a baseline measured in the same run; asserts nothing about time.
//!
//!   hns-bench api          GET latency of a hierarchy configuration vs a namespace, and
//!                          LIST hierarchyconfigurations -A at 1,000 and 10,000 namespaces
//!   hns-bench propagation  one RoleBinding reaching 1,000 descendants vs a client creating
//!                          1,000 RoleBindings itself (three rounds, median ratio);
//!                          hns-apiserver's memory with 10,000 namespaces and 10,000
//!                          propagated objects
//!   hns-bench deletion     a 60-level chain of subnamespaces and a subtree of 1,011 namespaces,
//!                          each deleted through its root, vs as many plain namespaces deleted
//!                          at once (the namespace controller's own pace)
//!   hns-bench watches      hns-apiserver's memory through 4 rounds of 2,000 watches opened
//!                          straight to it and dropped (does it give the memory back?)
//!   hns-bench tree         `kubectl hns tree -A` with a forest of 1,000 and 10,000 namespaces vs
//!                          an HNC-style client making two requests per namespace
//!   hns-bench quotas       hierarchical quotas: pods admitted beyond the budget over
//!                          $HNS_BENCH_QUOTA_TRIALS (default 1,000) trials of racing creations,
//!                          pod creation under 3 quotas vs a plain ResourceQuota, and how fast a
//!                          quota over 1,000 namespaces shows new usage
//!   hns-bench views        per-user views with 10,000 namespaces: a team admin's lists across
//!                          all namespaces vs the cluster admin's, and access changes reaching
//!                          their watch
//!   hns-bench subtree-get  `kubectl hns get pods -n ROOT` over a subtree of 100 namespaces
//!                          holding 10,000 pods ($HNS_BENCH_GET_NAMESPACES, $HNS_BENCH_GET_PODS)
//!                          vs `kubectl get pods -n NS` for each of them in turn
//!   hns-bench hnc          hns against HNC v1.1 itself on a cluster of its own (`hack/bench.sh
//!                          hnc` starts both): one RoleBinding to 1,000 descendants, memory at
//!                          10,000 namespaces with 10,000 propagated objects, each side's own
//!                          `kubectl hns tree -A`, and `kubectl hns create` until the
//!                          subnamespace is usable (see tests/src/hnc_bench.rs)
//!   hns-bench scale        100,000 namespaces ($HNS_BENCH_SCALE_NAMESPACES): creation, memory,
//!                          reads, tree -A, propagation, a move, diagnose -A and a restart at
//!                          that size (`make bench-scale`; see tests/src/scale_bench.rs)
//!   hns-bench tax          what hns costs the rest of the cluster: plain namespaces, pods,
//!                          RoleBindings, Secrets, ConfigMaps, discovery, kube-apiserver's CPU,
//!                          with hns and with hns uninstalled in alternating rounds on
//!                          $HNS_BENCH_TAX_NAMESPACES (10,000); the bytes hns adds to a
//!                          namespace; its requests and watches at idle (see tests/src/tax_bench.rs)
//!   hns-bench creation     on the cluster as it is: 5 rounds of 1,000 plain namespaces and a
//!                          tree of 1,000 subnamespaces, in alternating order, the median
//!                          ratio of their rates, and each control-plane process's CPU time
//!                          per namespace (part of scale)

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use hns_api::HierarchyConfiguration;
use hns_e2e::bench::{
    grow_forest, namespace_count, own_plugin_dir, propagate, subtree, time_copies, tree_runs,
    wait_controllers_settled, Subnamespaces,
};
use hns_e2e::reliability::processes::Processes;
use hns_e2e::timing::{ms, print_against_baseline};
use hns_e2e::{create_namespace, role_binding, Env, RemoteUser, Subject};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

const PREFIX: &str = "bench-ns";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "api".into());
    let env = Env::get();
    let client = env.admin().await;
    match which.as_str() {
        "api" => api(&client).await,
        "propagation" => propagation(&client, &env).await,
        "tree" => tree(&client, &env).await,
        "deletion" => deletion(&client).await,
        "watches" => watches(&env).await,
        "subtree-get" => {
            let size = |var: &str, default: usize| {
                std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
            };
            let (namespaces, pods) =
                (size("HNS_BENCH_GET_NAMESPACES", 100), size("HNS_BENCH_GET_PODS", 10_000));
            hns_e2e::get_bench::run(&client, &env, namespaces, pods).await
        }
        "quotas" => {
            let trials =
                std::env::var("HNS_BENCH_QUOTA_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(1_000);
            hns_e2e::quota_bench::run(&client, trials).await
        }
        "views" => hns_e2e::views_bench::run(&client, &env).await,
        "hnc" => hns_e2e::hnc_bench::run(&env).await,
        "tax" => hns_e2e::tax_bench::run(&client, &env).await,
        "creation" => {
            let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
            hns_e2e::scale_bench::creation_rounds(&client, &env, &format!("creation-{at}")).await;
            Ok(())
        }
        "scale" => {
            let total = std::env::var("HNS_BENCH_SCALE_NAMESPACES")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(100_000);
            hns_e2e::scale_bench::run(&client, &env, total).await
        }
        other => {
            anyhow::bail!(
                "unknown benchmark {other:?}; known: api, propagation, tree, deletion, watches, quotas, views, subtree-get, hnc, scale, creation, tax"
            )
        }
    }
}

/// Makes namespaces `bench-ns-<i>` for i in `from..to`, 32 at a time.
async fn populate(client: &Client, from: usize, to: usize) {
    let started = Instant::now();
    stream::iter(from..to)
        .for_each_concurrent(32, |i| async move {
            create_namespace(client, &format!("{PREFIX}-{i}"), &[]).await;
        })
        .await;
    println!("created {} namespaces in {:.1} s", to - from, started.elapsed().as_secs_f64());
}

/// Waits until hns lists at least `n` hierarchy configurations.
async fn wait_listed(client: &Client, n: usize) {
    let api: Api<HierarchyConfiguration> = Api::all(client.clone());
    loop {
        if api.list_metadata(&ListParams::default()).await.map(|l| l.items.len() >= n).unwrap_or(false) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn api(client: &Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existing = namespaces.list_metadata(&ListParams::default()).await?.items.len();
    populate(client, 0, 1_000).await;
    wait_listed(client, existing + 1_000).await;

    // GET latency, hns (through the aggregation layer) vs kube-apiserver's own namespaces,
    // interleaved so both see the same load.
    const ROUNDS: usize = 1_000;
    let (mut hns, mut kube) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for i in 0..ROUNDS {
        let name = format!("{PREFIX}-{}", i % 1_000);
        let t = Instant::now();
        Api::<HierarchyConfiguration>::namespaced(client.clone(), &name).get("hierarchy").await?;
        hns.push(t.elapsed());
        let t = Instant::now();
        namespaces.get(&name).await?;
        kube.push(t.elapsed());
    }
    hns.sort();
    kube.sort();
    println!();
    print_against_baseline(
        &format!("GET, {ROUNDS} requests each"),
        ("namespaces/NAME (baseline)", &kube),
        ("hierarchyconfigurations/hierarchy", &hns),
        "target p50 ratio <= 1.5",
    );

    println!();
    println!("LIST -A, mean of 5                 hns (ms)   namespaces (ms)   ratio");
    for (size, target) in [(1_000usize, 1_000usize), (10_000, 10_000)] {
        if target > 1_000 {
            populate(client, 1_000, target).await;
            wait_listed(client, existing + target).await;
        }
        let hcs: Api<HierarchyConfiguration> = Api::all(client.clone());
        let (mut h, mut k) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..5 {
            let t = Instant::now();
            let n = hcs.list(&ListParams::default()).await?.items.len();
            h += t.elapsed();
            anyhow::ensure!(n >= size, "listed {n} hierarchy configurations, expected at least {size}");
            let t = Instant::now();
            namespaces.list(&ListParams::default()).await?;
            k += t.elapsed();
        }
        println!(
            "  at {size:>6} namespaces            {:8.1}   {:15.1}   {:5.2}",
            ms(h) / 5.0,
            ms(k) / 5.0,
            h.as_secs_f64() / k.as_secs_f64()
        );
    }
    Ok(())
}

const TREE: &str = "bench-tree";
const DESCENDANTS: usize = 1_000;

/// hns-apiserver's resident memory (local control plane only).
fn rss_mib(env: &Env) -> Option<f64> {
    Processes::new(&env.local.as_ref()?.dir).rss_mib("hns-apiserver")
}

/// Propagation is timed this many times; the median ratio is reported.
const PROPAGATION_ROUNDS: usize = 3;

/// The baseline: a client creating RoleBinding `name` in each of the tree's descendants itself.
async fn by_hand(client: &Client, name: &str) -> Duration {
    let t = Instant::now();
    stream::iter(0..DESCENDANTS)
        .for_each_concurrent(32, |i| async move {
            let api: Api<RoleBinding> = Api::namespaced(client.clone(), &format!("{TREE}-{i}"));
            api.create(&PostParams::default(), &role_binding(name, "view", Subject::Group("bench")))
                .await
                .expect("RoleBinding");
        })
        .await;
    t.elapsed()
}

async fn propagation(client: &Client, env: &Env) -> anyhow::Result<()> {
    let took = subtree(client, Subnamespaces::Hns, TREE, DESCENDANTS, Duration::from_secs(1_200)).await?;
    println!("created {DESCENDANTS} subnamespaces in {:.1} s", took.as_secs_f64());

    // Rounds, each a baseline then hns, so that drift in the machine's load (the controller
    // manager still filling the new namespaces, say) falls on both sides alike.
    println!();
    println!("one RoleBinding to {DESCENDANTS} namespaces    baseline (s)    hns (s)    ratio");
    let mut ratios = Vec::new();
    for round in 1..=PROPAGATION_ROUNDS {
        let baseline = by_hand(client, &format!("by-hand-{round}")).await.as_secs_f64();
        let hns = time_copies(client, TREE, &format!("inherited-{round}"), DESCENDANTS).await?.as_secs_f64();
        println!(
            "  round {round}                           {baseline:8.2}   {hns:8.2}    {:5.2}",
            hns / baseline
        );
        ratios.push(hns / baseline);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "  median ratio hns/baseline                                {:5.2}   (target <= 1.25)",
        ratios[PROPAGATION_ROUNDS / 2]
    );
    println!("  baseline: a client creating the {DESCENDANTS} RoleBindings itself, 32 at a time");
    println!("  hns: one RoleBinding created in the root, until its last copy is seen");

    // Memory: 10,000 propagated objects (ten bindings in the root), with every namespace so far.
    let more: Vec<String> = (PROPAGATION_ROUNDS + 1..=10).map(|i| format!("inherited-{i}")).collect();
    propagate(client, TREE, &more, DESCENDANTS, Duration::from_secs(1_200)).await?;
    let total_ns = namespace_count(client).await?;
    if let Some(rss) = rss_mib(env) {
        println!("\nhns-apiserver RSS right after the last change: {rss:.1} MiB");
    }
    // Steady state: the allocator returns freed memory after its decay period (10 s).
    tokio::time::sleep(Duration::from_secs(15)).await;
    match rss_mib(env) {
        Some(rss) => println!(
            "hns-apiserver RSS, steady, with {total_ns} namespaces, {} propagated objects and {} other RoleBindings: {rss:.1} MiB (target < 100 MiB)",
            10 * DESCENDANTS,
            PROPAGATION_ROUNDS * DESCENDANTS
        ),
        None => println!("\nhns-apiserver RSS: not measurable here (needs the local control plane)"),
    }
    Ok(())
}

/// What HNC's plugin did for `tree -A`: list the namespaces, then for each one GET its
/// hierarchy configuration and list its anchors, one request after another.
async fn hnc_style_tree(client: &Client) -> anyhow::Result<usize> {
    let names = hns_e2e::bench::namespace_names(client).await?;
    for ns in &names {
        Api::<HierarchyConfiguration>::namespaced(client.clone(), ns).get("hierarchy").await?;
        Api::<hns_api::SubnamespaceAnchor>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await?;
    }
    Ok(names.len())
}

async fn tree(client: &Client, env: &Env) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existing = namespaces.list_metadata(&ListParams::default()).await?.items.len();
    let mut rows = Vec::new();
    let mut made = 0;
    for size in [1_000usize, 10_000] {
        made = grow_forest(client, Subnamespaces::Hns, made, size, Duration::from_secs(1_200)).await;
        wait_listed(client, existing + made).await;
        let total = namespaces.list_metadata(&ListParams::default()).await?.items.len();
        wait_controllers_settled(client, total).await;
        // Ours: mean of 5 runs, each a process, as a user runs it.
        let runs = tree_runs(&own_plugin_dir(), &env.kubeconfig, 5, Duration::from_secs(600)).await?;
        for run in &runs {
            anyhow::ensure!(run.finished, "tree -A did not finish in 10 minutes");
            let lines = run.lines;
            anyhow::ensure!(lines >= total, "tree -A printed {lines} lines for {total} namespaces");
        }
        let ours = runs.iter().map(|r| r.took).sum::<Duration>() / runs.len() as u32;
        // HNC's: one run; it is slow enough to measure once.
        let t = Instant::now();
        let walked = hnc_style_tree(client).await?;
        let theirs = t.elapsed();
        rows.push(format!(
            "  forest of {made:>6} ({walked:>6} in cluster) {:10.1}   {:14.1}   {:5.0}x",
            ms(ours),
            ms(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64()
        ));
    }
    println!();
    println!(
        "tree -A                       kubectl hns (ms)   HNC-style (ms)   ratio (target >= 50x at 10,000)"
    );
    for row in rows {
        println!("{row}");
    }
    Ok(())
}

/// Cascading deletion of a deep chain and of a wide subtree, each beside the baseline of as many
/// plain namespaces deleted at once: kube-controller-manager's namespace controller empties and
/// finalizes every namespace either way, so the ratio shows what the hierarchy adds.
async fn deletion(client: &Client) -> anyhow::Result<()> {
    use hns_e2e::deletion::{chain, delete_and_wait, flat, subtree};
    const LIMIT: Duration = Duration::from_secs(1_800);
    let chain = chain(client, "bench-chain", 60).await;
    let subtree = subtree(client, "bench-subtree", &[10, 10, 9]).await;
    let flat_chain = flat(client, "bench-flat-chain", chain.names.len()).await;
    let flat_subtree = flat(client, "bench-flat-subtree", subtree.names.len()).await;
    // Namespaces just made get a ServiceAccount and a ConfigMap each from the controllers; let
    // that finish so both sides start from the same state.
    let total =
        Api::<Namespace>::all(client.clone()).list_metadata(&ListParams::default()).await?.items.len();
    wait_controllers_settled(client, total).await;
    for (what, tree, baseline) in [
        ("a 60-level chain of subnamespaces", &chain, &flat_chain),
        ("a subtree of 1,011 namespaces (10 x 10 x 9 below the root)", &subtree, &flat_subtree),
    ] {
        let base = delete_and_wait(client, baseline, baseline, LIMIT).await;
        let hns = delete_and_wait(client, std::slice::from_ref(&tree.root), &tree.names, LIMIT).await;
        println!(
            "deletion of {what}: {:.1} s ({} left); {} plain namespaces deleted at once: {:.1} s ({} left); ratio {:.2}",
            hns.took.as_secs_f64(),
            hns.left.len(),
            baseline.len(),
            base.took.as_secs_f64(),
            base.left.len(),
            hns.took.as_secs_f64() / base.took.as_secs_f64()
        );
    }
    Ok(())
}

/// Four rounds of 2,000 watches held open for 5 s, straight to hns-apiserver as kube-apiserver
/// would send them (front-proxy certificate), then dropped; hns-apiserver's resident memory
/// before, after each round, and 30 s after the last.
async fn watches(env: &Env) -> anyhow::Result<()> {
    const WATCHES: usize = 2_000;
    let local = env.local.as_ref().ok_or_else(|| anyhow::anyhow!("needs the local control plane"))?;
    let client = local.direct_client(Some(local.front_proxy_identity()));
    let url = format!("{}/apis/hnc.x-k8s.io/v1alpha2/subnamespaces?watch=true", local.hns_url());
    let mut figures = vec![format!("start {:.1}", rss_mib(env).unwrap_or(0.0))];
    for round in 1..=4 {
        let opened: Vec<_> = stream::iter(0..WATCHES)
            .map(|_| {
                client
                    .get(&url)
                    .remote_user("bench", &["system:masters"])
                    .timeout(Duration::from_secs(60))
                    .send()
            })
            .buffer_unordered(200)
            .collect()
            .await;
        let held = opened.iter().filter(|r| r.as_ref().is_ok_and(|r| r.status().is_success())).count();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let during = rss_mib(env).unwrap_or(0.0);
        drop(opened);
        tokio::time::sleep(Duration::from_secs(2)).await;
        figures
            .push(format!("round {round} ({held} held) {during:.1} -> {:.1}", rss_mib(env).unwrap_or(0.0)));
    }
    for wait in [30, 60] {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let open = open_watches(local, &client).await;
        figures.push(format!("{wait} s later {:.1} ({open} watches open)", rss_mib(env).unwrap_or(0.0)));
    }
    println!("hns-apiserver RSS (MiB) through 4 rounds of {WATCHES} watches: {}", figures.join("; "));
    Ok(())
}

/// `hns_watches`, from hns-apiserver's metrics.
async fn open_watches(local: &hns_e2e::Local, client: &reqwest::Client) -> String {
    let text = match client
        .get(format!("{}/metrics", local.hns_url()))
        .remote_user("bench", &["system:masters"])
        .send()
        .await
    {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => return format!("unknown: {e}"),
    };
    text.lines().find_map(|l| l.strip_prefix("hns_watches ")).unwrap_or("unknown").trim().to_string()
}
