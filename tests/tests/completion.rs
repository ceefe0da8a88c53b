//! `kubectl hns <TAB>` end to end: the real kubectl's plugin completion (`kubectl __complete hns
//! …`, what kubectl's shell scripts run) finding `kubectl_complete-hns` on PATH, set up as
//! plugin/README.md tells users to (a symlink to kubectl-hns), against the real control plane.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use hns_e2e::*;

/// A directory holding kubectl-hns and kubectl_complete-hns, both links to the built plugin (made
/// once per test run).
fn plugin_with_completer() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(link_plugin)
}

fn link_plugin() -> PathBuf {
    let dir = std::env::temp_dir().join(unique("hns-completion"));
    std::fs::create_dir_all(&dir).expect("create a directory for the plugin");
    let plugin = plugin_dir().join("kubectl-hns");
    for name in ["kubectl-hns", "kubectl_complete-hns"] {
        std::os::unix::fs::symlink(&plugin, dir.join(name)).expect("link the plugin");
    }
    dir
}

/// What kubectl offers for the last of `words` after `kubectl hns`, with `kubeconfig` in
/// KUBECONFIG: the candidates (`value` or `value\tdescription`) and the directive line.
fn complete(kubeconfig: &Path, words: &[&str]) -> (Vec<String>, String) {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path_with(plugin_with_completer()))
        .args(["__complete", "hns"])
        .args(words)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("kubectl must be on PATH");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "kubectl __complete failed: {stderr}");
    // kubectl's own notes on stderr say what it looked for and which directive it ended with;
    // anything else came from the completer.
    let foreign: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("[Debug] ") && !l.starts_with("Completion ended with directive"))
        .collect();
    assert!(foreign.is_empty(), "the completer wrote to stderr: {stderr}");
    let mut lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    let directive = lines.pop().unwrap_or_default();
    (lines, directive)
}

/// Just the values.
fn values(kubeconfig: &Path, words: &[&str]) -> Vec<String> {
    let (lines, _) = complete(kubeconfig, words);
    lines.into_iter().map(|l| l.split('\t').next().unwrap_or_default().to_string()).collect()
}

#[test]
fn subcommands_nested_ones_and_flags() {
    let env = Env::get();
    let (lines, directive) = complete(&env.kubeconfig, &[""]);
    assert_eq!(directive, ":4", "no file names among subcommands");
    for sub in ["create", "delete", "set", "tree", "describe", "config", "diagnose", "export"] {
        assert!(lines.iter().any(|l| l.starts_with(&format!("{sub}\t"))), "{sub}: {lines:?}");
    }
    assert!(
        lines.contains(&"tree\tDisplay the trees below the given namespaces, or every tree with -A".into())
    );
    assert_eq!(values(&env.kubeconfig, &["de"]), ["delete", "describe"]);

    let nested = values(&env.kubeconfig, &["config", ""]);
    for sub in ["describe", "set-resource", "delete-type"] {
        assert!(nested.contains(&sub.to_string()), "config {sub}: {nested:?}");
    }
    assert_eq!(values(&env.kubeconfig, &["config", "set-r"]), ["set-resource"]);

    let flags = values(&env.kubeconfig, &["tree", "-"]);
    for flag in ["-A", "--all-namespaces", "-o", "--output", "-n", "--namespace", "--context", "--as"] {
        assert!(flags.contains(&flag.to_string()), "tree {flag}: {flags:?}");
    }
    // One form of each flag: HNC's spelling (the kebab-case alias works too).
    assert_eq!(values(&env.kubeconfig, &["set", "--allow"]), ["--allowCascadingDeletion"]);
    assert_eq!(values(&env.kubeconfig, &["tree", "-o", ""]), ["json", "yaml"]);
}

#[tokio::test]
async fn namespaces_from_the_cluster() {
    let (env, client, team) = Env::with_namespace("compl-team").await;
    let prefix = &team[..team.len() - 1];

    for words in [
        vec!["tree", prefix],
        vec!["describe", prefix],
        vec!["set", "x", "--parent", prefix],
        vec!["diagnose", prefix],
        vec!["create", "kid", "-n", prefix],
    ] {
        let offered = values(&env.kubeconfig, &words);
        assert!(offered.contains(&team), "{words:?}: {offered:?}");
        assert!(offered.iter().all(|ns| ns.starts_with(prefix)), "{words:?}: {offered:?}");
    }

    // The kubeconfig given on the line is the one asked, not KUBECONFIG's.
    let nowhere = std::env::temp_dir().join(unique("no-kubeconfig"));
    assert!(values(&nowhere, &["tree", prefix]).is_empty(), "no cluster, no candidates");
    let kubeconfig = env.kubeconfig.to_str().expect("a UTF-8 path");
    assert_eq!(values(&nowhere, &["tree", "--kubeconfig", kubeconfig, prefix]), [team.as_str()]);
    // A context that does not exist: nothing offered, nothing said.
    let (lines, directive) = complete(&env.kubeconfig, &["tree", "--context", "nonexistent", ""]);
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(directive, ":4");

    delete_namespaces(&client, &[&team]).await;
}

#[tokio::test]
async fn namespaces_in_the_users_view_for_whom_may_not_list_them() {
    let (env, client, team) = Env::with_namespace("compl-view").await;
    let dev = format!("{team}-dev");
    create_subns(&client, &team, &dev).await.expect("create the subnamespace");
    let other = create_namespace(&client, &format!("{team}x"), &[]).await;
    let user = unique("compl-admin");
    env.grant(&user, "admin", &team);
    let listed = env.kubectl_as(&user, &[], &["get", "namespaces"]);
    assert!(!listed.status.success(), "the user may not list namespaces");

    // The team's namespaces, as `tree -A --as` shows them; not the one beside it.
    eventually("the user's view to hold the subnamespace", Duration::from_secs(30), || async {
        let offered = values(&env.kubeconfig, &["tree", "--as", &user, &team]);
        (offered == [team.clone(), dev.clone()]).then_some(())
    })
    .await;
    let offered = values(&env.kubeconfig, &["describe", "--as", &user, &team]);
    assert!(!offered.contains(&other), "{offered:?}");

    delete_tree(&client, &team).await;
    delete_namespaces(&client, &[&other]).await;
}

#[test]
fn kinds_and_modes_for_set_resource() {
    let env = Env::get();
    let (lines, _) = complete(&env.kubeconfig, &["config", "set-resource", ""]);
    for kind in ["secrets\tSecret", "configmaps\tConfigMap", "deployments\tDeployment (apps)"] {
        assert!(lines.contains(&kind.to_string()), "{kind}: {lines:?}");
    }
    assert!(!lines.iter().any(|l| l.starts_with("nodes\t")), "cluster-scoped kinds do not propagate");
    assert_eq!(
        values(&env.kubeconfig, &["config", "set-resource", "--group", "apps", "dep"]),
        ["deployments"]
    );
    assert!(values(&env.kubeconfig, &["config", "set-resource", "x", "--group", ""]).contains(&"apps".into()));
    let modes = values(&env.kubeconfig, &["config", "set-resource", "secrets", "--mode", ""]);
    for mode in ["Propagate", "Ignore", "Remove"] {
        assert!(modes.contains(&mode.to_string()), "{mode}: {modes:?}");
    }
}

#[test]
fn file_names_for_the_kubeconfig() {
    let env = Env::get();
    // kubectl asks the shell for file names whenever a plugin has no completer: what tells
    // this apart is that the completer asks only here.
    assert_eq!(complete(&env.kubeconfig, &["tree", "--context", ""]).1, ":4");
    let (lines, directive) = complete(&env.kubeconfig, &["tree", "--kubeconfig", ""]);
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(directive, ":0", "the shell completes file names");
}
