//! The reliability suites behind `make reliability` (`hack/reliability.sh`): bad input, the auth
//! matrix, load, faults, outage safety and per-user views, each against the real local control plane with
//! several hns replicas. Each suite returns figures; the `hns-reliability` binary prints them as
//! one table and fails if a figure misses its target.

pub mod attacks;
pub mod auth;
pub mod bad_input;
pub mod deletion;
pub mod faults;
pub mod forgery;
pub mod h2_flood;
pub mod invariants;
pub mod load;
pub mod outage;
pub mod processes;
pub mod races;
pub mod views;

use std::fmt::Write as _;

/// One figure of a suite: what was measured, its value, and the target it must meet, if any.
#[derive(Debug, Clone)]
pub struct Figure {
    pub suite: &'static str,
    pub name: String,
    pub value: String,
    /// The target, e.g. "0"; `None` for figures that are only reported (latencies, counts tried).
    pub target: Option<String>,
    /// Whether the target is met; `None` when there is no target.
    pub met: Option<bool>,
}

impl Figure {
    /// A figure reported without a target.
    pub fn info(suite: &'static str, name: impl Into<String>, value: impl ToString) -> Figure {
        Figure { suite, name: name.into(), value: value.to_string(), target: None, met: None }
    }

    /// A count whose target is zero.
    pub fn zero(suite: &'static str, name: impl Into<String>, value: usize) -> Figure {
        Figure {
            suite,
            name: name.into(),
            value: value.to_string(),
            target: Some("0".into()),
            met: Some(value == 0),
        }
    }

    /// A figure with a target stated in words, met or not.
    pub fn target(
        suite: &'static str,
        name: impl Into<String>,
        value: impl ToString,
        target: impl Into<String>,
        met: bool,
    ) -> Figure {
        Figure {
            suite,
            name: name.into(),
            value: value.to_string(),
            target: Some(target.into()),
            met: Some(met),
        }
    }
}

/// The figures as a text table.
pub fn table(figures: &[Figure]) -> String {
    let header = ["suite", "figure", "value", "target", "result"];
    let rows: Vec<[String; 5]> = figures
        .iter()
        .map(|f| {
            let result = match f.met {
                Some(true) => "ok",
                Some(false) => "MISSED",
                None => "",
            };
            [
                f.suite.to_string(),
                f.name.clone(),
                f.value.clone(),
                f.target.clone().unwrap_or_default(),
                result.into(),
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(&header);
    line(
        &widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    for r in &rows {
        line(&r.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

/// The figure a suite that panicked leaves instead of its own.
pub const SUITE_FINISHED: &str = "suite finished";

/// Runs one suite; a suite that panics (a setup step kube-apiserver refused, say) becomes a
/// missed figure that carries the panic's message, so the run still prints every other suite's
/// figures and ends with what went wrong rather than with a backtrace.
pub async fn guarded(
    suite: &'static str,
    run: impl std::future::Future<Output = Vec<Figure>>,
) -> Vec<Figure> {
    use futures::FutureExt as _;
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(figures) => figures,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            vec![Figure::target(suite, SUITE_FINISHED, format!("panicked: {message}"), "finished", false)]
        }
    }
}

/// The run's verdict, printed after its table: each missed figure again, on the last lines a CI
/// log shows, and whether the run failed.
pub fn verdict(figures: &[Figure]) -> std::process::ExitCode {
    let missed: Vec<&Figure> = figures.iter().filter(|f| f.met == Some(false)).collect();
    if missed.is_empty() {
        return std::process::ExitCode::SUCCESS;
    }
    println!("\n{} figure(s) missed their target:", missed.len());
    for f in missed {
        println!("  {}: {}: {} (target {})", f.suite, f.name, f.value, f.target.as_deref().unwrap_or("-"));
    }
    std::process::ExitCode::FAILURE
}

/// What every suite works with: the cluster, its processes and how hard to push.
pub struct Context {
    pub env: crate::Env,
    pub client: kube::Client,
    pub processes: processes::Processes,
    pub replicas: processes::Replicas,
    pub scale: Scale,
    /// Seed of the random choices (fault timing, which replica), printed so a run can be repeated.
    pub seed: u64,
}

impl Context {
    /// The local control plane; the suites need its processes and PKI.
    pub fn local(&self) -> &crate::Local {
        self.env
            .local
            .as_ref()
            .expect("the reliability suites run against a local control plane (HNS_E2E_DIR)")
    }
}

/// How long and how hard the suites run: the full version for `make reliability`, a short one
/// for CI.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub short: bool,
}

impl Scale {
    pub fn pick<T>(self, short: T, full: T) -> T {
        if self.short {
            short
        } else {
            full
        }
    }
}

/// A small deterministic random source (xorshift), so a run can be repeated from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns_and_marks_missed_targets() {
        let t =
            table(&[Figure::zero("faults", "invariant violations", 0), Figure::zero("load", "errors", 3)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[2].ends_with("ok"), "{t}");
        assert!(lines[3].ends_with("MISSED"), "{t}");
        assert_eq!(lines[0].find("value"), lines[3].find('3'), "{t}");
    }

    #[test]
    fn rng_repeats_from_a_seed() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert_eq!(
            (0..5).map(|_| a.below(10)).collect::<Vec<_>>(),
            (0..5).map(|_| b.below(10)).collect::<Vec<_>>()
        );
    }
}
