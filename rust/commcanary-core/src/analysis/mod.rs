//! Per-event analyses of imported evidence (a layer of its own above
//! `import` and `trace`; nothing in the core uses it).
//!
//! * [`evidence`] — a job's files classified and read, under one directory
//!   rule, for every analysis below.
//! * [`hang`] — who hung and where: Flight Recorder dumps, profiler traces,
//!   stacks and exception texts aligned per process group into partial
//!   collectives, mismatches, a wait-for graph and its root.
//! * [`stragglers`] — who is slow and what it costs: arrival lags per
//!   collective instance, late arrivals and slow collectives against the
//!   job's own noise, each costed by a what-if replay of its step.
//! * [`steps`] — iteration boundaries recovered from the collective
//!   sequence alone, and their agreement with `ProfilerStep` markers.

pub mod comm_perf;
pub mod evidence;
pub mod hang;
pub mod steps;
pub mod stragglers;

use crate::import::kineto::AlignedJob;
use crate::json::Json;

/// µs rounded to the nanosecond, for documents (non-finite values become 0;
/// −0.0 becomes 0).
#[must_use]
pub(crate) fn round_us(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1000.0).round() / 1000.0 + 0.0
    } else {
        0.0
    }
}

/// A job group as documents describe it: `{name, desc, ranks}`.
#[must_use]
pub(crate) fn group_json(job: &AlignedJob, g: usize) -> Json {
    match job.groups.get(g) {
        Some(decl) => Json::object()
            .with("name", decl.name.as_str())
            .with("desc", decl.desc.as_str())
            .with("ranks", decl.ranks.as_slice()),
        None => Json::Null,
    }
}

/// A job group as a line names it: its description (`default_pg`), else
/// `pg <name>`; `an unmatched call` for no group.
#[must_use]
pub(crate) fn group_label(job: &AlignedJob, g: usize) -> String {
    match job.groups.get(g) {
        Some(d) if !d.desc.is_empty() => d.desc.clone(),
        Some(d) => format!("pg {}", d.name),
        None => "an unmatched call".to_owned(),
    }
}

/// The traces a document was made from: `{file, kind, rank, calls}` each.
#[must_use]
pub(crate) fn trace_files(job: &AlignedJob) -> Vec<Json> {
    (job.labels.iter().zip(&job.profiles))
        .map(|(label, p)| {
            Json::object()
                .with("file", label.as_str())
                .with("kind", job.source)
                .with("rank", p.rank)
                .with("calls", p.calls.len())
        })
        .collect()
}
