//! Load: many watchers of subnamespaces and a steady stream of writes (subnamespace creates and
//! deletes, parent changes) through kube-apiserver, with every hns replica serving. Figures:
//! errors, write latency, the replicas' memory over the run, and watch events missed (every
//! watcher must see the creation and the deletion of every subnamespace of its namespace: the
//! DELETED event once the namespace is gone, and until then the change that marks it
//! terminating, since kube-controller-manager empties namespaces at its own pace).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hns_api::{HierarchyConfiguration, Subnamespace};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Semaphore;

use super::{Context, Figure};
use crate::timing::quantile_ms;
use crate::{create_namespace, create_subns, delete_tree, set_parent};

const SUITE: &str = "load";
const PARENTS: usize = 20;
const MOVERS: usize = 10;
/// Writes in flight at most; if hns or kube-apiserver cannot keep up, the achieved rate drops
/// and the figures say so.
const IN_FLIGHT: usize = 256;

/// What one watcher saw.
#[derive(Default)]
struct Seen {
    added: BTreeSet<String>,
    /// Shown with a deletionTimestamp (the namespace is terminating).
    terminating: BTreeSet<String>,
    deleted: BTreeSet<String>,
    /// Watches ended by 410 Gone: the events in between were lost to this watcher.
    expired: usize,
}

/// What the writers did.
#[derive(Default)]
struct Written {
    latencies: Vec<Duration>,
    errors: usize,
    first_errors: Vec<String>,
    /// Subnamespaces created / deleted, per parent.
    created: BTreeMap<String, BTreeSet<String>>,
    deleted: BTreeMap<String, BTreeSet<String>>,
}

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let duration = ctx.scale.pick(Duration::from_secs(30), Duration::from_secs(300));
    let watchers = 200;
    // The short run (CI) drives unoptimized builds of hns, kube-apiserver's client and this
    // driver on the same two cores as the whole control plane; there half the rate keeps the
    // figures about hns rather than about the debug build. The full run holds the 100/s.
    let rate = ctx.scale.pick(50u64, 100);
    let p = format!("load{}-", std::process::id());
    let client = &ctx.client;
    let parents: Vec<String> = (0..PARENTS).map(|j| format!("{p}p{j}")).collect();
    for name in &parents {
        create_namespace(client, name, &[]).await;
    }
    let movers: Vec<String> = (0..MOVERS).map(|k| format!("{p}m{k}")).collect();
    for (k, name) in movers.iter().enumerate() {
        create_namespace(client, name, &[]).await;
        set_parent(client, name, Some(&parents[k])).await.expect("set a mover's first parent");
    }
    let rss_start = rss(ctx);

    let seen: Vec<Arc<Mutex<Seen>>> = (0..watchers).map(|_| Arc::default()).collect();
    let mut watch_tasks = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        let api: Api<Subnamespace> = Api::namespaced(client.clone(), &parents[i % PARENTS]);
        let rv = api
            .list_metadata(&ListParams::default())
            .await
            .expect("list subnamespaces")
            .metadata
            .resource_version;
        watch_tasks.push(tokio::spawn(watch(api, rv.unwrap_or_default(), s.clone())));
    }

    println!("load: {watchers} watchers open; writing at {rate}/s for {} s", duration.as_secs());
    let written = Arc::new(Mutex::new(Written::default()));
    let started = Instant::now();
    let (writes, issuing) = write_for(client, &parents, &movers, rate, duration, written.clone()).await;
    let elapsed = started.elapsed();
    let mut rss_samples = vec![rss(ctx)];

    // Every watcher must see every creation and deletion in its namespace; deletions finish when
    // kube-controller-manager has emptied the namespace, so give them time.
    let expected = |j: usize| {
        let w = written.lock().unwrap();
        let get = |m: &BTreeMap<String, BTreeSet<String>>| m.get(&parents[j]).cloned().unwrap_or_default();
        (get(&w.created), get(&w.deleted))
    };
    // The events not seen, as "watcher N: created|deleted NAME".
    let missed = |existing: &BTreeSet<String>| -> Vec<String> {
        let mut missed = Vec::new();
        for (i, s) in seen.iter().enumerate() {
            let (created, deleted) = expected(i % PARENTS);
            let s = s.lock().unwrap();
            let deletion_seen =
                |d: &String| s.deleted.contains(d) || (existing.contains(d) && s.terminating.contains(d));
            missed.extend(created.difference(&s.added).map(|n| format!("watcher {i}: created {n}")));
            missed.extend(
                deleted.iter().filter(|d| !deletion_seen(d)).map(|n| format!("watcher {i}: deleted {n}")),
            );
        }
        missed
    };
    let drain = Instant::now();
    let mut existing = namespaces(client).await;
    while !missed(&existing).is_empty() && drain.elapsed() < Duration::from_secs(180) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        existing = namespaces(client).await;
    }
    rss_samples.push(rss(ctx));
    let missed = missed(&existing);
    for m in missed.iter().take(10) {
        println!("load: event missed by {m}");
    }
    let missed = missed.len();
    let terminating = {
        let w = written.lock().unwrap();
        w.deleted.values().flatten().filter(|d| existing.contains(*d)).count()
    };
    let expired: usize = seen.iter().map(|s| s.lock().unwrap().expired).sum();
    for t in watch_tasks {
        t.abort();
    }
    for name in parents.iter().chain(&movers) {
        delete_tree(client, name).await;
    }

    let mut w = std::mem::take(&mut *written.lock().unwrap());
    w.latencies.sort();
    for e in &w.first_errors {
        println!("load: error: {e}");
    }
    let mut figures = vec![
        Figure::info(
            SUITE,
            "watchers / writes",
            format!(
                "{watchers} / {writes}, all answered {:.1} s after the last was sent",
                (elapsed - issuing).as_secs_f64()
            ),
        ),
        // Writes are sent on a clock, not after the previous answer; the rate drops only if
        // IN_FLIGHT writes are waiting for answers at once.
        Figure::target(
            SUITE,
            "write rate sustained",
            format!("{:.1}/s", writes as f64 / issuing.as_secs_f64()),
            format!("{rate}/s"),
            writes as f64 / issuing.as_secs_f64() >= rate as f64 * 0.95,
        ),
        Figure::zero(SUITE, "write errors", w.errors),
        Figure::info(
            SUITE,
            "write latency p50 / p99",
            format!("{:.0} ms / {:.0} ms", quantile_ms(&w.latencies, 0.5), quantile_ms(&w.latencies, 0.99)),
        ),
        Figure::zero(SUITE, "watch events missed", missed),
        Figure::info(SUITE, "deleted subnamespaces still terminating at the end", terminating.to_string()),
        Figure::zero(SUITE, "watches expired (410 Gone)", expired),
    ];
    for (name, start) in rss_start {
        let end = rss_samples.iter().filter_map(|s| s.get(&name)).copied().fold(0.0, f64::max);
        figures.push(Figure::target(
            SUITE,
            format!("RSS of {name} start / end"),
            format!("{start:.0} MiB / {end:.0} MiB"),
            "end < start + 64 MiB",
            end < start + 64.0,
        ));
    }
    figures
}

/// The names of the namespaces that exist now (terminating or not).
async fn namespaces(client: &Client) -> BTreeSet<String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let list = api.list_metadata(&ListParams::default()).await.expect("list namespaces");
    list.items.into_iter().filter_map(|n| n.metadata.name).collect()
}

fn rss(ctx: &Context) -> BTreeMap<String, f64> {
    ctx.replicas.names.iter().filter_map(|n| Some((n.clone(), ctx.processes.rss_mib(n)?))).collect()
}

/// Watches subnamespaces from `rv`, resuming where it left off when the server ends the watch.
async fn watch(api: Api<Subnamespace>, mut rv: String, seen: Arc<Mutex<Seen>>) {
    loop {
        let params = WatchParams::default().timeout(290);
        let Ok(stream) = api.watch(&params, &rv).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let mut s = seen.lock().unwrap();
            match event {
                Ok(WatchEvent::Added(o)) | Ok(WatchEvent::Modified(o)) => {
                    let name = o.metadata.name.clone().unwrap_or_default();
                    if o.metadata.deletion_timestamp.is_some() {
                        s.terminating.insert(name.clone());
                    }
                    s.added.insert(name);
                    rv = o.metadata.resource_version.unwrap_or(rv);
                }
                Ok(WatchEvent::Deleted(o)) => {
                    s.deleted.insert(o.metadata.name.clone().unwrap_or_default());
                    rv = o.metadata.resource_version.unwrap_or(rv);
                }
                Ok(WatchEvent::Bookmark(b)) => rv = b.metadata.resource_version,
                Ok(WatchEvent::Error(e)) => {
                    // 410 Gone: the events since `rv` are lost to this watcher; start again from now.
                    if e.code == 410 {
                        s.expired += 1;
                        rv = String::new();
                    }
                    break;
                }
                Err(_) => break,
            }
        }
        if rv.is_empty() {
            let list = api.list_metadata(&ListParams::default()).await;
            rv = list.ok().and_then(|l| l.metadata.resource_version).unwrap_or_default();
        }
    }
}

/// Writes at `rate` per second for `duration`: two creates, two deletes and one parent change
/// in every five. Returns the number of writes sent and how long sending them took; it waits for
/// every answer before returning.
async fn write_for(
    client: &Client,
    parents: &[String],
    movers: &[String],
    rate: u64,
    duration: Duration,
    written: Arc<Mutex<Written>>,
) -> (usize, Duration) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    // An open-loop generator: ticks the runtime was too busy to take are made up at once, so
    // a slow moment does not quietly lower the rate.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let live: Arc<Mutex<VecDeque<(String, String, Instant)>>> = Arc::default();
    let started = Instant::now();
    let mut n = 0usize;
    let mut tasks = Vec::new();
    while started.elapsed() < duration {
        tick.tick().await;
        let permit = permits.clone().acquire_owned().await.expect("semaphore open");
        let write = pick_write(n, parents, movers, &live);
        let (client, written, live) = (client.clone(), written.clone(), live.clone());
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let result = write.apply(&client).await;
            let mut w = written.lock().unwrap();
            w.latencies.push(t.elapsed());
            match result {
                Ok(()) => match write {
                    Write::Create { parent, name } => {
                        w.created.entry(parent.clone()).or_default().insert(name.clone());
                        live.lock().unwrap().push_back((parent, name, Instant::now()));
                    }
                    Write::Delete { parent, name } => {
                        w.deleted.entry(parent).or_default().insert(name);
                    }
                    Write::Move { .. } => {}
                },
                Err(e) => {
                    w.errors += 1;
                    if w.first_errors.len() < 5 {
                        w.first_errors.push(format!("{write:?}: {e}"));
                    }
                }
            }
            drop(permit);
        }));
        n += 1;
    }
    let issuing = started.elapsed();
    for t in tasks {
        let _ = t.await;
    }
    (n, issuing)
}

#[derive(Debug)]
enum Write {
    Create { parent: String, name: String },
    Delete { parent: String, name: String },
    Move { ns: String, parent: String },
}

fn pick_write(
    n: usize,
    parents: &[String],
    movers: &[String],
    live: &Mutex<VecDeque<(String, String, Instant)>>,
) -> Write {
    match n % 5 {
        2 | 3 => {
            let mut live = live.lock().unwrap();
            // Delete subnamespaces that have existed for a second, oldest first.
            if live.front().is_some_and(|(_, _, at)| at.elapsed() > Duration::from_secs(1)) {
                let (parent, name, _) = live.pop_front().expect("checked above");
                return Write::Delete { parent, name };
            }
            create(n, parents)
        }
        4 => {
            let k = (n / 5) % movers.len();
            let hop = (n / (5 * movers.len())) % 2;
            Write::Move { ns: movers[k].clone(), parent: parents[(k + hop) % parents.len()].clone() }
        }
        _ => create(n, parents),
    }
}

fn create(n: usize, parents: &[String]) -> Write {
    let parent = parents[n % parents.len()].clone();
    Write::Create { name: format!("{parent}-s{n}"), parent }
}

impl Write {
    async fn apply(&self, client: &Client) -> Result<(), kube::Error> {
        match self {
            Write::Create { parent, name } => create_subns(client, parent, name).await.map(|_| ()),
            Write::Delete { parent, name } => Api::<Subnamespace>::namespaced(client.clone(), parent)
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
            Write::Move { ns, parent } => {
                let patch = json!({"spec": {"parent": parent}});
                Api::<HierarchyConfiguration>::namespaced(client.clone(), ns)
                    .patch("hierarchy", &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
            }
        }
    }
}
