//! `hns-availability`: the availability scenarios (tests/src/availability) against a cluster of
//! real nodes with hns installed from deploy/hns.yaml, started by `hack/availability.sh`. Prints
//! one table of figures and exits non-zero if any figure misses its target.
//!
//!   hns-availability [--short] [SCENARIO...]   a b c d e f control (default: all); --short: windows of
//!                                              one minute, not two (but for (d) and (e), judged
//!                                              by their share of failed requests), and a steady
//!                                              half-minute
//!
//! HNS_E2E_KUBECONFIG: the cluster; HNS_NODES_DIR: its directory (hack/nodes.sh); HNS_IMAGE and
//! HNS_PREVIOUS_IMAGE: the image of this build and the one the upgrade starts from;
//! HNS_NODE_MONITOR_GRACE: kube-controller-manager's --node-monitor-grace-period, in seconds.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hns_e2e::availability::cluster::Cluster;
use hns_e2e::availability::{run, Options, Scenario};
use hns_e2e::reliability::{table, verdict};

fn var(name: &str) -> anyhow::Result<String> {
    std::env::var(name).map_err(|_| anyhow::anyhow!("{name} is not set: run hack/availability.sh"))
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let short = args.iter().any(|a| a == "--short");
    let letters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let scenarios: Vec<Scenario> = if letters.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        letters.iter().map(|l| Scenario::from_letter(l)).collect::<anyhow::Result<_>>()?
    };
    let kubeconfig = PathBuf::from(var("HNS_E2E_KUBECONFIG")?);
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    // Every answer counts: kube-rs would otherwise send a request refused with 429, 503 or 504
    // again by itself, up to 15 times, and the load would never see an outage. (client-go sends
    // again only when told to, with Retry-After.)
    config.default_retry = false;
    let client = kube::Client::try_from(config)?;
    let cluster = Cluster { client, kubeconfig, dir: PathBuf::from(var("HNS_NODES_DIR")?) };
    let options = Options {
        scenarios,
        image: var("HNS_IMAGE")?,
        previous_image: var("HNS_PREVIOUS_IMAGE")?,
        grace: Duration::from_secs(var("HNS_NODE_MONITOR_GRACE")?.parse()?),
        window: if short { Duration::from_secs(60) } else { hns_e2e::availability::FULL_WINDOW },
        steady: Duration::from_secs(if short { 30 } else { 60 }),
    };
    let figures = run(&cluster, &options).await;
    println!("\n{}", table(&figures));
    Ok(verdict(&figures))
}
