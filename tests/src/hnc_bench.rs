//! `hns-bench hnc`: hns against HNC v1.1 itself, the same workloads on two clusters of the same
//! Kubernetes version on the same machine (`hack/bench.sh hnc` starts both: HNC's CRDs and hns's
//! APIService claim the same group, so the two cannot share one). hns's cluster comes from the
//! usual environment (`HNS_E2E_KUBECONFIG`, `HNS_E2E_DIR`); HNC's from
//! `HNS_BENCH_HNC_KUBECONFIG`, `HNS_BENCH_HNC_DIR` (its manager's pid file,
//! `pids/hnc-manager.pid`) and `HNS_BENCH_HNC_PLUGIN` (HNC's own kubectl plugin).
//!
//! Each step runs on one side, then on the other, so the two never share the CPUs:
//!   a. a root with 1,000 subnamespaces (hns: Subnamespaces; HNC: SubnamespaceAnchors in the
//!      root), then one RoleBinding in the root timed until its last copy, 3 rounds;
//!   b. 7 more RoleBindings (10,000 propagated objects) and a forest of subnamespaces (anchors on
//!      HNC's side) up to 10,000 namespaces, then each side's process's resident memory;
//!   c. `kubectl hns tree -A` with each side's own plugin;
//!   d. `kubectl hns create` with each side's own plugin, timed until the subnamespace is usable.
//!
//! Sizes: `HNS_BENCH_HNC_DESCENDANTS` (1,000), `HNS_BENCH_HNC_NAMESPACES` (10,000),
//! `HNS_BENCH_HNC_CREATES` (10); each wait gives up after `HNS_BENCH_HNC_LIMIT` seconds (2,400:
//! HNC's manager makes 10,000 namespaces in some 25 minutes) and HNC's tree after
//! `HNS_BENCH_HNC_TREE_LIMIT` (120: enough to show the ratio), reporting what was reached.
//! Targets are printed, never asserted.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::bench::{
    grow_forest, namespace_count, own_plugin_dir, propagate, subtree, time_copies, tree_runs,
    wait_controllers_settled, Subnamespaces,
};
use crate::reliability::processes::Processes;
use crate::timing::ms;
use crate::{client_for, create_namespace, ok, plugin_command, role_binding, Env, Subject};

/// The root of step a's 1,000 descendants, on both sides.
const ROOT: &str = "bench-hnc";
/// The parent of step d's subnamespaces.
const PARENT: &str = "bench-hnc-create";
/// Propagation is timed this many times on each side; the medians are compared.
const ROUNDS: usize = 3;
/// RoleBindings in the root by step b: 10 over 1,000 descendants are 10,000 propagated objects.
const BINDINGS: usize = 10;

/// One side of the comparison.
struct Side {
    name: &'static str,
    client: Client,
    kubeconfig: PathBuf,
    /// The cluster's directory: its pid files.
    dir: PathBuf,
    /// The process whose memory is measured, by its pid file's name.
    process: &'static str,
    /// Where kubectl finds this side's `kubectl-hns`.
    plugin_dir: PathBuf,
    subnamespaces: Subnamespaces,
}

impl Side {
    fn rss_mib(&self) -> Option<f64> {
        Processes::new(&self.dir).rss_mib(self.process)
    }
}

struct Sizes {
    descendants: usize,
    namespaces: usize,
    creates: usize,
    limit: Duration,
    tree_limit: Duration,
}

fn var(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn required(name: &str) -> anyhow::Result<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("{name} is not set: run this benchmark with hack/bench.sh hnc"))
}

/// A figure of each side, and how it reads.
struct Row {
    what: String,
    hns: String,
    hnc: String,
    ratio: String,
    target: &'static str,
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let sizes = Sizes {
        descendants: var("HNS_BENCH_HNC_DESCENDANTS", 1_000),
        namespaces: var("HNS_BENCH_HNC_NAMESPACES", 10_000),
        creates: var("HNS_BENCH_HNC_CREATES", 10).max(1),
        limit: Duration::from_secs(var("HNS_BENCH_HNC_LIMIT", 2_400) as u64),
        tree_limit: Duration::from_secs(var("HNS_BENCH_HNC_TREE_LIMIT", 120) as u64),
    };
    let local =
        env.local.as_ref().ok_or_else(|| anyhow::anyhow!("needs hns's local control plane (HNS_E2E_DIR)"))?;
    let hnc_kubeconfig = required("HNS_BENCH_HNC_KUBECONFIG")?;
    let hnc_dir = required("HNS_BENCH_HNC_DIR")?;
    // kubectl finds plugins by name on PATH: HNC's binary as `kubectl-hns` in a directory of its own.
    let hnc_plugin_dir = hnc_dir.join("plugin");
    std::fs::create_dir_all(&hnc_plugin_dir)?;
    let link = hnc_plugin_dir.join("kubectl-hns");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(required("HNS_BENCH_HNC_PLUGIN")?, &link)?;
    let sides = [
        Side {
            name: "hns",
            client: env.admin().await,
            kubeconfig: env.kubeconfig.clone(),
            dir: local.dir.clone(),
            process: "hns-apiserver",
            plugin_dir: own_plugin_dir(),
            subnamespaces: Subnamespaces::Hns,
        },
        Side {
            name: "HNC v1.1",
            client: client_for(&hnc_kubeconfig).await,
            kubeconfig: hnc_kubeconfig,
            dir: hnc_dir,
            process: "hnc-manager",
            plugin_dir: hnc_plugin_dir,
            subnamespaces: Subnamespaces::HncAnchors,
        },
    ];
    let mut rows = Vec::new();
    rows.push(propagation(&sides, &sizes).await?);
    rows.push(memory(&sides, &sizes).await?);
    rows.push(tree(&sides, &sizes).await?);
    rows.push(create(&sides, &sizes).await?);

    println!();
    println!("{:<58} {:>16} {:>22} {:>10}   target", "hns vs HNC v1.1", "hns", "HNC v1.1", "HNC/hns");
    for r in rows {
        println!("{:<58} {:>16} {:>22} {:>10}   {}", r.what, r.hns, r.hnc, r.ratio, r.target);
    }
    println!(
        "  HNC's subnamespaces are SubnamespaceAnchors in their parent, as `kubectl hns create` makes them"
    );
    println!(
        "  HNC's manager runs as HNC ships it: --max-reconciles 10, 50 requests a second to kube-apiserver"
    );
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Step a: each side's subtree, then the rounds, each timing hns then HNC.
async fn propagation(sides: &[Side; 2], sizes: &Sizes) -> anyhow::Result<Row> {
    let d = sizes.descendants;
    for side in sides {
        let took = subtree(&side.client, side.subnamespaces, ROOT, d, sizes.limit).await?;
        println!(
            "{}: {d} subnamespaces of {ROOT} made and in the hierarchy in {:.1} s",
            side.name,
            took.as_secs_f64()
        );
        let total = namespace_count(&side.client).await?;
        wait_controllers_settled(&side.client, total).await;
    }
    let mut times = [Vec::new(), Vec::new()];
    for round in 1..=ROUNDS {
        for (side, times) in sides.iter().zip(&mut times) {
            let took = time_copies(&side.client, ROOT, &format!("inherited-{round}"), d).await?;
            println!(
                "{}: round {round}, one RoleBinding to {d} descendants in {:.2} s",
                side.name,
                took.as_secs_f64()
            );
            times.push(took);
        }
    }
    let [hns, hnc] = times.map(median);
    Ok(Row {
        what: format!("one RoleBinding to {d} descendants, median of {ROUNDS}"),
        hns: format!("{:.2} s", hns.as_secs_f64()),
        hnc: format!("{:.2} s", hnc.as_secs_f64()),
        ratio: format!("{:.1}x", hnc.as_secs_f64() / hns.as_secs_f64()),
        target: ">= 5x",
    })
}

/// Step b: each side grown to the full size, settled, then both memories measured.
async fn memory(sides: &[Side; 2], sizes: &Sizes) -> anyhow::Result<Row> {
    let d = sizes.descendants;
    let more: Vec<String> = (ROUNDS + 1..=BINDINGS).map(|i| format!("inherited-{i}")).collect();
    let mut reached = Vec::new();
    for side in sides {
        let started = Instant::now();
        propagate(&side.client, ROOT, &more, d, sizes.limit).await?;
        println!(
            "{}: {} more RoleBindings to {d} descendants in {:.1} s",
            side.name,
            more.len(),
            started.elapsed().as_secs_f64()
        );
        let existing = namespace_count(&side.client).await?;
        grow_forest(
            &side.client,
            side.subnamespaces,
            0,
            sizes.namespaces.saturating_sub(existing),
            sizes.limit,
        )
        .await;
        let total = namespace_count(&side.client).await?;
        if total < sizes.namespaces {
            println!("{}: reached {total} namespaces of {}", side.name, sizes.namespaces);
        }
        reached.push(total);
    }
    // Both settled (the forest is made a level at a time, each namespace in the hierarchy before
    // the next level), then memory after 15 s: allocators give freed memory back after a decay
    // period (10 s for hns's).
    tokio::time::sleep(Duration::from_secs(15)).await;
    let rss: Vec<Option<f64>> = sides.iter().map(Side::rss_mib).collect();
    let mib = |r: Option<f64>| r.map_or("unknown".to_string(), |r| format!("{r:.1} MiB"));
    Ok(Row {
        what: format!("RSS at {}, {} propagated objects", counts(reached[0], reached[1]), BINDINGS * d),
        hns: mib(rss[0]),
        hnc: mib(rss[1]),
        ratio: match (rss[0], rss[1]) {
            (Some(hns), Some(hnc)) => format!("{:.1}x", hnc / hns),
            _ => "-".into(),
        },
        target: ">= 3x (hns <= 1/3)",
    })
}

/// Step c: `kubectl hns tree -A`, a few runs of each side's plugin (HNC's once when it is slow).
async fn tree(sides: &[Side; 2], sizes: &Sizes) -> anyhow::Result<Row> {
    let mut figures = Vec::new();
    for side in sides {
        let total = namespace_count(&side.client).await?;
        wait_controllers_settled(&side.client, total).await;
        let limit = if side.subnamespaces == Subnamespaces::Hns { sizes.limit } else { sizes.tree_limit };
        let runs = tree_runs(&side.plugin_dir, &side.kubeconfig, 5, limit).await?;
        let mean = runs.iter().map(|r| r.took).sum::<Duration>() / runs.len() as u32;
        let last = runs.last().expect("at least one run");
        println!(
            "{}: tree -A with {total} namespaces, {} run(s), mean {:.1} ms, {} lines{}",
            side.name,
            runs.len(),
            ms(mean),
            last.lines,
            if last.finished {
                String::new()
            } else {
                format!(" by the time it was stopped after {} s", limit.as_secs())
            }
        );
        if !last.finished && last.lines > 0 {
            // A line a namespace, at the pace it printed them: an estimate, said as one.
            let estimate = mean.as_secs_f64() * total as f64 / last.lines as f64;
            println!(
                "{}: at that pace its tree of {total} namespaces would take about {estimate:.0} s",
                side.name
            );
        }
        figures.push((total, mean, last.finished, last.lines));
    }
    let [(hns_total, hns, hns_done, _), (hnc_total, hnc, hnc_done, hnc_lines)] = [figures[0], figures[1]];
    let shown = |d: Duration, done: bool| {
        if done {
            format!("{:.1} ms", ms(d))
        } else {
            format!("> {:.0} s", d.as_secs_f64())
        }
    };
    Ok(Row {
        what: format!("kubectl hns tree -A at {}", counts(hns_total, hnc_total)),
        hns: shown(hns, hns_done),
        hnc: if hnc_done { shown(hnc, true) } else { format!("{} ({hnc_lines} lines)", shown(hnc, false)) },
        ratio: format!(
            "{}{:.0}x",
            if hnc_done && hns_done { "" } else { ">" },
            hnc.as_secs_f64() / hns.as_secs_f64()
        ),
        target: ">= 50x",
    })
}

/// "N namespaces", or "N / M namespaces" when the two sides differ (HNC stopped short).
fn counts(hns: usize, hnc: usize) -> String {
    if hns == hnc {
        format!("{hns} namespaces")
    } else {
        format!("{hns} / {hnc} namespaces")
    }
}

/// Step d: `kubectl hns create CHILD -n PARENT` as a process, timed until the child is usable.
async fn create(sides: &[Side; 2], sizes: &Sizes) -> anyhow::Result<Row> {
    let mut medians = Vec::new();
    for side in sides {
        create_namespace(&side.client, PARENT, &[]).await;
        Api::<RoleBinding>::namespaced(side.client.clone(), PARENT)
            .create(&PostParams::default(), &role_binding("parents", "view", Subject::Group("bench")))
            .await?;
        let mut times = Vec::new();
        for i in 0..sizes.creates {
            times.push(usable(side, &format!("{PARENT}-{i}"), sizes.limit).await?);
        }
        let shown: Vec<String> = times.iter().map(|t| format!("{:.0}", ms(*t))).collect();
        println!("{}: kubectl hns create to usable, ms: {}", side.name, shown.join(", "));
        medians.push(median(times));
    }
    Ok(Row {
        what: format!("kubectl hns create to usable, median of {}", sizes.creates),
        hns: format!("{:.0} ms", ms(medians[0])),
        hnc: format!("{:.0} ms", ms(medians[1])),
        ratio: format!("{:.1}x", medians[1].as_secs_f64() / medians[0].as_secs_f64()),
        target: "-",
    })
}

/// From the start of `kubectl hns create CHILD -n PARENT` until the namespace exists, a
/// ConfigMap can be created in it and the parent's RoleBinding has been copied into it: what a
/// user waits for before working in it. Each condition is polled every 10 ms, in that order.
async fn usable(side: &Side, child: &str, limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    ok(plugin_command(&side.plugin_dir, &side.kubeconfig, &["create", child, "-n", PARENT]).output()?);
    let namespaces: Api<Namespace> = Api::all(side.client.clone());
    let configmaps: Api<ConfigMap> = Api::namespaced(side.client.clone(), child);
    let bindings: Api<RoleBinding> = Api::namespaced(side.client.clone(), child);
    let mut configmap = ConfigMap::default();
    configmap.metadata.name = Some("usable".into());
    let mut step = 0;
    while step < 3 {
        let done = match step {
            0 => namespaces.get_metadata_opt(child).await?.is_some(),
            1 => configmaps.create(&PostParams::default(), &configmap).await.is_ok(),
            _ => bindings.get_metadata_opt("parents").await?.is_some(),
        };
        if done {
            step += 1;
            continue;
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "{}: {child} not usable after {} s",
            side.name,
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(started.elapsed())
}
