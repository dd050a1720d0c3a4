//! The trace → canary compiler.
//!
//! Pipeline ([`compile`]):
//! 1. order events and derive gaps ([`samples::order_events`]), keep the first
//!    `max_events`, normalise each into a timing sample;
//! 2. group adjacent events with equal signatures;
//! 3. compress each group's samples with the timing ladder ([`ladder`]);
//! 4. account fidelity: per-field maxima over bounded records, the exact
//!    total-gap check, `--lossless-timing` and error budgets;
//!    or, when the trace carries iterations, a step loop's slot streams
//!    ([`loops`]);
//! 5. wrap repeated runs of identical groups as sequence motifs ([`motif`]);
//! 6. commit: source projection, execution and calibration digests,
//!    artifact provenance; then settle `canary_bytes` at its fixed point.
//!
//! Homes: options and their checks in [`options`], groups, records and
//! fidelity accounting in `program`, the bytes in `assemble`. The source
//! commitment runs beside stages 1–5 (a `rayon::join`); only stage 6 waits
//! for it.
//!
//! Same trace and options give the same canary bytes: there is no timestamp
//! and every number follows the CPython rules of [`crate::pyfloat`].

mod assemble;
pub mod bounded;
pub mod ladder;
pub mod loops;
pub mod motif;
pub mod options;
mod program;
pub mod record;
pub mod samples;

use crate::canary::commit::program_digests;
use crate::canary::{Block, Program};
use crate::error::{Error, ErrorKind, Result};
use crate::trace::Trace;
use samples::{build_samples, order_events};

pub use crate::canary::FIDELITY_FIELDS;
pub use options::{
    Budgets, CompileOptions, DEFAULT_TIMING_SAMPLE_LIMIT, RequestedOptions, checked_count,
    checked_sample_limit, checked_timing_sample_limit,
};

/// Producer string written into canaries.
pub const PRODUCER: &str = concat!("commcanary ", env!("CARGO_PKG_VERSION"));

/// Keys the compiler writes into the `compiler` block itself.
pub const COMPILER_KEYS: [&str; 29] = [
    "approximate_timing_records",
    "artifact_provenance_sha256",
    "byte_compression_ratio",
    "calibration_evaluation_sha256",
    "canary_bytes",
    "canary_events",
    "capture_uncertainty",
    "event_compression_ratio",
    "execution_semantic_sha256",
    "expanded_canary_events",
    "fidelity",
    "fidelity_budget",
    "producer",
    "recursive_timing_records",
    "sequence_motif_count",
    "source_bytes",
    "source_coverage_reason",
    "source_coverage_status",
    "source_events",
    "source_trace_sha256",
    "stored_approximate_timing_records",
    "stored_recursive_timing_records",
    "tail_signal",
    "timing_group_count",
    "timing_mode",
    "timing_sample_limit",
    "timing_sample_limit_mode",
    "timing_sample_limits_by_group",
    "trace_events",
];

/// Fidelity summary: per-field maxima over bounded records and gap totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fidelity {
    /// Any bounded record present.
    pub bounded: bool,
    /// Bounded records over logical events.
    pub approximate_timing_records: u64,
    /// Maxima in [`FIDELITY_FIELDS`] order.
    pub maxima: [f64; 8],
    /// `round(sum of source gaps, 9)`.
    pub source_gap_total_us: f64,
    /// `round(sum of encoded gap sums, 9)`.
    pub encoded_gap_total_us: f64,
    /// `round(|source − encoded|, 9)`.
    pub total_gap_error_us: f64,
}

impl Fidelity {
    /// `bounded_approximate` or `lossless_timing`.
    #[must_use]
    pub fn mode(&self) -> &'static str {
        if self.bounded {
            "bounded_approximate"
        } else {
            "lossless_timing"
        }
    }
}

/// Everything a caller learns from a compilation besides the bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Selected source events.
    pub source_events: u64,
    /// Events in the trace.
    pub trace_events: u64,
    /// Stored top-level canary events (a motif counts once).
    pub canary_events: u64,
    /// Logical events after motif expansion.
    pub expanded_canary_events: u64,
    /// Motif wrappers.
    pub sequence_motif_count: u64,
    /// Flat signature groups.
    pub timing_group_count: u64,
    /// `round(source_events / canary_events, 3)`.
    pub event_compression_ratio: f64,
    /// `round(source_bytes / canary_bytes, 3)` (see the size fixed point).
    pub byte_compression_ratio: f64,
    /// Canonical bytes of the selected, ordered trace.
    pub source_bytes: u64,
    /// Canonical bytes of the canary.
    pub canary_bytes: u64,
    /// How gaps were derived.
    pub timing_mode: &'static str,
    /// `observed_exposed_us` or `structural-proxy`.
    pub tail_signal: &'static str,
    /// Uniform timing limit.
    pub timing_sample_limit: u64,
    /// Per-group overrides.
    pub timing_sample_limits_by_group: Vec<(u64, u64)>,
    /// Records over logical events (pattern children included).
    pub recursive_timing_records: u64,
    /// Bounded records over logical events.
    pub approximate_timing_records: u64,
    /// Records over stored leaves.
    pub stored_recursive_timing_records: u64,
    /// Bounded records over stored leaves.
    pub stored_approximate_timing_records: u64,
    /// Fidelity.
    pub fidelity: Fidelity,
    /// Budgets applied.
    pub budgets: Budgets,
    /// SHA-256 of the source projection.
    pub source_trace_sha256: String,
    /// SHA-256 of the executed program.
    pub execution_semantic_sha256: String,
    /// SHA-256 of the calibration inputs.
    pub calibration_evaluation_sha256: String,
    /// SHA-256 of the canary minus its size fields.
    pub artifact_provenance_sha256: String,
    /// `full_source` or `partial_source`.
    pub source_coverage_status: &'static str,
    /// Why the coverage is partial.
    pub source_coverage_reason: Option<String>,
    /// Events with uncertain rank-local compute fields.
    pub uncertain_events: u64,
    /// Extra `compiler` members (see [`CompileOptions::compiler_members`]).
    pub extra_members: Vec<(String, Vec<u8>)>,
}

/// A compiled canary.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The program.
    pub program: Program,
    /// The summary.
    pub summary: Summary,
    /// Canonical canary JSON.
    pub canary: Vec<u8>,
}

fn budget_error(message: String) -> Error {
    Error::new(ErrorKind::Budget, message)
}

/// Compiles `trace`.
///
/// # Errors
/// Invalid options, traces the compiler refuses (unknown skew or overlap,
/// mixed timestamps, empty selections), fidelity budget violations and a
/// lossless request that needs approximation.
pub fn compile(trace: &Trace, options: &CompileOptions) -> Result<Compiled> {
    let (ordering, count) = prepare(trace, options)?;
    // The source commitment hashes the whole input; it runs beside the
    // compiler on another core.
    let (digest, encoded) = rayon::join(
        || {
            crate::fault::check("compile-digest");
            trace.projection_digest(&ordering.order[..count])
        },
        || encode(trace, options, &ordering, count),
    );
    assemble::finish(trace, options, &ordering, count, encoded?, digest)
}

/// Like [`compile`], but consumes the trace: the input bytes behind the
/// source commitment move to the hashing task and are freed as soon as it
/// finishes, before the canary is assembled, lowering peak memory.
///
/// # Errors
/// As [`compile`].
pub fn compile_owned(mut trace: Trace, options: &CompileOptions) -> Result<Compiled> {
    let (ordering, count) = prepare(&trace, options)?;
    let source = trace.take_source();
    let order = &ordering.order[..count];
    let (digest, encoded) = rayon::join(
        move || {
            crate::fault::check("compile-digest");
            source.projection_digest(order)
        },
        || encode(&trace, options, &ordering, count),
    );
    assemble::finish(&trace, options, &ordering, count, encoded?, digest)
}

/// The source coverage a compile of `trace` with `max_events` would
/// record (`full_source`, or `partial_source` and why), without compiling:
/// what the strict gate checks before a behaviour search.
#[must_use]
pub fn source_coverage(trace: &Trace, max_events: Option<u64>) -> (&'static str, Option<String>) {
    let total = trace.events.len();
    let count = max_events.map_or(total, |m| (m.min(total as u64)) as usize);
    assemble::coverage(trace, count)
}

/// Validates options, orders events and applies `max_events`.
fn prepare(trace: &Trace, options: &CompileOptions) -> Result<(samples::Ordering, usize)> {
    options::checked_timing_sample_limit(
        i64::try_from(options.timing_sample_limit).unwrap_or(i64::MAX),
    )?;
    for (name, budget) in options.budgets.entries() {
        if let Some(b) = budget
            && !(b >= 0.0 && b.is_finite())
        {
            return Err(Error::option(name, "must be non-negative"));
        }
    }
    let mut keys: Vec<&str> = options
        .compiler_members
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    keys.sort_unstable();
    for (i, key) in keys.iter().enumerate() {
        if COMPILER_KEYS.contains(key) || (i > 0 && keys[i - 1] == *key) {
            return Err(Error::invalid(format!(
                "compiler member '{key}' is reserved or repeated"
            )));
        }
    }
    let ordering = order_events(&trace.events)?;
    let total = trace.events.len();
    let count = match options.max_events {
        Some(m) => (m.min(total as u64)) as usize,
        None => total,
    };
    if count == 0 && !options.allow_empty {
        return Err(Error::invalid("cannot compile an empty trace"));
    }
    Ok((ordering, count))
}

/// Everything the compiler learns before the source commitment is needed.
struct Encoded {
    program: Program,
    groups: program::Groups,
    recursive: u64,
    fidelity: Fidelity,
    leaves: assemble::LeafJson,
    execution_semantic_sha256: String,
    calibration_evaluation_sha256: String,
    uncertain_events: u64,
}

/// Stages 1–5: samples, groups, the program, fidelity, leaf JSON with the
/// execution commitments beside it, and sequence motifs.
fn encode(
    trace: &Trace,
    options: &CompileOptions,
    ordering: &samples::Ordering,
    count: usize,
) -> Result<Encoded> {
    let samples = build_samples(trace, ordering, count)?;
    let groups = program::signature_groups(&samples, options)?;
    let uncertain_events = samples.uncertain.iter().filter(|&&u| u).count() as u64;
    let plan = (options.step_loops && groups.overrides.is_empty())
        .then(|| {
            let step = &trace.events.step;
            loops::plan(&groups, |k| step[ordering.order[k] as usize])
        })
        .flatten();
    let (built, fidelity, step_loop) = match plan {
        Some(plan) => {
            let streams = samples.gather(&plan.order, |sig| {
                trace.signatures[sig as usize].rank_count()
            });
            let slots = program::Groups {
                limits: vec![options.timing_sample_limit; plan.slot_spans.len()],
                spans: plan.slot_spans,
                overrides: Vec::new(),
            };
            let built = program::build_program_with(trace, &streams, &slots, count, true);
            let fidelity = program::account_fidelity(&samples.gap, &built, count, options)?;
            (built, fidelity, Some(plan.step_loop))
        }
        None => {
            let built = program::build_program(trace, &samples, &groups, count);
            let fidelity = program::account_fidelity(&samples.gap, &built, count, options)?;
            (built, fidelity, None)
        }
    };
    drop(samples);
    let program::Built {
        mut program,
        recursive,
        ..
    } = built;
    // Every leaf is serialized once; identical bytes mean identical leaves,
    // which is what sequence motifs repeat. Meanwhile another core computes
    // the execution and calibration commitments: they are defined over
    // logical events, which motif wrapping does not change, so they are taken
    // over the flat leaf sequence (or the loop, which runs the same events).
    program.blocks = match step_loop {
        Some(step_loop) => {
            program.loops.push(step_loop);
            vec![Block::Loop(0)]
        }
        None => (0..program.leaves.len() as u32).map(Block::Leaf).collect(),
    };
    let (digests, leaves) = rayon::join(
        || program_digests(&program),
        || assemble::LeafJson::of(&program),
    );
    let (execution_semantic_sha256, calibration_evaluation_sha256) = digests;
    if !program.has_loop() {
        program.blocks = motif::find_motifs(&leaves.keys(), options.sequence_motifs);
    }
    Ok(Encoded {
        program,
        groups,
        recursive,
        fidelity,
        leaves,
        execution_semantic_sha256,
        calibration_evaluation_sha256,
        uncertain_events,
    })
}
