//! Workloads and measures shared by `hns-bench`'s benchmarks: subtrees and forests of
//! subnamespaces, RoleBindings timed until their last copy, and waits for a cluster to settle.
//! They work on a cluster with hns and, where a [`Subnamespaces`] says how subnamespaces are
//! made, on one with HNC too (`hns-bench hnc`): HNC labels namespaces and copies objects with
//! the same keys hns does (`hnc.x-k8s.io/included-namespace`, `<ancestor>.tree.hnc.x-k8s.io/depth`,
//! `hnc.x-k8s.io/inherited-from`), so the same watches and lists see either's work.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};

use crate::{create_namespace, create_subns, role_binding, Subject};

/// How a benchmark makes subnamespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subnamespaces {
    /// hns's Subnamespace API: the namespace exists when the request returns.
    Hns,
    /// HNC's way: a SubnamespaceAnchor in the parent, after which HNC's manager creates the
    /// namespace and puts it in the hierarchy on its own time.
    HncAnchors,
}

impl Subnamespaces {
    /// Creates subnamespace `name` of `parent` and returns once it is in the hierarchy (it bears
    /// its parent's tree label), or fails once `deadline` has passed.
    pub async fn create(
        self,
        client: &Client,
        parent: &str,
        name: &str,
        deadline: Instant,
    ) -> anyhow::Result<()> {
        match self {
            Subnamespaces::Hns => {
                create_subns(client, parent, name).await?;
            }
            Subnamespaces::HncAnchors => {
                let anchor = hns_api::SubnamespaceAnchor::new(name, Default::default());
                Api::<hns_api::SubnamespaceAnchor>::namespaced(client.clone(), parent)
                    .create(&PostParams::default(), &anchor)
                    .await?;
                // HNC answers the anchor at once and creates the namespace later: the next level
                // of a forest needs it. Polled per namespace, at a pace that leaves kube-apiserver
                // to HNC's own writes (HNC's manager is throttled to 50 requests a second).
                let namespaces: Api<Namespace> = Api::all(client.clone());
                let label = hns_api::keys::tree_label(parent);
                loop {
                    let labelled = namespaces.get_metadata_opt(name).await?.and_then(|n| n.metadata.labels);
                    if labelled.is_some_and(|l| l.contains_key(&label)) {
                        break;
                    }
                    anyhow::ensure!(
                        Instant::now() < deadline,
                        "HNC did not make subnamespace {name} in time"
                    );
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        Ok(())
    }
}

/// Makes namespace `root` and `descendants` subnamespaces of it, `<root>-<i>`, 32 at a time, and
/// waits until every one bears the root's tree label at depth 1. Returns how long that took.
pub async fn subtree(
    client: &Client,
    how: Subnamespaces,
    root: &str,
    descendants: usize,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let deadline = started + limit;
    create_namespace(client, root, &[]).await;
    let made: Vec<anyhow::Result<()>> = stream::iter(0..descendants)
        .map(|i| async move { how.create(client, root, &format!("{root}-{i}"), deadline).await })
        .buffer_unordered(32)
        .collect()
        .await;
    made.into_iter().collect::<anyhow::Result<()>>()?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let selector = format!("{}=1", hns_api::keys::tree_label(root));
    while namespaces.list_metadata(&ListParams::default().labels(&selector)).await?.items.len() < descendants
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the {descendants} subnamespaces of {root} never all settled"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(started.elapsed())
}

/// Copies of RoleBinding `name` (objects labelled `inherited-from`, of that name).
pub async fn copies(client: &Client, name: &str) -> anyhow::Result<usize> {
    let api: Api<RoleBinding> = Api::all(client.clone());
    let lp =
        ListParams::default().labels("hnc.x-k8s.io/inherited-from").fields(&format!("metadata.name={name}"));
    Ok(api.list_metadata(&lp).await?.items.len())
}

/// One RoleBinding `name` created in `root`, timed until its copy in the last of `descendants`
/// namespaces exists. The copies are counted from a watch opened first: polling with LISTs would
/// load kube-apiserver and etcd while the controller works.
pub async fn time_copies(
    client: &Client,
    root: &str,
    name: &str,
    descendants: usize,
) -> anyhow::Result<Duration> {
    let all: Api<RoleBinding> = Api::all(client.clone());
    let wp = WatchParams::default()
        .labels(&format!("hnc.x-k8s.io/inherited-from={root}"))
        .fields(&format!("metadata.name={name}"));
    let rv = all
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut events = std::pin::pin!(all.watch_metadata(&wp, &rv).await?);
    let t = Instant::now();
    Api::<RoleBinding>::namespaced(client.clone(), root)
        .create(&PostParams::default(), &role_binding(name, "view", Subject::Group("bench")))
        .await?;
    let mut seen = HashSet::new();
    while seen.len() < descendants {
        match events.next().await {
            Some(Ok(WatchEvent::Added(o))) => {
                seen.insert(o.metadata.namespace.unwrap_or_default());
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => anyhow::bail!("watching the copies: {e}"),
            None => anyhow::bail!("the watch of the copies ended early"),
        }
    }
    Ok(t.elapsed())
}

/// Creates RoleBindings `names` in `root` and waits until each has `descendants` copies, or
/// fails after `limit`.
pub async fn propagate(
    client: &Client,
    root: &str,
    names: &[String],
    descendants: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    for name in names {
        Api::<RoleBinding>::namespaced(client.clone(), root)
            .create(&PostParams::default(), &role_binding(name, "view", Subject::Group("bench")))
            .await?;
    }
    for name in names {
        while copies(client, name).await? < descendants {
            anyhow::ensure!(
                started.elapsed() < limit,
                "RoleBinding {name} did not reach all {descendants} descendants"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// Gives kube-controller-manager up to 5 minutes to do its per-namespace work for `n`
/// namespaces (a `kube-root-ca.crt` ConfigMap and a `default` ServiceAccount in each), so the
/// figure taken next is less one of a machine busy with the controllers' 2n writes. At its
/// default 20 writes/s it rarely finishes 10,000 namespaces in that time; it says so.
pub async fn wait_controllers_settled(client: &Client, n: usize) {
    let configmaps: Api<ConfigMap> = Api::all(client.clone());
    let accounts: Api<ServiceAccount> = Api::all(client.clone());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(300) {
        let ca = ListParams::default().fields("metadata.name=kube-root-ca.crt");
        let sa = ListParams::default().fields("metadata.name=default");
        let ca = configmaps.list_metadata(&ca).await.map_or(0, |l| l.items.len());
        let sa = accounts.list_metadata(&sa).await.map_or(0, |l| l.items.len());
        if ca >= n && sa >= n {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!("(kube-controller-manager still busy after 5 minutes; figures taken anyway)");
}

/// Creates plain namespaces `<prefix>-<i>` for each `i` of `range`, `clients` requests at a time,
/// without waiting for hns; returns how long they took.
pub async fn create_plain_namespaces(
    client: &Client,
    prefix: &str,
    range: std::ops::Range<usize>,
    clients: usize,
) -> Duration {
    let api: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    stream::iter(range)
        .for_each_concurrent(clients, |i| {
            let api = &api;
            async move {
                let mut ns = Namespace::default();
                ns.metadata.name = Some(format!("{prefix}-{i}"));
                api.create(&PostParams::default(), &ns).await.expect("namespace");
            }
        })
        .await;
    started.elapsed()
}

/// The namespaces in the cluster.
pub async fn namespace_count(client: &Client) -> anyhow::Result<usize> {
    Ok(Api::<Namespace>::all(client.clone()).list_metadata(&ListParams::default()).await?.items.len())
}

/// The names of the namespaces in the cluster.
pub async fn namespace_names(client: &Client) -> anyhow::Result<Vec<String>> {
    let listed = Api::<Namespace>::all(client.clone()).list_metadata(&ListParams::default()).await?;
    Ok(listed.items.into_iter().filter_map(|n| n.metadata.name).collect())
}

const FOREST: &str = "bench-forest";
/// Roots of the forest; every other namespace is a subnamespace, ten per parent.
const ROOTS: usize = 100;

/// Namespace `i` of the forest and its parent: `ROOTS` roots, then ten subnamespaces under each
/// namespace in turn, so 1,000 namespaces are two levels deep and 10,000 three.
fn forest_member(i: usize) -> (String, Option<String>) {
    let parent = (i >= ROOTS).then(|| format!("{FOREST}-{}", (i - ROOTS) / 10));
    (format!("{FOREST}-{i}"), parent)
}

/// Grows the forest from `from` to `to` namespaces, a level at a time so parents exist first.
/// Stops at the end of the first level to finish after `limit`, or at a failed creation, and
/// says so; returns the number of namespaces in its whole levels then.
pub async fn grow_forest(
    client: &Client,
    how: Subnamespaces,
    from: usize,
    to: usize,
    limit: Duration,
) -> usize {
    let started = Instant::now();
    let deadline = started + limit;
    let (mut start, mut created) = (from, 0);
    while start < to {
        // The next level starts at the first namespace whose parent is not yet made.
        let level_end = (start + 1..to).find(|&i| i >= ROOTS && (i - ROOTS) / 10 >= start).unwrap_or(to);
        let made: Vec<anyhow::Result<()>> = stream::iter(start..level_end)
            .map(|i| async move {
                match forest_member(i) {
                    (name, None) => {
                        create_namespace(client, &name, &[]).await;
                        Ok(())
                    }
                    (name, Some(parent)) => how.create(client, &parent, &name, deadline).await,
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        let unmade = made.iter().filter(|r| r.is_err()).count();
        created += made.len() - unmade;
        if let Some(Err(e)) = made.into_iter().find(Result::is_err) {
            let level = level_end - start;
            println!(
                "growing the forest stopped after {:.0} s: {unmade} of the {level} namespaces from {start} on unmade ({e})",
                started.elapsed().as_secs_f64()
            );
            break;
        }
        start = level_end;
        if start < to && Instant::now() >= deadline {
            println!("growing the forest stopped at {start} namespaces: {} s passed", limit.as_secs());
            break;
        }
    }
    println!("created {created} forest namespaces in {:.1} s", started.elapsed().as_secs_f64());
    // Whole levels only: where growing the forest would go on from.
    start
}

/// The directory of the running benchmark binary: `cargo build --release` puts the kubectl-hns
/// the benchmarks time beside it.
pub fn own_plugin_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the running binary's path");
    exe.parent().map(std::path::Path::to_path_buf).unwrap_or_default()
}

/// One run of `kubectl hns tree -A`.
pub struct TreeRun {
    /// From the start of the process to its end, or to when it was stopped.
    pub took: Duration,
    /// The lines it printed (by the time it was stopped, if it was).
    pub lines: usize,
    /// Whether it ended on its own, within the limit.
    pub finished: bool,
}

/// Up to `runs` runs of `kubectl hns tree -A` with the `kubectl-hns` in `plugin_dir`, each a
/// process as a user runs it, stopped after `limit`. Runs stop after one that takes more than
/// 30 s (slow enough to measure once) or is stopped. Output goes to files rather than pipes, so
/// that a stopped run's lines can be counted and a chatty one (client-side throttling) never
/// blocks on a full pipe.
pub async fn tree_runs(
    plugin_dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    runs: usize,
    limit: Duration,
) -> anyhow::Result<Vec<TreeRun>> {
    let out = std::env::temp_dir().join(format!("hns-bench-tree-{}.out", std::process::id()));
    let err = out.with_extension("err");
    let mut done = Vec::new();
    while done.len() < runs {
        let started = Instant::now();
        let mut child = crate::plugin_command(plugin_dir, kubeconfig, &["tree", "-A"])
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(&err)?)
            .spawn()?;
        let finished = loop {
            if let Some(status) = child.try_wait()? {
                anyhow::ensure!(
                    status.success(),
                    "kubectl hns tree -A ({}): {}",
                    plugin_dir.display(),
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
                break true;
            }
            if started.elapsed() >= limit {
                child.kill()?;
                child.wait()?;
                break false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let took = started.elapsed();
        let lines = std::fs::read(&out)?.iter().filter(|b| **b == b'\n').count();
        done.push(TreeRun { took, lines, finished });
        if !finished || took > Duration::from_secs(30) {
            break;
        }
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&err);
    Ok(done)
}
