//! The `commcanary.steps.v1` document and the human lines above it.
//!
//! Invariants: steps ascending; ranks in slot (rank) order; times are µs on
//! the job clock, rounded to the nanosecond; canonical JSON.

use super::Recovery;
use crate::analysis::{group_json, group_label, round_us, trace_files};
use crate::import::kineto::AlignedJob;
use crate::json::Json;

/// The format identifier.
pub const FORMAT: &str = crate::document::STEPS;

/// One recovered step over all ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRow {
    /// Recovered step number.
    pub step: i64,
    /// First arrival of its calls, job clock, µs.
    pub start_us: f64,
    /// Last end minus first arrival, µs.
    pub duration_us: f64,
    /// Calls in it, over all ranks.
    pub calls: usize,
}

/// The steps table.
#[must_use]
pub fn rows(job: &AlignedJob, recovery: &Recovery) -> Vec<StepRow> {
    let mut out: Vec<StepRow> = (0..recovery.count())
        .map(|k| StepRow {
            step: k as i64,
            start_us: f64::INFINITY,
            duration_us: f64::NEG_INFINITY,
            calls: 0,
        })
        .collect();
    for ((p, r), shift) in job.profiles.iter().zip(&recovery.ranks).zip(&job.shifts) {
        for (i, c) in p.calls.iter().enumerate() {
            let Some(row) = usize::try_from(r.step_of(i))
                .ok()
                .and_then(|k| out.get_mut(k))
            else {
                continue;
            };
            row.start_us = row.start_us.min(c.arrival + shift);
            // Until the end: the latest end, turned into a duration below.
            row.duration_us = row.duration_us.max(c.end + shift);
            row.calls += 1;
        }
    }
    out.retain(|r| r.calls > 0);
    for r in &mut out {
        r.duration_us -= r.start_us;
    }
    out
}

fn key_json(job: &AlignedJob, (g, op): (usize, &'static str)) -> Json {
    Json::object()
        .with("group", group_json(job, g))
        .with("op", op)
}

/// The document.
#[must_use]
pub fn document(job: &AlignedJob, recovery: &Recovery) -> Json {
    let steps: Vec<Json> = rows(job, recovery)
        .iter()
        .map(|r| {
            Json::object()
                .with("step", r.step)
                .with("start_us", round_us(r.start_us))
                .with("duration_us", round_us(r.duration_us))
                .with("calls", r.calls)
        })
        .collect();
    let ranks: Vec<Json> = (recovery.ranks.iter().enumerate())
        .map(|(slot, r)| {
            let begins = r.begins_with.map_or(Json::Null, |k| key_json(job, k));
            let calls = job
                .profiles
                .get(slot)
                .map_or(&[][..], |p| p.calls.as_slice());
            let shift = job.shifts.get(slot).copied().unwrap_or(0.0);
            let boundaries: Vec<Json> = (r.cuts.iter().enumerate())
                .filter_map(|(k, &i)| {
                    let call = calls.get(i)?;
                    Some(
                        Json::object()
                            .with("step", r.first + k as i64)
                            .with("at_us", round_us(call.arrival + shift)),
                    )
                })
                .collect();
            Json::object()
                .with("rank", r.rank)
                .with("boundaries", boundaries)
                .with("steps", r.cuts.len())
                .with(
                    "first_step",
                    if r.cuts.is_empty() {
                        Json::Null
                    } else {
                        Json::from(r.first)
                    },
                )
                .with("begins_with", begins)
                .with(
                    "once_per_step",
                    r.anchors
                        .iter()
                        .map(|&k| key_json(job, k))
                        .collect::<Vec<_>>(),
                )
        })
        .collect();
    let agreement = recovery.agreement.map_or(Json::Null, |a| {
        Json::object()
            .with("markers", a.markers)
            .with("matched", a.matched)
            .with("fraction", a.matched as f64 / a.markers as f64)
    });
    Json::object()
        .with("format", FORMAT)
        .with("method", "once-per-step collectives as a repeating block; the boundary before the loop's end-of-step work and largest idle gap")
        .with("step_count", recovery.count())
        .with("clock_origin_ns", job.epoch)
        .with("steps", steps)
        .with("ranks", ranks)
        .with("agreement_with_profiler_steps", agreement)
        .with("evidence", Json::object().with("files", trace_files(job)))
}

/// What a person reads first.
#[must_use]
pub fn lines(job: &AlignedJob, recovery: &Recovery) -> Vec<String> {
    let rows = rows(job, recovery);
    let mut durations: Vec<f64> = rows.iter().map(|r| r.duration_us).collect();
    durations.sort_by(f64::total_cmp);
    let median = durations.get(durations.len() / 2).copied().unwrap_or(0.0);
    let with = recovery.ranks.iter().filter(|r| !r.cuts.is_empty()).count();
    let mut out = vec![format!(
        "recovered {} steps from the collective sequence on {} of {} ranks (median step {:.1} ms)",
        recovery.count(),
        with,
        recovery.ranks.len(),
        median / 1000.0
    )];
    let first = (recovery.ranks.iter()).find_map(|r| r.begins_with.map(|k| (r, k)));
    if let Some((r, (g, op))) = first {
        let name = group_label(job, g);
        out.push(format!(
            "  a step begins at {} on {} (rank {}); {} collective(s) run once per step",
            op,
            name,
            r.rank,
            r.anchors.len()
        ));
    }
    out.push(match recovery.agreement {
        Some(a) => format!(
            "  agreement with ProfilerStep: {} of {} step boundaries at the same collective ({:.1}%)",
            a.matched,
            a.markers,
            100.0 * a.matched as f64 / a.markers as f64
        ),
        None => "  no ProfilerStep markers to compare with".to_owned(),
    });
    out
}
