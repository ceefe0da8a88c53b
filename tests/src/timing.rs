//! Latencies as the benchmarks and the reliability suites report them: in milliseconds, and
//! quantiles of sorted samples.

use std::time::Duration;

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The value at quantile `q` (0..=1) of sorted `durations`, in milliseconds.
pub fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    ms(sorted[((sorted.len() as f64 - 1.0) * q).round() as usize])
}

/// Prints the p50 and p99 of `measured` against those of `baseline` (each a label and sorted
/// samples), and their ratios with `target`: the benchmarks' table of a figure and its baseline.
pub fn print_against_baseline(
    title: &str,
    baseline: (&str, &[Duration]),
    measured: (&str, &[Duration]),
    target: &str,
) {
    const WIDTH: usize = 44;
    println!("{title:<WIDTH$} p50 (ms)   p99 (ms)");
    for (label, samples) in [baseline, measured] {
        let (p50, p99) = (quantile_ms(samples, 0.5), quantile_ms(samples, 0.99));
        println!("  {label:<w$} {p50:8.2}   {p99:8.2}", w = WIDTH - 2);
    }
    let ratio = |q| quantile_ms(measured.1, q) / quantile_ms(baseline.1, q);
    println!("  {:<w$} {:8.2}   {:8.2}   ({target})", "ratio", ratio(0.5), ratio(0.99), w = WIDTH - 2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_pick_from_sorted_durations() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile_ms(&d, 0.5).round(), 51.0);
        assert_eq!(quantile_ms(&d, 0.99).round(), 99.0);
        assert_eq!(quantile_ms(&[], 0.5), 0.0);
    }
}
