//! Cascading deletion of whole subtrees, timed: a chain of subnamespaces and a wide subtree,
//! each deleted through its root, beside the baseline of as many plain namespaces deleted at
//! once (what kube-controller-manager's namespace controller takes for the same work). Shared by
//! `hns-bench deletion` and the reliability suite `deletion`.

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};

use crate::{allow_cascading_deletion, create_namespace, create_subns};

/// Requests sent at once while building.
const AT_ONCE: usize = 16;

/// A tree built for deletion: its root and every namespace in it.
pub struct Tree {
    pub root: String,
    pub names: Vec<String>,
}

/// A chain `PREFIX-0` ← `PREFIX-1` ← … of `depth` subnamespaces under a root that allows
/// cascading deletion.
pub async fn chain(client: &Client, prefix: &str, depth: usize) -> Tree {
    let root = cascading_root(client, prefix).await;
    let mut names = vec![root.clone()];
    for i in 1..=depth {
        let name = format!("{prefix}-{i}");
        create_subns(client, &names[i - 1], &name).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
        names.push(name);
    }
    Tree { root, names }
}

/// A subtree under a root that allows cascading deletion: `fanout[0]` subnamespaces under the
/// root, `fanout[1]` under each of those, and so on.
pub async fn subtree(client: &Client, prefix: &str, fanout: &[usize]) -> Tree {
    let root = cascading_root(client, prefix).await;
    let mut names = vec![root.clone()];
    let mut level = vec![root.clone()];
    for &width in fanout {
        let next: Vec<(String, String)> = level
            .iter()
            .flat_map(|parent| (0..width).map(move |i| (parent.clone(), format!("{parent}-{i}"))))
            .collect();
        stream::iter(next.iter())
            .for_each_concurrent(AT_ONCE, |(parent, name)| async move {
                create_subns(client, parent, name).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
            })
            .await;
        level = next.into_iter().map(|(_, name)| name).collect();
        names.extend(level.iter().cloned());
    }
    Tree { root, names }
}

async fn cascading_root(client: &Client, prefix: &str) -> String {
    let root = create_namespace(client, &format!("{prefix}-0"), &[]).await;
    allow_cascading_deletion(client, &root)
        .await
        .unwrap_or_else(|e| panic!("allow cascading deletion on {root}: {e}"));
    root
}

/// `n` plain namespaces labelled `flat=PREFIX`, the baseline's.
pub async fn flat(client: &Client, prefix: &str, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    stream::iter(names.iter())
        .for_each_concurrent(AT_ONCE, |name| async move {
            create_namespace(client, name, &[("flat", prefix)]).await;
        })
        .await;
    names
}

/// What a timed deletion left: how long until every namespace was gone, and which were still
/// there when it gave up.
pub struct Outcome {
    pub took: Duration,
    pub left: Vec<String>,
}

/// Deletes `roots` (one request each) and waits up to `limit` for every one of `names` to be
/// gone.
pub async fn delete_and_wait(
    client: &Client,
    roots: &[String],
    names: &[String],
    limit: Duration,
) -> Outcome {
    let api: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    stream::iter(roots)
        .for_each_concurrent(AT_ONCE, |root| {
            let api = api.clone();
            async move {
                if let Err(e) = api.delete(root, &DeleteParams::default()).await {
                    println!("deleting {root}: {e}");
                }
            }
        })
        .await;
    loop {
        let existing: std::collections::HashSet<String> =
            match api.list_metadata(&ListParams::default()).await {
                Ok(list) => list.items.into_iter().filter_map(|n| n.metadata.name).collect(),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
        let left: Vec<String> = names.iter().filter(|n| existing.contains(*n)).cloned().collect();
        if left.is_empty() || started.elapsed() > limit {
            return Outcome { took: started.elapsed(), left };
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
