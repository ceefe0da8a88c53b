//! Hierarchical quotas while hns is down (issue 18): creating what a quota counts fails closed
//! in covered namespaces beyond what hns had granted them, what it had granted stays usable,
//! namespaces outside every quota are unaffected, and creation works again once hns is back.
//! Alone in its file: it stops hns, which other tests would notice.

use std::time::Duration;

use hns_e2e::quotas::{budget_tree, pod, set_quota, until_granted};
use hns_e2e::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn hns_down_fails_closed_in_covered_namespaces_only() {
    let env = Env::get();
    let hns = hns_e2e::stopping::Hns::of(&env);
    let client = env.admin().await;
    let (root, siblings) = budget_tree(&client, "hrq-down", 20).await;
    let lone = fresh_namespace(&client, "hrq-lone").await;
    // Far from its limit, a namespace's first pod brings it a grant with headroom.
    let roomy = fresh_namespace(&client, "hrq-roomy").await;
    set_quota(&client, &roomy, "budget", &[("pods", "1000")]).await.unwrap();
    until_granted(&client, &roomy, std::slice::from_ref(&roomy), "0").await;
    let granted: Api<Pod> = Api::namespaced(client.clone(), &roomy);
    granted.create(&PostParams::default(), &pod("before-outage", "1m")).await.expect("within the quota");

    hns.kill();
    let covered: Api<Pod> = Api::namespaced(client.clone(), &siblings[0]);
    let refused = covered.create(&PostParams::default(), &pod("during-outage", "1m")).await;
    let message = refused.expect_err("a covered namespace fails closed").to_string();
    assert!(message.contains("resourcequotas.hns.hnc.x-k8s.io"), "{message}");
    granted
        .create(&PostParams::default(), &pod("during-outage", "1m"))
        .await
        .expect("within what hns had granted: admitted without hns");
    let outside: Api<Pod> = Api::namespaced(client.clone(), &lone);
    outside
        .create(&PostParams::default(), &pod("during-outage", "1m"))
        .await
        .expect("outside every quota: unaffected");

    hns.start().await;
    eventually("a covered namespace accepts pods again", WAIT, || async {
        covered.create(&PostParams::default(), &pod("after-outage", "1m")).await.ok()
    })
    .await;
    delete_tree(&client, &root).await;
    delete_tree(&client, &roomy).await;
    delete_namespaces(&client, &[&lone]).await;
}
