//! Races: crossed moves (`x` under `y` and `y` under `x`, sent at the same moment through
//! kube-apiserver, which spreads them over the hns replicas) must never both land. Each round
//! reads both namespaces back from kube-apiserver and counts a cycle if each names the other.

use std::time::Instant;

use hns_api::keys;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use super::{Context, Figure};
use crate::timing::ms;
use crate::{create_namespace, delete_namespaces, set_parent};

const SUITE: &str = "races";

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let rounds = ctx.scale.pick(100, 1_000);
    let pid = std::process::id();
    let (x, y) = (format!("race{pid}-x"), format!("race{pid}-y"));
    create_namespace(&ctx.client, &x, &[]).await;
    create_namespace(&ctx.client, &y, &[]).await;
    // One connection per side, so the two requests really travel at once.
    let (cx, cy) = (ctx.env.admin().await, ctx.env.admin().await);
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let parent = |ns: Namespace| ns.metadata.annotations.and_then(|a| a.get(keys::PARENT).cloned());
    let (mut cycles, mut one_landed, mut neither, mut errors) = (0, 0, 0, 0);
    let start = Instant::now();
    for round in 0..rounds {
        let (a, b) = tokio::join!(set_parent(&cx, &x, Some(&y)), set_parent(&cy, &y, Some(&x)));
        match (&a, &b) {
            (Ok(_), Ok(_)) => println!("races: round {round}: both crossed moves were accepted"),
            (Ok(_), Err(_)) | (Err(_), Ok(_)) => one_landed += 1,
            (Err(_), Err(_)) => neither += 1,
        }
        for e in [a.err(), b.err()].into_iter().flatten() {
            let status = crate::api_status(e);
            if !(status.code == 422 && status.message.contains("cycle")) {
                errors += 1;
                println!("races: round {round}: unexpected answer {} {}", status.code, status.message);
            }
        }
        let (px, py) = match (namespaces.get(&x).await, namespaces.get(&y).await) {
            (Ok(nx), Ok(ny)) => (parent(nx), parent(ny)),
            _ => (None, None),
        };
        if px.as_deref() == Some(y.as_str()) && py.as_deref() == Some(x.as_str()) {
            cycles += 1;
            println!("races: round {round}: cycle {x} <-> {y}");
        }
        for ns in [&x, &y] {
            if let Err(e) = set_parent(&ctx.client, ns, None).await {
                println!("races: round {round}: resetting {ns}: {e}");
            }
        }
    }
    let per_round = ms(start.elapsed()) / rounds as f64;
    delete_namespaces(&ctx.client, &[&x, &y]).await;
    vec![
        Figure::zero(SUITE, format!("crossed-move rounds with a cycle (of {rounds}, 2 replicas)"), cycles),
        Figure::info(
            SUITE,
            "crossed-move rounds: one landed / neither",
            format!("{one_landed} / {neither} ({per_round:.0} ms per round)"),
        ),
        Figure::zero(SUITE, "crossed moves refused other than as a cycle", errors),
    ]
}
