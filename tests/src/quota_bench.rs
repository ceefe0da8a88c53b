//! `hns-bench quotas`: hierarchical quotas measured against a live cluster.
//!
//! - **Overspend**: trials of 9 pods created at the same moment in 8 sibling subnamespaces of a
//!   parent whose quota allows 8 pods: pods admitted beyond the budget, over every trial (the
//!   target is 0), and trials that admitted fewer than the budget allowed (false refusals).
//! - **Cost**: pod creation latency in a namespace under a chain of 3 quotas vs in a namespace
//!   with a plain ResourceQuota of the same limits, interleaved so both see the same load.
//! - **Convergence**: how long a quota over 1,000 namespaces takes to show a new pod in its
//!   `status.used`.

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

use crate::quotas::{
    budget_tree, count_pods, create_pod, delete_pods, race_pods, set_quota, until_counted, until_used,
    SIBLINGS,
};
use crate::timing::{print_against_baseline, quantile_ms};
use crate::{create_namespace, create_subns};

/// Pods the parent's quota allows in the overspend trials (one per sibling).
const BUDGET: usize = SIBLINGS;

/// Runs the three benchmarks; `trials` overspend trials.
pub async fn run(client: &Client, trials: usize) -> anyhow::Result<()> {
    overspend(client, trials).await?;
    cost(client).await?;
    convergence(client).await
}

/// Trees the overspend trials take turns on: a tree's usage takes a second or two to come back
/// to 0 after its pods are deleted (hns lets kube-controller-manager recount only 1 s after a
/// rise), which the other trees' trials fill.
const TREES: usize = 4;

async fn overspend(client: &Client, trials: usize) -> anyhow::Result<()> {
    let id = std::process::id();
    let mut trees = Vec::new();
    for k in 0..TREES {
        trees.push(budget_tree(client, &format!("bq{id}-{k}"), BUDGET).await);
    }
    let (mut beyond, mut short) = (0usize, 0usize);
    let mut other: std::collections::BTreeMap<String, usize> = Default::default();
    let started = Instant::now();
    for t in 0..trials {
        let (root, siblings) = &trees[t % TREES];
        if until_used(client, root, "budget", "pods", "0", Duration::from_secs(60)).await.is_none() {
            anyhow::bail!("trial {t}: the quota's usage did not return to 0 after deleting the pods");
        }
        let mut targets: Vec<(String, String)> =
            siblings.iter().map(|s| (s.clone(), format!("p{t}"))).collect();
        targets.push((siblings[t % BUDGET].clone(), format!("p{t}-extra")));
        let outcomes = race_pods(client, &targets, "10m").await;
        for outcome in outcomes.clone() {
            if let crate::quotas::Admission::Failed(why) = outcome {
                *other.entry(why).or_default() += 1;
            }
        }
        let admitted = count_pods(client, siblings).await;
        if admitted > BUDGET {
            println!("trial {t}: {admitted} pods admitted; outcomes {outcomes:?}");
            print_state(client, root, siblings).await;
        }
        beyond += admitted.saturating_sub(BUDGET);
        short += usize::from(admitted < BUDGET);
        delete_pods(client, siblings).await;
    }
    println!();
    println!("Overspend: {trials} trials of {} pods created at once in {BUDGET} sibling subnamespaces, parent quota pods: {BUDGET} ({TREES} such trees in turn)", BUDGET + 1);
    println!("  pods admitted beyond the budget, all trials   {beyond}   (target 0)");
    println!("  trials admitting fewer than the budget        {short}");
    println!("  creations failing other than by quota          {}", other.values().sum::<usize>());
    for (why, n) in &other {
        println!("    {n} x {why}");
    }
    println!(
        "  time per trial (create, count, delete)         {:.2} s",
        started.elapsed().as_secs_f64() / trials.max(1) as f64
    );
    Ok(())
}

/// What a trial that went beyond the budget leaves: each sibling's pods and ResourceQuota, and
/// the tree's ledger, for the report.
async fn print_state(client: &Client, root: &str, siblings: &[String]) {
    for ns in siblings {
        let rq = Api::<ResourceQuota>::namespaced(client.clone(), ns).get("hrq.hnc.x-k8s.io").await.ok();
        let annotations = rq.as_ref().and_then(|q| q.metadata.annotations.clone()).unwrap_or_default();
        let used =
            rq.as_ref().and_then(|q| q.status.as_ref()).and_then(|s| s.used.clone()).unwrap_or_default();
        let version = rq.as_ref().and_then(|q| q.metadata.resource_version.clone()).unwrap_or_default();
        println!(
            "  {ns}: {} pods; ResourceQuota at {version}: used {used:?}, {annotations:?}",
            count_pods(client, std::slice::from_ref(ns)).await
        );
    }
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "hns-system");
    if let Ok(cm) = cms.get(&format!("hrq-ledger-{root}")).await {
        println!("  ledger: {:?}", cm.data.unwrap_or_default());
    }
}

async fn cost(client: &Client) -> anyhow::Result<()> {
    let hard = [("pods", "100000"), ("requests.cpu", "10000")];
    let id = std::process::id();
    let root = create_namespace(client, &format!("bl{id}-root"), &[]).await;
    let (mid, leaf) = (format!("bl{id}-mid"), format!("bl{id}-leaf"));
    create_subns(client, &root, &mid).await?;
    create_subns(client, &mid, &leaf).await?;
    for ns in [&root, &mid, &leaf] {
        set_quota(client, ns, "chain", &hard).await?;
    }
    let plain = create_namespace(client, &format!("bl{id}-plain"), &[]).await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"hard": {"pods": "100000", "requests.cpu": "10000"}},
    }))?;
    Api::<ResourceQuota>::namespaced(client.clone(), &plain).create(&PostParams::default(), &quota).await?;
    until_counted(client, std::slice::from_ref(&leaf)).await?;
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), &plain);
    while api.get("plain").await?.status.and_then(|s| s.hard).is_none() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    const ROUNDS: usize = 300;
    let (mut hrq, mut rq) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for i in 0..ROUNDS {
        let t = Instant::now();
        let a = create_pod(client, &leaf, &format!("p{i}"), "1m").await;
        hrq.push(t.elapsed());
        anyhow::ensure!(a.admitted(), "pod {i} under the quota chain: {a:?}");
        let t = Instant::now();
        let a = create_pod(client, &plain, &format!("p{i}"), "1m").await;
        rq.push(t.elapsed());
        anyhow::ensure!(a.admitted(), "pod {i} under the plain ResourceQuota: {a:?}");
    }
    hrq.sort();
    rq.sort();
    println!();
    print_against_baseline(
        &format!("Pod creation, {ROUNDS} each, interleaved"),
        ("plain ResourceQuota (baseline)", &rq),
        ("under a chain of 3 hierarchical quotas", &hrq),
        "target <= 1.3",
    );
    Ok(())
}

async fn convergence(client: &Client) -> anyhow::Result<()> {
    const SIZE: usize = 1_000;
    let id = std::process::id();
    let root = create_namespace(client, &format!("bc{id}-root"), &[]).await;
    set_quota(client, &root, "wide", &[("pods", "100000")]).await?;
    let leaves: Vec<String> = (0..SIZE - 1).map(|i| format!("bc{id}-{i}")).collect();
    let started = Instant::now();
    stream::iter(leaves.iter())
        .for_each_concurrent(32, |leaf| {
            let root = root.clone();
            async move {
                let _ = create_subns(client, &root, leaf).await;
            }
        })
        .await;
    let mut all = leaves.clone();
    all.push(root.clone());
    until_counted(client, &all).await?;
    println!();
    println!(
        "Convergence: a quota over {SIZE} namespaces (set up in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let mut times = Vec::new();
    for i in 0..20 {
        let leaf = &leaves[(i * 37) % leaves.len()];
        let a = create_pod(client, leaf, &format!("c{i}"), "1m").await;
        anyhow::ensure!(a.admitted(), "pod {i} in {leaf}: {a:?}");
        let want = (i + 1).to_string();
        match until_used(client, &root, "wide", "pods", &want, Duration::from_secs(30)).await {
            Some(t) => times.push(t),
            None => anyhow::bail!("the quota never showed {want} pods"),
        }
    }
    times.sort();
    println!(
        "  status.used shows a new pod after: p50 {:.0} ms, max {:.0} ms   (target <= 2 s)",
        quantile_ms(&times, 0.5),
        quantile_ms(&times, 1.0)
    );
    Ok(())
}
