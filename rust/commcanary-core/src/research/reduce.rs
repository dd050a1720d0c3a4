//! `reduce` (spec §7.1): ddmin over a trace's events with the ranking
//! oracle, the smallest subset (1-minimal with respect to the oracle) whose
//! model still decides every pairwise ranking of the configurations as the
//! whole trace does.
//!
//! The relations of a subset: compile it (losslessly with a timing limit of
//! `max(2, events)` unless a limit is given), replay it under every
//! configuration, and for each ranking metric (`median_us`, `p95_us`,
//! `p99_us`, `mean_us`) and each pair of configuration names in alphabetical
//! order record `tie` (within the tolerance), `left_better` or
//! `right_better`. The oracle compares them with the whole trace's (which
//! costs no oracle call); once the budget is spent it answers false and
//! marks the run exhausted. ddmin follows the spec's chunking exactly
//! (subsets, then complements when `k > 2`, granularity doubling), so the
//! reduced event count and the oracle-call count are the reference's.
//!
//! The oracle is evaluated here, natively: subset traces share the source's
//! columns and never carry its bytes (the compile's source commitment is
//! not used by the oracle). [`ddmin`] takes any oracle, which is how the
//! Python API accepts a callable.

use super::{EventOut, OutputTrace};
use crate::behavior::{Configuration, RANKING_METRICS, ranking_value, relation, runs};
use crate::compile::{CompileOptions, compile};
use crate::error::{Error, Result};
use crate::json::canon;
use crate::trace::{Events, Span, Trace, flag};

/// The largest oracle-call budget.
pub const MAX_BUDGET: u64 = 10_000;
/// The most pairwise ranking comparisons a run may plan
/// (`(budget + 1) × metrics × pairs`).
pub const MAX_RANKING_WORK: u64 = 10_000_000;

/// Reduction options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Two values within this many µs are tied (≥ 0).
    pub tie_us: f64,
    /// Oracle calls allowed (1..=[`MAX_BUDGET`]).
    pub budget: u64,
    /// The subsets' timing sample limit; `None`: lossless, `max(2, events)`.
    pub timing_sample_limit: Option<usize>,
    /// Configurations ranked (2..=32, unique names).
    pub configurations: Vec<Configuration>,
}

impl Options {
    /// Options from a caller's values (signed, as a front end receives
    /// them); the ranges are checked by [`check`] with the trace.
    ///
    /// # Errors
    /// A timing sample limit below 2.
    pub fn requested(
        tie_us: f64,
        budget: i64,
        timing_sample_limit: Option<i64>,
        configurations: Vec<Configuration>,
    ) -> Result<Self> {
        let options = Self {
            tie_us,
            budget: u64::try_from(budget).unwrap_or(0),
            timing_sample_limit: timing_sample_limit
                .map(crate::compile::checked_timing_sample_limit)
                .transpose()?,
            configurations,
        };
        options.check_values()?;
        Ok(options)
    }

    /// The budget within `1..=MAX_BUDGET` and a finite, non-negative tie.
    fn check_values(&self) -> Result<()> {
        if !(1..=MAX_BUDGET).contains(&self.budget) {
            return Err(Error::option(
                "max_oracle_calls",
                format!("must be between 1 and {MAX_BUDGET}"),
            ));
        }
        if !(self.tie_us >= 0.0 && self.tie_us.is_finite()) {
            return Err(Error::option(
                "ranking_tie_tolerance_us",
                "must be a non-negative number",
            ));
        }
        Ok(())
    }
}

/// The error an external oracle's failure becomes (the caller keeps the
/// failure itself and reports it instead).
#[must_use]
pub fn oracle_failed() -> Error {
    Error::invalid("the oracle raised")
}

/// What ddmin did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The kept events (input indices, ascending).
    pub kept: Vec<u32>,
    /// Oracle calls made.
    pub calls: u64,
    /// Whether the oracle was asked after its budget was spent.
    pub exhausted: bool,
}

/// A reduced trace and its ledger's counts.
#[derive(Debug)]
pub struct Reduction {
    /// The output trace (`workload.reduction` holds the ledger).
    pub trace: Trace,
    /// The ddmin run.
    pub outcome: Outcome,
    /// Events in the input.
    pub original: usize,
}

/// Checks options against a trace of `events` events.
///
/// # Errors
/// A budget outside `1..=MAX_BUDGET`, a negative tolerance, a timing limit
/// below 2, too much ranking work, a trace of fewer than two events.
pub fn check(events: usize, options: &Options) -> Result<()> {
    options.check_values()?;
    if let Some(l) = options.timing_sample_limit {
        crate::compile::checked_timing_sample_limit(i64::try_from(l).unwrap_or(i64::MAX))?;
    }
    let n = options.configurations.len() as u64;
    let work = (options.budget + 1) * RANKING_METRICS.len() as u64 * (n * n.saturating_sub(1) / 2);
    if work > MAX_RANKING_WORK {
        return Err(Error::option(
            "max_oracle_calls",
            format!("plans {work} pairwise ranking comparisons, more than {MAX_RANKING_WORK}"),
        ));
    }
    if events < 2 {
        return Err(Error::invalid(format!(
            "reduce needs a trace of at least two events, got {events}"
        )));
    }
    Ok(())
}

/// ddmin over `n` events in input order with `oracle` (which sees the kept
/// input indices, ascending) and a budget of `budget` calls.
///
/// # Errors
/// What `oracle` returns as an error (a failed evaluation is `Ok(false)`).
pub fn ddmin(
    n: usize,
    budget: u64,
    oracle: &mut dyn FnMut(&[u32]) -> Result<bool>,
) -> Result<Outcome> {
    let calls = std::cell::Cell::new(0u64);
    let exhausted = std::cell::Cell::new(false);
    let mut ask = |subset: &[u32]| -> Result<bool> {
        if calls.get() >= budget {
            exhausted.set(true);
            return Ok(false);
        }
        calls.set(calls.get() + 1);
        oracle(subset)
    };
    let mut current: Vec<u32> = (0..n as u32).collect();
    let mut k = 2usize;
    while current.len() >= 2 {
        let chunk = current.len() as f64 / k as f64;
        let subsets: Vec<&[u32]> = (0..k)
            .map(|i| &current[(i as f64 * chunk) as usize..((i + 1) as f64 * chunk) as usize])
            .filter(|s| !s.is_empty())
            .collect();
        let mut next: Option<(Vec<u32>, usize)> = None;
        for s in &subsets {
            if s.len() < current.len() && ask(s)? {
                next = Some((s.to_vec(), 2));
                break;
            }
        }
        if next.is_none() && k > 2 {
            for i in 0..subsets.len() {
                let complement: Vec<u32> = (subsets.iter().enumerate())
                    .filter(|&(j, _)| j != i)
                    .flat_map(|(_, s)| s.iter().copied())
                    .collect();
                if !complement.is_empty() && complement.len() < current.len() && ask(&complement)? {
                    next = Some((complement, (k - 1).max(2)));
                    break;
                }
            }
        }
        match next {
            Some((kept, granularity)) => (current, k) = (kept, granularity),
            None => {
                if k >= current.len() || exhausted.get() {
                    break;
                }
                k = current.len().min(2 * k);
            }
        }
    }
    Ok(Outcome {
        kept: current,
        calls: calls.get(),
        exhausted: exhausted.get(),
    })
}

/// The ranking relations of the events `subset` of `trace` (one code per
/// metric × pair: 0 tie, 1 left better, 2 right better).
///
/// # Errors
/// Compile or replay errors.
pub fn relations(trace: &Trace, subset: &[u32], options: &Options) -> Result<Vec<u8>> {
    let part = subset_trace(trace, subset);
    let compile_options = CompileOptions {
        timing_sample_limit: options.timing_sample_limit.unwrap_or(subset.len().max(2)),
        lossless_timing: options.timing_sample_limit.is_none(),
        ..CompileOptions::default()
    };
    let program = compile(&part, &compile_options)?.program;
    let results = runs(&program, &options.configurations)?;
    let mut order: Vec<usize> = (0..options.configurations.len()).collect();
    order.sort_by(|&a, &b| {
        options.configurations[a]
            .name
            .cmp(&options.configurations[b].name)
    });
    let mut out = Vec::new();
    for metric in RANKING_METRICS {
        for (x, &a) in order.iter().enumerate() {
            for &b in &order[x + 1..] {
                let rel = relation(
                    ranking_value(&results[a], metric),
                    ranking_value(&results[b], metric),
                    options.tie_us,
                );
                out.push(match rel {
                    "tie" => 0,
                    "left_better" => 1,
                    _ => 2,
                });
            }
        }
    }
    Ok(out)
}

/// Reduces `trace` with the native ranking oracle.
///
/// # Errors
/// Bad options, a trace the whole-trace relations cannot be computed for.
pub fn reduce(trace: &Trace, options: &Options) -> Result<Reduction> {
    let n = trace.events.len();
    check(n, options)?;
    let all: Vec<u32> = (0..n as u32).collect();
    let reference = relations(trace, &all, options)?;
    let outcome = ddmin(n, options.budget, &mut |subset| {
        Ok(relations(trace, subset, options).is_ok_and(|r| r == reference))
    })?;
    reduced_trace(trace, outcome, options)
}

/// The output trace of a ddmin `outcome`: the kept events copied, the
/// workload marked with the ledger.
///
/// # Errors
/// A kept index out of range.
pub fn reduced_trace(trace: &Trace, outcome: Outcome, options: &Options) -> Result<Reduction> {
    let n = trace.events.len();
    let mut out = OutputTrace::new();
    for &i in &outcome.kept {
        if i as usize >= n {
            return Err(Error::invalid(format!(
                "kept event {i} is not in the trace of {n} events"
            )));
        }
        out.push_raw(trace.canonical_json(i as usize));
    }
    let mut name = Vec::new();
    canon::write_str(&mut name, "ddmin_ranking");
    let note = "CommCanary research reduction: ddmin_ranking. Decision-preserving event subset; not source-verified against the original trace.";
    let ledger = ledger(n, &outcome, options);
    let trace = out.finish(
        trace,
        note,
        &[("reduction", ledger), ("reduction_method", name)],
    )?;
    Ok(Reduction {
        trace,
        outcome,
        original: n,
    })
}

fn ledger(original: usize, outcome: &Outcome, options: &Options) -> Vec<u8> {
    let mut e = EventOut::default();
    e.set_str("method", "ddmin_ranking");
    e.set_i64("original_events", original as i64);
    e.set_i64("reduced_events", outcome.kept.len() as i64);
    e.set_i64("oracle_calls", outcome.calls as i64);
    e.set_i64("oracle_call_budget", options.budget as i64);
    e.set_raw(
        "budget_exhausted",
        if outcome.exhausted {
            b"true".to_vec()
        } else {
            b"false".to_vec()
        },
    );
    e.set_f64("ranking_tie_tolerance_us", options.tie_us);
    let mut metrics = Vec::new();
    write_strings(&mut metrics, RANKING_METRICS.iter().copied());
    e.set_raw("ranking_metrics", metrics);
    let mut names = Vec::new();
    write_strings(
        &mut names,
        options.configurations.iter().map(|c| c.name.as_str()),
    );
    e.set_raw("configurations", names);
    match options.timing_sample_limit {
        Some(l) => e.set_i64("timing_sample_limit", l as i64),
        None => e.set_raw("timing_sample_limit", b"null".to_vec()),
    }
    let mut v = Vec::new();
    e.write(&mut v);
    v
}

fn write_strings<'a>(out: &mut Vec<u8>, items: impl Iterator<Item = &'a str>) {
    out.push(b'[');
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        canon::write_str(out, s);
    }
    out.push(b']');
}

/// The events `keep` of `trace` as a trace of their own (columns copied, no
/// source bytes: spans are empty).
fn subset_trace(trace: &Trace, keep: &[u32]) -> Trace {
    let ev = &trace.events;
    let mut out = Events::default();
    for &i in keep {
        let i = i as usize;
        out.arrival_at.push(out.arrivals.len() as u32);
        if ev.flags[i] & flag::HAS_ARRIVAL_MAP != 0 {
            let at = ev.arrival_at[i] as usize;
            let n = trace.signatures[ev.signature[i] as usize].rank_count();
            out.arrivals.extend_from_slice(&ev.arrivals[at..at + n]);
        }
        out.signature.push(ev.signature[i]);
        out.start_us.push(ev.start_us[i]);
        out.gap_us.push(ev.gap_us[i]);
        out.arrival_skew_us.push(ev.arrival_skew_us[i]);
        out.compute_before_us.push(ev.compute_before_us[i]);
        out.compute_overlap_us.push(ev.compute_overlap_us[i]);
        out.compute_pressure.push(ev.compute_pressure[i]);
        out.observed_exposed_us.push(ev.observed_exposed_us[i]);
        out.device_us.push(ev.device_us[i]);
        out.step.push(ev.step[i]);
        out.flags.push(ev.flags[i]);
        out.spans.push(Span {
            start: 0,
            len: 0,
            in_raw: false,
        });
    }
    Trace {
        members: Vec::new(),
        signatures: trace.signatures.clone(),
        events: out,
        derived_from: None,
        raw: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: usize, budget: u64, keep: fn(&[u32]) -> bool) -> Outcome {
        ddmin(n, budget, &mut |s| Ok(keep(s))).expect("no oracle error")
    }

    #[test]
    fn finds_the_two_events_that_matter_and_is_one_minimal() {
        let needs = |s: &[u32]| s.contains(&3) && s.contains(&11);
        let out = run(16, 1000, needs);
        assert_eq!(out.kept, [3, 11]);
        assert!(!out.exhausted);
        for i in 0..out.kept.len() {
            let mut less = out.kept.clone();
            less.remove(i);
            assert!(!needs(&less));
        }
    }

    #[test]
    fn the_budget_is_exact() {
        let out = run(40, 7, |_| false);
        assert_eq!((out.calls, out.exhausted, out.kept.len()), (7, true, 40));
        // Enough budget: the same search ends on its own, unexhausted.
        let whole = run(40, 10_000, |_| false);
        assert!(!whole.exhausted && whole.calls > 7);
    }

    #[test]
    fn a_failing_oracle_stops_the_search() {
        let err = ddmin(8, 10, &mut |_| Err(Error::invalid("boom"))).expect_err("propagates");
        assert!(err.to_string().contains("boom"));
    }
}
