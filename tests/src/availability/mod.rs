//! Availability (`make availability`, `hack/availability.sh`): hns installed from
//! `deploy/hns.yaml` on a cluster of real nodes, two replicas on two nodes, under a steady client
//! load through kube-apiserver ([`load`]), through the disruptions a cluster meets. While hns's
//! APIService is not Available, kube-controller-manager finishes no namespace deletion in the
//! whole cluster and every client's discovery reports the group failed, so each scenario
//! reports, for its window (from the disruption until hns has rolled out again and 30 s more,
//! two minutes at least; one with `--short`):
//!
//! - the requests that failed (no answer, 429 or 5xx), by verb and code, and their share;
//! - how long the APIService was not Available, in all and at most at a stretch;
//! - the discovery checks that did not show hns's group version as served;
//! - the namespace deletions, how long they took against the steady ones before;
//! - the watches that ended without a bookmark (cut) and the resumes refused (410).
//!
//! Targets (issue 36): planned disruptions (a rollout restart, an image upgrade, a drain) fail
//! nothing, leave the APIService Available and discovery whole; a replica's process killed fails
//! under 1% and is Available again within 10 s; a node lost, the same within the node-monitor
//! grace period plus 10 s; both replicas deleted, Available again within 30 s and every
//! namespace deletion started completes.

pub mod cluster;
pub mod load;

use std::time::{Duration, Instant};

use crate::reliability::Figure;
use cluster::{Cluster, NAMESPACE};
use load::{Load, Tally};

const SUITE: &str = "availability";

/// A disruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// (a) `kubectl rollout restart`.
    RolloutRestart,
    /// (b) the image changed to this build's, from the one before.
    ImageUpgrade,
    /// (c) `kubectl drain` of a node running a replica.
    Drain,
    /// (d) SIGKILL of the leader's process.
    KillLeader,
    /// (f) both replicas deleted at once.
    DeleteBoth,
    /// (e) the leader's node lost: its kubelet, containerd and containers stopped.
    NodeLoss,
    /// A control, last: hns scaled to nothing for 20 s. The load must see it (failed requests,
    /// the APIService not Available), or the figures above could not have shown an outage.
    Control,
}

impl Scenario {
    /// Every scenario, in the order they run (the node lost last: the cluster is one node short
    /// until the script brings it back).
    pub const ALL: [Scenario; 7] = [
        Scenario::RolloutRestart,
        Scenario::ImageUpgrade,
        Scenario::Drain,
        Scenario::KillLeader,
        Scenario::DeleteBoth,
        Scenario::NodeLoss,
        Scenario::Control,
    ];

    /// The scenario of the letter (a to f).
    pub fn from_letter(letter: &str) -> anyhow::Result<Scenario> {
        Ok(match letter {
            "a" => Scenario::RolloutRestart,
            "b" => Scenario::ImageUpgrade,
            "c" => Scenario::Drain,
            "d" => Scenario::KillLeader,
            "e" => Scenario::NodeLoss,
            "f" => Scenario::DeleteBoth,
            "control" => Scenario::Control,
            other => anyhow::bail!("unknown scenario {other:?}: a to f"),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Scenario::RolloutRestart => "(a) rollout restart",
            Scenario::ImageUpgrade => "(b) image upgrade",
            Scenario::Drain => "(c) drain of a node",
            Scenario::KillLeader => "(d) SIGKILL of the leader",
            Scenario::DeleteBoth => "(f) both replicas deleted",
            Scenario::Control => "control: hns stopped for 20 s",
            Scenario::NodeLoss => "(e) the leader's node lost",
        }
    }

    /// Whether its target is a share of the window's requests ((d) and (e): under 1% failed).
    /// Such a scenario keeps the full window in short runs too: what fails is the requests of
    /// the moment a replica is gone and still has the endpoint, so a shorter window would only
    /// make the same failures a larger share.
    fn judged_by_share(self) -> bool {
        matches!(self, Scenario::KillLeader | Scenario::NodeLoss)
    }

    fn planned(self) -> bool {
        matches!(self, Scenario::RolloutRestart | Scenario::ImageUpgrade | Scenario::Drain)
    }

    /// The longest stretch the APIService may be not Available.
    fn longest_unavailable(self, grace: Duration) -> Duration {
        match self {
            Scenario::KillLeader => Duration::from_secs(10),
            Scenario::NodeLoss => grace + Duration::from_secs(10),
            Scenario::DeleteBoth => Duration::from_secs(30),
            Scenario::Control => Duration::MAX,
            _ => Duration::ZERO,
        }
    }
}

/// How a run goes.
pub struct Options {
    /// The scenarios to run.
    pub scenarios: Vec<Scenario>,
    /// The image this build made, and the one the upgrade starts from.
    pub image: String,
    pub previous_image: String,
    /// kube-controller-manager's `--node-monitor-grace-period`.
    pub grace: Duration,
    /// How long a scenario's window lasts at least, from its disruption, and the steady
    /// window before the first (two minutes and one for `make availability`, less in CI; see
    /// [`FULL_WINDOW`]).
    pub window: Duration,
    pub steady: Duration,
}

/// How long a disruption may take to roll out again before the scenario is judged anyway.
const RECOVERY: Duration = Duration::from_secs(300);
/// A scenario's window in `make availability`, and in short runs for the scenarios judged by
/// their share of failed requests.
pub const FULL_WINDOW: Duration = Duration::from_secs(120);
/// How long after hns rolled out again the window goes on.
const TAIL: Duration = Duration::from_secs(30);

/// Runs `options.scenarios` under load; the figures.
pub async fn run(cluster: &Cluster, options: &Options) -> Vec<Figure> {
    let mut figures = Vec::new();
    if !cluster.until_settled(RECOVERY).await {
        return vec![Figure::target(SUITE, "hns rolled out before the load", "no", "yes", false)];
    }
    let tag = format!("av{}", std::process::id());
    let load = Load::start(cluster.client.clone(), &tag).await;
    // A steady window first: what a namespace deletion takes when nothing happens.
    tokio::time::sleep(options.steady).await;
    let steady = load.take();
    let first = report("steady", &steady, None, Duration::ZERO, true);
    println!("{}", crate::reliability::table(&first));
    figures.extend(first);
    let baseline = median(&steady.deletions);
    for scenario in &options.scenarios {
        let these = run_one(cluster, &load, *scenario, options, baseline).await;
        // As each scenario ends: a run cut short still shows what it measured.
        println!("{}", crate::reliability::table(&these));
        figures.extend(these);
    }
    load.stop();
    figures
}

async fn run_one(
    cluster: &Cluster,
    load: &Load,
    scenario: Scenario,
    options: &Options,
    baseline: Duration,
) -> Vec<Figure> {
    let name = scenario.name();
    if let Err(e) = prepare(cluster, scenario, options).await {
        return vec![Figure::target(SUITE, format!("{name}: set up"), e, "done", false)];
    }
    load.take();
    let started = Instant::now();
    let acted = act(cluster, scenario, options).await;
    let away = acted.as_ref().ok().cloned().flatten();
    let (recovered, gone_from_away) = settle_after(cluster, started, away.as_deref()).await;
    let window = if scenario.judged_by_share() { options.window.max(FULL_WINDOW) } else { options.window };
    let window_end = (started.elapsed() + TAIL).max(window);
    tokio::time::sleep(window_end.saturating_sub(started.elapsed())).await;
    // Deletions started in the window must end (within two minutes more); the load goes on
    // starting new ones meanwhile.
    let closed = Instant::now();
    while load.deletions_in_flight_since(closed) > 0 && closed.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let unfinished = load.deletions_in_flight_since(closed);
    let tally = load.take();
    let mut figures = vec![match acted {
        Ok(_) => Figure::info(
            SUITE,
            format!("{name}: rolled out again after"),
            format!("{:.0} s", recovered.as_secs_f64()),
        ),
        Err(e) => Figure::target(SUITE, format!("{name}: disruption"), e, "done", false),
    }];
    if let (Scenario::NodeLoss, Some(after)) = (scenario, gone_from_away) {
        figures.push(Figure::target(
            SUITE,
            format!("{name}: its replica out of service after"),
            format!("{:.0} s", after.as_secs_f64()),
            format!("< {} s (the grace period)", options.grace.as_secs()),
            after < options.grace,
        ));
    }
    figures.extend(report(name, &tally, Some(scenario), options.grace, false));
    figures.push(Figure::info(
        SUITE,
        format!("{name}: namespace deletions, p50 / max (steady p50)"),
        format!(
            "{} done: {:.1} / {:.1} s ({:.1} s)",
            tally.deletions.len(),
            median(&tally.deletions).as_secs_f64(),
            tally.deletions.iter().max().copied().unwrap_or_default().as_secs_f64(),
            baseline.as_secs_f64()
        ),
    ));
    figures.push(Figure::zero(
        SUITE,
        format!("{name}: namespace deletions not finished 2 min after"),
        unfinished,
    ));
    if let Err(e) = spread_again(cluster, scenario).await {
        figures.push(Figure::target(
            SUITE,
            format!("{name}: nodes and replicas as before"),
            e,
            "done",
            false,
        ));
    }
    figures
}

/// The figures of one tally; judged against `scenario`'s targets (none for the steady window,
/// whose figures show what the load itself meets).
fn report(
    name: &str,
    tally: &Tally,
    scenario: Option<Scenario>,
    grace: Duration,
    steady: bool,
) -> Vec<Figure> {
    let failed = tally.failed();
    let count: usize = failed.values().sum();
    let share = count as f64 / tally.requests().max(1) as f64;
    let listed = if failed.is_empty() {
        "none".to_string()
    } else {
        failed.iter().map(|((verb, code), n)| format!("{verb} {code}×{n}")).collect::<Vec<_>>().join(", ")
    };
    let failed_value = format!("{count} of {} ({:.2}%): {listed}", tally.requests(), share * 100.0);
    let (all, longest) = tally.unavailable;
    let unavailable = format!("{:.1} s (longest {:.1} s)", all.as_secs_f64(), longest.as_secs_f64());
    let discovery = format!("{} of {}", tally.discovery.1, tally.discovery.0);
    let (clean, cut, gone) = tally.watches;
    let watches = Figure::info(
        SUITE,
        format!("{name}: watches ended with a bookmark / cut / resumes refused 410"),
        format!("{clean} / {cut} / {gone}"),
    );
    if scenario == Some(Scenario::Control) {
        return vec![
            Figure::target(
                SUITE,
                format!("{name}: failed requests"),
                failed_value,
                "> 0: the load sees an outage",
                count > 0,
            ),
            Figure::target(
                SUITE,
                format!("{name}: APIService not Available"),
                unavailable,
                "> 0 s",
                !all.is_zero(),
            ),
            Figure::info(SUITE, format!("{name}: discovery errors"), discovery),
            watches,
        ];
    }
    let scenario = scenario.filter(|s| !steady && !s.planned());
    let Some(scenario) = scenario else {
        // Steady, or a planned disruption: nothing may fail.
        return vec![
            Figure::target(SUITE, format!("{name}: failed requests"), failed_value, "0", count == 0),
            Figure::target(
                SUITE,
                format!("{name}: APIService not Available"),
                unavailable,
                "0 s",
                all.is_zero(),
            ),
            Figure::target(
                SUITE,
                format!("{name}: discovery errors"),
                discovery,
                "0",
                tally.discovery.1 == 0,
            ),
            watches,
        ];
    };
    let limit = scenario.longest_unavailable(grace);
    let mut figures = vec![
        Figure::target(
            SUITE,
            format!("{name}: APIService not Available"),
            unavailable,
            format!("longest ≤ {} s", limit.as_secs()),
            longest <= limit,
        ),
        Figure::info(SUITE, format!("{name}: discovery errors"), discovery),
        watches,
    ];
    figures.insert(
        0,
        if scenario == Scenario::DeleteBoth {
            Figure::info(SUITE, format!("{name}: failed requests"), failed_value)
        } else {
            Figure::target(SUITE, format!("{name}: failed requests"), failed_value, "< 1%", share < 0.01)
        },
    );
    figures
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// What a scenario needs before it starts: the image upgrade starts from the previous image.
async fn prepare(cluster: &Cluster, scenario: Scenario, options: &Options) -> Result<(), String> {
    if scenario == Scenario::ImageUpgrade {
        set_image(cluster, &options.previous_image)?;
    }
    if cluster.until_settled(RECOVERY).await {
        Ok(())
    } else {
        Err("hns did not roll out before the scenario".into())
    }
}

fn set_image(cluster: &Cluster, image: &str) -> Result<(), String> {
    cluster
        .kubectl(&[
            "-n",
            NAMESPACE,
            "set",
            "image",
            "deployment/hns-apiserver",
            &format!("hns-apiserver={image}"),
        ])
        .map(|_| ())
}

/// How long a disruption waits for the Lease to name a running replica.
const LEADER_WAIT: Duration = Duration::from_secs(120);

/// The disruption itself; the node it takes away, if it does.
async fn act(cluster: &Cluster, scenario: Scenario, options: &Options) -> Result<Option<String>, String> {
    match scenario {
        Scenario::RolloutRestart => cluster
            .kubectl(&["-n", NAMESPACE, "rollout", "restart", "deployment/hns-apiserver"])
            .map(|_| None),
        Scenario::ImageUpgrade => set_image(cluster, &options.image).map(|()| None),
        Scenario::Drain => {
            let leader = cluster.settled_leader(LEADER_WAIT).await.ok_or("no leader within 2 minutes")?;
            cluster.kubectl(&[
                "drain",
                &leader.node,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=180s",
            ])?;
            cluster.kubectl(&["uncordon", &leader.node]).map(|_| Some(leader.node))
        }
        Scenario::KillLeader => {
            let leader = cluster.settled_leader(LEADER_WAIT).await.ok_or("no leader within 2 minutes")?;
            let pids = cluster::processes_of(&leader.uid, "hns-apiserver");
            if pids.is_empty() {
                return Err(format!("no process of pod {} found", leader.pod));
            }
            pids.into_iter().try_for_each(cluster::kill).map(|()| None)
        }
        Scenario::DeleteBoth => cluster
            .kubectl(&[
                "-n",
                NAMESPACE,
                "delete",
                "pod",
                "-l",
                "app.kubernetes.io/name=hns-apiserver",
                "--wait=false",
            ])
            .map(|_| None),
        Scenario::Control => {
            cluster.kubectl(&["-n", NAMESPACE, "scale", "deployment/hns-apiserver", "--replicas=0"])?;
            tokio::time::sleep(Duration::from_secs(20)).await;
            cluster
                .kubectl(&["-n", NAMESPACE, "scale", "deployment/hns-apiserver", "--replicas=2"])
                .map(|_| None)
        }
        Scenario::NodeLoss => {
            let leader = cluster.settled_leader(LEADER_WAIT).await.ok_or("no leader within 2 minutes")?;
            cluster.nodes("stop", &[&leader.node]).map(|()| Some(leader.node))
        }
    }
}

/// Waits until hns has rolled out again after the disruption: how long from `started`, and, when
/// a node was taken `away`, how long until no replica there served any more (for a lost node,
/// what hns's replicas watching each other shorten). With a node away, two replicas Ready
/// elsewhere are enough (nothing moves pods back when a node returns).
async fn settle_after(
    cluster: &Cluster,
    started: Instant,
    away: Option<&str>,
) -> (Duration, Option<Duration>) {
    // A moment for the disruption to show (a restart is a new ReplicaSet, a kill a restart).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut gone_from_away = None;
    while started.elapsed() < RECOVERY {
        let replicas = cluster.replicas().await;
        let done = match away {
            Some(node) => {
                // Ready ones: a replacement the scheduler puts on a lost node before it is marked
                // NotReady never serves.
                if gone_from_away.is_none() && replicas.iter().filter(|r| r.ready).all(|r| r.node != node) {
                    gone_from_away = Some(started.elapsed());
                }
                replicas.iter().filter(|r| r.ready && r.node != node).count() >= 2
            }
            None => cluster.settled().await,
        };
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    (started.elapsed(), gone_from_away)
}

/// After a drain or a lost node (brought back, empty): the replicas spread over the nodes
/// again, by a rollout (not measured), for the next scenario.
async fn spread_again(cluster: &Cluster, scenario: Scenario) -> Result<(), String> {
    if !matches!(scenario, Scenario::NodeLoss | Scenario::Drain) {
        return Ok(());
    }
    if scenario == Scenario::NodeLoss {
        cluster.nodes("up", &[])?;
    }
    cluster.kubectl(&["-n", NAMESPACE, "rollout", "restart", "deployment/hns-apiserver"])?;
    if cluster.until_settled(RECOVERY).await {
        Ok(())
    } else {
        Err("hns did not spread over the nodes again".into())
    }
}
