//! The hierarchy controller end to end: tree labels follow moves across a whole subtree,
//! membership follows children, and broken hierarchies (cycles, missing parents) are reported as
//! conditions and recover when fixed.

use std::time::Duration;

use hns_api::{keys, HierarchyConfiguration};
use hns_e2e::*;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

async fn labels(client: &Client, ns: &str) -> std::collections::BTreeMap<String, String> {
    Api::<Namespace>::all(client.clone()).get(ns).await.unwrap().metadata.labels.unwrap_or_default()
}

async fn reasons(client: &Client, ns: &str) -> Vec<String> {
    let hc: HierarchyConfiguration = Api::namespaced(client.clone(), ns).get("hierarchy").await.unwrap();
    hc.status.unwrap_or_default().conditions.into_iter().map(|c| c.reason).collect()
}

#[tokio::test]
async fn tree_labels_follow_a_moved_subtree() {
    let client = Env::get().admin().await;
    let [a, b, mid, leaf] = ["ctl-a", "ctl-b", "ctl-mid", "ctl-leaf"].map(unique);
    for n in [&a, &b, &mid, &leaf] {
        create_namespace(&client, n, &[]).await;
    }
    set_parent(&client, &mid, Some(&a)).await.unwrap();
    set_parent(&client, &leaf, Some(&mid)).await.unwrap();
    eventually("leaf labelled under a", WAIT, || async {
        (labels(&client, &leaf).await.get(&keys::tree_label(&a)).map(String::as_str) == Some("2"))
            .then_some(())
    })
    .await;

    set_parent(&client, &mid, Some(&b)).await.unwrap();
    let l = eventually("leaf relabelled under b", WAIT, || async {
        let l = labels(&client, &leaf).await;
        (l.get(&keys::tree_label(&b)).map(String::as_str) == Some("2")
            && !l.contains_key(&keys::tree_label(&a)))
        .then_some(l)
    })
    .await;
    assert_eq!(l[&keys::tree_label(&mid)], "1");
    let l = eventually("a, childless now, leaves the hierarchy", WAIT, || async {
        let l = labels(&client, &a).await;
        (!l.contains_key(keys::HIERARCHY_MEMBER)).then_some(l)
    })
    .await;
    // Out of every hierarchy, it is still a namespace hns manages.
    assert_eq!(l[&keys::tree_label(&a)], "0", "{l:?}");
    assert_eq!(l[keys::INCLUDED_NAMESPACE], "true", "{l:?}");
    for n in [&leaf, &mid, &a, &b] {
        set_parent(&client, n, None).await.unwrap();
        delete_namespaces(&client, &[n]).await;
    }
}

/// Writes `parent` as the parent of `ns`, sealed with hns's own key, as restoring Namespaces
/// from backups of different moments would bring it back: the one way left for a cycle to reach
/// hns, since moves take turns (tests/tests/tamper.rs).
async fn restore_parent(local: &Local, admin: &Client, ns: &str, parent: &str) {
    let secret: Secret =
        Api::namespaced(admin.clone(), "hns-system").get("hns-hierarchy-seal").await.unwrap();
    let key = secret.data.unwrap().remove("key").expect("the seal key");
    let sealer = hns_apiserver::hierarchy::seal::Sealer::new(&key.0).unwrap();
    let mut annotations = annotations(admin, ns).await;
    annotations.insert(keys::PARENT.into(), parent.into());
    annotations.remove(keys::SEAL);
    let seal = sealer.seal(ns, &annotations);
    let patch = json!({"metadata": {"annotations": {keys::PARENT: parent, keys::SEAL: seal}}});
    // hns's own credentials: its webhook lets only hns write these annotations.
    let hns = client_for(&local.dir.join("hns-apiserver.kubeconfig")).await;
    Api::<Namespace>::all(hns).patch(ns, &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
}

async fn annotations(client: &Client, ns: &str) -> std::collections::BTreeMap<String, String> {
    Api::<Namespace>::all(client.clone()).get(ns).await.unwrap().metadata.annotations.unwrap_or_default()
}

#[tokio::test]
async fn a_cycle_restored_from_backups_is_reported_and_recovers() {
    let Some((env, local, client)) = Env::local_with_admin().await else { return };
    let (x, y) = (unique("cyc-x"), unique("cyc-y"));
    for n in [&x, &y] {
        create_namespace(&client, n, &[]).await;
        create_subns(&client, n, &format!("{n}-kid")).await.unwrap();
    }
    restore_parent(&local, &client, &x, &y).await;
    restore_parent(&local, &client, &y, &x).await;
    for n in [&x, &y] {
        eventually("InCycle reported", WAIT, || async {
            reasons(&client, n).await.contains(&"InCycle".to_string()).then_some(())
        })
        .await;
    }
    let kid = format!("{x}-kid");
    eventually("the cycle's descendants report their halted ancestor", WAIT, || async {
        reasons(&client, &kid).await.contains(&"AncestorHaltActivities".to_string()).then_some(())
    })
    .await;
    let l = labels(&client, &x).await;
    assert!(!l.contains_key(&keys::tree_label(&y)), "tree labels never express the cycle: {l:?}");
    let table = ok(env.kubectl(&["get", "hierarchyconfigurations", "-n", &x, "--no-headers"]));
    assert!(table.contains("ActivitiesHalted(InCycle)"), "{table}");
    eventually("an InCycle event about the namespace", WAIT, || async {
        let out = ok(env.kubectl(&[
            "get",
            "events",
            "-A",
            "--field-selector",
            &format!("reason=InCycle,involvedObject.name={x}"),
            "-o",
            "name",
        ]));
        (!out.trim().is_empty()).then_some(())
    })
    .await;
    let config: hns_api::HNCConfiguration = Api::all(client.clone()).get("config").await.unwrap();
    let summary = config.status.unwrap().conditions;
    let in_cycle =
        summary.iter().find(|c| c.type_ == "NamespaceCondition" && c.message.contains("\"InCycle\""));
    assert!(in_cycle.is_some_and(|c| c.message.contains(&x) && c.message.contains(&y)), "{summary:?}");

    // Breaking the cycle clears the conditions.
    set_parent(&client, &x, None).await.unwrap();
    for n in [&x, &y, &kid] {
        eventually("conditions cleared", WAIT, || async {
            reasons(&client, n).await.is_empty().then_some(())
        })
        .await;
    }
    let hc: Value = serde_json::to_value(
        Api::<HierarchyConfiguration>::namespaced(client.clone(), &y).get("hierarchy").await.unwrap(),
    )
    .unwrap();
    assert_eq!(hc["spec"]["parent"], x.as_str());
    set_parent(&client, &y, None).await.unwrap();
    for n in [&x, &y] {
        delete_tree(&client, n).await;
    }
}

#[tokio::test]
async fn a_missing_parent_is_reported() {
    let client = Env::get().admin().await;
    let (p, c) = (unique("mp-parent"), unique("mp-child"));
    create_namespace(&client, &p, &[]).await;
    create_namespace(&client, &c, &[]).await;
    set_parent(&client, &c, Some(&p)).await.unwrap();
    delete_namespaces(&client, &[&p]).await;
    eventually("ParentMissing", Duration::from_secs(60), || async {
        reasons(&client, &c).await.contains(&"ParentMissing".to_string()).then_some(())
    })
    .await;
    set_parent(&client, &c, None).await.unwrap();
    eventually("condition cleared", WAIT, || async { reasons(&client, &c).await.is_empty().then_some(()) })
        .await;
    delete_namespaces(&client, &[&c]).await;
}

#[tokio::test]
async fn metrics_describe_the_hierarchy_and_the_work() {
    let env = Env::get();
    let Some(local) = env.local_or_skip("metrics") else { return };
    let text = local.metrics().await;
    for series in [
        "hns_leader 1",
        "hns_namespaces ",
        "hns_namespace_conditions{condition=\"ActivitiesHalted\",reason=\"InCycle\"}",
        "hns_propagated_objects{kind=\"RoleBinding\"}",
        "hns_source_objects{kind=\"Role\"}",
        "hns_reconciles_total ",
        "hns_watch_lag_seconds_count ",
        "hns_quota_namespaces_unknown_usage 0",
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }
    // Every hns metric an alert reads is one hns serves (a renamed metric would silence it).
    for metric in metrics_the_alerts_read() {
        let family =
            ["_total", "_bucket"].iter().fold(metric.as_str(), |m, s| m.strip_suffix(s).unwrap_or(m));
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "an alert reads {metric}, which hns does not serve:\n{text}"
        );
    }
    // The serving certificate's expiry, for the alert on a near one: in the future.
    let expiry: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("hns_serving_certificate_expiry_timestamp_seconds "))
        .unwrap_or_else(|| panic!("no certificate expiry in:\n{text}"))
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(expiry > now + 86_400, "expires {expiry}, now {now}");
}

/// The `hns_…` metric names in the expressions of config/prometheus/hns-rules.yaml.
fn metrics_the_alerts_read() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/prometheus/hns-rules.yaml");
    let rules = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut names: Vec<String> = rules
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("expr:"))
        .flat_map(|expr| expr.match_indices("hns_").map(move |(at, _)| &expr[at..]))
        .map(|from| from.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect())
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 7, "found only {names:?} in {}", path.display());
    names
}
