//! The user guide's commands, run against the cluster under test, so the guide cannot rot.
//!
//! Convention for fenced blocks in `docs/*.md` (the parsing and matching are `hns_e2e::docs`):
//!
//! - ```` ```sh ````: a bash script, run with `bash -euo pipefail`; it must succeed.
//! - ```` ```console ````: lines starting with `$ ` are commands (a line ending in `\`
//!   continues); the lines after a command, up to the next `$ `, are its output (stdout and
//!   stderr together), which must match: whitespace runs count as one space; a line `...`
//!   stands for any number of lines; within a line, `...` stands for any text and `<word>` (e.g.
//!   `<age>`) for one run of non-space characters. A command must succeed, unless its shown
//!   output starts with `Error:` or `Error from server` (how kubectl and kubectl hns report a
//!   refusal): then it must fail.
//! - ```` ```sh migration PHASE [local=ACTION] ````: a step of the move between HNC and hns, run
//!   by `hack/migration-test.sh` on its own control plane, not here.
//! - ```` ```sh cluster ````: a command for a real cluster (installing hns): not run here, and
//!   its text must also appear in a migration block, which the migration test runs (or its
//!   local equivalent, for the few steps that need a cluster's nodes).
//! - any other info string (`yaml`, `text`, none): not run.
//!
//! The blocks of a file run in order, in one scratch directory, with `KUBECONFIG` set to the
//! cluster's admin, `PATH` holding `kubectl-hns` first and `NO_COLOR=1`. A failure names the
//! file and line of the block (and of the command, in a console block). The guide's namespaces
//! begin with `acme-`; any left by an earlier run are deleted first. The guide changes the
//! cluster-wide HNCConfiguration; the test puts back the kinds it found, even when it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hns_e2e::docs::{blocks, output_matches, steps, Block, Kind};
use hns_e2e::{path_with, plugin_dir, Env};

fn docs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

fn guide_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(docs_dir())
        .expect("docs/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

fn bash(env: &Env, dir: &Path, script: &str) -> Output {
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("KUBECONFIG", &env.kubeconfig)
        .env("PATH", path_with(&plugin_dir()))
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("bash runs")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs one block; `Err` says what went wrong, naming `where_` (file:line).
fn run_block(env: &Env, dir: &Path, block: &Block, where_: &str) -> Result<(), String> {
    match block.kind {
        Kind::Script => {
            let out = bash(env, dir, &block.body);
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{where_}: the block failed ({}):\n{}\n--- output:\n{}",
                    out.status,
                    block.body,
                    text(&out)
                ))
            }
        }
        Kind::Console => {
            for step in steps(&block.body) {
                let at = format!("{where_} (line {})", block.line + step.line);
                // stdout and stderr in the order they are written, as a terminal shows them.
                let out = bash(env, dir, &format!("exec 2>&1\n{}", step.command));
                let shown = text(&out);
                let should_fail = step
                    .expected
                    .first()
                    .is_some_and(|l| l.starts_with("Error:") || l.starts_with("Error from server"));
                if out.status.success() == should_fail {
                    let want = if should_fail { "fail" } else { "succeed" };
                    return Err(format!("{at}: `{}` should {want} ({}):\n{shown}", step.command, out.status));
                }
                if !step.expected.is_empty() && !output_matches(&step.expected, &shown) {
                    return Err(format!(
                        "{at}: `{}` printed\n{shown}\n--- but the guide shows\n{}",
                        step.command,
                        step.expected.join("\n")
                    ));
                }
            }
            Ok(())
        }
        Kind::Migration | Kind::Cluster | Kind::Other => Ok(()),
    }
}

/// Deletes the guide's namespaces left by an earlier run against the same cluster.
fn clean(env: &Env, dir: &Path) {
    let script = r#"
for ns in $(kubectl get ns -o name | sed -n 's|^namespace/||; /^acme-/p'); do
  kubectl patch hierarchyconfiguration hierarchy -n "$ns" --type merge -p '{"spec":{"allowCascadingDeletion":true}}' >/dev/null 2>&1 || true
done
for ns in $(kubectl get ns -o name | sed -n 's|^namespace/||; /^acme-/p'); do
  for cm in $(kubectl get configmaps -n "$ns" -o name); do
    kubectl patch -n "$ns" "$cm" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  done
done
roots=$(kubectl get ns -o name | sed -n 's|^namespace/||; /^acme-/p' | while read -r ns; do
  if [ -z "$(kubectl get ns "$ns" -o jsonpath='{.metadata.annotations.hnc\.x-k8s\.io/subnamespace-of}')" ]; then echo "$ns"; fi
done)
# --ignore-not-found: one may have gone since it was listed.
[ -z "$roots" ] || kubectl delete ns $roots --ignore-not-found --wait=true --timeout=120s
# Subnamespaces go after their root: wait for every one, or the guide's first block finds them.
for _ in $(seq 120); do
  kubectl get ns -o name | grep -q '^namespace/acme-' || exit 0
  sleep 1
done
echo "namespaces acme-* still there after 2 minutes" >&2; exit 1
"#;
    let out = bash(env, dir, script);
    assert!(out.status.success(), "cleaning up an earlier run's namespaces failed:\n{}", text(&out));
}

/// A scratch directory, removed when dropped (also when a block fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("hns-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// Puts the HNCConfiguration's kinds back as they were when it was made, when dropped.
struct RestoreConfig<'a> {
    env: &'a Env,
    resources: serde_json::Value,
}

impl<'a> RestoreConfig<'a> {
    fn new(env: &'a Env) -> Self {
        let out = env.kubectl(&["get", "hncconfiguration", "config", "-o", "json"]);
        let config: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("reading the HNCConfiguration: {e}\n{}", String::from_utf8_lossy(&out.stderr))
        });
        let resources = config["spec"]["resources"].clone();
        RestoreConfig { env, resources: if resources.is_null() { serde_json::json!([]) } else { resources } }
    }
}

impl Drop for RestoreConfig<'_> {
    fn drop(&mut self) {
        let patch = serde_json::json!({"spec": {"resources": self.resources}}).to_string();
        let out = self.env.kubectl(&["patch", "hncconfiguration", "config", "--type", "merge", "-p", &patch]);
        if !out.status.success() {
            eprintln!("could not restore the HNCConfiguration: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[test]
fn every_command_in_the_guide_runs_as_shown() {
    let env = Env::get();
    let dir = Scratch::new();
    let scratch = dir.0.as_path();
    clean(&env, scratch);
    let _restore = RestoreConfig::new(&env);
    let migration = std::fs::read_to_string(docs_dir().join("migration.md")).expect("docs/migration.md");
    let migration_steps: Vec<String> =
        blocks(&migration).into_iter().filter(|b| b.kind == Kind::Migration).map(|b| b.body).collect();
    let mut ran = 0;
    for file in guide_files() {
        let name = format!("docs/{}", file.file_name().unwrap().to_string_lossy());
        let markdown = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        for block in blocks(&markdown) {
            let where_ = format!("{name}:{}", block.line);
            if block.kind == Kind::Cluster {
                assert!(
                    migration_steps.contains(&block.body),
                    "{where_}: a `sh cluster` block must also be a step of docs/migration.md, so the migration test runs it"
                );
            }
            if let Err(e) = run_block(&env, scratch, &block, &where_) {
                panic!("{e}");
            }
            ran += usize::from(matches!(block.kind, Kind::Script | Kind::Console));
        }
    }
    assert!(ran >= 10, "only {ran} runnable blocks found in docs/: is the convention still the one above?");
}
