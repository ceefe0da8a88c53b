//! Views under churn: random RoleBindings made and removed (for users and for groups) and
//! namespaces moved between trees, while every user watches hierarchy configurations across all
//! namespaces through kube-apiserver (two hns replicas behind it). After each change settles,
//! each user's watched set and a fresh list must both equal the set of namespaces where
//! kube-apiserver's own SubjectAccessReview lets the user get the configuration: a row more is a
//! row shown that may not be seen, a row less one hidden that may.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use hns_api::hierarchy::HIERARCHY_SINGLETON;
use hns_api::HierarchyConfiguration;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};

use super::{Context, Figure, Rng};
use crate::timing::quantile_ms;
use crate::{
    create_namespace, create_subns, delete_namespaces, delete_tree, may_get, role_binding, set_parent,
    Subject,
};

const SUITE: &str = "views";
/// How long a change may take to reach every watch and list before what differs is counted.
const SETTLE: Duration = Duration::from_secs(15);

/// A user, the group it is in, and what it sees.
struct Watcher {
    user: String,
    group: String,
    client: Client,
    /// The namespaces its watch shows, kept by a background task.
    watched: Arc<Mutex<BTreeSet<String>>>,
    /// Events its watcher could not take: hns broke the watch protocol (an object without a
    /// resourceVersion). An expired watch (410) is the protocol working, and is not counted.
    unusable: Arc<AtomicUsize>,
    /// Watches answered 410 Gone (its watcher lists again): after a change of the user's access,
    /// or on a replica that cannot tell what the client was shown.
    expired: Arc<AtomicUsize>,
}

/// The namespaces of the suite: trees (roots with two subnamespaces each) and loose namespaces
/// that move between them.
struct Pool {
    roots: Vec<String>,
    loose: Vec<String>,
    all: Vec<String>,
}

async fn pool(client: &Client, prefix: &str) -> Pool {
    let mut roots = Vec::new();
    let mut all = Vec::new();
    for r in 0..3 {
        let root = create_namespace(client, &format!("{prefix}-r{r}"), &[]).await;
        for kid in ["a", "b"] {
            let name = format!("{root}-{kid}");
            create_subns(client, &root, &name).await.expect("subnamespace");
            all.push(name);
        }
        all.push(root.clone());
        roots.push(root);
    }
    let mut loose = Vec::new();
    for l in 0..4 {
        loose.push(create_namespace(client, &format!("{prefix}-l{l}"), &[]).await);
    }
    all.extend(loose.iter().cloned());
    Pool { roots, loose, all }
}

/// Starts a user's watch (kube-runtime's watcher: it lists again whenever the watch expires).
async fn watch(ctx: &Context, user: String, group: String) -> Watcher {
    let client = ctx.env.client_as(&user, &[&group]).await;
    let watched = Arc::new(Mutex::new(BTreeSet::new()));
    let (api, shown) = (Api::<HierarchyConfiguration>::all(client.clone()), watched.clone());
    let unusable = Arc::new(AtomicUsize::new(0));
    let broken = unusable.clone();
    let expired = Arc::new(AtomicUsize::new(0));
    let gone = expired.clone();
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut relisted = BTreeSet::new();
        let ns = |hc: &HierarchyConfiguration| hc.namespace().unwrap_or_default();
        loop {
            let event = match events.try_next().await {
                Ok(Some(event)) => event,
                Ok(None) => return,
                // The watcher retries (with backoff) on its own.
                Err(e) => {
                    match &e {
                        watcher::Error::NoResourceVersion => _ = broken.fetch_add(1, Ordering::Relaxed),
                        watcher::Error::WatchError(status) if status.code == 410 => {
                            _ = gone.fetch_add(1, Ordering::Relaxed)
                        }
                        _ => {}
                    }
                    println!("views: a watch failed: {e}");
                    continue;
                }
            };
            let mut shown = shown.lock().unwrap();
            match event {
                Event::Init => relisted.clear(),
                Event::InitApply(hc) => {
                    relisted.insert(ns(&hc));
                }
                Event::InitDone => *shown = std::mem::take(&mut relisted),
                Event::Apply(hc) => {
                    shown.insert(ns(&hc));
                }
                Event::Delete(hc) => {
                    shown.remove(&ns(&hc));
                }
            }
        }
    });
    Watcher { user, group, client, watched, unusable, expired }
}

/// Rows shown that may not be seen, and rows hidden that may, over every user's watch and list.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Wrong {
    shown: usize,
    hidden: usize,
}

/// Compares every user's watch and a fresh list with kube-apiserver's reviews, over the pool and
/// anything shown outside it.
async fn compare(admin: &Client, watchers: &[Watcher], pool: &[String]) -> Wrong {
    let checks = watchers.iter().map(|w| async move {
        let listed: BTreeSet<String> =
            match Api::<HierarchyConfiguration>::all(w.client.clone()).list(&ListParams::default()).await {
                Ok(l) => l.items.iter().map(|hc| hc.namespace().unwrap_or_default()).collect(),
                Err(e) => {
                    println!("views: {} could not list: {e}", w.user);
                    return Wrong { shown: 0, hidden: pool.len() };
                }
            };
        let watched = w.watched.lock().unwrap().clone();
        let mut candidates: BTreeSet<String> = pool.iter().cloned().collect();
        candidates.extend(listed.iter().cloned());
        candidates.extend(watched.iter().cloned());
        let mut wrong = Wrong::default();
        for ns in candidates {
            let allowed =
                may_get(admin, (&w.user, &[&w.group]), "hierarchyconfigurations", &ns, HIERARCHY_SINGLETON)
                    .await;
            for seen in [&listed, &watched] {
                match (seen.contains(&ns), allowed) {
                    (true, false) => wrong.shown += 1,
                    (false, true) => wrong.hidden += 1,
                    _ => {}
                }
            }
        }
        wrong
    });
    let all: Vec<Wrong> = futures::stream::iter(checks).buffer_unordered(8).collect().await;
    all.iter().fold(Wrong::default(), |a, w| Wrong { shown: a.shown + w.shown, hidden: a.hidden + w.hidden })
}

/// One random change; returns what it was.
async fn change(
    ctx: &Context,
    rng: &mut Rng,
    pool: &Pool,
    watchers: &[Watcher],
    made: &mut Vec<(String, String)>,
) -> String {
    match rng.below(10) {
        0..=3 => {
            let ns = &pool.all[rng.below(pool.all.len() as u64) as usize];
            let w = &watchers[rng.below(watchers.len() as u64) as usize];
            let subject = if rng.below(3) == 0 { Subject::Group(&w.group) } else { Subject::User(&w.user) };
            let name = format!(
                "views-{}-{}",
                subject.name().rsplit('-').next().unwrap_or_default(),
                ns.rsplit('-').next().unwrap_or_default()
            );
            match Api::<RoleBinding>::namespaced(ctx.client.clone(), ns)
                .create(&PostParams::default(), &role_binding(&name, "view", subject))
                .await
            {
                Ok(_) => {
                    made.push((ns.clone(), name.clone()));
                    format!("bind {} {} in {ns}", subject.kind(), subject.name())
                }
                Err(e) => format!("bind {} {} in {ns}: {e}", subject.kind(), subject.name()),
            }
        }
        4..=6 if !made.is_empty() => {
            let (ns, name) = made.swap_remove(rng.below(made.len() as u64) as usize);
            match Api::<RoleBinding>::namespaced(ctx.client.clone(), &ns)
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => format!("unbind {name} in {ns}"),
                Err(e) => format!("unbind {name} in {ns}: {e}"),
            }
        }
        _ => {
            let ns = &pool.loose[rng.below(pool.loose.len() as u64) as usize];
            let choice = rng.below(pool.roots.len() as u64 + 1) as usize;
            let parent = pool.roots.get(choice).map(String::as_str);
            match set_parent(&ctx.client, ns, parent).await {
                Ok(_) => format!("move {ns} under {parent:?}"),
                Err(e) => format!("move {ns} under {parent:?}: {e}"),
            }
        }
    }
}

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let changes = ctx.scale.pick(40, 1_000);
    let users = ctx.scale.pick(5, 20);
    let prefix = format!("views{}", std::process::id());
    let pool = pool(&ctx.client, &prefix).await;
    let mut watchers = Vec::new();
    for u in 0..users {
        watchers.push(watch(ctx, format!("{prefix}-u{u}"), format!("{prefix}-g{}", u % 3)).await);
    }
    let mut rng = Rng::new(ctx.seed ^ 0x7669_6577);
    let mut made = Vec::new();
    let (mut wrong, mut settle_times, mut unsettled) = (Wrong::default(), Vec::new(), 0);
    for i in 0..changes {
        let what = change(ctx, &mut rng, &pool, &watchers, &mut made).await;
        let started = Instant::now();
        let last = loop {
            let found = compare(&ctx.client, &watchers, &pool.all).await;
            if found == Wrong::default() {
                settle_times.push(started.elapsed());
                break found;
            }
            if started.elapsed() > SETTLE {
                unsettled += 1;
                println!("views: change {i} ({what}) unsettled after {SETTLE:?}: {found:?}");
                break found;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        wrong.shown += last.shown;
        wrong.hidden += last.hidden;
    }
    settle_times.sort();
    let unusable = watchers.iter().map(|w| w.unusable.load(Ordering::Relaxed)).sum();
    let expired: usize = watchers.iter().map(|w| w.expired.load(Ordering::Relaxed)).sum();
    for root in &pool.roots {
        delete_tree(&ctx.client, root).await;
    }
    delete_namespaces(&ctx.client, &pool.loose.iter().map(String::as_str).collect::<Vec<_>>()).await;
    vec![
        Figure::info(SUITE, format!("random RBAC changes and moves ({users} users watching)"), changes),
        Figure::zero(SUITE, "rows shown that SubjectAccessReview denies (watch + list)", wrong.shown),
        Figure::zero(SUITE, "rows hidden that SubjectAccessReview allows (watch + list)", wrong.hidden),
        Figure::zero(SUITE, format!("changes not settled within {} s", SETTLE.as_secs()), unsettled),
        Figure::zero(
            SUITE,
            "watch events without a resourceVersion (kube-runtime's watcher fails)",
            unusable,
        ),
        Figure::info(SUITE, "watches told to list again (410 Gone)", expired),
        Figure::info(
            SUITE,
            "change to every watch and list agreeing, p50 / p99",
            format!("{:.0} / {:.0} ms", quantile_ms(&settle_times, 0.5), quantile_ms(&settle_times, 0.99)),
        ),
    ]
}
