//! Behavioural fidelity: does a canary make the model behave like its source?
//!
//! The source's program (a lossless canary of the whole trace) and the
//! candidate canary are replayed under each configuration (by default the
//! five of [`default_configurations`]). Per configuration a row passes when
//! every check passes:
//!
//! * `count` — equal numbers of replayed events;
//! * `median_us`, `p95_us`, `p99_us`, `max_us`, `mean_us` of exposed latency —
//!   within the absolute **or** the relative tolerance;
//! * `communication_hidden_pct` — within the tolerance in points;
//! * the same five statistics of the queue-wait distribution;
//! * every per-phase and per-operation row present on both sides, each with
//!   the five statistics within tolerance;
//! * tail-event recall at q95 and q99 — of the source's samples at or above
//!   its q-quantile of exposed latency, the share that are also among the
//!   canary's same number of slowest samples (by index) must reach the
//!   threshold.
//!
//! Ranking compares, for each of `median_us`, `p95_us`, `p99_us`, `mean_us`
//! and each unordered pair of configurations, the source's relation (`tie`
//! within the tie tolerance, else `left_better` / `right_better`) with the
//! canary's: five configurations give 40 decisions.

mod config;
pub mod search;

pub use config::{
    CONFIGURATION_SETTINGS, MAX_CONFIGURATIONS, MIN_CONFIGURATIONS, default_configurations_json,
    read_configuration_file, read_configurations, read_physical_configurations,
};

use rayon::prelude::*;

use crate::canary::Program;
use crate::compile::{CompileOptions, compile};
use crate::error::{Error, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::pyfloat::{quantile_sorted, round};
use crate::report::{Aggregates, aggregate};
use crate::sim::metrics::{Metrics, Row, Summary, summarize};
use crate::sim::{Settings, replay};
use crate::trace::Trace;

/// A named replay configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Configuration {
    /// Unique, non-empty name.
    pub name: String,
    /// Replay settings.
    pub settings: Settings,
}

/// The five configurations behaviour is checked under by default: the
/// default backend and four variations of it.
#[must_use]
pub fn default_configurations() -> Vec<Configuration> {
    let d = Settings::default();
    let make = |name: &str, settings: Settings| Configuration {
        name: name.to_owned(),
        settings,
    };
    vec![
        make("baseline", d.clone()),
        make(
            "low_latency",
            Settings {
                latency_floor_us: 3.5,
                ..d.clone()
            },
        ),
        make(
            "high_bandwidth",
            Settings {
                bandwidth_gbps: 110.0,
                latency_floor_us: 10.0,
                ..d.clone()
            },
        ),
        make(
            "overlap_friendly",
            Settings {
                latency_floor_us: 9.0,
                overlap_efficiency: 0.95,
                ..d.clone()
            },
        ),
        make(
            "congested",
            Settings {
                bandwidth_gbps: 28.0,
                compute_pressure: 0.95,
                ..d
            },
        ),
    ]
}

/// Check tolerances.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Relative tolerance, percent.
    pub relative_pct: f64,
    /// Absolute tolerance, µs.
    pub absolute_us: f64,
    /// Hidden-share tolerance, points.
    pub hidden_points: f64,
    /// Minimum tail-event recall.
    pub tail_recall: f64,
    /// Ranking tie tolerance, µs.
    pub tie_us: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self {
            relative_pct: 10.0,
            absolute_us: 1.0,
            hidden_points: 5.0,
            tail_recall: 0.8,
            tie_us: 0.001,
        }
    }
}

impl Tolerances {
    /// Checks the ranges.
    ///
    /// # Errors
    /// A negative tolerance or a recall threshold outside [0, 1].
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("relative_tolerance_pct", self.relative_pct),
            ("absolute_tolerance_us", self.absolute_us),
            ("hidden_tolerance_points", self.hidden_points),
            ("ranking_tie_tolerance_us", self.tie_us),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::option(name, "must be non-negative"));
            }
        }
        if !(0.0..=1.0).contains(&self.tail_recall) {
            return Err(Error::option(
                "tail_recall_threshold",
                "must be between 0 and 1",
            ));
        }
        Ok(())
    }
}

/// The source's program: the whole trace compiled losslessly
/// (`timing_sample_limit = max(2, events)`), the reference every canary of
/// the trace is measured against.
///
/// # Errors
/// Traces the compiler refuses.
pub fn reference_program(trace: &Trace) -> Result<Program> {
    let options = CompileOptions {
        timing_sample_limit: trace.events.len().max(2),
        lossless_timing: true,
        allow_empty: true,
        ..CompileOptions::default()
    };
    Ok(compile(trace, &options)?.program)
}

/// What one replay contributes to the checks.
#[derive(Debug, Clone)]
pub struct Run {
    /// Metrics and breakdowns.
    pub aggregates: Aggregates,
    /// Queue-wait distribution of the (rounded) samples.
    pub queue: Summary,
    /// Exposed latency of each sample (rounded as reports store it), ordered
    /// for the tail checks.
    pub exposed: Slowest,
}

/// Sample exposed latencies sorted once per replay, so tail checks against
/// many candidates never sort again.
#[derive(Debug, Clone, Default)]
pub struct Slowest {
    /// Values, ascending (for quantiles).
    ascending: Vec<f64>,
    /// Sample indices, slowest first; equal values keep the smaller index first.
    order: Vec<u32>,
}

impl Slowest {
    /// Orders `values` (one per sample).
    #[must_use]
    pub fn new(values: &[f64]) -> Self {
        let mut order: Vec<u32> = (0..values.len() as u32).collect();
        order.sort_by(|&a, &b| {
            values[b as usize]
                .total_cmp(&values[a as usize])
                .then(a.cmp(&b))
        });
        let ascending = order.iter().rev().map(|&i| values[i as usize]).collect();
        Self { ascending, order }
    }

    /// The `q`-quantile and the indices of the samples at or above it.
    fn tail(&self, q: f64) -> (f64, &[u32]) {
        let cutoff = quantile_sorted(&self.ascending, q);
        let below = self.ascending.partition_point(|&v| v < cutoff);
        (cutoff, &self.order[..self.ascending.len() - below])
    }
}

/// Replays `program` under every configuration (in parallel).
///
/// # Errors
/// Replay errors (settings, expansion limits).
pub fn runs(program: &Program, configurations: &[Configuration]) -> Result<Vec<Run>> {
    let one = |c: &Configuration| -> Result<Run> {
        let r = replay(program, &c.settings)?;
        let aggregates = aggregate(&r);
        let exposed: Vec<f64> = r
            .total_us
            .iter()
            .zip(&r.hidden_us)
            .map(|(t, h)| {
                let total = round(*t, 3);
                round(total - total.min(round(*h, 3)), 3)
            })
            .collect();
        let queue: Vec<f64> = r.queue_wait_us.iter().map(|q| round(*q, 3)).collect();
        Ok(Run {
            aggregates,
            queue: summarize(&queue),
            exposed: Slowest::new(&exposed),
        })
    };
    // In parallel, collected in order; the first error in configuration
    // order wins, whatever finished first.
    let results: Vec<Result<Run>> = configurations.par_iter().map(one).collect();
    results.into_iter().collect()
}

/// The outcome of comparing candidate runs with source runs.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// Whether each configuration's row passed.
    pub rows_pass: Vec<bool>,
    /// Whether all 40 (or n·(n−1)/2 · 4) ranking decisions agree.
    pub ranking_pass: bool,
    /// Ranking decisions that agree.
    pub passed_pairs: u64,
    /// Ranking decisions made.
    pub total_pairs: u64,
    /// Canonical JSON of the configuration rows.
    pub rows_json: Vec<u8>,
    /// Canonical JSON of the ranking summary.
    pub ranking_json: Vec<u8>,
}

/// The metric-check rule: absolute **or** relative tolerance suffices.
fn within(source: f64, canary: f64, t: &Tolerances) -> bool {
    let delta = (canary - source).abs();
    delta <= t.absolute_us || (source != 0.0 && delta / source * 100.0 <= t.relative_pct)
}

fn relative_pct(source: f64, canary: f64) -> Option<f64> {
    (source != 0.0).then(|| round((canary - source).abs() / source * 100.0, 2))
}

/// Appends one check object; returns whether it passed.
fn metric_check(
    out: &mut Vec<u8>,
    scope: Option<(&str, &[u8])>,
    metric: &str,
    source: f64,
    canary: f64,
    pass: bool,
) -> bool {
    let mut o = ObjectWriter::new(out);
    o.f64("absolute_delta", round(canary - source, 3));
    o.f64("canary", round(canary, 3));
    o.str("metric", metric);
    if let Some((_, name)) = scope {
        canon::write_wtf8(o.key("name"), name);
    }
    match relative_pct(source, canary) {
        Some(p) => o.f64("relative_delta_pct", p),
        None => o.raw("relative_delta_pct", b"null"),
    }
    if let Some((scope, _)) = scope {
        o.str("scope", scope);
    }
    o.f64("source", round(source, 3));
    o.str("status", if pass { "pass" } else { "fail" });
    o.end();
    pass
}

fn summary_checks(
    out: &mut Vec<u8>,
    scope: Option<(&str, &[u8])>,
    s: &Summary,
    c: &Summary,
    t: &Tolerances,
    first: &mut bool,
) -> bool {
    let mut all = true;
    for (metric, a, b) in [
        ("median_us", s.median_us, c.median_us),
        ("p95_us", s.p95_us, c.p95_us),
        ("p99_us", s.p99_us, c.p99_us),
        ("max_us", s.max_us, c.max_us),
        ("mean_us", s.mean_us, c.mean_us),
    ] {
        if !*first {
            out.push(b',');
        }
        *first = false;
        all &= metric_check(out, scope, metric, a, b, within(a, b, t));
    }
    all
}

fn breakdown_checks(
    out: &mut Vec<u8>,
    scope: &str,
    source: &[Row],
    canary: &[Row],
    t: &Tolerances,
) -> bool {
    let mut names: Vec<&[u8]> = source
        .iter()
        .chain(canary)
        .map(|r| r.name.as_slice())
        .collect();
    names.sort_unstable();
    names.dedup();
    out.push(b'[');
    let mut first = true;
    let mut all = true;
    for name in names {
        let s = source.iter().find(|r| r.name == name);
        let c = canary.iter().find(|r| r.name == name);
        match (s, c) {
            (Some(s), Some(c)) => {
                all &= summary_checks(
                    out,
                    Some((scope, name)),
                    &s.summary,
                    &c.summary,
                    t,
                    &mut first,
                )
            }
            _ => {
                if !first {
                    out.push(b',');
                }
                first = false;
                all = false;
                let mut o = ObjectWriter::new(out);
                o.bool("canary", c.is_some());
                o.str("metric", "presence");
                canon::write_wtf8(o.key("name"), name);
                o.str("scope", scope);
                o.bool("source", s.is_some());
                o.str("status", "fail");
                o.end();
            }
        }
    }
    out.push(b']');
    all
}

/// Tail-event recall at quantile `q`: of the source's samples at or above its
/// `q`-quantile, the share that are also among the canary's same number of
/// slowest samples. Returns (recall, cutoff, tail size).
fn tail_recall(source: &Slowest, canary: &Slowest, q: f64) -> (f64, f64, usize) {
    if source.order.is_empty() {
        return (1.0, 0.0, 0);
    }
    let (cutoff, tail) = source.tail(q);
    if tail.is_empty() || canary.order.is_empty() {
        return (1.0, cutoff, tail.len());
    }
    let mut in_top = vec![false; canary.order.len()];
    for &i in canary.order.iter().take(tail.len()) {
        in_top[i as usize] = true;
    }
    let hits = tail
        .iter()
        .filter(|&&i| in_top.get(i as usize).copied().unwrap_or(false))
        .count();
    (hits as f64 / tail.len() as f64, cutoff, tail.len())
}

pub(crate) fn relation(a: f64, b: f64, tie: f64) -> &'static str {
    if (a - b).abs() <= tie {
        "tie"
    } else if a < b {
        "left_better"
    } else {
        "right_better"
    }
}

pub(crate) const RANKING_METRICS: [&str; 4] = ["median_us", "p95_us", "p99_us", "mean_us"];

pub(crate) fn ranking_value(run: &Run, metric: &str) -> f64 {
    let e = &run.aggregates.metrics.exposed;
    match metric {
        "median_us" => e.median_us,
        "p95_us" => e.p95_us,
        "p99_us" => e.p99_us,
        _ => e.mean_us,
    }
}

/// Compares candidate runs with source runs, configuration by configuration.
#[must_use]
pub fn evaluate(
    source: &[Run],
    canary: &[Run],
    configurations: &[Configuration],
    t: &Tolerances,
) -> Evaluation {
    let mut rows_json = vec![b'['];
    let mut rows_pass = Vec::new();
    for (k, ((s, c), config)) in source.iter().zip(canary).zip(configurations).enumerate() {
        if k > 0 {
            rows_json.push(b',');
        }
        rows_pass.push(write_row(&mut rows_json, s, c, &config.name, t));
    }
    rows_json.push(b']');
    let pairwise = pairwise_decisions(source, canary, configurations, t);
    let ranking_json = ranking_json(source, canary, configurations, t, &pairwise);
    Evaluation {
        rows_pass,
        ranking_pass: pairwise.passed == pairwise.total,
        passed_pairs: pairwise.passed,
        total_pairs: pairwise.total,
        rows_json,
        ranking_json,
    }
}

/// Evaluation stage 1: appends the row object of configuration `name`
/// (source run `s` against candidate run `c`); returns whether every check
/// in it passed.
fn write_row(out: &mut Vec<u8>, s: &Run, c: &Run, name: &str, t: &Tolerances) -> bool {
    let sm = &s.aggregates.metrics;
    let cm = &c.aggregates.metrics;
    let (checks, mut pass) = metric_checks(sm, cm, t);
    let mut queue = vec![b'['];
    let mut qfirst = true;
    pass &= summary_checks(&mut queue, None, &s.queue, &c.queue, t, &mut qfirst);
    queue.push(b']');
    let mut phase = Vec::new();
    pass &= breakdown_checks(
        &mut phase,
        "phase",
        &s.aggregates.by_phase,
        &c.aggregates.by_phase,
        t,
    );
    let mut op = Vec::new();
    pass &= breakdown_checks(
        &mut op,
        "operation",
        &s.aggregates.by_op,
        &c.aggregates.by_op,
        t,
    );
    let (recall, recall_pass) = tail_recall_checks(&s.exposed, &c.exposed, t);
    pass &= recall_pass;
    let mut o = ObjectWriter::new(out);
    o.raw("canary_metrics", &row_metrics_json(cm));
    o.raw("canary_queue_wait_metrics", &queue_metrics_json(&c.queue));
    o.raw("checks", &checks);
    o.str("name", name);
    o.raw("op_checks", &op);
    o.raw("phase_checks", &phase);
    o.raw("queue_wait_checks", &queue);
    o.raw("source_metrics", &row_metrics_json(sm));
    o.raw("source_queue_wait_metrics", &queue_metrics_json(&s.queue));
    o.str("status", if pass { "pass" } else { "fail" });
    o.raw("tail_event_recall", &recall);
    o.end();
    pass
}

/// Row stage 1: the `checks` list (event count, the five exposed-latency
/// statistics, the hidden share) and whether all of them passed.
fn metric_checks(sm: &Metrics, cm: &Metrics, t: &Tolerances) -> (Vec<u8>, bool) {
    let mut checks = vec![b'['];
    let count_pass = sm.exposed.count == cm.exposed.count;
    {
        let mut o = ObjectWriter::new(&mut checks);
        o.i64(
            "absolute_delta",
            cm.exposed.count as i64 - sm.exposed.count as i64,
        );
        o.i64("canary", cm.exposed.count as i64);
        o.str("metric", "count");
        match relative_pct(sm.exposed.count as f64, cm.exposed.count as f64) {
            Some(p) => o.f64("relative_delta_pct", p),
            None => o.raw("relative_delta_pct", b"null"),
        }
        o.i64("source", sm.exposed.count as i64);
        o.str("status", if count_pass { "pass" } else { "fail" });
        o.end();
    }
    let mut first = false;
    let mut pass = count_pass;
    pass &= summary_checks(&mut checks, None, &sm.exposed, &cm.exposed, t, &mut first);
    checks.push(b',');
    let hidden_delta = cm.communication_hidden_pct - sm.communication_hidden_pct;
    let hidden_pass = hidden_delta.abs() <= t.hidden_points;
    pass &= hidden_pass;
    {
        let mut o = ObjectWriter::new(&mut checks);
        o.f64("absolute_delta", round(hidden_delta, 2));
        o.f64("canary", cm.communication_hidden_pct);
        o.str("metric", "communication_hidden_pct");
        o.raw("relative_delta_pct", b"null");
        o.f64("source", sm.communication_hidden_pct);
        o.str("status", if hidden_pass { "pass" } else { "fail" });
        o.end();
    }
    checks.push(b']');
    (checks, pass)
}

/// Row stage 2: the `tail_event_recall` object (q95 and q99) and whether
/// both recalls reach the threshold.
fn tail_recall_checks(source: &Slowest, canary: &Slowest, t: &Tolerances) -> (Vec<u8>, bool) {
    let mut recall = Vec::new();
    let mut pass = true;
    let mut o = ObjectWriter::new(&mut recall);
    for (key, q) in [("q95", 95.0), ("q99", 99.0)] {
        let (value, cutoff, size) = tail_recall(source, canary, q);
        let ok = value >= t.tail_recall;
        pass &= ok;
        let v = o.key(key);
        let mut r = ObjectWriter::new(v);
        r.f64("cutoff_us", round(cutoff, 3));
        r.f64("quantile", q);
        r.f64("recall", round(value, 4));
        r.i64("source_tail_events", size as i64);
        r.str("status", if ok { "pass" } else { "fail" });
        r.f64("threshold", t.tail_recall);
        r.end();
    }
    o.end();
    (recall, pass)
}

/// The exposed-latency metrics a row shows for one side.
fn row_metrics_json(m: &Metrics) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.f64("communication_hidden_pct", m.communication_hidden_pct);
    o.f64("max_us", m.exposed.max_us);
    o.f64("mean_us", m.exposed.mean_us);
    o.f64("median_us", m.exposed.median_us);
    o.f64("p95_us", m.exposed.p95_us);
    o.f64("p99_us", m.exposed.p99_us);
    o.end();
    out
}

/// The queue-wait metrics a row shows for one side.
fn queue_metrics_json(q: &Summary) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.f64("max_us", q.max_us);
    o.f64("mean_us", q.mean_us);
    o.f64("median_us", q.median_us);
    o.f64("p95_us", q.p95_us);
    o.f64("p99_us", q.p99_us);
    o.end();
    out
}

/// The pairwise ranking decisions: their canonical JSON list and how many
/// agree of how many were made.
struct Pairwise {
    json: Vec<u8>,
    passed: u64,
    total: u64,
}

/// Evaluation stage 2: for each ranking metric and each pair of
/// configurations, the source's relation against the candidate's.
fn pairwise_decisions(
    source: &[Run],
    canary: &[Run],
    configurations: &[Configuration],
    t: &Tolerances,
) -> Pairwise {
    let n = configurations.len();
    let mut pairwise = vec![b'['];
    let mut passed = 0u64;
    let mut total = 0u64;
    for metric in RANKING_METRICS {
        for i in 0..n {
            for j in i + 1..n {
                let (sl, sr) = (
                    ranking_value(&source[i], metric),
                    ranking_value(&source[j], metric),
                );
                let (cl, cr) = (
                    ranking_value(&canary[i], metric),
                    ranking_value(&canary[j], metric),
                );
                let sr_rel = relation(sl, sr, t.tie_us);
                let cr_rel = relation(cl, cr, t.tie_us);
                let ok = sr_rel == cr_rel;
                total += 1;
                passed += u64::from(ok);
                if total > 1 {
                    pairwise.push(b',');
                }
                let mut o = ObjectWriter::new(&mut pairwise);
                o.f64("canary_left", cl);
                o.str("canary_relation", cr_rel);
                o.f64("canary_right", cr);
                o.str("left", &configurations[i].name);
                o.str("metric", metric);
                o.str("right", &configurations[j].name);
                o.f64("source_left", sl);
                o.str("source_relation", sr_rel);
                o.f64("source_right", sr);
                o.str("status", if ok { "pass" } else { "fail" });
                o.end();
            }
        }
    }
    pairwise.push(b']');
    Pairwise {
        json: pairwise,
        passed,
        total,
    }
}

/// Configuration names ordered by `metric` of `runs`, ties by name, as a
/// canonical JSON list.
fn ranking_order(runs: &[Run], configurations: &[Configuration], metric: &str) -> Vec<u8> {
    let mut idx: Vec<usize> = (0..configurations.len()).collect();
    idx.sort_by(|&a, &b| {
        ranking_value(&runs[a], metric)
            .total_cmp(&ranking_value(&runs[b], metric))
            .then(configurations[a].name.cmp(&configurations[b].name))
    });
    let mut out = vec![b'['];
    for (k, i) in idx.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        canon::write_str(&mut out, &configurations[*i].name);
    }
    out.push(b']');
    out
}

/// Evaluation stage 3: the ranking summary (agreement, both sides' orders
/// per metric, the pairwise decisions).
fn ranking_json(
    source: &[Run],
    canary: &[Run],
    configurations: &[Configuration],
    t: &Tolerances,
    pairwise: &Pairwise,
) -> Vec<u8> {
    let (passed, total) = (pairwise.passed, pairwise.total);
    let mut ranking_json = Vec::new();
    let mut o = ObjectWriter::new(&mut ranking_json);
    o.f64(
        "agreement",
        if total == 0 {
            1.0
        } else {
            round(passed as f64 / total as f64, 4)
        },
    );
    o.str("metric", "pairwise_latency_metrics");
    let orders = o.key("orders");
    let mut oo = ObjectWriter::new(orders);
    let mut sorted_metrics = RANKING_METRICS;
    sorted_metrics.sort_unstable();
    for metric in sorted_metrics {
        let v = oo.key(metric);
        let mut m = ObjectWriter::new(v);
        m.raw(
            "canary_order",
            &ranking_order(canary, configurations, metric),
        );
        m.raw(
            "source_order",
            &ranking_order(source, configurations, metric),
        );
        m.end();
    }
    oo.end();
    o.raw("pairwise", &pairwise.json);
    o.i64("passed_pairs", passed as i64);
    o.str("status", if passed == total { "pass" } else { "fail" });
    o.f64("tie_tolerance_us", t.tie_us);
    o.i64("total_pairs", total as i64);
    o.end();
    ranking_json
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{LoadOptions, load_bytes};

    const LONG: &[u8] = include_bytes!("../../../../examples/traces/llama70b_tp8_trace_long.json");

    fn source() -> (Trace, Vec<Run>) {
        let trace = load_bytes(LONG, &LoadOptions::default()).unwrap();
        let reference = reference_program(&trace).unwrap();
        let source = runs(&reference, &default_configurations()).unwrap();
        (trace, source)
    }

    #[test]
    fn either_tolerance_suffices() {
        let t = Tolerances::default();
        assert!(within(100.0, 109.9, &t)); // 9.9 % relative
        assert!(within(0.5, 1.4, &t)); // 0.9 µs absolute
        assert!(!within(100.0, 111.0, &t));
        assert!(within(0.0, 1.0, &t) && !within(0.0, 1.5, &t));
    }

    #[test]
    fn relations_respect_the_tie_tolerance() {
        assert_eq!(relation(1.0, 1.0005, 0.001), "tie");
        assert_eq!(relation(1.0, 2.0, 0.001), "left_better");
        assert_eq!(relation(2.0, 1.0, 0.001), "right_better");
    }

    #[test]
    fn tail_recall_counts_shared_slowest_indices() {
        let source = Slowest::new(&[1.0, 9.0, 2.0, 8.0, 3.0]);
        assert_eq!(tail_recall(&source, &source, 95.0).0, 1.0);
        // The canary's slowest sample is a different event.
        let canary = Slowest::new(&[9.5, 1.0, 2.0, 8.0, 3.0]);
        let (recall, _, size) = tail_recall(&source, &canary, 95.0);
        assert_eq!((recall, size), (0.0, 1));
        assert_eq!(tail_recall(&Slowest::new(&[]), &canary, 99.0).0, 1.0);
        // At q50 the tail is every sample at or above the median, ties included.
        let flat = Slowest::new(&[5.0, 1.0, 5.0, 5.0]);
        let (cutoff, tail) = flat.tail(50.0);
        assert_eq!((cutoff, tail), (5.0, &[0u32, 2, 3][..]));
    }

    #[test]
    fn the_reference_verifies_against_itself_and_a_subset_does_not() {
        let (trace, source) = source();
        let configs = default_configurations();
        let e = evaluate(&source, &source, &configs, &Tolerances::default());
        assert!(e.rows_pass.iter().all(|&p| p) && e.ranking_pass);
        assert_eq!((e.passed_pairs, e.total_pairs), (40, 40));

        let options = CompileOptions {
            max_events: Some(10),
            ..CompileOptions::default()
        };
        let prefix = compile(&trace, &options).unwrap();
        let e = evaluate(
            &source,
            &runs(&prefix.program, &configs).unwrap(),
            &configs,
            &Tolerances::default(),
        );
        assert!(
            e.rows_pass.iter().all(|&p| !p),
            "the count check fails every row"
        );
        let rows = String::from_utf8(e.rows_json).unwrap();
        assert!(rows.contains(
            r#""metric":"count","relative_delta_pct":82.14,"source":56,"status":"fail""#
        ));
    }

    #[test]
    fn tolerances_are_validated() {
        let bad = Tolerances {
            tail_recall: 1.5,
            ..Tolerances::default()
        };
        assert!(bad.validate().is_err());
        let bad = Tolerances {
            absolute_us: f64::NAN,
            ..Tolerances::default()
        };
        assert!(bad.validate().is_err());
    }
}
