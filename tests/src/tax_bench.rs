//! `hns-bench tax` (part of `make bench`; `make bench-scale` runs it at 100,000 namespaces): what
//! installing hns costs everything else in the cluster, measured against no hns at all on the
//! same control plane in the same run.
//!
//! The cluster first holds `$HNS_BENCH_TAX_NAMESPACES` namespaces (10,000 by default): a forest of
//! subnamespaces and lone namespaces. Then rounds alternate between hns installed and hns
//! uninstalled (`hack/hns-up.sh uninstall`: its APIService and webhooks gone, its process
//! stopped, every namespace kept), and each round measures, as the rest of the cluster meets
//! them: plain namespaces created and deleted; pods created where no hierarchical quota applies;
//! RoleBindings, Secrets and ConfigMaps created in lone namespaces and inside the forest;
//! aggregated discovery as kubectl asks for it; kube-apiserver's CPU per namespace created and
//! its memory; and kube-apiserver's and kube-controller-manager's CPU per namespace deleted (the
//! namespace controller lists and deletes hns's resources in every namespace it deletes). The
//! figure of each side is its median over its rounds ([`summary`]: the mean for CPU per
//! namespace); the ratio is with ÷ without.
//!
//! It measures hns as it finds it installed: with lone namespaces unlabelled
//! (config/components/unlabelled-lone-namespaces; `HNS_LONE_NAMESPACE_LABELS=false` for
//! hack/hns-up.sh, which the rounds reinstall with) or, by default, labelled.
//!
//! `hack/bench.sh tax-nodes` runs the same rounds with hns as users install it: deploy/hns.yaml's
//! Deployment on real nodes (hack/nodes.sh, HNS_NODES_DIR), the nodes on CPUs of their own and
//! the control plane and the benchmark's clients on the others, as on a cluster where hns's pods
//! run on other machines than kube-apiserver. Uninstalled, its registration is deleted and the
//! Deployment scaled to 0. hns's CPU is then its nodes' pods', from their cgroups.
//!
//! Then, once: hns's own requests to kube-apiserver over `$HNS_BENCH_TAX_IDLE_SECONDS` (300:
//! two or three of the leader's renewals) after `$HNS_BENCH_TAX_QUIET_SECONDS` (300) quiet
//! seconds (kube-apiserver counts them apart under a FlowSchema of the benchmark's), the watches
//! it holds open (kube-apiserver's, with hns and without), and the bytes hns adds to a lone
//! namespace (its protobuf encoding, as etcd stores it, with and without hns). Prints the
//! figures with their targets; asserts nothing about time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, Pod, PodSchedulingGate, PodSpec, Secret};
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PartialObjectMeta, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};

use crate::apiserver_metrics::{kube_apiserver_metrics, metric_sum};
use crate::bench::{grow_forest, Subnamespaces};
use crate::reliability::processes::Processes;
use crate::scale_bench::{
    measured, measured_then_idle, settle, COMPONENTS, ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER,
};
use crate::timing::quantile_ms;
use crate::{create_namespace, role_binding, Env, Subject};

/// Clients writing at once, on both sides.
const CLIENTS: usize = 16;
/// Lone namespaces the object writes outside any hierarchy go to.
const LONE: usize = 20;
/// Each kind's writes, pods and discovery requests in a round.
const WRITES: usize = 200;

/// What a round is run with, from the environment.
struct Sizes {
    namespaces: usize,
    rounds: usize,
    per_round: usize,
    quiet: Duration,
    idle: Duration,
}

impl Sizes {
    fn from_env() -> Sizes {
        let var = |name: &str, default: usize| {
            std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
        };
        Sizes {
            namespaces: var("HNS_BENCH_TAX_NAMESPACES", 10_000),
            // An even number, so that each side has as many rounds, each side going first in turn.
            rounds: var("HNS_BENCH_TAX_ROUNDS", 6).max(2) / 2 * 2,
            per_round: var("HNS_BENCH_TAX_ROUND", 500),
            quiet: Duration::from_secs(var("HNS_BENCH_TAX_QUIET_SECONDS", 300) as u64),
            idle: Duration::from_secs(var("HNS_BENCH_TAX_IDLE_SECONDS", 300).max(60) as u64),
        }
    }
}

/// How the rounds install and uninstall hns.
enum Install {
    /// hns-apiserver as a process beside a control plane on loopback (`hack/hns-up.sh up` and
    /// `uninstall`), sharing its cores, as `make bench`'s other benchmarks run it. `unlabelled`:
    /// found installed with lone namespaces unlabelled, and so reinstalled
    /// (`HNS_LONE_NAMESPACE_LABELS=false` for the script).
    Process { script: PathBuf, dir: PathBuf, replicas: usize, unlabelled: bool },
    /// hns as users install it: deploy/hns.yaml's Deployment on the real nodes of a control
    /// plane made by hack/nodes.sh (`hack/bench.sh tax-nodes`), whose CPU is not the control
    /// plane's. Uninstalled, its APIService, webhooks and admission policy are gone and the
    /// Deployment has no pods; every namespace stays. `unlabelled`: it runs hns with
    /// `--label-lone-namespaces=false`.
    Deployment { manifest: PathBuf, dir: PathBuf, replicas: usize, unlabelled: bool },
}

/// hns's Deployment and its APIService, as deploy/hns.yaml names them.
const DEPLOYMENT: &str = "deployment/hns-apiserver";
const API_SERVICE: &str = "apiservice/v1alpha2.hnc.x-k8s.io";

impl Install {
    /// From where the benchmark runs: a loopback control plane (HNS_E2E_DIR) or one with nodes
    /// (HNS_NODES_DIR, with deploy/hns.yaml or HNS_BENCH_TAX_MANIFEST already applied).
    async fn of(client: &Client, env: &Env) -> anyhow::Result<Install> {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        if let Some(local) = &env.local {
            let replicas = local.replica_names.len().max(1);
            let registered = Api::<MutatingWebhookConfiguration>::all(client.clone()).get_opt("hns").await?;
            let Some(webhooks) = registered else {
                anyhow::bail!(
                    "hns is not installed on {} (no MutatingWebhookConfiguration hns): run hack/hns-up.sh up {0} first",
                    local.dir.display()
                );
            };
            return Ok(Install::Process {
                script: repo.join("hack/hns-up.sh"),
                dir: local.dir.clone(),
                replicas,
                unlabelled: crate::registers_unlabelled(&webhooks),
            });
        }
        let dir = env.control_plane_dir().ok_or_else(|| {
            anyhow::anyhow!("the tax benchmark installs and uninstalls hns: it needs a local control plane (hack/bench.sh tax or tax-nodes)")
        })?;
        let manifest = std::env::var_os("HNS_BENCH_TAX_MANIFEST")
            .map(PathBuf::from)
            .unwrap_or(repo.join("deploy/hns.yaml"));
        let deployment = Api::<Deployment>::namespaced(client.clone(), "hns-system")
            .get("hns-apiserver")
            .await
            .map_err(|e| {
                anyhow::anyhow!("hns's Deployment hns-system/hns-apiserver: {e}: apply deploy/hns.yaml first")
            })?;
        anyhow::ensure!(
            Processes::new(&dir).node_pods_cpu_seconds().is_some(),
            "no CPU figure for the pods of the nodes in {} (cgroup v1 cpuacct, hack/nodes.sh): the rounds could not wait for hns",
            dir.display()
        );
        let unlabelled = runs_unlabelled(&deployment);
        anyhow::ensure!(
            unlabelled == crate::lone_namespaces_unlabelled(client).await,
            "hns's Deployment runs hns {}, but its labelling webhook is registered for the other way: apply one rendering of config/ whole (config/components/unlabelled-lone-namespaces patches both)",
            if unlabelled { "with --label-lone-namespaces=false" } else { "labelling lone namespaces" },
        );
        let replicas = deployment.spec.and_then(|s| s.replicas).unwrap_or(1).max(1) as usize;
        Ok(Install::Deployment { manifest, dir, replicas, unlabelled })
    }

    /// The control plane's directory, whose processes are measured.
    fn dir(&self) -> &Path {
        match self {
            Install::Process { dir, .. } | Install::Deployment { dir, .. } => dir,
        }
    }

    /// How many replicas of hns-apiserver run when it is installed.
    fn replicas(&self) -> usize {
        match self {
            Install::Process { replicas, .. } | Install::Deployment { replicas, .. } => *replicas,
        }
    }

    fn describe(&self) -> String {
        match self {
            Install::Process { unlabelled: true, .. } => {
                "a process beside the control plane, lone namespaces unlabelled (HNS_LONE_NAMESPACE_LABELS=false: config/components/unlabelled-lone-namespaces)".into()
            }
            Install::Process { .. } => {
                "a process beside the control plane, the default (every managed namespace labelled, as under HNC)".into()
            }
            Install::Deployment { manifest, replicas, unlabelled, .. } => format!(
                "{} applied, its {replicas} pods on nodes of their own (not the control plane's cores){}",
                manifest.display(),
                if *unlabelled { ", lone namespaces unlabelled" } else { "" }
            ),
        }
    }

    async fn set(&self, client: &Client, env: &Env, installed: bool) -> anyhow::Result<()> {
        match self {
            Install::Process { script, dir, unlabelled, .. } => {
                let verb = if installed { "up" } else { "uninstall" };
                // Reinstalled as it was found, whatever the benchmark was started with.
                let labels = if *unlabelled { "false" } else { "true" };
                let out = std::process::Command::new(script)
                    .args([verb])
                    .arg(dir)
                    .env("HNS_LONE_NAMESPACE_LABELS", labels)
                    .output()?;
                anyhow::ensure!(
                    out.status.success(),
                    "hack/hns-up.sh {verb} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Install::Deployment { manifest, .. } if installed => {
                kubectl(env, &["apply", "-f", &manifest.to_string_lossy()])?;
                kubectl(env, &["-n", "hns-system", "rollout", "status", DEPLOYMENT, "--timeout=300s"])?;
                kubectl(env, &["wait", "--for=condition=Available", API_SERVICE, "--timeout=180s"])?;
            }
            Install::Deployment { .. } => {
                let mut registration = vec![
                    "delete",
                    "--ignore-not-found",
                    API_SERVICE,
                    "validatingwebhookconfiguration/hns",
                    "mutatingwebhookconfiguration/hns",
                ];
                // Its admission policy (Kubernetes 1.36 and later) goes too, not later with its owner.
                if crate::admission_policies_served(client).await {
                    registration.extend([
                        "mutatingadmissionpolicy/hns-namespace-labels",
                        "mutatingadmissionpolicybinding/hns-namespace-labels",
                    ]);
                }
                kubectl(env, &registration)?;
                kubectl(env, &["-n", "hns-system", "scale", DEPLOYMENT, "--replicas=0"])?;
                let pods = "app.kubernetes.io/name=hns-apiserver";
                kubectl(
                    env,
                    &["-n", "hns-system", "wait", "--for=delete", "pod", "-l", pods, "--timeout=180s"],
                )?;
            }
        }
        Ok(())
    }
}

/// Whether hns's Deployment runs hns with `--label-lone-namespaces=false`
/// (config/components/unlabelled-lone-namespaces), or the flag and `false` as two arguments.
fn runs_unlabelled(deployment: &Deployment) -> bool {
    const FLAG: &str = "--label-lone-namespaces";
    const FLAG_FALSE: &str = "--label-lone-namespaces=false";
    let containers = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|s| &s.containers);
    containers.into_iter().flatten().filter_map(|c| c.args.as_deref()).any(|args| {
        args.iter().any(|a| a == FLAG_FALSE)
            || args.windows(2).any(|pair| pair[0] == FLAG && pair[1] == "false")
    })
}

/// Runs kubectl on the benchmark's cluster; an error names the command and what it said.
fn kubectl(env: &Env, args: &[&str]) -> anyhow::Result<()> {
    let out = env.kubectl(args);
    anyhow::ensure!(
        out.status.success(),
        "kubectl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// One round's samples.
#[derive(Default)]
struct Round {
    figures: BTreeMap<&'static str, f64>,
}

impl Round {
    fn latencies(&mut self, what: &'static [&'static str; 2], mut samples: Vec<Duration>) {
        samples.sort();
        self.figures.insert(what[0], quantile_ms(&samples, 0.5));
        self.figures.insert(what[1], quantile_ms(&samples, 0.99));
    }
}

/// A figure the report prints: its name in [`Round::figures`], and its target as the most (or,
/// for a rate, the least) with ÷ without may be; `None` is measured only.
struct Row {
    name: &'static str,
    target: Option<(&'static str, f64)>,
}

const CREATE: [&str; 2] = ["namespace create p50 (ms)", "namespace create p99 (ms)"];
const DELETE: [&str; 2] = ["namespace delete request p50 (ms)", "namespace delete request p99 (ms)"];
const PODS: [&str; 2] = ["pod create, no quota p50 (ms)", "pod create, no quota p99 (ms)"];
const DISCOVERY: [&str; 2] = ["discovery /apis p50 (ms)", "discovery /apis p99 (ms)"];
const CREATE_RATE: &str = "namespaces created per second";
const GONE_RATE: &str = "namespaces deleted (gone) per second";
const APISERVER_CPU: &str = "kube-apiserver CPU per namespace (ms)";
const ETCD_CPU: &str = "etcd CPU per namespace (ms)";
const APISERVER_RSS: &str = "kube-apiserver resident memory (MiB)";
const DELETE_APISERVER_CPU: &str = "kube-apiserver CPU per namespace deleted (ms)";
const DELETE_CONTROLLER_MANAGER_CPU: &str = "kube-controller-manager CPU per namespace deleted (ms)";

/// The latency figures of writing `kind` outside any hierarchy or inside one.
fn object_figures(kind: Kind, inside: bool) -> &'static [&'static str; 2] {
    match (kind, inside) {
        (Kind::RoleBinding, false) => &["RoleBinding, lone ns p50 (ms)", "RoleBinding, lone ns p99 (ms)"],
        (Kind::RoleBinding, true) => &["RoleBinding, in a tree p50 (ms)", "RoleBinding, in a tree p99 (ms)"],
        (Kind::Secret, false) => &["Secret, lone ns p50 (ms)", "Secret, lone ns p99 (ms)"],
        (Kind::Secret, true) => &["Secret, in a tree p50 (ms)", "Secret, in a tree p99 (ms)"],
        (Kind::ConfigMap, false) => &["ConfigMap, lone ns p50 (ms)", "ConfigMap, lone ns p99 (ms)"],
        (Kind::ConfigMap, true) => &["ConfigMap, in a tree p50 (ms)", "ConfigMap, in a tree p99 (ms)"],
    }
}

fn rows() -> Vec<Row> {
    let most = |limit| Some(("<=", limit));
    let mut rows = vec![
        Row { name: CREATE_RATE, target: Some((">=", 0.95)) },
        Row { name: CREATE[0], target: None },
        Row { name: CREATE[1], target: most(1.1) },
        Row { name: DELETE[0], target: None },
        Row { name: DELETE[1], target: None },
        Row { name: GONE_RATE, target: None },
        Row { name: PODS[0], target: most(1.02) },
        Row { name: PODS[1], target: most(1.02) },
    ];
    for kind in [Kind::RoleBinding, Kind::Secret, Kind::ConfigMap] {
        for inside in [false, true] {
            let [p50, p99] = object_figures(kind, inside);
            let target = if inside { None } else { most(1.02) };
            rows.extend([Row { name: p50, target }, Row { name: p99, target }]);
        }
    }
    rows.extend([
        Row { name: DISCOVERY[0], target: None },
        Row { name: DISCOVERY[1], target: most(1.05) },
        Row { name: APISERVER_CPU, target: most(1.05) },
        Row { name: ETCD_CPU, target: None },
        Row { name: APISERVER_RSS, target: None },
        Row { name: DELETE_APISERVER_CPU, target: None },
        Row { name: DELETE_CONTROLLER_MANAGER_CPU, target: None },
    ]);
    rows
}

#[derive(Clone, Copy)]
enum Kind {
    RoleBinding,
    Secret,
    ConfigMap,
}

pub async fn run(client: &Client, env: &Env) -> anyhow::Result<()> {
    let install = Install::of(client, env).await?;
    let sizes = Sizes::from_env();
    let processes = Processes::new(install.dir());
    let (lone, inside) = populate(client, sizes.namespaces).await?;
    println!(
        "hns's tax: {} rounds, each side in turn, on {} namespaces; {} plain namespaces created and deleted a round, {WRITES} of each write, {CLIENTS} clients",
        sizes.rounds,
        crate::bench::namespace_count(client).await?,
        sizes.per_round
    );
    println!("  hns as installed: {}", install.describe());

    let (mut with, mut without) = (Vec::new(), Vec::new());
    for r in 0..sizes.rounds {
        // with, without, without, with, …: each side goes first as often, and hns is switched
        // every other round only.
        let installed = (r + 1) % 4 < 2;
        install.set(client, env, installed).await?;
        let round =
            round(client, env, &processes, &format!("tax-r{r}"), sizes.per_round, &lone, &inside).await?;
        println!("  round {r} ({}): {:.0} namespaces/s", side(installed), round.figures[CREATE_RATE]);
        if installed {
            with.push(round)
        } else {
            without.push(round)
        }
    }
    report(&with, &without);

    install.set(client, env, true).await?;
    let flow = FlowSchemaFor::hns(client).await?;
    let with_bytes = "tax-bytes-a";
    create_plain(client, with_bytes).await?;
    settled_labels(client, with_bytes).await?;
    let with_hns = idle(client, &flow, sizes.quiet, sizes.idle).await?;
    install.set(client, env, false).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let without_watches = open_watches(client).await?;
    println!(
        "  hns's requests to kube-apiserver at idle, over {} s after {} quiet seconds: {:.0}, {:.2} a minute per replica (target <= 1)",
        sizes.idle.as_secs(),
        sizes.quiet.as_secs(),
        with_hns.requests,
        with_hns.requests / (sizes.idle.as_secs_f64() / 60.0) / install.replicas() as f64
    );
    println!(
        "  watches open on kube-apiserver: {:.0} with hns, {without_watches:.0} without: hns holds {:.0}",
        with_hns.watches,
        with_hns.watches - without_watches
    );
    println!(
        "  bytes hns adds to a lone namespace, as etcd stores it: {}",
        bytes_added(client, with_bytes).await?
    );
    flow.remove(client).await?;
    install.set(client, env, true).await
}

fn side(installed: bool) -> &'static str {
    if installed {
        "with hns"
    } else {
        "without"
    }
}

/// Tops the cluster up to `total` namespaces: half a forest of subnamespaces (what hns-bench's
/// other benchmarks grow), the rest lone namespaces `tax-lone-<i>`. Returns the lone namespaces
/// and the forest's leaves that the object writes go to.
async fn populate(client: &Client, total: usize) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let names = crate::bench::namespace_names(client).await?;
    let forest = names.iter().filter(|n| n.starts_with("bench-forest-")).count();
    let want_forest = (total / 2).max(forest).max(LONE + 100);
    let grown = grow_forest(client, Subnamespaces::Hns, forest, want_forest, Duration::from_secs(1800)).await;
    let lone_now = names.iter().filter(|n| n.starts_with("tax-lone-")).count();
    let others = names.len() - forest - lone_now;
    let lone = total.saturating_sub(others + grown).max(LONE);
    stream::iter(lone_now..lone)
        .for_each_concurrent(32, |i| async move {
            create_namespace(client, &format!("tax-lone-{i}"), &[]).await;
        })
        .await;
    crate::bench::wait_controllers_settled(client, total).await;
    let lone = (0..LONE).map(|i| format!("tax-lone-{i}")).collect();
    // The forest's last namespaces are leaves, three levels deep at 10,000.
    let leaves = (grown - LONE..grown).map(|i| format!("bench-forest-{i}")).collect();
    Ok((lone, leaves))
}

/// One round: what the rest of the cluster meets, in the order it meets it.
async fn round(
    client: &Client,
    env: &Env,
    processes: &Processes,
    prefix: &str,
    n: usize,
    lone: &[String],
    inside: &[String],
) -> anyhow::Result<Round> {
    let mut round = Round::default();
    // hns just (re)started, or the last round's deletions: neither is this round's to pay.
    settle(env).await;
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let mut latencies = Vec::new();
    let (took, cpu) = measured(env, n, async {
        let (took, samples) = timed(&names, |name| create_plain(client, name)).await;
        latencies = samples;
        took
    })
    .await;
    round.figures.insert(CREATE_RATE, n as f64 / took.as_secs_f64());
    round.latencies(&CREATE, latencies);
    round.figures.insert(APISERVER_CPU, cpu[KUBE_APISERVER]);
    round.figures.insert(ETCD_CPU, cpu[ETCD]);
    round.figures.insert(APISERVER_RSS, processes.rss_mib(COMPONENTS[KUBE_APISERVER]).unwrap_or(0.0));

    let pods: Vec<(String, String)> =
        (0..WRITES).map(|i| (lone[i % lone.len()].clone(), format!("{prefix}-pod-{i}"))).collect();
    round.latencies(&PODS, timed(&pods, |(ns, name)| create_pod(client, ns, name)).await.1);
    for kind in [Kind::RoleBinding, Kind::Secret, Kind::ConfigMap] {
        for (place, within) in [(lone, false), (inside, true)] {
            let objects: Vec<(String, String)> =
                (0..WRITES).map(|i| (place[i % place.len()].clone(), format!("{prefix}-{i}"))).collect();
            let samples = timed(&objects, |(ns, name)| create_object(client, kind, ns, name)).await.1;
            round.latencies(object_figures(kind, within), samples);
        }
    }
    round.latencies(&DISCOVERY, discovery(client).await?);

    // The namespace controller lists and deletes every namespaced resource of a namespace being
    // deleted, hns's through its APIService: what a deletion costs, over a window of minutes.
    let (mut samples, mut gone) = (Vec::new(), Ok(Duration::ZERO));
    let cpu = measured_then_idle(env, n, async {
        samples = timed(&names, |name| delete_namespace(client, name)).await.1;
        gone = until_gone(client, prefix, n).await;
    })
    .await;
    round.latencies(&DELETE, samples);
    round.figures.insert(GONE_RATE, n as f64 / gone?.as_secs_f64());
    round.figures.insert(DELETE_APISERVER_CPU, cpu[KUBE_APISERVER]);
    round.figures.insert(DELETE_CONTROLLER_MANAGER_CPU, cpu[KUBE_CONTROLLER_MANAGER]);
    clean_up(client, prefix, lone, inside).await?;
    Ok(round)
}

/// Runs `op` on every item, [`CLIENTS`] at a time; returns how long they all took and each one's
/// latency. A failure ends the benchmark: a figure over failed requests would mean nothing.
async fn timed<'a, T, F, Fut>(items: &'a [T], op: F) -> (Duration, Vec<Duration>)
where
    F: Fn(&'a T) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let started = Instant::now();
    let samples = stream::iter(items)
        .map(|item| {
            let op = &op;
            async move {
                let t = Instant::now();
                op(item).await.unwrap_or_else(|e| panic!("a request of the tax benchmark failed: {e}"));
                t.elapsed()
            }
        })
        .buffer_unordered(CLIENTS)
        .collect()
        .await;
    (started.elapsed(), samples)
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: namespace.map(Into::into), ..Default::default() }
}

async fn create_plain(client: &Client, name: &str) -> Result<(), kube::Error> {
    let ns = Namespace { metadata: meta(None, name), ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.map(drop)
}

async fn delete_namespace(client: &Client, name: &str) -> Result<(), kube::Error> {
    Api::<Namespace>::all(client.clone()).delete(name, &DeleteParams::default()).await.map(drop)
}

/// A pod no node runs: its creation is what is measured. A scheduling gate keeps it from any
/// node where the control plane has some (hack/bench.sh tax-nodes).
async fn create_pod(client: &Client, namespace: &str, name: &str) -> Result<(), kube::Error> {
    let container = Container { name: "c".into(), image: Some("pause".into()), ..Default::default() };
    let gate = PodSchedulingGate { name: "hns.example.com/never".into() };
    let spec =
        PodSpec { containers: vec![container], scheduling_gates: Some(vec![gate]), ..Default::default() };
    let pod = Pod { metadata: meta(Some(namespace), name), spec: Some(spec), ..Default::default() };
    Api::<Pod>::namespaced(client.clone(), namespace).create(&PostParams::default(), &pod).await.map(drop)
}

async fn create_object(client: &Client, kind: Kind, namespace: &str, name: &str) -> Result<(), kube::Error> {
    let pp = PostParams::default();
    let c = client.clone();
    match kind {
        Kind::RoleBinding => {
            let mut rb = role_binding(name, "view", Subject::User("tax-bench"));
            rb.metadata.namespace = Some(namespace.into());
            Api::<RoleBinding>::namespaced(c, namespace).create(&pp, &rb).await.map(drop)
        }
        Kind::Secret => {
            let secret = Secret { metadata: meta(Some(namespace), name), ..Default::default() };
            Api::<Secret>::namespaced(c, namespace).create(&pp, &secret).await.map(drop)
        }
        Kind::ConfigMap => {
            let cm = ConfigMap { metadata: meta(Some(namespace), name), ..Default::default() };
            Api::<ConfigMap>::namespaced(c, namespace).create(&pp, &cm).await.map(drop)
        }
    }
}

/// The Accept header kubectl (1.30 and later) sends for `/apis`: aggregated discovery.
const AGGREGATED_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// [`WRITES`] aggregated discovery requests, one after the other, as clients make them.
async fn discovery(client: &Client) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(WRITES);
    for _ in 0..WRITES {
        let request = http::Request::get("/apis")
            .header(http::header::ACCEPT, AGGREGATED_DISCOVERY)
            .body(kube::client::Body::empty())?;
        let t = Instant::now();
        let response = client.send(request).await?;
        anyhow::ensure!(response.status().is_success(), "GET /apis answered {}", response.status());
        response.into_body().collect_bytes().await?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

/// Waits until none of the `n` namespaces `<prefix>-<i>` is left; returns how long since the
/// call (the deletions were all requested just before). It follows a watch of namespaces' metadata
/// (one list, then events) rather than listing them again and again: the wait is inside
/// deletion's CPU window, and a list of 10,000 namespaces every quarter second would cost
/// kube-apiserver more than the deletions it waits for.
async fn until_gone(client: &Client, prefix: &str, n: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let events =
        watcher(Api::<PartialObjectMeta<Namespace>>::all(client.clone()), watcher::Config::default());
    let mut events = std::pin::pin!(events.default_backoff());
    // The round's namespaces left: as of the last (re)list, then as its events say.
    let (mut left, mut listing, mut listed) = (BTreeSet::new(), BTreeSet::new(), false);
    loop {
        let wait = Duration::from_secs(1800).saturating_sub(started.elapsed());
        let event = tokio::time::timeout(wait, events.try_next())
            .await
            .map_err(|_| anyhow::anyhow!("{} of {n} namespaces not gone after 30 minutes", left.len()))?;
        let name = |ns: &PartialObjectMeta<Namespace>| ns.name_any();
        match event?.ok_or_else(|| anyhow::anyhow!("the watch of namespaces ended"))? {
            watcher::Event::Init => listing.clear(),
            watcher::Event::InitApply(ns) if in_round(&name(&ns), prefix) => _ = listing.insert(name(&ns)),
            watcher::Event::InitApply(_) => {}
            watcher::Event::InitDone => (left, listed) = (std::mem::take(&mut listing), true),
            watcher::Event::Apply(ns) if in_round(&name(&ns), prefix) => _ = left.insert(name(&ns)),
            watcher::Event::Apply(_) => {}
            watcher::Event::Delete(ns) => _ = left.remove(&name(&ns)),
        }
        if listed && left.is_empty() {
            return Ok(started.elapsed());
        }
    }
}

/// Whether namespace `name` is one of the round `prefix`'s plain namespaces.
fn in_round(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|i| i.bytes().all(|b| b.is_ascii_digit()))
}

/// Deletes what the round wrote into lone namespaces and the forest, so that rounds start alike.
async fn clean_up(client: &Client, prefix: &str, lone: &[String], inside: &[String]) -> anyhow::Result<()> {
    for ns in lone.iter().chain(inside) {
        delete_ours(Api::<Pod>::namespaced(client.clone(), ns), prefix).await?;
        delete_ours(Api::<RoleBinding>::namespaced(client.clone(), ns), prefix).await?;
        delete_ours(Api::<Secret>::namespaced(client.clone(), ns), prefix).await?;
        delete_ours(Api::<ConfigMap>::namespaced(client.clone(), ns), prefix).await?;
    }
    Ok(())
}

/// Deletes the objects of `api` whose names start with `prefix`.
async fn delete_ours<K>(api: Api<K>, prefix: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let listed = api.list_metadata(&ListParams::default()).await?;
    for name in listed.items.into_iter().filter_map(|o| o.metadata.name).filter(|n| n.starts_with(prefix)) {
        api.delete(&name, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// A side's figure `name` over its rounds' `values`. CPU per namespace is their mean: each round
/// measures creation's over a second or two, and one of kube-apiserver's garbage collections more
/// or less in a window moves a round's figure by more than hns's share (deletion's window is
/// minutes long, and summed alike). The collections are a cost all
/// the rounds' namespaces share; a median would count them on one side and leave them out on the
/// other. Every other figure is the median.
fn summary(name: &str, values: Vec<f64>) -> f64 {
    if [APISERVER_CPU, ETCD_CPU, DELETE_APISERVER_CPU, DELETE_CONTROLLER_MANAGER_CPU].contains(&name) {
        values.iter().sum::<f64>() / values.len() as f64
    } else {
        median(values)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The table: each figure with hns and without ([`summary`]), their ratio and its target.
fn report(with: &[Round], without: &[Round]) {
    println!();
    println!(
        "{:<54} {:>12} {:>12} {:>8}   target (with ÷ without)",
        "hns's tax", "with hns", "without", "ratio"
    );
    for row in rows() {
        let of = |rounds: &[Round]| summary(row.name, rounds.iter().map(|r| r.figures[row.name]).collect());
        let (w, wo) = (of(with), of(without));
        let ratio = w / wo;
        let verdict = match row.target {
            None => "measured".to_string(),
            Some((">=", limit)) => format!(">= {limit}: {}", if ratio >= limit { "met" } else { "MISSED" }),
            Some((_, limit)) => format!("<= {limit}: {}", if ratio <= limit { "met" } else { "MISSED" }),
        };
        println!("{:<54} {w:>12.2} {wo:>12.2} {ratio:>8.3}   {verdict}", row.name);
    }
}

/// Namespace `with`, made and settled while hns was installed, against one made now that it is
/// not, compared as etcd stores them (protobuf) and key by key; both are deleted then.
async fn bytes_added(client: &Client, with: &str) -> anyhow::Result<String> {
    // As long a name, so that only what hns adds differs.
    let without = "tax-bytes-b";
    create_plain(client, without).await?;
    settled_labels(client, without).await?;
    let (with_pb, without_pb) = (protobuf_size(client, with).await?, protobuf_size(client, without).await?);
    let api: Api<Namespace> = Api::all(client.clone());
    let (a, b) = (api.get(with).await?, api.get(without).await?);
    let mut parts = Vec::new();
    for (what, mine, theirs) in [
        (
            "label",
            a.metadata.labels.clone().unwrap_or_default(),
            b.metadata.labels.clone().unwrap_or_default(),
        ),
        (
            "annotation",
            a.metadata.annotations.clone().unwrap_or_default(),
            b.metadata.annotations.clone().unwrap_or_default(),
        ),
    ] {
        for (key, value) in mine.iter().filter(|(k, _)| !theirs.contains_key(*k) && !k.contains(without)) {
            parts.push(format!("{what} {key}={value} ({} B)", key.len() + value.len()));
        }
    }
    let managers = |ns: &Namespace| {
        ns.metadata
            .managed_fields
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|m| (m.manager.clone().unwrap_or_default(), m))
    };
    let theirs: BTreeMap<String, _> = managers(&b).collect();
    for (manager, entry) in managers(&a).filter(|(m, _)| !theirs.contains_key(m)) {
        parts.push(format!("managedFields of {manager} ({} B as JSON)", serde_json::to_vec(&entry)?.len()));
    }
    for name in [with, without] {
        delete_namespace(client, name).await?;
    }
    Ok(format!(
        "{} B with, {} B without: {} B more; {}",
        with_pb,
        without_pb,
        with_pb as i64 - without_pb as i64,
        parts.join("; ")
    ))
}

/// Waits until namespace `name`'s labels and annotations stay the same for 3 seconds (hns and
/// kube-controller-manager done with it), at most a minute.
async fn settled_labels(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let (started, mut last, mut since) = (Instant::now(), None, Instant::now());
    while started.elapsed() < Duration::from_secs(60) {
        let meta = api.get_metadata(name).await?.metadata;
        let now = Some((meta.labels, meta.annotations));
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(3) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    anyhow::bail!("namespace {name}'s metadata still changing after a minute")
}

/// The size of namespace `name` in kube-apiserver's protobuf encoding, the one etcd stores.
async fn protobuf_size(client: &Client, name: &str) -> anyhow::Result<usize> {
    let request = http::Request::get(format!("/api/v1/namespaces/{name}"))
        .header(http::header::ACCEPT, "application/vnd.kubernetes.protobuf")
        .body(kube::client::Body::empty())?;
    let response = client.send(request).await?;
    anyhow::ensure!(response.status().is_success(), "GET namespace {name} answered {}", response.status());
    Ok(response.into_body().collect_bytes().await?.len())
}

/// A FlowSchema of the benchmark's own that puts hns's ServiceAccount at the priority level it
/// has without one (`workload-low`, as the `service-accounts` FlowSchema puts it), only so that
/// kube-apiserver counts hns's requests apart (`apiserver_flowcontrol_dispatched_requests_total`).
struct FlowSchemaFor {
    name: &'static str,
}

impl FlowSchemaFor {
    async fn hns(client: &Client) -> anyhow::Result<FlowSchemaFor> {
        let name = "hns-tax-bench";
        let schema: FlowSchema = serde_json::from_value(serde_json::json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "matchingPrecedence": 1000,
                "priorityLevelConfiguration": {"name": "workload-low"},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{
                    "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "hns-apiserver", "namespace": "hns-system"}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
                }]
            }
        }))?;
        Api::<FlowSchema>::all(client.clone()).create(&PostParams::default(), &schema).await?;
        Ok(FlowSchemaFor { name })
    }

    /// The requests kube-apiserver has dispatched under this FlowSchema.
    async fn dispatched(&self, client: &Client) -> anyhow::Result<f64> {
        let metrics = kube_apiserver_metrics(client).await?;
        Ok(metric_sum(
            &metrics,
            "apiserver_flowcontrol_dispatched_requests_total",
            Some(("flow_schema", self.name)),
        ))
    }

    async fn remove(self, client: &Client) -> anyhow::Result<()> {
        Api::<FlowSchema>::all(client.clone()).delete(self.name, &DeleteParams::default()).await?;
        Ok(())
    }
}

/// hns at idle: its requests over `window` after `quiet`, and the watches open on kube-apiserver
/// at the end of it.
struct Idle {
    requests: f64,
    watches: f64,
}

async fn idle(
    client: &Client,
    flow: &FlowSchemaFor,
    quiet: Duration,
    window: Duration,
) -> anyhow::Result<Idle> {
    tokio::time::sleep(quiet).await;
    let before = flow.dispatched(client).await?;
    tokio::time::sleep(window).await;
    let requests = flow.dispatched(client).await? - before;
    Ok(Idle { requests, watches: open_watches(client).await? })
}

/// The watches open on kube-apiserver, everyone's.
async fn open_watches(client: &Client) -> anyhow::Result<f64> {
    let metrics = kube_apiserver_metrics(client).await?;
    Ok(metric_sum(&metrics, "apiserver_longrunning_requests", Some(("verb", "WATCH"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_runs_hns_unlabelled_only_with_the_flag() {
        let with = |args: &[&str]| -> Deployment {
            let spec = serde_json::json!({"selector": {}, "template": {"spec": {"containers": [{"name": "hns", "args": args}]}}});
            serde_json::from_value(serde_json::json!({"spec": spec})).unwrap()
        };
        assert!(runs_unlabelled(&with(&["--cert-dir=/x", "--label-lone-namespaces=false"])));
        assert!(runs_unlabelled(&with(&["--label-lone-namespaces", "false"])));
        assert!(!runs_unlabelled(&with(&["--label-lone-namespaces", "true"])));
        assert!(!runs_unlabelled(&with(&["--cert-dir=/x"])));
        assert!(!runs_unlabelled(&Deployment::default()));
    }

    #[test]
    fn a_round_counts_only_its_own_numbered_namespaces() {
        assert!(in_round("tax-r1-0", "tax-r1"));
        assert!(!in_round("tax-r10-0", "tax-r1"));
        assert!(!in_round("tax-r1-pod-3", "tax-r1"));
    }

    #[test]
    fn medians_of_even_and_odd_counts_and_means_of_cpu() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        // CPU per namespace: the mean, a garbage collection in one round shared by all.
        assert_eq!(summary(APISERVER_CPU, vec![1.0, 1.0, 4.0]), 2.0);
        assert_eq!(summary(CREATE_RATE, vec![1.0, 1.0, 4.0]), 1.0);
    }
}
