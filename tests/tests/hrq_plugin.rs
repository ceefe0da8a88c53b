//! `kubectl hns hrq` through real kubectl dispatch, against quotas served by hns.

use std::time::Duration;

use hns_e2e::quotas::{create_pod, set_quota, until_counted};
use hns_e2e::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn hrq_shows_each_quota_with_what_its_subtree_uses() {
    let (env, client, root) = Env::with_namespace("hq").await;
    let sub = new_subnamespace(&client, &root, "s").await;
    set_quota(&client, &root, "budget", &[("pods", "4"), ("limits.cpu", "2")]).await.unwrap();
    until_counted(&client, std::slice::from_ref(&sub)).await.unwrap();
    assert!(create_pod(&client, &sub, "p", "10m").await.admitted());

    let row = eventually("the quota counts the pod below it", WAIT, || async {
        let out = hns(&env, &["hrq", "-n", &root]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find(|l| l.starts_with("budget") && l.contains("pods: 1/4")).map(String::from)
    })
    .await;
    assert!(row.contains("limits.cpu: 10m/2"), "LIMIT holds limits.*: {row}");
    let header = ok(hns(&env, &["hrq", "-n", &root]));
    assert!(header.starts_with("NAME    AGE  REQUEST    LIMIT"), "{header}");

    let all = ok(hns(&env, &["hrq", "-A"]));
    assert!(all.starts_with("NAMESPACE"), "{all}");
    assert!(all.lines().any(|l| l.starts_with(&root) && l.contains("budget")), "{all}");

    let doc: serde_json::Value =
        serde_json::from_str(&ok(hns(&env, &["hrq", "budget", "-n", &root, "-o", "json"]))).unwrap();
    assert_eq!(
        doc["kind"], "HierarchicalResourceQuota",
        "one asked for by name: the object, as kubectl prints it"
    );
    assert_eq!(doc["spec"]["hard"]["pods"], "4");
    assert!(doc["metadata"].get("managedFields").is_none(), "{doc}");
    let docs: serde_json::Value =
        serde_json::from_str(&ok(hns(&env, &["hrq", "-n", &root, "-o", "json"]))).unwrap();
    assert_eq!(docs["items"][0]["spec"]["hard"]["pods"], "4");

    let out = hns(&env, &["hrq", "-n", &sub]);
    assert_eq!(out.status.code(), Some(0), "none found is no failure, as with kubectl get");
    assert_eq!(String::from_utf8_lossy(&out.stderr), format!("No resources found in {sub} namespace.\n"));
    let err = fails(hns(&env, &["hrq", "-n", "no-such-namespace"]));
    assert!(err.contains("namespace \"no-such-namespace\" not found"), "{err}");
    let err = fails(hns(&env, &["hrq", "missing", "-n", &root]));
    assert!(err.contains("\"missing\" not found"), "{err}");
    delete_tree(&client, &root).await;
}
