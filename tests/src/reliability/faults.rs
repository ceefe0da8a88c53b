//! Faults: SIGKILL of an hns-apiserver replica (the leader or a follower) at a random moment
//! during subnamespace creation, a move, a cascading deletion, propagation or pod creations
//! racing for a hierarchical quota's last places; and restarts of
//! kube-apiserver and etcd while the same operations run. After each trial the invariants must
//! hold again (`invariants`), with nobody's help; the time that takes is the figure.

use std::time::Duration;

use futures::future::join_all;
use hns_api::{HierarchyConfiguration, Subnamespace};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::invariants::converge;
use super::processes::Role as ReplicaRole;
use super::{Context, Figure, Rng};
use crate::quotas::{count_pods, create_pod, set_quota, until_counted, Admission};
use crate::timing::quantile_ms;
use crate::{create_namespace, create_subns, role_binding, set_parent, Subject};

const SUITE: &str = "faults";
/// How long an operation keeps retrying while its target is down.
const OP_DEADLINE: Duration = Duration::from_secs(120);
/// How long the hierarchy may take to become valid again after a fault.
const CONVERGE_DEADLINE: Duration = Duration::from_secs(180);

/// The operation a fault interrupts.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Eight subnamespaces created at once.
    Create,
    /// A full namespace with four subnamespaces moved to another parent (copies move too).
    Move,
    /// A subnamespace with six descendants deleted, cascading.
    Cascade,
    /// A new RoleBinding and Role, and a changed one, propagated to 24 descendants.
    Propagate,
    /// Nine pods created at once in eight sibling subnamespaces whose parent's quota allows
    /// eight: never more than eight may exist afterwards.
    Quota,
}

const OPS: [Op; 5] = [Op::Create, Op::Move, Op::Cascade, Op::Propagate, Op::Quota];

/// Pods the parent's quota allows in a [`Op::Quota`] trial.
const QUOTA_PODS: usize = 8;

impl Op {
    /// Faults land at a random moment within this window after the operation starts.
    fn window_ms(self) -> u64 {
        match self {
            Op::Create | Op::Move | Op::Quota => 400,
            Op::Cascade => 600,
            Op::Propagate => 800,
        }
    }
}

/// What the fault kills.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Replica(ReplicaRole),
    KubeApiserver,
    Etcd,
}

struct Outcome {
    converged_in: Duration,
    violations: Vec<String>,
}

pub async fn run(ctx: &Context) -> Vec<Figure> {
    let mut rng = Rng::new(ctx.seed);
    let replica_trials = ctx.scale.pick(8, 52);
    let mut plan: Vec<(Op, Fault)> = (0..replica_trials)
        .map(|i| {
            let role =
                if (i / OPS.len()).is_multiple_of(2) { ReplicaRole::Leader } else { ReplicaRole::Follower };
            (OPS[i % OPS.len()], Fault::Replica(role))
        })
        .collect();
    let control_plane: &[(Op, Fault)] = if ctx.scale.short {
        &[(Op::Propagate, Fault::KubeApiserver), (Op::Create, Fault::Etcd)]
    } else {
        &[
            (Op::Propagate, Fault::KubeApiserver),
            (Op::Create, Fault::KubeApiserver),
            (Op::Propagate, Fault::Etcd),
            (Op::Create, Fault::Etcd),
        ]
    };
    plan.extend_from_slice(control_plane);

    let (mut replica, mut cp) = (Tally::default(), Tally::default());
    for (i, (op, fault)) in plan.into_iter().enumerate() {
        let outcome = trial(ctx, i, op, fault, &mut rng).await;
        let tally = if matches!(fault, Fault::Replica(_)) { &mut replica } else { &mut cp };
        println!(
            "faults: trial {i}: {op:?} / {fault:?}: converged in {:.1} s, {} violation(s)",
            outcome.converged_in.as_secs_f64(),
            outcome.violations.len()
        );
        for v in outcome.violations.iter().take(5) {
            println!("    {v}");
        }
        tally.add(outcome);
    }
    let mut figures = replica.figures("SIGKILL of an hns replica (leader / follower)");
    figures.extend(cp.figures("restart of kube-apiserver / etcd"));
    figures
}

#[derive(Default)]
struct Tally {
    trials: usize,
    violated: usize,
    times: Vec<Duration>,
}

impl Tally {
    fn add(&mut self, o: Outcome) {
        self.trials += 1;
        self.violated += usize::from(!o.violations.is_empty());
        self.times.push(o.converged_in);
    }

    fn figures(mut self, what: &str) -> Vec<Figure> {
        self.times.sort();
        vec![
            Figure::info(SUITE, format!("{what}: trials"), self.trials),
            Figure::zero(SUITE, format!("{what}: trials with invariant violations"), self.violated),
            Figure::info(
                SUITE,
                format!("{what}: time to converge p50 / max"),
                format!(
                    "{:.1} s / {:.1} s",
                    quantile_ms(&self.times, 0.5) / 1000.0,
                    quantile_ms(&self.times, 1.0) / 1000.0
                ),
            ),
        ]
    }
}

async fn trial(ctx: &Context, i: usize, op: Op, fault: Fault, rng: &mut Rng) -> Outcome {
    let prefix = format!("flt{}-{i}-", std::process::id());
    let client = &ctx.client;
    if let Err(e) = setup(client, op, &prefix).await {
        return Outcome { converged_in: Duration::ZERO, violations: vec![format!("setup failed: {e:#}")] };
    }
    let (_, before) = converge(client, &prefix, CONVERGE_DEADLINE).await;
    if !before.is_empty() {
        return Outcome { converged_in: Duration::ZERO, violations: before };
    }
    let victim = match fault {
        Fault::Replica(role) => match ctx.replicas.pick(role, client, &ctx.processes).await {
            Ok(name) => name,
            Err(e) => return Outcome { converged_in: Duration::ZERO, violations: vec![e.to_string()] },
        },
        Fault::KubeApiserver => "kube-apiserver".into(),
        Fault::Etcd => "etcd".into(),
    };
    let delay = Duration::from_millis(rng.below(op.window_ms()));
    let down = Duration::from_millis(rng.below(2_000));
    let work = tokio::spawn(operate(client.clone(), op, prefix.clone()));
    tokio::time::sleep(delay).await;
    let mut violations = Vec::new();
    if let Err(e) = ctx.processes.kill_and_restart(&victim, down).await {
        violations.push(format!("could not kill and restart {victim}: {e:#}"));
    }
    match work.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => violations.push(format!("the operation never succeeded: {e:#}")),
        Err(e) => violations.push(format!("the operation panicked: {e}")),
    }
    let (converged_in, left) = converge(client, &prefix, CONVERGE_DEADLINE).await;
    violations.extend(left);
    if let Op::Quota = op {
        let pods = count_pods(client, &siblings(&prefix)).await;
        if pods > QUOTA_PODS {
            violations.push(format!("{pods} pods exist under a quota of {QUOTA_PODS}"));
        }
    }
    cleanup(client, &prefix).await;
    Outcome { converged_in, violations }
}

fn role(name: &str) -> Role {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }))
    .expect("a valid Role")
}

/// The tree an operation starts from; everything is named `<prefix>…`.
async fn setup(client: &Client, op: Op, p: &str) -> anyhow::Result<()> {
    let root = create_namespace(client, &format!("{p}root"), &[]).await;
    match op {
        Op::Create => {}
        Op::Move => {
            for full in ["x", "y", "a"] {
                create_namespace(client, &format!("{p}{full}"), &[]).await;
            }
            set_parent(client, &format!("{p}x"), Some(&root)).await?;
            set_parent(client, &format!("{p}y"), Some(&root)).await?;
            set_parent(client, &format!("{p}a"), Some(&format!("{p}x"))).await?;
            for k in 1..=4 {
                create_subns(client, &format!("{p}a"), &format!("{p}a-{k}")).await?;
            }
            for (ns, name) in [("x", "rb-x"), ("y", "rb-y"), ("root", "rb-root")] {
                let api: Api<RoleBinding> = Api::namespaced(client.clone(), &format!("{p}{ns}"));
                api.create(&PostParams::default(), &role_binding(name, "view", Subject::Group(ns))).await?;
            }
        }
        Op::Cascade => {
            create_subns(client, &root, &format!("{p}c")).await?;
            for k in 1..=3 {
                create_subns(client, &format!("{p}c"), &format!("{p}c-{k}")).await?;
                create_subns(client, &format!("{p}c-{k}"), &format!("{p}c-{k}-1")).await?;
            }
            let cascade = json!({"spec": {"allowCascadingDeletion": true}});
            Api::<HierarchyConfiguration>::namespaced(client.clone(), &format!("{p}c"))
                .patch("hierarchy", &PatchParams::default(), &Patch::Merge(cascade))
                .await?;
        }
        Op::Quota => {
            for s in siblings(p) {
                create_subns(client, &root, &s).await?;
            }
            set_quota(client, &root, "budget", &[("pods", &QUOTA_PODS.to_string())]).await?;
            until_counted(client, &siblings(p)).await?;
        }
        Op::Propagate => {
            let api: Api<RoleBinding> = Api::namespaced(client.clone(), &root);
            api.create(&PostParams::default(), &role_binding("rb-old", "view", Subject::Group("before")))
                .await?;
            for k in 0..12 {
                create_subns(client, &root, &format!("{p}s{k}")).await?;
                create_subns(client, &format!("{p}s{k}"), &format!("{p}s{k}-1")).await?;
            }
        }
    }
    Ok(())
}

/// The operation itself, retried (as a user or controller would) until it is accepted: while a
/// replica or kube-apiserver is down, requests fail with 503 or a broken connection.
async fn operate(client: Client, op: Op, p: String) -> anyhow::Result<()> {
    let root = format!("{p}root");
    match op {
        Op::Quota => {
            let mut targets: Vec<(String, String)> =
                siblings(&p).into_iter().map(|s| (s, "p".to_string())).collect();
            targets.push((format!("{p}s0"), "p-extra".to_string()));
            let creates = targets.into_iter().map(|(ns, name)| {
                let client = client.clone();
                async move { create_until_decided(&client, &ns, &name).await }
            });
            join_all(creates).await.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        }
        Op::Create => {
            let creates = (0..8).map(|k| {
                let (client, root, name) = (client.clone(), root.clone(), format!("{p}s{k}"));
                async move {
                    retry(|| async { ignore_conflict(create_subns(&client, &root, &name).await.map(|_| ())) })
                        .await
                }
            });
            join_all(creates).await.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        }
        Op::Move => {
            retry(|| async {
                set_parent(&client, &format!("{p}a"), Some(&format!("{p}y"))).await.map(|_| ())
            })
            .await?;
        }
        Op::Cascade => {
            let anchors: Api<Subnamespace> = Api::namespaced(client.clone(), &root);
            retry(|| async {
                match anchors.delete(&format!("{p}c"), &DeleteParams::default()).await {
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            })
            .await?;
        }
        Op::Propagate => {
            let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &root);
            let roles: Api<Role> = Api::namespaced(client.clone(), &root);
            retry(|| async {
                ignore_conflict(
                    rbs.create(
                        &PostParams::default(),
                        &role_binding("rb-new", "view", Subject::Group("new")),
                    )
                    .await
                    .map(|_| ()),
                )
            })
            .await?;
            retry(|| async {
                ignore_conflict(roles.create(&PostParams::default(), &role("role-new")).await.map(|_| ()))
            })
            .await?;
            let subjects = json!({"subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "after"}]});
            retry(|| async {
                rbs.patch("rb-old", &PatchParams::default(), &Patch::Merge(&subjects)).await.map(|_| ())
            })
            .await?;
        }
    }
    Ok(())
}

/// The sibling subnamespaces of a [`Op::Quota`] trial.
fn siblings(p: &str) -> Vec<String> {
    (0..QUOTA_PODS).map(|k| format!("{p}s{k}")).collect()
}

/// Creates a pod, retrying while hns or kube-apiserver is down, until a quota admits or refuses
/// it (or it turns out the first attempt made it).
async fn create_until_decided(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    loop {
        match create_pod(client, ns, name, "10m").await {
            Admission::Admitted | Admission::OverQuota(_) => return Ok(()),
            Admission::Failed(e) if e.contains("already exists") => return Ok(()),
            Admission::Failed(e) if started.elapsed() > OP_DEADLINE => anyhow::bail!("pod {ns}/{name}: {e}"),
            Admission::Failed(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// A create retried after a crash may find its object made by the first attempt.
fn ignore_conflict(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => other,
    }
}

async fn retry<F, Fut>(mut attempt: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let started = std::time::Instant::now();
    loop {
        match attempt().await {
            Ok(()) => return Ok(()),
            Err(e) if started.elapsed() > OP_DEADLINE => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Deletes a trial's namespaces: cascading from every full namespace.
async fn cleanup(client: &Client, prefix: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let Ok(list) = namespaces.list(&ListParams::default()).await else { return };
    let full: Vec<String> = list
        .items
        .into_iter()
        .filter(|n| {
            let sub = n
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(hns_api::keys::SUBNAMESPACE_OF));
            !sub
        })
        .filter_map(|n| n.metadata.name)
        .filter(|n| n.starts_with(prefix))
        .collect();
    for n in &full {
        let cascade = json!({"spec": {"allowCascadingDeletion": true}});
        let _ = Api::<HierarchyConfiguration>::namespaced(client.clone(), n)
            .patch("hierarchy", &PatchParams::default(), &Patch::Merge(cascade))
            .await;
    }
    for n in &full {
        let _ = namespaces.delete(n, &DeleteParams::default()).await;
    }
}
