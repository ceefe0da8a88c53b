//! Outage safety: with every hns replica down, namespaces outside any hierarchy are still
//! created (the namespace webhook fails open for them) and deleted once hns is back, with no
//! manual step; while a deletion waits, `kubectl hns diagnose` names hns's APIService as the
//! cause. (Kubernetes' namespace controller finalizes no namespace while any aggregated API's
//! discovery fails, so a deletion cannot finish during the outage, whatever hns does.) Parents
//! forged meanwhile, past the fail-open webhook, are not honoured ([`super::forgery`]).
//! Creation under a hierarchical quota fails closed meanwhile (nothing could count it), while
//! namespaces outside every quota are unaffected; it works again once hns is back.

use std::time::{Duration, Instant};

use hns_api::HierarchyConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::DeleteParams;
use kube::Api;

use super::forgery::Forgery;
use super::{Context, Figure};
use crate::quotas::{create_pod, set_quota, until_counted, Admission};
use crate::{allow_cascading_deletion, create_namespace, create_subns, hns_with};

const SUITE: &str = "outage";
const APISERVICE: &str = "v1alpha2.hnc.x-k8s.io";

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let n = ctx.scale.pick(3, 10);
    let names: Vec<String> = (0..n).map(|i| format!("out{}-{i}", std::process::id())).collect();
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let mut forgery = Forgery::prepare(&ctx.client, ctx.scale.pick(3, 20)).await;

    let quota = QuotaProbe::prepare(&ctx.client).await;

    let mut stopped = Vec::new();
    for name in &ctx.replicas.names {
        match ctx.processes.kill(name).await {
            Ok(s) => stopped.push(s),
            Err(e) => println!("outage: {e:#}"),
        }
    }
    let created = {
        let mut ok = 0;
        for name in &names {
            let mut ns = Namespace::default();
            ns.metadata.name = Some(name.clone());
            match namespaces.create(&Default::default(), &ns).await {
                Ok(_) => ok += 1,
                Err(e) => println!("outage: creating {name} with hns down: {e}"),
            }
        }
        ok
    };
    let quota_while_down = quota.try_both(&ctx.client, "down").await;
    for name in &names {
        let _ = namespaces.delete(name, &DeleteParams::default()).await;
    }
    forgery.forge(&ctx.client).await;
    // Let the namespace controller try (and fail discovery) before asking the diagnoser.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let gone_while_down = count_gone(&namespaces, &names).await;
    let diagnosis = hns_with(&ctx.env.kubeconfig, &["diagnose", &names[0]]);
    let text = String::from_utf8_lossy(&diagnosis.stdout).into_owned();
    let names_apiservice = text.contains(APISERVICE);
    if !names_apiservice {
        println!(
            "outage: kubectl hns diagnose {} said:\n{text}{}",
            names[0],
            String::from_utf8_lossy(&diagnosis.stderr)
        );
    }

    let back = Instant::now();
    for s in stopped {
        if let Err(e) = ctx.processes.start(s) {
            println!("outage: restarting hns: {e:#}");
        }
    }
    let mut gone = 0;
    while back.elapsed() < Duration::from_secs(300) {
        gone = count_gone(&namespaces, &names).await;
        if gone == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The suites after this one need hns serving again.
    let hierarchy: Api<HierarchyConfiguration> = Api::namespaced(ctx.client.clone(), "default");
    while hierarchy.get("hierarchy").await.is_err() && back.elapsed() < Duration::from_secs(360) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let forgery = forgery.judge(&ctx.client).await;
    let quota_after = quota.admitted_again(&ctx.client).await;
    quota.clean_up(&ctx.client).await;

    let mut figures = vec![
        Figure::target(
            SUITE,
            "namespaces created with hns down",
            format!("{created}/{n}"),
            "all",
            created == n,
        ),
        Figure::info(
            SUITE,
            "deletions finished with hns down",
            format!("{gone_while_down}/{n} (namespace controller waits on discovery)"),
        ),
        Figure::target(
            SUITE,
            "kubectl hns diagnose names the APIService",
            names_apiservice,
            "true",
            names_apiservice,
        ),
        Figure::target(
            SUITE,
            "deletions finished after hns returned, no manual step",
            format!("{gone}/{n} in {:.0} s", back.elapsed().as_secs_f64()),
            "all",
            gone == n,
        ),
    ];
    figures.extend(forgery);
    figures.extend(quota_figures(quota_while_down, quota_after));
    figures
}

fn quota_figures((under, outside): (Admission, Admission), after: bool) -> Vec<Figure> {
    let closed = !under.admitted();
    vec![
        Figure::target(
            SUITE,
            "pod creation under a hierarchical quota with hns down",
            under.outcome(),
            "refused",
            closed,
        ),
        Figure::target(
            SUITE,
            "pod creation outside every quota with hns down",
            outside.outcome(),
            "admitted",
            outside.admitted(),
        ),
        Figure::target(SUITE, "pod creation under the quota once hns returned", after, "true", after),
    ]
}

/// A namespace under a hierarchical quota, and one outside every quota, to create pods in.
struct QuotaProbe {
    root: String,
    covered: String,
}

impl QuotaProbe {
    async fn prepare(client: &kube::Client) -> QuotaProbe {
        let root = create_namespace(client, &format!("outq{}", std::process::id()), &[]).await;
        let covered = format!("{root}-s");
        if let Err(e) = create_subns(client, &root, &covered).await {
            println!("outage: creating {covered}: {e}");
        }
        if let Err(e) = set_quota(client, &root, "budget", &[("pods", "8")]).await {
            println!("outage: setting the quota of {root}: {e:#}");
        }
        if let Err(e) = until_counted(client, std::slice::from_ref(&covered)).await {
            println!("outage: {e:#}");
        }
        QuotaProbe { root, covered }
    }

    /// A pod under the quota, and one in `default`, outside every quota.
    async fn try_both(&self, client: &kube::Client, tag: &str) -> (Admission, Admission) {
        let under = create_pod(client, &self.covered, &format!("p-{tag}"), "10m").await;
        let outside_name = format!("{}-{tag}", self.root);
        let outside = create_pod(client, "default", &outside_name, "10m").await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let _ = pods.delete(&outside_name, &DeleteParams::default()).await;
        (under, outside)
    }

    /// Whether a pod under the quota is admitted within two minutes of hns's return.
    async fn admitted_again(&self, client: &kube::Client) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            if create_pod(client, &self.covered, "p-after", "10m").await.admitted() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        false
    }

    async fn clean_up(&self, client: &kube::Client) {
        let _ = allow_cascading_deletion(client, &self.root).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let _ = namespaces.delete(&self.root, &DeleteParams::default()).await;
    }
}

async fn count_gone(namespaces: &Api<Namespace>, names: &[String]) -> usize {
    let mut gone = 0;
    for name in names {
        if matches!(namespaces.get_opt(name).await, Ok(None)) {
            gone += 1;
        }
    }
    gone
}
