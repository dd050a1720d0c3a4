//! Aggregation of replay samples: latency summaries, breakdowns, calibration.
//!
//! Quantiles are `linear-interpolated-sorted` (NumPy's "linear"); means are
//! `sum(values) / len(values)` with CPython 3.12's compensated `sum`.
//! Latencies and errors are `round(·, 3)`, the hidden share `round(·, 2)`.
//! The same functions summarise full-precision replay values (reports) and
//! rounded samples (verification), so both sides agree by construction.

use crate::pyfloat::{py_sum, quantile_sorted, round};

/// `{count, median, p95, p99, max, mean}` of a value list (rounded to 3).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// q50.
    pub median_us: f64,
    /// q95.
    pub p95_us: f64,
    /// q99.
    pub p99_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

/// Summarises `values` (any order); empty gives zeros.
#[must_use]
pub fn summarize(values: &[f64]) -> Summary {
    if values.is_empty() {
        return Summary::default();
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Summary {
        count: values.len() as u64,
        median_us: round(quantile_sorted(&sorted, 50.0), 3),
        p95_us: round(quantile_sorted(&sorted, 95.0), 3),
        p99_us: round(quantile_sorted(&sorted, 99.0), 3),
        max_us: round(sorted[sorted.len() - 1], 3),
        mean_us: round(mean(values), 3),
    }
}

/// `sum(values) / len(values)`; 0.0 when empty.
#[must_use]
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        py_sum(values.iter().copied()) / values.len() as f64
    }
}

/// Report-level metrics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metrics {
    /// Exposed-latency summary.
    pub exposed: Summary,
    /// Median arrival skew.
    pub arrival_skew_median_us: f64,
    /// p95 arrival skew.
    pub arrival_skew_p95_us: f64,
    /// Maximum arrival skew.
    pub arrival_skew_max_us: f64,
    /// Median of the mean rank wait.
    pub avg_rank_wait_median_us: f64,
    /// `round(100 · Σhidden / Σtotal, 2)`.
    pub communication_hidden_pct: f64,
}

/// Computes metrics from per-sample values.
#[must_use]
pub fn metrics(
    exposed: &[f64],
    skew: &[f64],
    wait: &[f64],
    hidden: &[f64],
    total: &[f64],
) -> Metrics {
    let mut skews = skew.to_vec();
    skews.sort_by(f64::total_cmp);
    let mut waits = wait.to_vec();
    waits.sort_by(f64::total_cmp);
    let total_sum = py_sum(total.iter().copied());
    let hidden_pct = if total_sum == 0.0 {
        0.0
    } else {
        round(100.0 * py_sum(hidden.iter().copied()) / total_sum, 2)
    };
    Metrics {
        exposed: summarize(exposed),
        arrival_skew_median_us: round(quantile_sorted(&skews, 50.0), 3),
        arrival_skew_p95_us: round(quantile_sorted(&skews, 95.0), 3),
        arrival_skew_max_us: round(skews.last().copied().unwrap_or(0.0), 3),
        avg_rank_wait_median_us: round(quantile_sorted(&waits, 50.0), 3),
        communication_hidden_pct: hidden_pct,
    }
}

/// One breakdown row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Phase or operation name.
    pub name: Vec<u8>,
    /// Summary of the bucket's exposed latencies.
    pub summary: Summary,
}

/// Breakdown of `exposed` by the name `key(i)` of each sample, sorted by name.
#[must_use]
pub fn breakdown<'a>(exposed: &[f64], key: impl Fn(usize) -> &'a [u8]) -> Vec<Row> {
    let mut buckets: Vec<(&[u8], Vec<f64>)> = Vec::new();
    for (i, &v) in exposed.iter().enumerate() {
        let k = key(i);
        match buckets.iter_mut().find(|(name, _)| *name == k) {
            Some((_, values)) => values.push(v),
            None => buckets.push((k, vec![v])),
        }
    }
    buckets.sort_by(|a, b| a.0.cmp(b.0));
    buckets
        .into_iter()
        .map(|(name, values)| Row {
            name: name.to_vec(),
            summary: summarize(&values),
        })
        .collect()
}

/// Calibration of modelled against observed exposed latency.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Calibration {
    /// Samples compared.
    pub count: u64,
    /// mean |e|
    pub mean_absolute_error_us: f64,
    /// q50 |e|
    pub median_absolute_error_us: f64,
    /// q95 |e|
    pub p95_absolute_error_us: f64,
    /// max |e|
    pub max_absolute_error_us: f64,
    /// mean e
    pub mean_bias_us: f64,
    /// mean |e| / observed · 100 over observed > 0
    pub mean_absolute_percentage_error_pct: f64,
    /// Samples with observed > 0.
    pub percentage_count: u64,
}

/// Calibration with `e = exposed − observed`.
#[must_use]
pub fn calibration(exposed: &[f64], observed: &[f64]) -> Calibration {
    let errors: Vec<f64> = exposed.iter().zip(observed).map(|(e, o)| e - o).collect();
    let absolute: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    let mut sorted = absolute.clone();
    sorted.sort_by(f64::total_cmp);
    let percentages: Vec<f64> = absolute
        .iter()
        .zip(observed)
        .filter(|(_, o)| **o > 0.0)
        .map(|(a, o)| a / o * 100.0)
        .collect();
    Calibration {
        count: errors.len() as u64,
        mean_absolute_error_us: round(mean(&absolute), 3),
        median_absolute_error_us: round(quantile_sorted(&sorted, 50.0), 3),
        p95_absolute_error_us: round(quantile_sorted(&sorted, 95.0), 3),
        max_absolute_error_us: round(sorted.last().copied().unwrap_or(0.0), 3),
        mean_bias_us: round(mean(&errors), 3),
        mean_absolute_percentage_error_pct: round(mean(&percentages), 3),
        percentage_count: percentages.len() as u64,
    }
}
