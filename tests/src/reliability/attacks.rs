//! Attacks that once worked (issue 40), run against the reliability cluster as part of the auth
//! section: what a revoked user, a namespace admin, and anyone who reaches hns-apiserver's port
//! without credentials could learn or break. Each figure counts what got through.

use std::time::{Duration, Instant};

use http::Request;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

use super::{Context, Figure};
use crate::quotas::{create_pod, set_quota, Admission};
use crate::{client_for, create_namespace, create_subns, delete_tree, forged, role_binding, Subject};

const SUITE: &str = "auth";
const API: &str = "/apis/hnc.x-k8s.io/v1alpha2";
const SETTLE: Duration = Duration::from_secs(30);

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let tag = format!("atk{}", std::process::id());
    let mut figures = vec![revoked_watch(ctx, &tag).await];
    figures.extend(tenant_quotas(ctx, &tag).await);
    figures.push(forged_quota_reviews(ctx, &tag).await);
    figures.extend(forged_holds(ctx, &tag).await);
    figures.push(status_subresource(ctx, &tag).await);
    figures.push(slow_bodies(ctx).await);
    figures.push(name_timing(ctx, &tag).await);
    figures
}

/// `user`'s client, with a client certificate of the cluster's.
async fn as_user(ctx: &Context, user: &str) -> Client {
    client_for(&ctx.local().user_kubeconfig(user, &[])).await
}

async fn bind(ctx: &Context, ns: &str, name: &str, role: &str, user: &str) {
    Api::<RoleBinding>::namespaced(ctx.client.clone(), ns)
        .create(&PostParams::default(), &role_binding(name, role, Subject::User(user)))
        .await
        .expect("bind a role");
}

async fn get_text(client: &Client, path: &str) -> Option<String> {
    let req = Request::get(path).body(Vec::new()).expect("a valid request");
    client.request_text(req).await.ok()
}

/// Polls `check` every 200 ms for [`SETTLE`]; whether it came true.
async fn until<F: std::future::Future<Output = bool>>(mut check: impl FnMut() -> F) -> bool {
    let started = Instant::now();
    while started.elapsed() < SETTLE {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// B1: a user whose access to a namespace ended resumes watches of subnamespaces and hierarchy
/// configurations, from before and after the revocation; every line naming the namespace is a
/// leak (a subnamespace is made there after the revocation).
async fn revoked_watch(ctx: &Context, tag: &str) -> Figure {
    let victim = create_namespace(&ctx.client, &format!("{tag}-victim"), &[]).await;
    create_subns(&ctx.client, &victim, &format!("{victim}-before")).await.expect("a subnamespace");
    let user = format!("{tag}-mallory");
    bind(ctx, &victim, "m-view", "view", &user).await;
    let mallory = as_user(ctx, &user).await;
    let paths = [format!("{API}/subnamespaces"), format!("{API}/hierarchyconfigurations")];
    let mut old = Vec::new();
    for path in &paths {
        until(|| async { listed(&mallory, path, &victim).await.1 }).await;
        old.push(listed(&mallory, path, &victim).await.0);
    }
    Api::<RoleBinding>::namespaced(ctx.client.clone(), &victim)
        .delete("m-view", &DeleteParams::default())
        .await
        .expect("revoke");
    for path in &paths {
        until(|| async { !listed(&mallory, path, &victim).await.1 }).await;
    }
    create_subns(&ctx.client, &victim, &format!("{victim}-secret")).await.expect("a subnamespace");
    let mut leaks = 0;
    for (path, old_rv) in paths.iter().zip(&old) {
        let fresh = listed(&mallory, path, &victim).await.0;
        for rv in [fresh.as_str(), old_rv.as_str()] {
            let url = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=2");
            let lines = get_text(&mallory, &url).await.unwrap_or_default();
            let leaked = lines.lines().filter(|l| l.contains(&victim)).count();
            if leaked > 0 {
                println!("auth: a revoked user resuming {path} from {rv} was told: {lines}");
            }
            leaks += leaked;
        }
    }
    delete_tree(&ctx.client, &victim).await;
    Figure::zero(SUITE, "revoked user resuming watches: events about the revoked namespace", leaks)
}

/// The resourceVersion of a list of `path`, and whether it mentions `text`.
async fn listed(client: &Client, path: &str, text: &str) -> (String, bool) {
    let body = get_text(client, path).await.unwrap_or_default();
    let list: Value = serde_json::from_str(&body).unwrap_or_default();
    (list["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string(), body.contains(text))
}

/// B2: the admin of one subnamespace under a quota puts quotas on it that hns cannot count
/// (a resource Kubernetes never counts), or that would fill the tree's quota ledger; pods are
/// created in a sibling and in the parent meanwhile.
async fn tenant_quotas(ctx: &Context, tag: &str) -> Vec<Figure> {
    let parent = create_namespace(&ctx.client, &format!("{tag}-q"), &[]).await;
    let (tenant_ns, sibling) = (format!("{parent}-tenant"), format!("{parent}-sibling"));
    for ns in [&tenant_ns, &sibling] {
        create_subns(&ctx.client, &parent, ns).await.expect("a subnamespace");
    }
    set_quota(&ctx.client, &parent, "budget", &[("pods", "20")]).await.expect("the parent's quota");
    let user = format!("{tag}-tenant");
    bind(ctx, &tenant_ns, "tenant-admin", "admin", &user).await;
    let tenant = as_user(ctx, &user).await;
    let quota = |name: &str, hard: Value| {
        json!({"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchicalResourceQuota",
            "metadata": {"name": name, "namespace": tenant_ns}, "spec": {"hard": hard}})
    };
    let create = |body: Value| {
        let tenant = tenant.clone();
        let path = format!("{API}/namespaces/{tenant_ns}/hierarchicalresourcequotas");
        async move {
            let req = Request::post(path).header("content-type", "application/json");
            let req = req.body(body.to_string().into_bytes()).expect("a valid request");
            tenant.request_text(req).await.map(|_| ()).map_err(|e| match e {
                kube::Error::Api(s) => s.code,
                _ => 0,
            })
        }
    };
    let uncountable = create(quota("tiny", json!({"count/widgets.example.com": "5"}))).await;
    let thousands: serde_json::Map<String, Value> =
        (0..2_500).map(|i| (format!("count/w{i}.example.com"), json!("5"))).collect();
    let oversized_accepted = usize::from(create(quota("huge", Value::Object(thousands))).await != Err(422));
    // Quotas of the most resources allowed, with the longest names Kubernetes takes, over
    // subnamespaces of the tenant's own, until the tree's ledger is full.
    for i in 0..16 {
        create_subns(&ctx.client, &tenant_ns, &format!("{tenant_ns}-{i}")).await.expect("a subnamespace");
    }
    let mut filled = 0;
    for q in 0..30 {
        let hard: serde_json::Map<String, Value> =
            (0..64).map(|i| (format!("count/{q}x{i}-{}.example.com", "w".repeat(40)), json!("5"))).collect();
        match create(quota(&format!("wide-{q}"), Value::Object(hard))).await {
            Ok(()) => filled += 1,
            Err(code) => {
                if code != 422 {
                    println!("auth: a quota beyond the ledger's room was answered {code}, not 422");
                }
                break;
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut refused = 0;
    for (i, ns) in [&sibling, &sibling, &sibling, &parent, &parent].into_iter().enumerate() {
        match create_pod(&ctx.client, ns, &format!("p{i}"), "1m").await {
            Admission::Admitted => {}
            other => {
                // Why, so that a refusal in CI can be told apart from a slow ledger.
                let why = match &other {
                    Admission::OverQuota(m) | Admission::Failed(m) => m.as_str(),
                    Admission::Admitted => "",
                };
                println!(
                    "auth: a pod in {ns} was {} while the tenant's quotas stood: {why}",
                    other.outcome()
                );
                refused += 1;
            }
        }
    }
    let ledger = crate::quotas::stored_ledger(&ctx.client, &parent).await.map_or(0, |l| l.to_string().len());
    delete_tree(&ctx.client, &parent).await;
    vec![
        Figure::info(
            SUITE,
            "tenant's quotas: one Kubernetes never counts; wide ones accepted before the ledger was full",
            format!("{}; {filled}", if uncountable.is_ok() { "accepted" } else { "refused" }),
        ),
        Figure::zero(SUITE, "tenant's quota of 2,500 resources accepted", oversized_accepted),
        Figure::target(
            SUITE,
            "tree's quota ledger written",
            format!("{} KiB", ledger / 1024),
            "< 1008 KiB",
            ledger < 1008 << 10,
        ),
        Figure::zero(SUITE, "pods refused outside the tenant's subtree while its quotas stood", refused),
    ]
}

/// B3: forged status updates of a ResourceQuota, stepping oldObject's resourceVersion around the
/// stored one without knowing its uid: any answer that differs tells the stored version.
async fn forged_quota_reviews(ctx: &Context, tag: &str) -> Figure {
    let local = ctx.local();
    let parent = create_namespace(&ctx.client, &format!("{tag}-sq"), &[]).await;
    let child = format!("{parent}-c");
    create_subns(&ctx.client, &parent, &child).await.expect("a subnamespace");
    set_quota(&ctx.client, &parent, "budget", &[("pods", "6")]).await.expect("a quota");
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(ctx.client.clone(), &child);
    let started = Instant::now();
    let stored = loop {
        let rq = quotas.get("hrq.hnc.x-k8s.io").await.ok();
        let used = rq.as_ref().and_then(|r| r.status.as_ref()?.used.as_ref()?.get("pods").cloned());
        if let Some((rq, used)) = rq.zip(used) {
            break Some((rq.metadata.resource_version.unwrap_or_default(), used.0));
        }
        if started.elapsed() > SETTLE {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let Some((version, used)) = stored else {
        delete_tree(&ctx.client, &parent).await;
        return Figure::target(
            SUITE,
            "forged quota reviews: the ResourceQuota was counted",
            "no",
            "yes",
            false,
        );
    };
    let version: u64 = version.parse().unwrap_or(0);
    let mut answers = std::collections::BTreeSet::new();
    for v in version.saturating_sub(10)..=version + 10 {
        let review = forged::quota_status_update(
            &child,
            ("00000000-0000-0000-0000-00000000beef", &v.to_string(), &used),
            98,
        );
        answers.insert(forged::send(local, "/mutate-quota-status", &review).await["response"].to_string());
    }
    delete_tree(&ctx.client, &parent).await;
    Figure::zero(
        SUITE,
        "forged quota reviews: answers beyond one, over 21 resourceVersions",
        answers.len() - 1,
    )
}

/// B4: forged reviews of a parent's deletion, without its uid, must make hns write nothing; one
/// naming its uid (only those who may read it know it) holds it at most for the hold's grace.
async fn forged_holds(ctx: &Context, tag: &str) -> Vec<Figure> {
    let local = ctx.local();
    let parent = create_namespace(&ctx.client, &format!("{tag}-hold"), &[]).await;
    create_subns(&ctx.client, &parent, &format!("{parent}-c")).await.expect("a subnamespace");
    // Deletable with its subnamespaces: a real deletion of it would be held.
    crate::allow_cascading_deletion(&ctx.client, &parent).await.expect("allow cascading deletion");
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let held = || async {
        let ns = namespaces.get(&parent).await.expect("the parent");
        ns.metadata.finalizers.unwrap_or_default().iter().any(|f| f == "hnc.x-k8s.io/hasSubnamespace")
    };
    for uid in [None, Some("00000000-0000-0000-0000-00000000dead")] {
        for _ in 0..10 {
            forged::send(local, "/validate-namespaces", &forged::namespace_delete(&parent, uid)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = usize::from(held().await);
    let uid = namespaces.get(&parent).await.expect("the parent").metadata.uid;
    forged::send(local, "/validate-namespaces", &forged::namespace_delete(&parent, uid.as_deref())).await;
    let started = Instant::now();
    let mut released = None;
    while started.elapsed() < Duration::from_secs(150) {
        if !held().await {
            released = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    delete_tree(&ctx.client, &parent).await;
    vec![
        Figure::zero(
            SUITE,
            "forged deletion reviews without the namespace's uid that made hns write",
            written,
        ),
        match released {
            Some(after) => Figure::target(
                SUITE,
                "hold made by a forged review naming the uid, taken back after",
                format!("{:.0} s", after.as_secs_f64()),
                "≤ 120 s",
                after <= Duration::from_secs(120),
            ),
            None => Figure::target(
                SUITE,
                "hold made by a forged review naming the uid, taken back",
                "no",
                "yes",
                false,
            ),
        },
    ]
}

/// W2: hns's labels written through the status subresource.
async fn status_subresource(ctx: &Context, tag: &str) -> Figure {
    let ns = create_namespace(&ctx.client, &format!("{tag}-status"), &[]).await;
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let patch = json!({"metadata": {"labels": {"victim.tree.hnc.x-k8s.io/depth": "1", "hnc.x-k8s.io/hierarchy-member": "true"}}});
    let pp = kube::api::PatchParams::default();
    let accepted = usize::from(api.patch_status(&ns, &pp, &kube::api::Patch::Merge(&patch)).await.is_ok());
    crate::delete_namespaces(&ctx.client, &[&ns]).await;
    Figure::zero(SUITE, "hns's labels written through namespaces/status", accepted)
}

/// W3: strangers sending bodies a byte a second, many at once: how long hns kept them.
async fn slow_bodies(ctx: &Context) -> Figure {
    let connections = ctx.scale.pick(50, 400);
    let held: Vec<Duration> = futures::future::join_all((0..connections).map(|_| {
        let local = ctx.local().clone();
        tokio::task::spawn_blocking(move || forged::slow_body(&local, Duration::from_secs(60)).0)
    }))
    .await
    .into_iter()
    .map(|held| held.unwrap_or(Duration::MAX))
    .collect();
    let longest = held.iter().max().copied().unwrap_or_default();
    Figure::target(
        SUITE,
        format!("longest a stranger's slow body held a connection, of {connections}"),
        format!("{:.1} s", longest.as_secs_f64()),
        "≤ 15 s",
        longest <= Duration::from_secs(15),
    )
}

/// W1: a namespace admin times `GET subnamespaces/NAME` in their own namespace for a name that
/// exists as a namespace elsewhere and for one that exists nowhere. Reported, not judged (tests
/// assert no timings): both pay the same look at kube-apiserver (a unit test checks that), so
/// the two medians should be alike.
async fn name_timing(ctx: &Context, tag: &str) -> Figure {
    let own = create_namespace(&ctx.client, &format!("{tag}-own"), &[]).await;
    let elsewhere = create_namespace(&ctx.client, &format!("{tag}-elsewhere"), &[]).await;
    let user = format!("{tag}-timer");
    bind(ctx, &own, "timer-admin", "admin", &user).await;
    let client = as_user(ctx, &user).await;
    let path = |name: &str| format!("{API}/namespaces/{own}/subnamespaces/{name}");
    let (mut existing, mut missing) = (Vec::new(), Vec::new());
    for i in 0..ctx.scale.pick(40, 400) {
        for (name, times) in
            [(elsewhere.clone(), &mut existing), (format!("{tag}-nowhere-{i}"), &mut missing)]
        {
            let started = Instant::now();
            let _ = get_text(&client, &path(&name)).await;
            times.push(started.elapsed());
        }
    }
    crate::delete_namespaces(&ctx.client, &[&own, &elsewhere]).await;
    let median = |times: &mut Vec<Duration>| {
        times.sort();
        times[times.len() / 2].as_secs_f64() * 1000.0
    };
    let (a, b) = (median(&mut existing), median(&mut missing));
    Figure::info(
        SUITE,
        "404 for a subnamespace name: median when a namespace of that name exists elsewhere / nowhere",
        format!("{a:.1} / {b:.1} ms ({:.2})", a / b),
    )
}
