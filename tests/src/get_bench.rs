//! `hns-bench subtree-get`: `kubectl hns get pods -n ROOT` over a subtree (by default 100
//! namespaces, three levels, 10,000 pods) vs what a user does without it, `kubectl get pods -n X`
//! for each namespace of the subtree, one after the other. Both run as processes through real
//! kubectl, in rounds that interleave them so both see the same load.

use std::process::Output;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

use crate::bench::ms;
use crate::quotas::{delete_pods, pod};
use crate::{create_namespace, create_subns, delete_tree, hns_with, kubectl_with, Env};

const ROOT: &str = "bench-get";
/// Children per namespace: 100 namespaces are the root, 10 children and 89 grandchildren.
const FAN_OUT: usize = 10;
/// Rounds, each one run of either side.
const ROUNDS: usize = 3;
/// How long the subtree's deletion may take before the benchmark says it left it behind.
const CLEAN_UP: Duration = Duration::from_secs(600);

/// Namespace `i` of the subtree: the root, then each namespace's [`FAN_OUT`] children in turn.
fn member(i: usize) -> String {
    match i {
        0 => ROOT.to_string(),
        i => format!("{ROOT}-{i}"),
    }
}

/// The parent of namespace `i > 0`.
fn parent(i: usize) -> usize {
    (i - 1) / FAN_OUT
}

/// Runs the benchmark over `namespaces` namespaces holding `pods` pods.
pub async fn run(client: &Client, env: &Env, namespaces: usize, pods: usize) -> anyhow::Result<()> {
    anyhow::ensure!(namespaces >= 1, "the subtree needs at least its root");
    let names: Vec<String> = (0..namespaces).map(member).collect();
    let result = measure(client, env, &names, pods).await;
    clean_up(client, &names).await;
    result
}

async fn measure(client: &Client, env: &Env, names: &[String], pods: usize) -> anyhow::Result<()> {
    grow(client, names).await?;
    fill(client, names, pods).await?;
    // hns has the whole subtree in its forest when the plugin lists every pod.
    let started = Instant::now();
    while ours(env)?.1 != pods {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(120),
            "kubectl hns get never listed all {pods} pods"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let title = format!("subtree-get, {} namespaces, {pods} pods", names.len());
    let baseline = format!("{} x kubectl get (ms)", names.len());
    println!();
    println!("{title:<44}  kubectl hns get (ms)  {baseline:>22}   ratio (target >= 20x)");
    let mut ratios = Vec::new();
    for round in 1..=ROUNDS {
        let (hns, listed) = ours(env)?;
        anyhow::ensure!(listed == pods, "kubectl hns get listed {listed} pods of {pods}");
        let (kubectl, listed) = theirs(env, names)?;
        anyhow::ensure!(listed == pods, "kubectl get listed {listed} pods of {pods}");
        let ratio = kubectl.as_secs_f64() / hns.as_secs_f64();
        println!("  round {round:<36}  {:20.1}  {:22.1}   {ratio:5.1}x", ms(hns), ms(kubectl));
        ratios.push(ratio);
    }
    ratios.sort_by(f64::total_cmp);
    println!("  {:<42}  {:20}  {:22}   {:5.1}x", "median ratio", "", "", ratios[ROUNDS / 2]);
    println!("  kubectl hns get pods -n {ROOT}: one process, one request per namespace, 8 at once");
    println!("  baseline: kubectl get pods -n NS for each namespace of the subtree, one after the other");
    Ok(())
}

/// Makes the subtree, a level at a time so that parents exist first, 32 namespaces at once.
async fn grow(client: &Client, names: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    create_namespace(client, &names[0], &[]).await;
    let mut level = vec![0];
    while !level.is_empty() {
        let next: Vec<usize> = (1..names.len()).filter(|&i| level.contains(&parent(i))).collect();
        let made: Vec<anyhow::Result<()>> = stream::iter(&next)
            .map(|&i| async move {
                create_subns(client, &names[parent(i)], &names[i]).await?;
                Ok(())
            })
            .buffer_unordered(32)
            .collect()
            .await;
        made.into_iter().collect::<anyhow::Result<()>>()?;
        level = next;
    }
    println!("created a subtree of {} namespaces in {:.1} s", names.len(), started.elapsed().as_secs_f64());
    Ok(())
}

/// Creates `pods` pods spread evenly over the namespaces, 64 at once. Each namespace takes pods
/// once the controller manager has made its `default` ServiceAccount; until then a creation is
/// retried, for up to 5 minutes (after `hns-bench views` has made 10,000 namespaces, the
/// controller manager takes minutes to reach new ones).
async fn fill(client: &Client, names: &[String], pods: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let made: Vec<anyhow::Result<()>> = stream::iter(0..pods)
        .map(|j| async move {
            let api: Api<Pod> = Api::namespaced(client.clone(), &names[j % names.len()]);
            let p = pod(&format!("p-{j}"), "10m");
            let mut tries = 0;
            while let Err(e) = api.create(&PostParams::default(), &p).await {
                tries += 1;
                anyhow::ensure!(tries < 3_000, "pod p-{j}: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(())
        })
        .buffer_unordered(64)
        .collect()
        .await;
    made.into_iter().collect::<anyhow::Result<()>>()?;
    println!("created {pods} pods in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Lines of output but the header: the pods a table lists.
fn rows(out: &Output, what: &str) -> anyhow::Result<usize> {
    anyhow::ensure!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(out.stdout.iter().filter(|b| **b == b'\n').count().saturating_sub(1))
}

/// One `kubectl hns get pods -n ROOT`: how long it took and how many pods it listed.
fn ours(env: &Env) -> anyhow::Result<(Duration, usize)> {
    let t = Instant::now();
    let out = hns_with(&env.kubeconfig, &["get", "pods", "-n", ROOT]);
    let took = t.elapsed();
    Ok((took, rows(&out, "kubectl hns get pods")?))
}

/// `kubectl get pods -n NS` for each namespace in turn: how long that took and how many pods
/// they listed.
fn theirs(env: &Env, names: &[String]) -> anyhow::Result<(Duration, usize)> {
    let t = Instant::now();
    let mut listed = 0;
    for ns in names {
        let out = kubectl_with(&env.kubeconfig, &["get", "pods", "-n", ns]);
        // An empty namespace prints nothing on stdout (no header): 0 rows all the same.
        listed += rows(&out, "kubectl get pods")?;
    }
    Ok((t.elapsed(), listed))
}

/// Deletes the pods (at once, namespace by namespace: nothing runs them) and the subtree, and
/// waits until its namespaces are gone.
async fn clean_up(client: &Client, names: &[String]) {
    delete_pods(client, names).await;
    delete_tree(client, &names[0]).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    while started.elapsed() < CLEAN_UP {
        let left = namespaces.list_metadata(&ListParams::default()).await.map_or(usize::MAX, |l| {
            l.items.iter().filter(|n| n.metadata.name.as_ref().is_some_and(|n| names.contains(n))).count()
        });
        if left == 0 {
            println!("deleted the subtree in {:.1} s", started.elapsed().as_secs_f64());
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!("the subtree {} was not deleted within {} s", names[0], CLEAN_UP.as_secs());
}
