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
