//! Many namespaces held by one unavailable APIService, what one dead APIService does to a busy
//! cluster: `diagnose -A` must lead with that cause once, with the namespaces it blocks, in a
//! summary that fits on one screen, and refer to it in each namespace's details.

use super::*;

/// As many namespaces as the example.
const MANY: usize = 50;
/// One screen.
const SCREEN: usize = 24;

/// Creates `names`, each with a ConfigMap, in one `kubectl apply`.
fn namespaces_with_content(env: &Env, names: &[String]) {
    let yaml: String = names
        .iter()
        .map(|ns| {
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: data, namespace: {ns}}}\ndata: {{a: b}}\n---\n"
            )
        })
        .collect();
    apply(env, &yaml);
}

/// Waits until the namespace controller has written its discovery failure on every one of
/// `names` (one list per look, not one GET per namespace).
async fn all_blocked(env: &Env, names: &[String]) {
    eventually("discovery failures on every namespace", WAIT, || async {
        let list: Value =
            serde_json::from_str(&ok(env.kubectl(&["get", "namespaces", "-o", "json"]))).ok()?;
        let blocked = list["items"]
            .as_array()?
            .iter()
            .filter(|n| names.iter().any(|ns| n["metadata"]["name"] == ns.as_str()))
            .filter(|n| {
                n["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "NamespaceDeletionDiscoveryFailure" && c["status"] == "True")
                })
            })
            .count();
        (blocked == names.len()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn diagnose_all_leads_with_each_root_cause_once() {
    let (env, mut cleanup) = turn().await;
    let prefix = unique("diag-many");
    let names: Vec<String> = (1..=MANY).map(|i| format!("{prefix}-{i:02}")).collect();
    for ns in &names {
        cleanup.namespace(ns);
    }
    namespaces_with_content(&env, &names);
    dead_api_service(&env, &mut cleanup).await;
    let mut delete = vec!["delete", "namespace", "--wait=false"];
    delete.extend(names.iter().map(String::as_str));
    ok(env.kubectl(&delete));
    all_blocked(&env, &names).await;

    // Other tests' namespaces may be Terminating too: the assertions are about ours.
    let out = hns(&env, &["diagnose", "-A"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let brief = stdout(&out);
    assert!(brief.lines().count() <= SCREEN, "the brief report is the summary:\n{brief}");
    assert!(brief.contains("--fix would: delete APIService v1.dead.example.com"), "{brief}");
    assert!(brief.contains("kubectl hns diagnose -A --fix\n"), "{brief}");
    let out = hns(&env, &["diagnose", "-A", "--details"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let report = stdout(&out);
    let (summary, details) = report.split_once("Each namespace follows").expect(&report);
    assert!(summary.lines().count() <= SCREEN, "the summary fits on one screen:\n{summary}");
    let said: Vec<&str> =
        summary.lines().filter(|l| l.contains(". APIService v1.dead.example.com is unavailable")).collect();
    assert_eq!(said.len(), 1, "the APIService is one root cause:\n{summary}");
    let blocks = summary.lines().find(|l| l.trim_start().starts_with("blocks ")).expect(summary);
    let count: usize = blocks.trim_start()["blocks ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(count >= MANY, "it blocks all of ours: {blocks}");
    assert!(summary.contains(" more"), "a long list is elided:\n{summary}");
    let delete_call = "DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1.dead.example.com";
    assert_eq!(report.matches(delete_call).count(), 1, "the remedy is stated once:\n{summary}");
    for ns in &names {
        let at = details.find(&format!("Namespace {ns}: Terminating")).expect(ns);
        let section = &details[at..];
        let section = &section[..section.find("\n\n").unwrap_or(section.len())];
        assert!(
            section.contains(
                "APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck): see root cause"
            ),
            "{section}"
        );
    }

    let doc: Value = serde_json::from_slice(&hns(&env, &["diagnose", "-A", "-o", "json"]).stdout).unwrap();
    let ours: Vec<&Value> = doc["summary"]
        .as_array()
        .expect("a summary")
        .iter()
        .filter(|r| {
            r["namespaces"].as_array().unwrap().iter().any(|n| names.contains(&n.as_str().unwrap().into()))
        })
        .collect();
    assert_eq!(ours.len(), 1, "one root cause for ours: {ours:?}");
    assert_eq!(ours[0]["kind"], "unavailable_api_service");
    assert_eq!(ours[0]["remedy"]["actions"][0]["kind"], "delete_api_service");
    let blocked = ours[0]["namespaces"].as_array().unwrap();
    assert!(names.iter().all(|ns| blocked.iter().any(|b| b == ns.as_str())), "all {MANY}: {blocked:?}");
    assert!(doc["namespaces"].as_array().unwrap().len() >= MANY, "the details stay");

    // -n, as kubectl users write it: one namespace, reported as before, without a summary.
    let one = hns(&env, &["diagnose", "-n", &names[0]]);
    assert_eq!(code(&one), 2, "{}", stderr(&one));
    let one = stdout(&one);
    assert!(one.contains(&format!("Namespace {}: Terminating", names[0])), "{one}");
    assert!(
        one.contains("1. APIService v1.dead.example.com is unavailable (FailedDiscoveryCheck)\n"),
        "{one}"
    );
    assert!(!one.contains("root cause"), "{one}");

    // The fix applies the shared remedy once, and that frees them all.
    let mut fix = vec!["diagnose", "--fix", "--yes", "--timeout", "180s"];
    fix.extend(names.iter().map(String::as_str));
    let out = hns(&env, &fix);
    let narration = stderr(&out);
    assert_eq!(code(&out), 0, "fix failed:\n{narration}");
    let writes: Vec<&str> = narration.lines().filter(|l| l.trim_start().starts_with("done:")).collect();
    assert_eq!(writes.len(), 1, "one write only:\n{narration}");
    assert!(writes[0].contains(delete_call), "{narration}");
    for ns in &names {
        assert!(narration.contains(&format!("[{ns}] fixed: the namespace is gone")), "{narration}");
    }
}
