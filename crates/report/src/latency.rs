//! One latency recorder and one way to name its figures.
//!
//! Every system measures how long its transactions take, in the simulator and in real mode,
//! and before this module each did it its own way: seven hdrhistograms with four different
//! ceilings, quantiles computed by hand, and four spellings of the same figure
//! (`latency_ms_p99`, `latency_p99_us`, `p99_us`, an unnamed `[mean, p50, p99]`). A reader
//! comparing two systems' JSON had to learn each.
//!
//! [`Latency`] records nanoseconds into an [`hdrhistogram::Histogram`] with one bound for
//! everyone: from 1 ns to [`LATENCY_NS_MAX`] (one hour, longer than any run) at three
//! significant digits. The bucket a value lands in depends only on the lowest value and the
//! digits, not on the ceiling, so moving a histogram from a smaller ceiling to this one
//! changes no quantile of values under the old ceiling. A value over the ceiling is counted
//! at the ceiling (saturating, never dropped).
//!
//! [`LatencySummary`] is what a run reports: `latency_us_mean`, `latency_us_p50` and
//! `latency_us_p99`, in microseconds, named with the unit before the statistic (TigerBeetle's
//! habit: `latency_ns_max`), so the figures of every system read alike and sort together. A
//! figure with several latencies (reads and writes) holds one summary per kind under a field
//! that names the kind. The mean is hdrhistogram's (each value at its bucket's middle); a
//! system that keeps an exact sum for a breakdown whose parts must add up to the mean
//! overwrites it with [`LatencySummary::with_mean_us`].

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest latency the recorder tells apart, ns (one hour); longer ones count as this.
pub const LATENCY_NS_MAX: u64 = 3_600 * 1_000_000_000;

/// Significant decimal digits every recorded latency keeps.
const SIGNIFICANT_DIGITS: u8 = 3;

/// A latency histogram in nanoseconds with the project's one bound: see the module doc.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    /// The recorded values, ns.
    histogram: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty recorder.
    pub fn new() -> Self {
        let histogram = Histogram::new_with_bounds(1, LATENCY_NS_MAX, SIGNIFICANT_DIGITS)
            .expect("1 ns .. 1 h at 3 digits is valid");
        Self { histogram }
    }

    /// Counts one latency of `ns` nanoseconds (over an hour as an hour).
    pub fn record_ns(&mut self, ns: u64) {
        self.histogram.saturating_record(ns);
    }

    /// Adds every value `other` recorded (the figures of several hosts or threads together).
    pub fn merge(&mut self, other: &Latency) {
        self.histogram.add(&other.histogram).expect("histograms of one bound always add");
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The mean, ns (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        self.histogram.mean()
    }

    /// The value at quantile `q` (0..=1), ns (0 when empty).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.histogram.value_at_quantile(q)
        }
    }

    /// The value at quantile `q`, µs (0 when empty).
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.quantile_ns(q) as f64 / 1e3
    }

    /// The distribution as `points` quantiles, µs: the values at 1/points, 2/points, …, 1 (a
    /// CDF to plot). Empty when nothing was recorded.
    pub fn cdf_us(&self, points: u32) -> Vec<f64> {
        if self.is_empty() {
            return Vec::new();
        }
        (1..=points).map(|i| self.quantile_us(f64::from(i) / f64::from(points))).collect()
    }

    /// Mean, median and 99th percentile, µs.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            latency_us_mean: self.mean_ns() / 1e3,
            latency_us_p50: self.quantile_us(0.5),
            latency_us_p99: self.quantile_us(0.99),
        }
    }
}

/// A run's latency figures, µs, named alike in every system: see the module doc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// The mean, µs.
    pub latency_us_mean: f64,
    /// The median, µs.
    pub latency_us_p50: f64,
    /// The 99th percentile, µs.
    pub latency_us_p99: f64,
}

impl LatencySummary {
    /// The same quantiles with an exact mean in place of the histogram's.
    pub fn with_mean_us(self, latency_us_mean: f64) -> Self {
        Self { latency_us_mean, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_recorder_reports_zeros() {
        let latency = Latency::new();
        assert!(latency.is_empty());
        assert_eq!(latency.summary(), LatencySummary::default());
        assert!(latency.cdf_us(4).is_empty());
    }

    #[test]
    fn quantiles_keep_three_significant_digits_and_the_summary_is_in_microseconds() {
        let mut latency = Latency::new();
        for us in 1..=100u64 {
            latency.record_ns(us * 1_000);
        }
        let s = latency.summary();
        assert_eq!(latency.count(), 100);
        assert!((s.latency_us_p50 - 50.0).abs() <= 0.05, "{s:?}");
        assert!((s.latency_us_p99 - 99.0).abs() <= 0.1, "{s:?}");
        assert!((s.latency_us_mean - 50.5).abs() <= 0.05, "{s:?}");
        assert_eq!(latency.cdf_us(2).len(), 2);
    }

    #[test]
    fn the_ceiling_does_not_move_a_quantile_below_it() {
        // What the systems had before: a ceiling of 100 s; the same values, the same figures.
        let mut old = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        let mut new = Latency::new();
        for ns in (1..5_000u64).map(|i| i * i * 7_919 % 90_000_000_000) {
            old.saturating_record(ns);
            new.record_ns(ns);
        }
        for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(old.value_at_quantile(q), new.quantile_ns(q), "q {q}");
        }
        assert_eq!(old.mean(), new.mean_ns());
    }

    #[test]
    fn overlong_latencies_are_counted_at_the_ceiling_not_dropped() {
        let mut latency = Latency::new();
        latency.record_ns(0);
        latency.record_ns(u64::MAX);
        assert_eq!(latency.count(), 2);
        assert_eq!(latency.quantile_ns(0.0), 0);
        assert!(latency.quantile_ns(1.0) >= LATENCY_NS_MAX);
    }

    #[test]
    fn merged_recorders_hold_both_sets() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        a.record_ns(1_000);
        b.record_ns(3_000);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert!((a.summary().latency_us_mean - 2.0).abs() < 0.01);
    }

    #[test]
    fn summaries_serialize_under_the_shared_names() {
        let json =
            serde_json::to_value(LatencySummary { latency_us_mean: 1.0, latency_us_p50: 2.0, latency_us_p99: 3.0 })
                .unwrap();
        assert_eq!(json, serde_json::json!({"latency_us_mean": 1.0, "latency_us_p50": 2.0, "latency_us_p99": 3.0}));
        let exact = LatencySummary::default().with_mean_us(4.5);
        assert_eq!(exact.latency_us_mean, 4.5);
    }
}
