//! `hns-bench views`: per-user views measured against a live cluster of 10,000 namespaces, through
//! kube-apiserver's aggregation layer, as the user's own client sees them.
//!
//! - **Lists**: a user with a RoleBinding at the root of a team of 100 subnamespaces (so access to
//!   101 of 10,000 namespaces) lists hierarchy configurations and subnamespaces across all
//!   namespaces, against the cluster admin's list of all 10,000 configurations and the admin's
//!   list of the same 100 subnamespaces in their one namespace (the same rows, without a view).
//! - **Watch**: how long a RoleBinding created (or deleted) in a namespace outside the team takes
//!   to add (or remove) that namespace's configuration in the user's open watch.

use std::time::{Duration, Instant};

use futures::{stream, StreamExt, TryStreamExt};
use hns_api::{HierarchyConfiguration, Subnamespace};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client, ResourceExt};

use crate::timing::quantile_ms;
use crate::{create_namespace, create_subns, role_binding, Env, Subject};

/// Namespaces in the cluster during the measurements (`HNS_BENCH_VIEWS_NAMESPACES` for a
/// quicker run).
fn cluster_size() -> usize {
    std::env::var("HNS_BENCH_VIEWS_NAMESPACES").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
}
/// The user's team: a root and this many subnamespaces.
const TEAM: usize = 100;
/// Requests per list measured.
const LISTS: usize = 30;
/// Access changes timed in the user's watch (each an addition, then a removal).
const CHANGES: usize = 50;
const ROOT: &str = "bench-views-team";
const USER: &str = "bench-views-user";

/// Runs both benchmarks.
pub async fn run(client: &Client, env: &Env) -> anyhow::Result<()> {
    let team = team(client).await?;
    fill(client).await?;
    lists(client, env, &team).await?;
    watch(client, env).await
}

/// The team (made once), with the user's RoleBinding at its root; returns its namespaces.
async fn team(client: &Client) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = (0..TEAM).map(|i| format!("{ROOT}-{i}")).collect();
    if Api::<Namespace>::all(client.clone()).get_opt(ROOT).await?.is_none() {
        create_namespace(client, ROOT, &[]).await;
        stream::iter(&names)
            .for_each_concurrent(32, |n| async move {
                create_subns(client, ROOT, n).await.expect("subnamespace");
            })
            .await;
        bind(client, ROOT, "bench-views").await?;
    }
    Ok(names)
}

/// Binds ClusterRole `view` to the user in `namespace`.
async fn bind(client: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role_binding(name, "view", Subject::User(USER)))
        .await?;
    Ok(())
}

/// Adds plain namespaces until the cluster holds [`cluster_size`] (none after `hns-bench tree`, which
/// leaves its forest of 10,000), and waits until hns lists them all.
async fn fill(client: &Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existing = namespaces.list_metadata(&ListParams::default()).await?.items.len();
    let cluster = cluster_size();
    let missing = cluster.saturating_sub(existing);
    let started = Instant::now();
    crate::bench::create_plain_namespaces(client, &format!("bench-views-fill-{existing}"), 0..missing, 32)
        .await;
    let configs: Api<HierarchyConfiguration> = Api::all(client.clone());
    while configs.list_metadata(&ListParams::default()).await?.items.len() < cluster {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "views: {missing} namespaces added in {:.1} s; {cluster} in the cluster",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// How many objects one list of `api` returns.
async fn rows_of<K>(api: Api<K>) -> anyhow::Result<usize>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api.list(&ListParams::default()).await?.items.len())
}

async fn lists(client: &Client, env: &Env, team: &[String]) -> anyhow::Result<()> {
    let user = env.client_as(USER, &[]).await;
    let user_hcs: Api<HierarchyConfiguration> = Api::all(user.clone());
    let user_subns: Api<Subnamespace> = Api::all(user);
    // The binding reaches the subnamespaces by propagation.
    while user_hcs.list(&ListParams::default()).await?.items.len() < TEAM + 1 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let admin_hcs: Api<HierarchyConfiguration> = Api::all(client.clone());
    let admin_team: Api<Subnamespace> = Api::namespaced(client.clone(), ROOT);
    const WHAT: [&str; 4] = [
        "admin: configurations, all namespaces",
        "user's view: configurations, all namespaces",
        "admin: subnamespaces of the team (-n)",
        "user's view: subnamespaces, all namespaces",
    ];
    // Interleaved, so that whatever else loads the machine (kube-controller-manager still
    // writing into the new namespaces) weighs on all four alike.
    let mut times: [Vec<Duration>; 4] = Default::default();
    let mut counts = [0usize; 4];
    for _ in 0..LISTS {
        for (i, (times, count)) in times.iter_mut().zip(counts.iter_mut()).enumerate() {
            let t = Instant::now();
            *count = match i {
                0 => rows_of(admin_hcs.clone()).await?,
                1 => rows_of(user_hcs.clone()).await?,
                2 => rows_of(admin_team.clone()).await?,
                _ => rows_of(user_subns.clone()).await?,
            };
            times.push(t.elapsed());
        }
    }
    let rows: Vec<(&str, (f64, f64, usize))> = WHAT
        .iter()
        .zip(times.iter_mut().zip(counts))
        .map(|(what, (times, count))| {
            times.sort();
            (*what, (quantile_ms(times, 0.5), quantile_ms(times, 0.99), count))
        })
        .collect();
    anyhow::ensure!(
        rows[3].1 .2 == team.len(),
        "the user saw {} subnamespaces of {}",
        rows[3].1 .2,
        team.len()
    );
    println!();
    println!(
        "views: lists through kube-apiserver, {} namespaces, user may get {} ({LISTS} each)",
        cluster_size(),
        TEAM + 1
    );
    println!("  {:<46} {:>6} {:>9} {:>9}", "list", "rows", "p50 ms", "p99 ms");
    for (what, (p50, p99, n)) in &rows {
        println!("  {what:<46} {n:>6} {p50:>9.1} {p99:>9.1}");
    }
    let (admin_all, view_all, admin_100, view_100) = (rows[0].1 .0, rows[1].1 .0, rows[2].1 .0, rows[3].1 .0);
    println!(
        "  user's configurations / admin's all: {:.2}x (target <= 2x); user's subnamespaces - admin's same 100: {:+.1} ms (target <= 10 ms); user's configurations - admin's 100 subnamespaces: {:+.1} ms",
        view_all / admin_all,
        view_100 - admin_100,
        view_all - admin_100,
    );
    Ok(())
}

/// Reads `events` until `namespace`'s configuration is added (`added`) or deleted.
async fn until_event(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<HierarchyConfiguration>>> + Unpin),
    namespace: &str,
    added: bool,
) -> anyhow::Result<()> {
    loop {
        match events.try_next().await? {
            Some(WatchEvent::Added(hc)) if added && hc.namespace().as_deref() == Some(namespace) => {
                return Ok(())
            }
            Some(WatchEvent::Deleted(hc)) if !added && hc.namespace().as_deref() == Some(namespace) => {
                return Ok(())
            }
            Some(WatchEvent::Error(e)) => anyhow::bail!("watch error: {e:?}"),
            None => anyhow::bail!("the watch ended"),
            Some(_) => {}
        }
    }
}

async fn watch(client: &Client, env: &Env) -> anyhow::Result<()> {
    let outsiders: Vec<String> = (0..CHANGES).map(|i| format!("bench-views-outside-{i}")).collect();
    for n in &outsiders {
        if Api::<Namespace>::all(client.clone()).get_opt(n).await?.is_none() {
            create_namespace(client, n, &[]).await;
        }
    }
    let user: Api<HierarchyConfiguration> = Api::all(env.client_as(USER, &[]).await);
    let mut events = user.watch(&WatchParams::default().timeout(290), "0").await?.boxed();
    let mut times = Vec::new();
    for n in &outsiders {
        let t = Instant::now();
        bind(client, n, "bench-views-change").await?;
        tokio::time::timeout(Duration::from_secs(30), until_event(&mut events, n, true)).await??;
        times.push(t.elapsed());
        let t = Instant::now();
        Api::<RoleBinding>::namespaced(client.clone(), n)
            .delete("bench-views-change", &DeleteParams::default())
            .await?;
        tokio::time::timeout(Duration::from_secs(30), until_event(&mut events, n, false)).await??;
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "views: access change to the user's watch ({} RoleBindings created and deleted): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 <= 1 s)",
        CHANGES,
        quantile_ms(&times, 0.5),
        quantile_ms(&times, 0.99),
        quantile_ms(&times, 1.0),
    );
    Ok(())
}
