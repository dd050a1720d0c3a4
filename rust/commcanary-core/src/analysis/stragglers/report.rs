//! The `commcanary.stragglers.v1` document and the human lines above it.
//!
//! Invariants: lists keep the analysis's order (steps ascending, findings by
//! step then rank, ranks by cost); times are µs rounded to the nanosecond;
//! the document is canonical JSON.

use super::StepSource;
use super::bandwidth::{Row, round_gbps as gbps, row_json};
use super::detect::{
    Finding, LATE_Z, MATERIAL_Z, NOISE_FLOOR, SLOW_MATERIAL_Z, SLOW_Z, Stragglers,
};
use crate::analysis::{group_json as group, group_label, round_us as us, trace_files};
use crate::import::kineto::AlignedJob;
use crate::json::Json;

/// The format identifier.
pub const FORMAT: &str = crate::document::STRAGGLERS;

fn ms(x: f64) -> String {
    format!("{:.1} ms", x / 1000.0)
}

fn finding_json(job: &AlignedJob, f: &Finding) -> Json {
    Json::object()
        .with("rank", f.rank)
        .with("step", f.step)
        .with("kind", f.kind.as_str())
        .with("lag_us", us(f.lag_us))
        .with("behind_first_us", us(f.behind_first_us))
        .with("at_us", us(f.at_us))
        .with("estimated_cost_us", us(f.estimated_cost_us))
        .with("op", f.op)
        .with("group", group(job, f.group))
        .with("gap_before_us", finite(f.gap_before_us))
        .with("usual_gap_before_us", finite(f.usual_gap_before_us))
}

fn finite(x: f64) -> Json {
    if x.is_finite() {
        Json::from(us(x))
    } else {
        Json::Null
    }
}

fn bandwidth_json(job: &AlignedJob, r: &Row) -> Json {
    let flagged: Vec<Json> = (r.flagged.iter())
        .map(|f| {
            Json::object()
                .with("step", f.step)
                .with("rank", f.rank)
                .with("time_us", us(f.time_us))
                .with("busbw_gbps", gbps(f.busbw_gbps))
        })
        .collect();
    row_json(r)
        .with("group", group(job, r.group))
        .with(
            "algorithm",
            if r.algorithm.is_empty() {
                Json::Null
            } else {
                Json::from(r.algorithm)
            },
        )
        .with("flagged", flagged)
}

/// The document.
#[must_use]
pub fn document(job: &AlignedJob, s: &Stragglers, source: StepSource) -> Json {
    let steps: Vec<Json> = s
        .steps
        .iter()
        .map(|r| {
            Json::object()
                .with("step", r.step)
                .with("duration_us", us(r.duration_us))
                .with("last_rank", r.last_rank)
                .with("lag_us", us(r.lag_us))
                .with("straggler_ranks", r.straggler_ranks.as_slice())
        })
        .collect();
    let ranks: Vec<Json> = s
        .ranks
        .iter()
        .map(|r| {
            Json::object()
                .with("rank", r.rank)
                .with("straggler_steps", r.straggler_steps)
                .with("recurrence", recurrence(r.straggler_steps, s.steps.len()))
                .with("total_estimated_cost_us", us(r.total_estimated_cost_us))
        })
        .collect();
    let detector = Json::object()
        .with(
            "statistic",
            "per (rank, step): the largest arrival excess over the latest other member",
        )
        .with("baseline_us", us(s.baseline_us))
        .with("noise_us", us(s.noise_us))
        .with("threshold_us", us(s.threshold_us))
        .with("step_noise_us", us(s.step_noise_us))
        .with("material_z", MATERIAL_Z)
        .with("slow_material_z", SLOW_MATERIAL_Z)
        .with("late_z", LATE_Z)
        .with("slow_z", SLOW_Z)
        .with("noise_floor_of_median_step", NOISE_FLOOR);
    Json::object()
        .with("format", FORMAT)
        .with(
            "verdict",
            if s.findings.is_empty() {
                "none"
            } else {
                "stragglers"
            },
        )
        .with("step_source", source.as_str())
        .with("world", s.ranks.len())
        .with(
            "groups",
            (0..job.groups.len())
                .map(|g| group(job, g))
                .collect::<Vec<_>>(),
        )
        .with("steps", steps)
        .with(
            "findings",
            s.findings
                .iter()
                .map(|f| finding_json(job, f))
                .collect::<Vec<_>>(),
        )
        .with("ranks", ranks)
        .with("detector", detector)
        .with(
            "communication",
            s.bandwidth
                .iter()
                .map(|r| bandwidth_json(job, r))
                .collect::<Vec<_>>(),
        )
        .with("evidence", Json::object().with("files", trace_files(job)))
}

/// How often a rank straggled: `none`, `once`, `recurring` (on several
/// steps) or `persistent` (on half the steps or more: a slow host, not an
/// event).
#[must_use]
pub fn recurrence(straggler_steps: usize, steps: usize) -> &'static str {
    match straggler_steps {
        0 => "none",
        1 => "once",
        n if 2 * n >= steps.max(2) => "persistent",
        _ => "recurring",
    }
}

/// What a person reads first.
#[must_use]
pub fn lines(job: &AlignedJob, s: &Stragglers, source: StepSource) -> Vec<String> {
    let mut out = lines_for(job, s);
    let flagged: usize = s.bandwidth.iter().map(|r| r.flagged_count).sum();
    let rows = s.bandwidth.iter().filter(|r| r.flagged_count > 0).count();
    out.push(format!(
        "  communication: {} (group, op, size) classes; {} instance(s) in {} class(es) far below their class's bus bandwidth",
        s.bandwidth.len(),
        flagged,
        rows
    ));
    if source == StepSource::Recovered {
        out.push(
            "  no ProfilerStep markers: steps were recovered from the collective sequence (numbered from 0)"
                .to_owned(),
        );
    }
    out
}

fn lines_for(job: &AlignedJob, s: &Stragglers) -> Vec<String> {
    let mut out = Vec::new();
    if s.findings.is_empty() {
        let worst = s.steps.iter().map(|r| r.lag_us).fold(0.0, f64::max);
        out.push(format!(
            "no stragglers: {} steps on {} ranks; the largest arrival excess, {}, is within the job's noise (threshold {})",
            s.steps.len(),
            s.ranks.len(),
            ms(worst),
            ms(s.threshold_us)
        ));
        return out;
    }
    let blamed: Vec<_> = s.ranks.iter().filter(|r| r.straggler_steps > 0).collect();
    out.push(format!(
        "stragglers: {} of {} ranks slowed {} of {} steps, costing {} in all (threshold {} over a baseline of {})",
        blamed.len(),
        s.ranks.len(),
        s.steps.iter().filter(|r| !r.straggler_ranks.is_empty()).count(),
        s.steps.len(),
        ms(s.findings.iter().map(|f| f.estimated_cost_us).sum()),
        ms(s.threshold_us),
        ms(s.baseline_us)
    ));
    for r in blamed {
        let mine: Vec<&Finding> = s.findings.iter().filter(|f| f.rank == r.rank).collect();
        let steps: Vec<String> = mine.iter().map(|f| f.step.to_string()).collect();
        let late = mine
            .iter()
            .filter(|f| f.kind.as_str() == "late_arrival")
            .count();
        out.push(format!(
            "  rank {}: {} on {} of {} steps, {} ({}): {} late arrival(s), {} slow collective(s)",
            r.rank,
            ms(r.total_estimated_cost_us),
            r.straggler_steps,
            s.steps.len(),
            recurrence(r.straggler_steps, s.steps.len()),
            steps.join(", "),
            late,
            mine.len() - late
        ));
    }
    if let Some(w) = s
        .findings
        .iter()
        .max_by(|a, b| a.estimated_cost_us.total_cmp(&b.estimated_cost_us))
    {
        out.push(format!(
            "  worst: step {}, rank {} {} {} at {} on {} (gap before it {}{}); the step would have been {} shorter",
            w.step,
            w.rank,
            if w.kind.as_str() == "late_arrival" { "arrived" } else { "stayed" },
            ms(w.lag_us) + if w.kind.as_str() == "late_arrival" { " after the others" } else { " longer inside" },
            w.op,
            group_label(job, w.group),
            if w.gap_before_us.is_finite() { ms(w.gap_before_us) } else { "unknown".to_owned() },
            if w.usual_gap_before_us.is_finite() { format!(", usually {}", ms(w.usual_gap_before_us)) } else { String::new() },
            ms(w.estimated_cost_us)
        ));
    }
    out
}
