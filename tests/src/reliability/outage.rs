//! Outage safety: with every hns replica down, namespaces outside any hierarchy are still
//! created (the namespace webhook fails open for them) and deleted once hns is back, with no
//! manual step; while a deletion waits, `kubectl hns diagnose` names hns's APIService as the
//! cause. (Kubernetes' namespace controller finalizes no namespace while any aggregated API's
//! discovery fails, so a deletion cannot finish during the outage, whatever hns does.) Parents
//! forged meanwhile, past the fail-open webhook, are not honoured ([`super::forgery`]).

use std::time::{Duration, Instant};

use hns_api::HierarchyConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::DeleteParams;
use kube::Api;

use super::forgery::Forgery;
use super::{Context, Figure};
use crate::hns_with;

const SUITE: &str = "outage";
const APISERVICE: &str = "v1alpha2.hnc.x-k8s.io";

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let n = ctx.scale.pick(3, 10);
    let names: Vec<String> = (0..n).map(|i| format!("out{}-{i}", std::process::id())).collect();
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let mut forgery = Forgery::prepare(&ctx.client, ctx.scale.pick(3, 20)).await;

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
    figures
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
