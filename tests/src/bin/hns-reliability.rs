//! `hns-reliability`: the reliability suites against a local control plane with several hns
//! replicas (started by `make reliability`, i.e. `hack/reliability.sh`). Prints one table of
//! figures and exits non-zero if any figure misses its target.
//!
//!   hns-reliability [--short] [SUITE...]   suites: bad-input auth races faults outage views deletion load
//!                                          (default: all)
//!
//! HNS_RELIABILITY_SEED repeats a run's random choices; HNS_SCHEMATHESIS names the schemathesis
//! executable.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use hns_e2e::reliability::processes::{Processes, Replicas};
use hns_e2e::reliability::{
    auth, bad_input, deletion, faults, guarded, load, outage, races, table, verdict, views, Context, Scale,
    SUITE_FINISHED,
};
use hns_e2e::Env;

// Load runs last: the thousands of namespaces it deletes keep kube-controller-manager busy for
// minutes afterwards, which would slow the suites after it.
const SUITES: [&str; 8] = ["bad-input", "auth", "races", "faults", "outage", "views", "deletion", "load"];

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let short = args.iter().any(|a| a == "--short");
    let mut suites: Vec<&str> = args.iter().filter(|a| !a.starts_with("--")).map(String::as_str).collect();
    if let Some(unknown) = suites.iter().find(|s| !SUITES.contains(s)) {
        anyhow::bail!("unknown suite {unknown:?}; known: {}", SUITES.join(", "));
    }
    if suites.is_empty() {
        suites = SUITES.to_vec();
    }
    let env = Env::get();
    let local =
        env.local.as_ref().ok_or_else(|| anyhow::anyhow!("HNS_E2E_DIR is not set: run make reliability"))?;
    let seed = match std::env::var("HNS_RELIABILITY_SEED") {
        Ok(s) => s.parse()?,
        Err(_) => SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64,
    };
    println!("seed {seed} (HNS_RELIABILITY_SEED={seed} repeats this run's choices)");
    let ctx = Context {
        client: env.admin().await,
        processes: Processes::new(&local.dir),
        replicas: Replicas::new(local.replica_names.clone()),
        scale: Scale { short },
        seed,
        env,
    };

    let mut figures: Vec<hns_e2e::reliability::Figure> = Vec::new();
    for suite in suites {
        // A suite that panicked may have left the cluster as it was mid-way (the outage suite
        // stops every replica): the suites after it would only report its consequences.
        if let Some(panicked) = figures.iter().find(|f| f.name == SUITE_FINISHED && f.met == Some(false)) {
            println!("== {suite}: not run, {} panicked", panicked.suite);
            continue;
        }
        println!("== {suite}");
        let name: &'static str = SUITES.iter().copied().find(|s| *s == suite).expect("checked above");
        figures.extend(match suite {
            "bad-input" => guarded(name, bad_input::run(&ctx)).await,
            "auth" => guarded(name, auth::run(&ctx)).await,
            "load" => guarded(name, load::run(&ctx)).await,
            "faults" => guarded(name, faults::run(&ctx)).await,
            "races" => guarded(name, races::run(&ctx)).await,
            "deletion" => guarded(name, deletion::run(&ctx)).await,
            "views" => guarded(name, views::run(&ctx)).await,
            _ => guarded(name, outage::run(&ctx)).await,
        });
    }
    println!("\n{}", table(&figures));
    Ok(verdict(&figures))
}
