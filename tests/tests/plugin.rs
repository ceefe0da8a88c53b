//! `kubectl hns …` end to end, through kubectl's real plugin dispatch against the real control
//! plane: every command and flag, the exact lines scripts rely on, exit codes, and the errors
//! (unknown namespace, no permission, hns unavailable or not installed, cycle refused, non-leaf
//! delete refused), each checked to have changed nothing.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hns_api::HierarchyConfiguration;
use hns_e2e::*;
use k8s_openapi::api::core::v1::{LimitRange, Namespace};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

// === helpers ===

/// `kubectl hns ARGS` as `user` with a client certificate, or `None` (after saying why) against
/// an external cluster, where the plugin has no impersonation flag to fall back on.
fn hns_as(env: &Env, user: &str, args: &[&str]) -> Option<Output> {
    let local = env.local_or_skip("running kubectl hns as another user")?;
    Some(hns_with(&local.user_kubeconfig(user, &[]), args))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stderr of a command that failed with exit code 1 and printed nothing on stdout.
fn refused(out: Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit code 1:\nstdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    stderr(&out)
}

async fn hierarchy(client: &Client, ns: &str) -> HierarchyConfiguration {
    Api::<HierarchyConfiguration>::namespaced(client.clone(), ns).get("hierarchy").await.unwrap()
}

async fn exists(client: &Client, ns: &str) -> bool {
    Api::<Namespace>::all(client.clone())
        .get_opt(ns)
        .await
        .unwrap()
        .is_some_and(|n| n.metadata.deletion_timestamp.is_none())
}

// === tests ===

#[test]
fn kubectl_finds_the_plugin_copied_onto_path() {
    let dir = std::env::temp_dir().join(unique("hns-plugin-path"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(plugin_dir().join("kubectl-hns"), dir.join("kubectl-hns")).unwrap();
    let list =
        Command::new("kubectl").args(["plugin", "list"]).env("PATH", path_with(&dir)).output().unwrap();
    let out = stdout(&list);
    assert!(out.contains(&format!("{}/kubectl-hns\n", dir.display())), "{out}\n{}", stderr(&list));
    assert!(!stderr(&list).contains(&dir.display().to_string()), "no warning about it: {}", stderr(&list));

    let help = Command::new("kubectl").args(["hns", "--help"]).env("PATH", path_with(&dir)).output().unwrap();
    let help = ok(help);
    for word in [
        "create",
        "delete",
        "set",
        "tree",
        "describe",
        "config",
        "version",
        "completion",
        "diagnose",
        "export",
        "hrq",
        "get",
    ] {
        assert!(help.contains(&format!("\n  {word} ")), "{word} in help:\n{help}");
    }
    assert!(
        help.contains("Exit codes:") && help.contains("--kubeconfig") && help.contains("--namespace"),
        "{help}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn completion_scripts_for_three_shells() {
    let env = Env::get();
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(hns(&env, &["completion", shell]));
        assert!(script.contains("kubectl-hns") && script.contains("set-resource"), "{shell}: {script}");
    }
    let out = hns(&env, &["completion", "powershell"]);
    assert_eq!(out.status.code(), Some(2), "an invalid command line exits 2: {}", stderr(&out));
}

/// A reader that stops early (`kubectl hns tree -A | head`) ends the plugin as it ends kubectl:
/// quietly, with the status a shell reports for a program ended by SIGPIPE, not with a panic.
#[test]
fn a_reader_that_stops_early_ends_the_plugin_quietly() {
    let env = Env::get();
    for args in [&["tree", "-A"][..], &["describe", "default"], &["completion", "bash"]] {
        let mut child = plugin_command(&plugin_dir(), &env.kubeconfig, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl must be on PATH");
        // The reader goes away while kubectl is still starting, before the plugin writes a byte.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait for kubectl hns");
        assert_eq!((out.status.code(), stderr(&out)), (Some(141), String::new()), "{args:?}");
    }
}

/// The lines HNC's plugin printed, word for word, where scripts grep them: cascading deletion in
/// `describe` (the namespace's own setting; an ancestor's on a line of its own), the events
/// heading, `set`'s and `delete -a`'s lines, and `config describe`'s headings.
#[tokio::test]
async fn hnc_lines_that_scripts_grep() {
    let (env, client, root) = Env::with_namespace("pl-words").await;
    let (kid, leaf) = (format!("{root}-kid"), format!("{root}-kid-leaf"));
    ok(hns(&env, &["create", &kid, "-n", &root]));
    ok(hns(&env, &["create", &leaf, "-n", &kid]));

    assert_eq!(
        ok(hns(&env, &["set", &root, "-a"])),
        format!(
            "Allowing cascading deletion on '{root}'\n\
             Succesfully updated 1 property of the hierarchical configuration of {root}\n"
        )
    );
    assert_eq!(
        ok(hns(&env, &["set", &root, "--allowCascadingDeletion"])),
        format!("Cascading deletion for '{root}' is already set to true; unchanged\nNo changes made\n")
    );
    assert_eq!(
        ok(hns(&env, &["describe", &kid])),
        format!(
            "Hierarchy configuration for namespace {kid}\n  Parent: {root}\n  Children:\n  - {leaf} (subnamespace)\n  \
             Allows Cascading Deletion: false\n  Cascading deletion allowed by ancestor: {root}\n  No conditions\n\n\
             No recent HNC events for objects in this namespace\n"
        )
    );
    // A team admin may list the events in their namespace, not those about it kept in default:
    // describe shows what they may read and names what they may not.
    let admin = format!("{kid}-admin");
    env.grant(&admin, "admin", &kid);
    let described = ok(hns(&env, &["describe", &kid, &format!("--as={admin}")]));
    assert!(
        described.contains("No recent HNC events for objects in this namespace\n")
            && described.contains(&format!("Events not shown: the events about namespace {kid} itself, which Kubernetes keeps in namespace default (events is forbidden")),
        "{described}"
    );
    ok(hns(&env, &["set", &kid, "-a"]));
    assert_eq!(
        ok(hns(&env, &["delete", &kid, "-n", &root, "-a", "--yes"])),
        format!(
            "Cascading deletion for '{kid}' is already set to 'true'; unchanged\n\
             Successfully deleted \"{kid}\" subnamespace anchor in \"{root}\" namespace\n"
        )
    );

    let described = ok(hns(&env, &["config", "describe"]));
    assert!(described.starts_with("Synchronized resources:\n* "), "{described}");
    assert!(described.contains("\n\nConditions:\n"), "HNC's heading, conditions or not: {described}");
    delete_tree(&client, &root).await;
}

/// `set` plans its change again when the namespace moved between its read and its write: a
/// hierarchy configuration's resourceVersion is its namespace's, which others move for reasons
/// of their own (here a label written over and over; in life, hns's controller adding a parent's
/// finalizer). Each `set` must succeed and say what it did.
#[tokio::test]
async fn set_plans_again_when_the_namespace_changes_under_it() {
    let (env, client, ns) = Env::with_namespace("pl-busy").await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let labeller = {
        let (ns, stop) = (ns.clone(), stop.clone());
        std::thread::spawn(move || {
            let env = Env::get();
            let mut writes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                ok(env.kubectl(&["label", "namespace", &ns, &format!("tick={writes}"), "--overwrite"]));
                writes += 1;
            }
            writes
        })
    };
    for round in 0..4 {
        let allowed = ok(hns(&env, &["set", &ns, "-a"]));
        assert!(allowed.contains(&format!("Allowing cascading deletion on '{ns}'")), "{round}: {allowed}");
        let forbidden = ok(hns(&env, &["set", &ns, "-f"]));
        assert!(
            forbidden.contains(&format!("Forbidding cascading deletion on '{ns}'")),
            "{round}: {forbidden}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = labeller.join().unwrap();
    assert!(writes > 0, "the namespace was written meanwhile");
    assert!(!hierarchy(&client, &ns).await.spec.allow_cascading_deletion);
    delete_namespaces(&client, &[&ns]).await;
}

#[tokio::test]
async fn create_set_tree_describe_delete() {
    let (env, client, root) = Env::with_namespace("pl-org").await;
    let (a, b, ax) = (format!("{root}-a"), format!("{root}-b"), format!("{root}-a-x"));

    // create: HNC's line; the namespace exists at once.
    assert_eq!(
        ok(hns(&env, &["create", &a, "-n", &root])),
        format!("Successfully created \"{a}\" subnamespace anchor in \"{root}\" namespace\n")
    );
    ok(hns(&env, &["create", &ax, "--namespace", &a]));
    assert!(exists(&client, &ax).await);
    let err = refused(hns(&env, &["create", &ax, "-n", &a]));
    assert!(err.starts_with("Error: ") && err.contains("already exists"), "{err}");

    // set: a full namespace joins the tree, in HNC's words.
    create_namespace(&client, &b, &[]).await;
    assert_eq!(
        ok(hns(&env, &["set", &b, "--parent", &root, "-a"])),
        format!(
            "Setting the parent of {b} to {root}\nAllowing cascading deletion on '{b}'\n\
             Succesfully updated 2 properties of the hierarchical configuration of {b}\n"
        )
    );
    assert_eq!(
        ok(hns(&env, &["set", &b, "-p", &root, "--allowCascadingDeletion"])),
        format!(
            "Parent of {b} is already {root}; unchanged\nCascading deletion for '{b}' is already set to true; unchanged\nNo changes made\n"
        )
    );

    // tree: one tree, or all of them.
    let drawn = format!("{root}\n├── [s] {a}\n│   └── [s] {ax}\n└── {b}\n\n[s] indicates subnamespaces\n");
    assert_eq!(ok(hns(&env, &["tree", &root])), drawn);
    let all = ok(hns(&env, &["tree", "-A"]));
    let block = format!("\n{root}\n├── [s] {a}\n│   └── [s] {ax}\n└── {b}\n");
    assert!(all.contains(&block), "{all}");
    assert!(all.contains("\ndefault\n") || all.starts_with("default\n"), "every root: {all}");
    assert_eq!(
        ok(hns(&env, &["tree", &a, &b])),
        format!("[s] {a}\n└── [s] {ax}\n{b}\n\n[s] indicates subnamespaces\n")
    );
    let data: Value = serde_json::from_str(&ok(hns(&env, &["tree", &root, "-o", "json"]))).unwrap();
    assert_eq!(
        data,
        json!({"trees": [{"name": root, "subnamespace": false, "children": [
            {"name": a, "subnamespace": true, "children": [{"name": ax, "subnamespace": true}]},
            {"name": b, "subnamespace": false},
        ]}]})
    );
    let yaml: Value = serde_saphyr::from_str(&ok(hns(&env, &["tree", &root, "-o", "yaml"]))).unwrap();
    assert_eq!(yaml, data);
    let err = refused(hns(&env, &["tree"]));
    assert_eq!(
        err,
        "Error: Must specify the root of the tree(s) to display or else specify --all-namespaces\n"
    );

    // describe.
    assert_eq!(
        ok(hns(&env, &["describe", &root])),
        format!(
            "Hierarchy configuration for namespace {root}\n  No parent\n  Children:\n  - {a} (subnamespace)\n  - {b}\n  \
             Allows Cascading Deletion: false\n  No conditions\n\nNo recent HNC events for objects in this namespace\n"
        )
    );
    let ax_described = ok(hns(&env, &["describe", &ax]));
    assert!(ax_described
        .starts_with(&format!("Hierarchy configuration for namespace {ax}\n  Parent: {a}\n  No children\n")));
    let described: Value = serde_json::from_str(&ok(hns(&env, &["describe", &b, "-o", "json"]))).unwrap();
    assert_eq!(
        (described["parent"].as_str(), described["allowCascadingDeletion"].as_bool()),
        (Some(root.as_str()), Some(true))
    );
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{a}.e2e"), "namespace": a},
        "involvedObject": {"apiVersion": "v1", "kind": "LimitRange", "name": "limits", "namespace": a},
        "reason": "CannotPropagateObject", "message": "Objects with finalizers cannot be propagated",
        "type": "Warning", "source": {"component": "hns.hnc.x-k8s.io"},
        "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z", "count": 1
    });
    let file = std::env::temp_dir().join(format!("{a}-event.json"));
    std::fs::write(&file, event.to_string()).unwrap();
    ok(env.kubectl(&["create", "-f", file.to_str().unwrap()]));
    let with_event = ok(hns(&env, &["describe", &a]));
    assert!(with_event.contains(&format!("  Children:\n  - {ax} (subnamespace)\n")), "{with_event}");
    let table =
        with_event.split_once(&format!("\nEvents from the objects in namespace {a}\n")).expect(&with_event).1;
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["Last", "Seen", "Reason", "Object", "Message"]);
    let object = format!("LimitRange:{a}/limits");
    assert_eq!(rows[1][1..4], ["CannotPropagateObject", object.as_str(), "Objects"], "{table}");

    // A cycle is refused with the server's message, and nothing moves.
    let err = refused(hns(&env, &["set", &root, "--parent", &ax]));
    assert!(
        err.starts_with("Error: ")
            && err.contains(&format!("illegal parent: cycle when making \"{ax}\" the parent of \"{root}\"")),
        "{err}"
    );
    assert_eq!(hierarchy(&client, &root).await.spec.parent, None);

    // A subnamespace with subnamespaces is deleted only with -a. -a asks first on a terminal;
    // without one it needs --yes (HNC's plugin had no delete, so no script expects otherwise).
    let err = refused(hns(&env, &["delete", &a, "-n", &root]));
    assert!(
        err.contains(&format!("subnamespace {a} is not a leaf and doesn't allow cascading deletion")),
        "{err}"
    );
    assert!(
        exists(&client, &ax).await && !hierarchy(&client, &a).await.spec.allow_cascading_deletion,
        "nothing changed"
    );
    let err = refused(hns(&env, &["delete", &b, "-n", &root]));
    assert!(
        err.contains(&format!(
            "\"{b}\" is a full namespace, a child of \"{root}\" but not a subnamespace of it"
        )) && err
            .contains(&format!("kubectl hns set {b} --root; to delete it: kubectl delete namespace {b}")),
        "a full namespace is not deleted: {err}"
    );
    let err = refused(hns(&env, &["delete", "no-such-kid", "-n", &root]));
    assert!(
        err.contains(&format!("has no subnamespace \"no-such-kid\" (its children: kubectl hns tree {root})")),
        "{err}"
    );
    let err = refused(hns(&env, &["delete", &a, "-n", &root, "--allowCascadingDeletion"]));
    assert!(
        err.contains(&format!(
            "not confirmed: there is no terminal to ask on, so nothing was changed. Delete \"{a}\" and the 1 namespace below it ({ax}), with everything in them? To go ahead without asking, add --yes"
        )),
        "{err}"
    );
    assert!(
        exists(&client, &ax).await && !hierarchy(&client, &a).await.spec.allow_cascading_deletion,
        "nothing changed"
    );
    let err = refused(hns(&env, &["delete", &a, "--allowCascadingDeletion", "--yes"]));
    assert!(err.contains("parent must be set via --namespace or -n: kubectl hns delete"), "{err}");
    let out = hns(&env, &["delete", &a, "-n", &root, "--allowCascadingDeletion", "--yes"]);
    assert_eq!(stderr(&out), "", "not asked, nothing said");
    assert_eq!(
        ok(out),
        format!(
            "Allowing cascading deletion on '{a}'\n\
             Successfully deleted \"{a}\" subnamespace anchor in \"{root}\" namespace\n"
        )
    );
    eventually("the subtree gone from the tree", WAIT, || async {
        let t = ok(hns(&env, &["tree", &root]));
        (t == format!("{root}\n└── {b}\n")).then_some(())
    })
    .await;

    // set --root -f undoes both, and says so.
    assert_eq!(
        ok(hns(&env, &["set", &b, "--root", "-f"])),
        format!(
            "Unsetting the parent of {b} (was previously {root})\nForbidding cascading deletion on '{b}'\n\
             Succesfully updated 2 properties of the hierarchical configuration of {b}\n"
        )
    );
    assert_eq!(
        ok(hns(&env, &["set", &b, "-r"])),
        format!("{b} is already a root namespace; unchanged\nNo changes made\n")
    );
    assert_eq!(hns(&env, &["set", &b]).status.code(), Some(2), "set needs a change");
    delete_namespaces(&client, &[&root, &b]).await;
}

#[tokio::test]
async fn the_contexts_namespace_is_no_parent_and_flags_choose_the_cluster() {
    let (env, client) = Env::with_admin().await;
    let (team, other) = (unique("pl-ctx"), unique("pl-ctx-other"));
    for n in [&team, &other] {
        create_namespace(&client, n, &[]).await;
    }
    // A copy of the admin kubeconfig whose context works in `team`, plus a context for `other`.
    let kubeconfig = std::env::temp_dir().join(format!("{team}.kubeconfig"));
    std::fs::copy(&env.kubeconfig, &kubeconfig).unwrap();
    let current = ok(kubectl_with(&kubeconfig, &["config", "current-context"])).trim().to_string();
    let cluster = ok(kubectl_with(
        &kubeconfig,
        &["config", "view", "--minify", "-o", "jsonpath={.contexts[0].context.cluster}"],
    ));
    let user = ok(kubectl_with(
        &kubeconfig,
        &["config", "view", "--minify", "-o", "jsonpath={.contexts[0].context.user}"],
    ));
    ok(kubectl_with(&kubeconfig, &["config", "set-context", &current, &format!("--namespace={team}")]));
    ok(kubectl_with(
        &kubeconfig,
        &[
            "config",
            "set-context",
            "other",
            &format!("--cluster={cluster}"),
            &format!("--user={user}"),
            &format!("--namespace={other}"),
        ],
    ));

    // As in HNC's plugin, create (and delete) take their parent from -n only: a subnamespace
    // made in the context's namespace by mistake is worse than a refusal.
    let kid = format!("{team}-kid");
    let err = refused(hns_with(&kubeconfig, &["create", &kid]));
    assert!(
        err.contains("parent must be set via --namespace or -n: kubectl hns create CHILD -n PARENT"),
        "{err}"
    );
    let out = ok(hns_with(&kubeconfig, &["create", &kid, "-n", &team]));
    assert_eq!(out, format!("Successfully created \"{kid}\" subnamespace anchor in \"{team}\" namespace\n"));
    let kid2 = format!("{other}-kid");
    ok(hns_with(&kubeconfig, &["create", &kid2, "--context", "other", "-n", &other]));
    // --kubeconfig wins over KUBECONFIG, as with kubectl.
    let nowhere = std::env::temp_dir().join("no-such.kubeconfig");
    let kubeconfig_flag = kubeconfig.to_str().unwrap();
    let tree = ok(hns_with(&nowhere, &["tree", &other, "--kubeconfig", kubeconfig_flag]));
    assert_eq!(tree, format!("{other}\n└── [s] {kid2}\n\n[s] indicates subnamespaces\n"));
    assert_eq!(hierarchy(&client, &kid).await.spec.parent.as_deref(), Some(team.as_str()));
    ok(hns_with(&kubeconfig, &["delete", &kid, "-n", &team]));
    ok(hns_with(&kubeconfig, &["delete", &kid2, "--context=other", "-n", &other]));
    delete_namespaces(&client, &[&team, &other]).await;
    std::fs::remove_file(&kubeconfig).unwrap();
}

/// kubectl passes a plugin its arguments as given, so kubectl's configuration flags must work
/// through its dispatch: an admin sees what another user (in other groups) would see.
#[tokio::test]
async fn kubectl_impersonation_flags_through_kubectl_dispatch() {
    let (env, client, team) = Env::with_namespace("pl-as").await;
    let kid = new_subnamespace(&client, &team, "kid").await;
    let dev = unique("pl-dev");
    let as_dev = format!("--as={dev}");

    let err = refused(hns(&env, &["tree", &team, &as_dev]));
    assert!(err.starts_with("Error: ") && err.contains("forbidden") && err.contains(&dev), "{err}");
    env.grant(&dev, "admin", &team);
    let drawn = format!("{team}\n└── [s] {kid}\n\n[s] indicates subnamespaces\n");
    eventually("the user's rights to reach hns (SAR cache, propagation)", WAIT, || async {
        let out = hns(&env, &["tree", &team, &as_dev, "--request-timeout=30s", "-v=6"]);
        (out.status.success() && stdout(&out) == drawn).then_some(())
    })
    .await;
    // Every tree the user may see (their view), and with the groups given, every tree.
    let other = fresh_namespace(&client, "pl-as-other").await;
    let out = ok(hns(&env, &["tree", "-A", "--as", &dev]));
    assert!(out.contains(&format!("{team}\n└── [s] {kid}\n")) && !out.contains(&other), "{out}");
    let out = ok(hns(&env, &["tree", "-A", &as_dev, "--as-group=pl-nobody", "--as-group=system:masters"]));
    assert!(out.contains(&format!("{team}\n└── [s] {kid}\n")) && out.contains(&other), "{out}");
    delete_tree(&client, &team).await;
    delete_namespaces(&client, &[&other]).await;
}

/// `kubectl hns ARGS` with `KUBECONFIG=kubeconfig`, outside any pod (so no in-cluster fallback).
fn hns_outside_a_pod(kubeconfig: &std::ffi::OsStr, args: &[&str]) -> Output {
    Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("PATH", path_with(&plugin_dir()))
        .arg("hns")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("kubectl must be on PATH")
}

/// A wrong context, kubeconfig or KUBECONFIG is named, as kubectl names it.
#[test]
fn a_bad_context_or_kubeconfig_is_named() {
    let env = Env::get();
    let err = refused(hns(&env, &["tree", "-A", "--context", "pl-no-such-context"]));
    assert!(
        err.starts_with("Error: context \"pl-no-such-context\" does not exist in kubeconfig ")
            && err.contains(&env.kubeconfig.display().to_string())
            && err.contains("kubectl config get-contexts"),
        "{err}"
    );
    let err = refused(hns(&env, &["describe", "default", "--cluster=pl-no-such-cluster"]));
    assert!(err.starts_with("Error: cluster \"pl-no-such-cluster\" does not exist"), "{err}");
    let err = refused(hns(&env, &["tree", "default", "--client-key=/nonexistent/hns.key"]));
    assert!(
        err.starts_with("Error: kubeconfig ")
            && err.contains("cannot read the client key /nonexistent/hns.key: No such file or directory"),
        "{err}"
    );

    let nowhere = std::env::temp_dir().join(unique("pl-no-such")).join("kubeconfig");
    let err = refused(hns(&env, &["tree", "-A", "--kubeconfig", nowhere.to_str().unwrap()]));
    assert_eq!(
        err,
        format!(
            "Error: stat {}: no such file or directory (given with --kubeconfig): name an existing kubeconfig\n",
            nowhere.display()
        )
    );
    let err = refused(hns_outside_a_pod(nowhere.as_os_str(), &["tree", "-A"]));
    assert!(
        err.starts_with(&format!("Error: KUBECONFIG names no file that exists ({})", nowhere.display())),
        "{err}"
    );
    // A missing file among others is skipped, as kubectl skips it.
    let both = std::env::join_paths([nowhere.as_path(), env.kubeconfig.as_path()]).unwrap();
    ok(hns_outside_a_pod(&both, &["tree", "default"]));
}

/// HNC's camelCase flags and kubectl's kebab-case both work; a namespace may be given with -n.
#[tokio::test]
async fn kebab_case_flags_and_dash_n() {
    let (env, client, team) = Env::with_namespace("pl-kebab").await;
    assert_eq!(
        ok(hns(&env, &["set", &team, "--allow-cascading-deletion"])),
        format!(
            "Allowing cascading deletion on '{team}'\n\
             Succesfully updated 1 property of the hierarchical configuration of {team}\n"
        )
    );
    assert!(hierarchy(&client, &team).await.spec.allow_cascading_deletion);
    assert_eq!(
        ok(hns(&env, &["set", "-n", &team, "--forbid-cascading-deletion"])),
        format!(
            "Forbidding cascading deletion on '{team}'\n\
             Succesfully updated 1 property of the hierarchical configuration of {team}\n"
        )
    );
    assert!(!hierarchy(&client, &team).await.spec.allow_cascading_deletion);

    let described = ok(hns(&env, &["describe", &team]));
    assert!(described.contains(&team), "{described}");
    assert_eq!(ok(hns(&env, &["describe", "-n", &team])), described);
    assert_eq!(ok(hns(&env, &["tree", "--namespace", &team])), ok(hns(&env, &["tree", &team])));
    let err = refused(hns(&env, &["describe", &team, "-n", "default"]));
    assert_eq!(err, format!("Error: NS ({team}) and -n (default) name different namespaces: give one\n"));
    let err = refused(hns(&env, &["describe"]));
    assert_eq!(err, "Error: Must specify the namespace: kubectl hns describe NS (or -n NS)\n");
    delete_namespaces(&client, &[&team]).await;
}

#[tokio::test]
async fn unknown_namespaces_are_named() {
    let env = Env::get();
    let missing = unique("pl-missing");
    for args in [
        vec!["tree", missing.as_str()],
        vec!["describe", &missing],
        vec!["set", &missing, "--root"],
        vec!["tree", "default", &missing],
    ] {
        let err = refused(hns(&env, &args));
        assert_eq!(err, format!("Error: namespace \"{missing}\" not found\n"), "{args:?}");
    }
    let err = refused(hns(&env, &["create", "kid", "-n", &missing]));
    assert!(err.starts_with("Error: ") && err.contains(&missing) && err.contains("not found"), "{err}");
}

#[tokio::test]
async fn without_permission_the_server_says_so() {
    let (env, client, team) = Env::with_namespace("pl-perm").await;
    let kid = new_subnamespace(&client, &team, "kid").await;
    let (nobody, admin) = (unique("pl-nobody"), unique("pl-admin"));
    // Every tree is every tree the user may see: none.
    let Some(out) = hns_as(&env, &nobody, &["tree", "-A"]) else { return };
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "No namespaces found whose hierarchy you may get.\n");
    let err = refused(hns_as(&env, &nobody, &["create", "x", "-n", &team]).unwrap());
    assert!(err.contains("forbidden") && err.contains("subnamespaces"), "{err}");
    let err = refused(hns_as(&env, &nobody, &["tree", &team]).unwrap());
    assert!(err.contains("forbidden") && err.contains(&team), "{err}");

    // A namespace admin may not list cluster-wide, but sees the trees it may read; the binding
    // reaches the subnamespace by propagation.
    env.grant(&admin, "admin", &team);
    let drawn = format!("{team}\n└── [s] {kid}\n\n[s] indicates subnamespaces\n");
    eventually("the admin's rights to reach hns (SAR cache, propagation)", WAIT, || async {
        let out = hns_as(&env, &admin, &["tree", &team]).unwrap();
        (out.status.success() && stdout(&out) == drawn).then_some(())
    })
    .await;
    let err = refused(
        hns_as(&env, &admin, &["config", "set-resource", "limitranges", "--mode", "Ignore"]).unwrap(),
    );
    assert!(err.contains("forbidden") && err.contains("hncconfigurations"), "{err}");
    delete_tree(&client, &team).await;
}

/// A stand-in for kube-apiserver answering hns's group the way kube-apiserver 1.20 does when
/// the group is served by nobody (404, plain text) or by an APIService it cannot reach (503,
/// plain text), and `/version` normally. Returns the kubeconfig pointing at it.
fn fake_apiserver(code: u16, body: &'static str) -> PathBuf {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut first = String::new();
            if reader.read_line(&mut first).is_err() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let path = first.split_whitespace().nth(1).unwrap_or_default();
            let (status, kind, body) = if path == "/version" {
                let info = r#"{"major":"1","minor":"20","gitVersion":"v1.20.2","gitCommit":"x","gitTreeState":"clean","buildDate":"2021-01-13T13:20:00Z","goVersion":"go1.15.5","compiler":"gc","platform":"linux/amd64"}"#;
                (200, "application/json", info)
            } else {
                (code, "text/plain; charset=utf-8", body)
            };
            let reason = if status == 200 { "OK" } else { "Error" };
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let kubeconfig = std::env::temp_dir().join(unique("fake-apiserver") + ".kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: fake}}\ncurrent-context: fake\n"
        ),
    )
    .unwrap();
    kubeconfig
}

#[test]
fn hns_unavailable_or_not_installed_is_said_plainly() {
    const CHECK: &str = "Check with: kubectl get apiservice v1alpha2.hnc.x-k8s.io\n";
    for (code, body, says) in [
        (
            503,
            "service unavailable\n",
            "the hns API (hnc.x-k8s.io/v1alpha2) is unavailable: kube-apiserver cannot reach hns-apiserver (service unavailable). ",
        ),
        (404, "404 page not found\n", "the hns API (hnc.x-k8s.io/v1alpha2) is not installed in this cluster. "),
    ] {
        let kubeconfig = fake_apiserver(code, body);
        let expected = format!("Error: {says}{CHECK}");
        for args in [&["tree", "-A"][..], &["describe", "x"], &["create", "kid", "-n", "x"], &["set", "x", "--root"], &["config", "describe"]] {
            assert_eq!(refused(hns_with(&kubeconfig, args)), expected, "{code} {args:?}");
        }
        let out = hns_with(&kubeconfig, &["version"]);
        assert_eq!(
            (stdout(&out), refused(out)),
            ("kubectl-hns version v0.1.0\nKubernetes version v1.20.2\n".to_string(), expected.clone()),
        );
        std::fs::remove_file(&kubeconfig).unwrap();
    }
}

#[tokio::test]
async fn version_reports_client_and_served_api() {
    let env = Env::get();
    let out = ok(hns(&env, &["version"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("kubectl-hns version v{}", env!("CARGO_PKG_VERSION")));
    assert!(lines[1].starts_with("Kubernetes version v1."), "{out}");
    assert_eq!(
        lines[2],
        "hns API hnc.x-k8s.io/v1alpha2 served: hierarchicalresourcequotas, hierarchyconfigurations, hncconfigurations, subnamespaceanchors, subnamespaces"
    );
    let v: Value = serde_saphyr::from_str(&ok(hns(&env, &["version", "-o", "yaml"]))).unwrap();
    assert_eq!(v["hnsApi"]["served"], true);
    assert_eq!(v["hnsApi"]["resources"][4], "subnamespaces");
    assert_eq!(v["clientVersion"], format!("v{}", env!("CARGO_PKG_VERSION")));
}

/// A `config` command, retried while another writer's change makes ours stale (the plugin
/// writes only on top of what it read).
fn config(env: &Env, args: &[&str]) -> Output {
    let mut all = vec!["config"];
    all.extend_from_slice(args);
    for _ in 0..5 {
        let out = hns(env, &all);
        if !stderr(&out).contains("has been modified") {
            return out;
        }
    }
    panic!("config {args:?}: conflicts 5 times in a row")
}

async fn copies(client: &Client) -> Option<i32> {
    let c: hns_api::HNCConfiguration = Api::all(client.clone()).get("config").await.unwrap();
    let status = c.status.unwrap_or_default();
    status.resources.iter().find(|r| r.resource == "limitranges").and_then(|r| r.num_propagated_objects)
}

/// Every change to the cluster-wide configuration here is in this one test, and to a kind no
/// other test configures (limitranges), so nothing races it.
#[tokio::test]
async fn config_describe_set_resource_delete_type() {
    let (env, client) = Env::with_admin().await;
    let described = ok(config(&env, &["describe"]));
    assert!(described.starts_with("Synchronized resources:\n"), "{described}");
    assert!(described.contains("* Propagating: roles (rbac.authorization.k8s.io/v1)"), "{described}");
    let data: Value = serde_json::from_str(&ok(config(&env, &["describe", "-o", "json"]))).unwrap();
    assert!(data["resources"].as_array().unwrap().iter().any(|r| r["resource"] == "rolebindings"), "{data}");

    let line = |mode: &str| {
        format!("Configuration for type with group: , resource: limitranges is set to mode {mode}\n")
    };
    let nobody = format!("--as={}", unique("nobody"));
    let err = refused(config(&env, &["set-resource", "limitranges", "--mode", "Ignore", &nobody]));
    assert!(
        err.contains("changing the HNCConfiguration needs the rights to get and update hncconfigurations"),
        "{err}"
    );
    let err = refused(config(&env, &["set-resource", "limitrange", "--mode", "Ignore"]));
    assert!(err.contains("resource \"limitrange\" in group \"\" is not found in the cluster; did you mean \"limitranges\"?"), "{err}");
    assert_eq!(ok(config(&env, &["set-resource", "limitranges", "--mode", "Ignore"])), line("Ignore"));
    let warned = refused(config(&env, &["set-resource", "limitranges", "--mode", "propagate"]));
    assert!(
        warned.starts_with(
            "Switching directly from 'Ignore' to 'Propagate' mode or 'AllowPropagate' mode could cause existing \"limitranges\" objects in child namespaces to be overwritten by objects from ancestor namespaces.\n\
             If you are sure you want to proceed with this operation, use the '--force' flag.\n"
        ),
        "{warned}"
    );
    let warned = refused(config(&env, &["set-resource", "limitranges", "--mode", "AllowPropagate"]));
    assert!(warned.starts_with("Switching directly from 'Ignore' to 'Propagate' mode or"), "{warned}");
    assert!(ok(config(&env, &["describe"])).contains("* Ignoring: limitranges (/v1)"), "unchanged");
    assert_eq!(
        ok(config(&env, &["set-resource", "limitranges", "--mode", "Propagate", "--force"])),
        line("Propagate")
    );

    // With a copy made, changes that touch copies ask first.
    let root = fresh_namespace(&client, "pl-cfg").await;
    let child = new_subnamespace(&client, &root, "child").await;
    let limits: LimitRange =
        serde_json::from_value(json!({"metadata": {"name": "limits"}, "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}}))
            .unwrap();
    Api::<LimitRange>::namespaced(client.clone(), &root)
        .create(&PostParams::default(), &limits)
        .await
        .unwrap();
    let child_limits: Api<LimitRange> = Api::namespaced(client.clone(), &child);
    eventually("the copy and its count", WAIT, || async {
        let copied = child_limits.get_opt("limits").await.unwrap().is_some();
        (copied && copies(&client).await.is_some_and(|n| n >= 1)).then_some(())
    })
    .await;
    // Without a terminal, as HNC's plugin did: no question, a note on stderr.
    let out = config(&env, &["set-resource", "limitranges", "--mode", "Remove"]);
    let note = stderr(&out);
    assert!(
        note.starts_with("Not asked (no terminal): Set limitranges to Remove? hns deletes its")
            && note.contains("Going ahead, as HNC's plugin, which never asked, did for this command"),
        "{note}"
    );
    assert_eq!(ok(out), line("Remove"));
    eventually("the copy removed", WAIT, || async {
        child_limits.get_opt("limits").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(
        ok(config(&env, &["delete-type", "--resource", "limitranges"])),
        "Configuration for type with group: , resource: limitranges is deleted\n"
    );
    assert_eq!(
        ok(config(&env, &["delete-type", "--group", "", "--resource", "limitranges"])),
        "Nothing to delete; No configuration for type with group: , resource: limitranges\n"
    );
    let err = refused(config(&env, &["set-resource", "no-such-things", "--mode", "Propagate"]));
    assert!(
        err.starts_with("Error: ") && err.contains("resource \"no-such-things\" in group \"\" is not found"),
        "{err}"
    );
    delete_tree(&client, &root).await;
}

/// A finalizer on a ConfigMap that keeps its namespace terminating until the guard goes, even
/// when the test fails half-way (a namespace left terminating would never go).
struct Hold {
    kubeconfig: PathBuf,
    namespaces: Vec<String>,
}

const HOLD_FINALIZER: &str = "e2e.hns.example.com/hold";

impl Hold {
    /// Puts a held ConfigMap in each of `namespaces`.
    async fn new(env: &Env, client: &Client, namespaces: &[&str]) -> Hold {
        for ns in namespaces {
            let cm: k8s_openapi::api::core::v1::ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": [HOLD_FINALIZER]}}))
                    .unwrap();
            Api::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.unwrap();
        }
        Hold {
            kubeconfig: env.kubeconfig.clone(),
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let patch = r#"{"metadata":{"finalizers":null}}"#;
            let _ = kubectl_with(
                &self.kubeconfig,
                &["patch", "configmap", "held", "-n", ns, "--type=merge", "-p", patch],
            );
        }
    }
}

/// While a subnamespace's namespace terminates, `kubectl get subns`, the configuration's row,
/// `tree` and `describe` say so (HNC showed `Ok` until the namespace was gone); a full child
/// terminating is marked in its parent's description too.
#[tokio::test]
async fn terminating_namespaces_say_so_in_get_tree_and_describe() {
    let (env, client, root) = Env::with_namespace("pl-term").await;
    let (sub, full) = (format!("{root}-sub"), format!("{root}-full"));
    create_subns(&client, &root, &sub).await.unwrap();
    create_namespace(&client, &full, &[]).await;
    set_parent(&client, &full, Some(&root)).await.unwrap();
    let hold = Hold::new(&env, &client, &[&sub, &full]).await;

    ok(hns(&env, &["delete", &sub, "-n", &root]));
    ok(env.kubectl(&["delete", "namespace", &full, "--wait=false"]));
    let row = eventually("the Subnamespace Terminating", WAIT, || async {
        let row = ok(env.kubectl(&["get", "subns", "-n", &root, &sub, "--no-headers"]));
        row.split_whitespace().nth(1).is_some_and(|s| s == "Terminating").then_some(row)
    })
    .await;
    assert!(row.starts_with(&sub), "{row}");
    let status = ok(env.kubectl(&["get", "subns", "-n", &root, &sub, "-o", "jsonpath={.status.status}"]));
    assert_eq!(status, "Terminating");
    let hc_row = ok(env.kubectl(&["get", "hierarchyconfigurations", "-n", &sub, "--no-headers"]));
    assert!(hc_row.contains(" Terminating "), "{hc_row}");

    let tree = ok(hns(&env, &["tree", &root]));
    assert!(tree.contains(&format!("[s] {sub} (terminating)\n")), "{tree}");
    assert!(tree.contains(&format!("── {full} (terminating)\n")), "{tree}");
    let tree_data: Value = serde_json::from_str(&ok(hns(&env, &["tree", &root, "-o", "json"]))).unwrap();
    assert!(tree_data["trees"][0].get("terminating").is_none(), "{tree_data}");
    assert_eq!(tree_data["trees"][0]["children"][0]["terminating"], true, "{tree_data}");

    let own = ok(hns(&env, &["describe", &sub]));
    assert!(own.contains("  Terminating for "), "{own}");
    assert!(own.contains(&format!("kubectl hns diagnose {sub}")), "{own}");
    let parent = ok(hns(&env, &["describe", &root]));
    assert!(parent.contains(&format!("  - {sub} (subnamespace, terminating)\n")), "{parent}");
    assert!(parent.contains(&format!("  - {full} (terminating)\n")), "{parent}");
    assert!(!parent.contains("  Terminating for "), "the parent is not terminating: {parent}");

    drop(hold);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually("both children gone once nothing holds them", Duration::from_secs(120), || async {
        let gone = |ns: &str| {
            let ns = ns.to_string();
            let api = namespaces.clone();
            async move { api.get_opt(&ns).await.unwrap().is_none() }
        };
        (gone(&sub).await && gone(&full).await).then_some(())
    })
    .await;
    delete_tree(&client, &root).await;
}
