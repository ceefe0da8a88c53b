//! `hns-bench`: benchmarks against a live cluster (started by `make bench`). Prints figures and
//! ratios against a baseline measured in the same run; asserts nothing about time.
//!
//!   hns-bench api     GET latency of a hierarchy configuration vs a namespace, and
//!                     LIST hierarchyconfigurations -A at 1,000 and 10,000 namespaces

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use hns_api::HierarchyConfiguration;
use hns_e2e::{create_namespace, Env};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};

const PREFIX: &str = "bench-ns";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "api".into());
    let env = Env::get();
    let client = env.admin().await;
    match which.as_str() {
        "api" => api(&client).await,
        other => anyhow::bail!("unknown benchmark {other:?}; known: api"),
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
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
    println!("GET, {ROUNDS} requests each          p50 (ms)   p99 (ms)");
    println!(
        "  namespaces/NAME (baseline)      {:8.2}   {:8.2}",
        ms(percentile(&kube, 0.5)),
        ms(percentile(&kube, 0.99))
    );
    println!(
        "  hierarchyconfigurations/hierarchy {:6.2}   {:8.2}",
        ms(percentile(&hns, 0.5)),
        ms(percentile(&hns, 0.99))
    );
    println!(
        "  ratio hns/baseline              {:8.2}   {:8.2}   (target p50 ratio <= 1.5)",
        ms(percentile(&hns, 0.5)) / ms(percentile(&kube, 0.5)),
        ms(percentile(&hns, 0.99)) / ms(percentile(&kube, 0.99))
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
