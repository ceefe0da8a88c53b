//! Cascading deletion at depth and width, with two hns replicas: a chain of subnamespaces and a
//! wide subtree, each deleted through its root. Nothing may be left behind, and each is timed
//! beside as many plain namespaces deleted at once (the namespace controller's own pace; before
//! hns deleted a subtree at once, a 60-level chain took about 35 minutes, one level per retry of
//! that controller).

use std::time::Duration;

use super::{Context, Figure};
use crate::deletion::{chain, delete_and_wait, flat, subtree, Tree};

const SUITE: &str = "deletion";

/// How long a deletion may take before what is left counts as left behind.
const LIMIT: Duration = Duration::from_secs(900);

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let pid = std::process::id();
    let depth = ctx.scale.pick(20, 60);
    let fanout: &[usize] = ctx.scale.pick(&[10, 10], &[10, 10, 9]);
    let chain = chain(&ctx.client, &format!("del{pid}-chain"), depth).await;
    let subtree = subtree(&ctx.client, &format!("del{pid}-tree"), fanout).await;
    let mut figures = Vec::new();
    for (what, tree) in [
        (format!("a {depth}-level chain"), &chain),
        (format!("a subtree of {}", subtree.names.len()), &subtree),
    ] {
        figures.extend(timed(ctx, &what, tree, &format!("del{pid}-flat-{}", tree.names.len())).await);
    }
    figures
}

async fn timed(ctx: &Context, what: &str, tree: &Tree, flat_prefix: &str) -> Vec<Figure> {
    let baseline = flat(&ctx.client, flat_prefix, tree.names.len()).await;
    let base = delete_and_wait(&ctx.client, &baseline, &baseline, LIMIT).await;
    let hns = delete_and_wait(&ctx.client, std::slice::from_ref(&tree.root), &tree.names, LIMIT).await;
    for left in &hns.left {
        println!("deletion: {left} still there after {} s", LIMIT.as_secs());
    }
    vec![
        Figure::zero(
            SUITE,
            format!("{what} deleted through its root: namespaces left behind"),
            hns.left.len(),
        ),
        Figure::info(
            SUITE,
            format!("{what}: deletion time / {} plain namespaces deleted at once", baseline.len()),
            format!("{:.1} s / {:.1} s", hns.took.as_secs_f64(), base.took.as_secs_f64()),
        ),
    ]
}
