//! The trace → canary compiler.
//!
//! Pipeline ([`compile`]):
//! 1. order events and derive gaps ([`samples::order_events`]), keep the first
//!    `max_events`, normalise each into a timing sample;
//! 2. group adjacent events with equal signatures;
//! 3. compress each group's samples with the timing ladder ([`ladder`]);
//! 4. account fidelity: per-field maxima over bounded records, the exact
//!    total-gap check, `--lossless-timing` and error budgets;
//! 5. wrap repeated runs of identical groups as sequence motifs ([`motif`]);
//! 6. commit: source projection, execution and calibration digests,
//!    artifact provenance; then settle `canary_bytes` at its fixed point.
//!
//! Same trace and options give the same canary bytes: there is no timestamp
//! and every number follows the CPython rules of [`crate::pyfloat`].

pub mod bounded;
pub mod ladder;
pub mod motif;
pub mod samples;

use std::collections::HashMap;

use crate::fxhash::FxMap;

use sha2::{Digest, Sha256};

use crate::canary::commit::program_digests;
use crate::canary::write::{ProgramWriter, timing_columns};
use crate::canary::{Block, Bounded, CANARY_FORMAT, Leaf, Point, Program, Record};
use crate::error::{Error, ErrorKind, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::pyfloat::{self, py_sum, round};
use crate::trace::{Trace, hex};
use ladder::{GroupRecord, compress_group};
use samples::{Samples, build_samples, order_events};

/// Producer string written into canaries.
pub const PRODUCER: &str = concat!("commcanary ", env!("CARGO_PKG_VERSION"));

/// Error budgets (`None` = unbounded), in the order they are checked.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budgets {
    /// `max_gap_error_us`
    pub gap: Option<f64>,
    /// `max_skew_error_us`
    pub skew: Option<f64>,
    /// `max_arrival_offset_error_us`
    pub arrival_offset: Option<f64>,
    /// `max_compute_before_error_us`
    pub compute_before: Option<f64>,
    /// `max_overlap_error_us`
    pub overlap: Option<f64>,
    /// `max_pressure_error`
    pub pressure: Option<f64>,
    /// `max_observed_exposed_error_us`
    pub observed_exposed: Option<f64>,
    /// `max_prefix_gap_error_us`
    pub prefix_gap: Option<f64>,
}

/// The eight fidelity field names, in budget-check order.
pub const FIDELITY_FIELDS: [&str; 8] = [
    "max_gap_error_us",
    "max_skew_error_us",
    "max_arrival_offset_error_us",
    "max_compute_before_error_us",
    "max_overlap_error_us",
    "max_pressure_error",
    "max_observed_exposed_error_us",
    "max_prefix_gap_error_us",
];

impl Budgets {
    /// The budgets as `(field name, value)` in check order.
    #[must_use]
    pub fn entries(&self) -> [(&'static str, Option<f64>); 8] {
        [
            (FIDELITY_FIELDS[0], self.gap),
            (FIDELITY_FIELDS[1], self.skew),
            (FIDELITY_FIELDS[2], self.arrival_offset),
            (FIDELITY_FIELDS[3], self.compute_before),
            (FIDELITY_FIELDS[4], self.overlap),
            (FIDELITY_FIELDS[5], self.pressure),
            (FIDELITY_FIELDS[6], self.observed_exposed),
            (FIDELITY_FIELDS[7], self.prefix_gap),
        ]
    }
}

/// Compiler options.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileOptions {
    /// Maximum timing records per group (≥ 2).
    pub timing_sample_limit: usize,
    /// Per-group limits `(group index, limit)`, each in `2..=timing_sample_limit`.
    pub timing_sample_limits_by_group: Vec<(usize, usize)>,
    /// Keep only the first N ordered events.
    pub max_events: Option<u64>,
    /// Error budgets.
    pub budgets: Budgets,
    /// Refuse any bounded approximation.
    pub lossless_timing: bool,
    /// Wrap repeated groups as sequence motifs.
    pub sequence_motifs: bool,
    /// Accept an empty selection.
    pub allow_empty: bool,
    /// Extra members of the `compiler` block, `(key, canonical JSON value)`
    /// (verification statuses, the behaviour-search summary). Keys must not
    /// be ones the compiler writes itself. They are covered by the
    /// provenance digest and counted in `canary_bytes` like every other byte.
    pub compiler_members: Vec<(String, Vec<u8>)>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            timing_sample_limit: 128,
            timing_sample_limits_by_group: Vec::new(),
            max_events: None,
            budgets: Budgets::default(),
            lossless_timing: false,
            sequence_motifs: true,
            allow_empty: false,
            compiler_members: Vec::new(),
        }
    }
}

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
    std::thread::scope(|scope| {
        // The source commitment hashes the whole input; it runs beside the
        // compiler on a second core.
        let digest = scope.spawn(|| trace.projection_digest(&ordering.order[..count]));
        compile_ordered(trace, options, &ordering, count, || join(digest))
    })
}

/// Like [`compile`], but consumes the trace: the input bytes behind the
/// source commitment move to the hashing thread and are freed as soon as it
/// finishes, before the canary is assembled, lowering peak memory.
///
/// # Errors
/// As [`compile`].
pub fn compile_owned(mut trace: Trace, options: &CompileOptions) -> Result<Compiled> {
    let (ordering, count) = prepare(&trace, options)?;
    let source = trace.take_source();
    let order = ordering.order[..count].to_vec();
    let digest = std::thread::spawn(move || source.projection_digest(&order));
    compile_ordered(&trace, options, &ordering, count, || join(digest))
}

fn join<T>(handle: impl JoinLike<T>) -> Result<T> {
    handle
        .join_result()
        .map_err(|_| Error::invalid("internal error: a worker thread panicked"))
}

/// `join` for scoped and unscoped thread handles alike.
trait JoinLike<T> {
    fn join_result(self) -> std::thread::Result<T>;
}

impl<T> JoinLike<T> for std::thread::JoinHandle<T> {
    fn join_result(self) -> std::thread::Result<T> {
        self.join()
    }
}

impl<T> JoinLike<T> for std::thread::ScopedJoinHandle<'_, T> {
    fn join_result(self) -> std::thread::Result<T> {
        self.join()
    }
}

/// Validates options, orders events and applies `max_events`.
fn prepare(trace: &Trace, options: &CompileOptions) -> Result<(samples::Ordering, usize)> {
    let limit = options.timing_sample_limit;
    if limit < 2 {
        return Err(Error::invalid("timing_sample_limit must be at least 2"));
    }
    for (name, budget) in options.budgets.entries() {
        if let Some(b) = budget
            && !(b >= 0.0 && b.is_finite())
        {
            return Err(Error::invalid(format!("{name} must be non-negative")));
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

/// The compiler proper, given the ordering and the source commitment.
#[allow(clippy::too_many_lines)]
fn compile_ordered(
    trace: &Trace,
    options: &CompileOptions,
    ordering: &samples::Ordering,
    count: usize,
    source_digest: impl FnOnce() -> Result<(String, u64)>,
) -> Result<Compiled> {
    let limit = options.timing_sample_limit;
    let total = trace.events.len();
    let samples = build_samples(trace, ordering, count)?;

    // Groups of adjacent equal signatures.
    let mut groups: Vec<(u32, usize, usize)> = Vec::new(); // (trace signature, start, len)
    for (k, &sig) in samples.signature.iter().enumerate() {
        match groups.last_mut() {
            Some((s, _, len)) if *s == sig => *len += 1,
            _ => groups.push((sig, k, 1)),
        }
    }
    let mut group_limits = vec![limit; groups.len()];
    let mut overrides = options.timing_sample_limits_by_group.clone();
    overrides.sort_unstable();
    overrides.dedup();
    for &(g, l) in &overrides {
        if g >= groups.len() {
            return Err(Error::invalid(format!(
                "timing_sample_limits_by_group names unknown group {g} (the trace has {} groups)",
                groups.len()
            )));
        }
        if l < 2 || l > limit {
            return Err(Error::invalid(format!(
                "timing_sample_limits_by_group[{g}]={l} must be between 2 and timing_sample_limit={limit}"
            )));
        }
        group_limits[g] = l;
    }

    // Compress every group and build the program.
    let mut program = Program {
        has_observed: count > 0 && !samples.observed[0].is_nan(),
        ..Program::default()
    };
    let mut sig_map: HashMap<u32, u32> = HashMap::new();
    let mut scratch: Vec<GroupRecord> = Vec::new();
    let mut fidelity = [0.0f64; 8];
    let mut recursive = 0u64;
    let mut approximate = 0u64;
    let mut encoded_gap_sums: Vec<f64> = Vec::with_capacity(count);
    for (g, &(sig, start, len)) in groups.iter().enumerate() {
        let ranks = trace.signatures[sig as usize].rank_count();
        scratch.clear();
        compress_group(&samples, start, len, group_limits[g], ranks, &mut scratch);
        let next_sig = sig_map.len() as u32;
        let signature = *sig_map.entry(sig).or_insert_with(|| {
            program
                .signatures
                .push(trace.signatures[sig as usize].clone());
            next_sig
        });
        let first_record = program.records.len() as u32;
        for record in scratch.drain(..) {
            recursive += 1;
            let r = match record {
                GroupRecord::Plain { first, weight } => {
                    let point = push_point(&mut program, &samples, first as usize, ranks);
                    let gap = samples.gap[first as usize];
                    encoded_gap_sums.push(if weight == 1 {
                        gap
                    } else {
                        round(gap * f64::from(weight), 9)
                    });
                    Record::Plain {
                        point,
                        weight: u64::from(weight),
                    }
                }
                GroupRecord::Pattern {
                    first,
                    period,
                    repeats,
                } => {
                    recursive += u64::from(period);
                    let covered = first as usize..first as usize + (period * repeats) as usize;
                    let gap_sum_us = round(pyfloat::fsum(samples.gap[covered].iter().copied()), 9);
                    encoded_gap_sums.push(gap_sum_us);
                    let first_point = program.points.len() as u32;
                    for c in first..first + period {
                        push_point(&mut program, &samples, c as usize, ranks);
                    }
                    Record::Pattern {
                        first_point,
                        period,
                        repeats: u64::from(repeats),
                        gap_sum_us,
                    }
                }
                GroupRecord::Bounded(b) => {
                    approximate += 1;
                    let e = &b.errors;
                    for (slot, v) in fidelity.iter_mut().zip([
                        e.gap,
                        e.skew,
                        e.arrival_offset,
                        e.compute_before,
                        e.overlap,
                        e.pressure,
                        if e.observed.is_nan() { 0.0 } else { e.observed },
                        e.prefix_gap,
                    ]) {
                        *slot = slot.max(v);
                    }
                    encoded_gap_sums.push(b.gap_sum_us);
                    let point =
                        push_point(&mut program, &samples, b.representative as usize, ranks);
                    program.points[point as usize].gap_us = b.gap_us;
                    program.bounded.push(Bounded {
                        point,
                        weight: u64::from(b.weight),
                        gap_sum_us: b.gap_sum_us,
                        representative_index: u64::from(b.representative_index),
                        errors: b.errors,
                        segment_sha256: b.segment_sha256,
                        uncertain_weight: u64::from(b.uncertain_weight),
                    });
                    Record::Bounded(program.bounded.len() as u32 - 1)
                }
            };
            program.records.push(r);
        }
        program.leaves.push(Leaf {
            signature,
            first_record,
            record_count: program.records.len() as u32 - first_record,
        });
    }

    // Fidelity accounting and the exact total-gap check.
    let source_gap_total = py_sum(samples.gap.iter().copied());
    let encoded_gap_total = py_sum(encoded_gap_sums.iter().copied());
    let difference = (source_gap_total - encoded_gap_total).abs();
    // Every stored gap sum is rounded to 9 decimals (≤ 5e-10 each) and both
    // totals carry floating-point error relative to their magnitude; the
    // tolerance scales with both so large traces are judged fairly.
    let magnitude = source_gap_total.abs().max(encoded_gap_total.abs());
    let tolerance =
        1e-6 + (encoded_gap_sums.len() + count) as f64 * (5e-10 + magnitude * f64::EPSILON);
    if difference > tolerance {
        return Err(Error::invalid(format!(
            "timing compression changed total gap duration by {} us",
            pyfloat::repr(round(difference, 9))
        )));
    }
    let fidelity = Fidelity {
        bounded: approximate > 0,
        approximate_timing_records: approximate,
        maxima: fidelity,
        source_gap_total_us: round(source_gap_total, 9),
        encoded_gap_total_us: round(encoded_gap_total, 9),
        total_gap_error_us: round(difference, 9),
    };
    if options.lossless_timing && fidelity.bounded {
        return Err(budget_error(
            "lossless timing was requested but bounded approximation was required".to_owned(),
        ));
    }
    for ((name, budget), actual) in options.budgets.entries().into_iter().zip(fidelity.maxima) {
        if let Some(b) = budget
            && actual > b + 1e-6
        {
            return Err(budget_error(format!(
                "timing fidelity {name}={} us exceeds budget {} us",
                pyfloat::repr(actual),
                pyfloat::repr(b)
            )));
        }
    }

    // Every leaf is serialized once; identical bytes mean identical leaves,
    // which is what sequence motifs repeat. Meanwhile a second core computes
    // the execution and calibration commitments: they are defined over
    // logical events, which motif wrapping does not change, so they are taken
    // over the flat leaf sequence.
    program.blocks = (0..program.leaves.len() as u32).map(Block::Leaf).collect();
    let (digests, leaf_json, leaf_span) = std::thread::scope(|scope| {
        let digests = scope.spawn(|| program_digests(&program));
        let mut leaf_json: Vec<u8> = Vec::new();
        let mut leaf_span: Vec<(usize, usize)> = Vec::with_capacity(program.leaves.len());
        let writer = ProgramWriter::new(&program);
        for leaf in &program.leaves {
            let start = leaf_json.len();
            writer.write_leaf(&mut leaf_json, leaf);
            leaf_span.push((start, leaf_json.len()));
        }
        (join(digests), leaf_json, leaf_span)
    });
    let (execution_semantic_sha256, calibration_evaluation_sha256) = digests?;
    let keys: Vec<u32> = {
        let mut ids: FxMap<&[u8], u32> = FxMap::default();
        leaf_span
            .iter()
            .map(|&(a, b)| {
                let next = ids.len() as u32;
                *ids.entry(&leaf_json[a..b]).or_insert(next)
            })
            .collect()
    };
    program.blocks = motif::find_motifs(&keys, options.sequence_motifs);

    let mut stored_recursive = 0u64;
    let mut stored_approximate = 0u64;
    for block in &program.blocks {
        for l in program.block_leaves(block) {
            for r in program.leaf_records(&program.leaves[l as usize]) {
                stored_recursive += 1;
                match r {
                    Record::Pattern { period, .. } => stored_recursive += u64::from(*period),
                    Record::Bounded(_) => stored_approximate += 1,
                    Record::Plain { .. } => {}
                }
            }
        }
    }
    let motif_count = program
        .blocks
        .iter()
        .filter(|b| matches!(b, Block::Motif { .. }))
        .count() as u64;

    let (source_trace_sha256, source_bytes) = source_digest()?;
    let canary_events = program.blocks.len() as u64;
    let uncertain_events = samples.uncertain.iter().filter(|&&u| u).count() as u64;
    let (coverage, reason) = if count < total {
        (
            "partial_source",
            Some(format!(
                "compiled the first {count} of {total} trace events (max_events)"
            )),
        )
    } else if let Some(marker) = &trace.derived_from {
        (
            "partial_source",
            Some(format!(
                "the trace carries {marker}: it is a subset or stand-in of a larger workload"
            )),
        )
    } else {
        ("full_source", None)
    };
    let mut summary = Summary {
        source_events: count as u64,
        trace_events: total as u64,
        canary_events,
        expanded_canary_events: groups.len() as u64,
        sequence_motif_count: motif_count,
        timing_group_count: groups.len() as u64,
        event_compression_ratio: if canary_events == 0 {
            0.0
        } else {
            round(count as f64 / canary_events as f64, 3)
        },
        byte_compression_ratio: 0.0,
        source_bytes,
        canary_bytes: 0,
        timing_mode: ordering.mode.name(),
        tail_signal: if program.has_observed {
            "observed_exposed_us"
        } else {
            "structural-proxy"
        },
        timing_sample_limit: limit as u64,
        timing_sample_limits_by_group: overrides
            .iter()
            .map(|&(g, l)| (g as u64, l as u64))
            .collect(),
        recursive_timing_records: recursive,
        approximate_timing_records: approximate,
        stored_recursive_timing_records: stored_recursive,
        stored_approximate_timing_records: stored_approximate,
        fidelity,
        budgets: options.budgets,
        source_trace_sha256,
        execution_semantic_sha256,
        calibration_evaluation_sha256,
        artifact_provenance_sha256: String::new(),
        source_coverage_status: coverage,
        source_coverage_reason: reason,
        uncertain_events,
        extra_members: options.compiler_members.clone(),
    };

    // The canary is `{"compiler":{...},` followed by the body below; the body
    // is assembled from pieces (leaf JSON is not copied) and hashed as a
    // stream, so the only full copy is the final output buffer.
    let writer = ProgramWriter::new(&program);
    let mut head = Vec::new();
    head.extend_from_slice(b"\"events\":[");
    let mut pieces: Vec<Piece> = vec![Piece::Owned(head)];
    for (i, block) in program.blocks.iter().enumerate() {
        let mut sep = Vec::new();
        if i > 0 {
            sep.push(b',');
        }
        match *block {
            Block::Leaf(l) => {
                pieces.push(Piece::Owned(sep));
                pieces.push(Piece::Leaf(l));
            }
            Block::Motif {
                first_leaf,
                leaf_count,
                repeats,
            } => {
                sep.extend_from_slice(b"{\"motif\":[");
                pieces.push(Piece::Owned(sep));
                for l in first_leaf..first_leaf + leaf_count {
                    if l > first_leaf {
                        pieces.push(Piece::Owned(b",".to_vec()));
                    }
                    pieces.push(Piece::Leaf(l));
                }
                let mut close = b"],\"repeats\":".to_vec();
                canon::write_i64(&mut close, repeats as i64);
                close.push(b'}');
                pieces.push(Piece::Owned(close));
            }
        }
    }
    let mut rest = Vec::new();
    let column_list = |out: &mut Vec<u8>, columns: Vec<&str>| {
        out.push(b'[');
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            canon::write_str(out, c);
        }
        out.push(b']');
    };
    rest.extend_from_slice(b"],\"format\":");
    canon::write_str(&mut rest, CANARY_FORMAT);
    rest.extend_from_slice(b",\"signatures\":");
    writer.write_signatures(&mut rest);
    rest.extend_from_slice(b",\"source_format\":");
    rest.extend_from_slice(trace.member("format").unwrap_or(b"\"commcanary.trace.v1\""));
    rest.extend_from_slice(b",\"system\":");
    rest.extend_from_slice(trace.member("system").unwrap_or(b"{}"));
    rest.extend_from_slice(b",\"timing_columns\":");
    column_list(&mut rest, timing_columns(&program));
    rest.extend_from_slice(b",\"workload\":");
    rest.extend_from_slice(trace.member("workload").unwrap_or(b"{}"));
    rest.push(b'}');
    pieces.push(Piece::Owned(rest));
    let piece = |p: &Piece| piece_bytes(p, &leaf_json, &leaf_span).len();
    let body_len: usize = pieces.iter().map(piece).sum();

    let mut hasher = Sha256::new();
    hasher.update(b"{\"compiler\":");
    hasher.update(compiler_block(&summary, None));
    hasher.update(b",");
    for p in &pieces {
        hasher.update(piece_bytes(p, &leaf_json, &leaf_span));
    }
    summary.artifact_provenance_sha256 = hex(&hasher.finalize());
    let fixed_len = 12 + 1 + body_len;
    let (canary_bytes, ratio) = settle_size(&summary, fixed_len)?;
    summary.canary_bytes = canary_bytes;
    summary.byte_compression_ratio = ratio;
    let mut canary = Vec::with_capacity(canary_bytes as usize);
    canary.extend_from_slice(b"{\"compiler\":");
    canary.extend_from_slice(&compiler_block(&summary, Some((canary_bytes, ratio))));
    canary.push(b',');
    for p in &pieces {
        canary.extend_from_slice(piece_bytes(p, &leaf_json, &leaf_span));
    }
    debug_assert_eq!(canary.len() as u64, canary_bytes);
    drop(pieces);
    drop(leaf_json);
    Ok(Compiled {
        program,
        summary,
        canary,
    })
}

/// A piece of the canary body.
enum Piece {
    /// Bytes owned by the piece list.
    Owned(Vec<u8>),
    /// The JSON of a stored leaf.
    Leaf(u32),
}

fn piece_bytes<'a>(p: &'a Piece, leaf_json: &'a [u8], leaf_span: &[(usize, usize)]) -> &'a [u8] {
    match p {
        Piece::Owned(v) => v,
        Piece::Leaf(l) => {
            let (a, b) = leaf_span[*l as usize];
            &leaf_json[a..b]
        }
    }
}

fn push_point(program: &mut Program, samples: &Samples, i: usize, ranks: usize) -> u32 {
    let offsets_at = program.offsets.len() as u32;
    program
        .offsets
        .extend_from_slice(samples.offsets_of(i, ranks));
    program.points.push(Point {
        gap_us: samples.gap[i],
        compute_before_us: samples.before[i],
        compute_overlap_us: samples.overlap[i],
        compute_pressure: samples.pressure[i],
        observed_exposed_us: samples.observed[i],
        offsets_at,
        uncertain: samples.uncertain[i],
    });
    program.points.len() as u32 - 1
}

/// `round(source / canary, decimals)`, 0.0 when either is zero.
fn ratio(source: u64, canary: u64, decimals: u32) -> f64 {
    if canary == 0 || source == 0 {
        0.0
    } else {
        round(source as f64 / canary as f64, decimals)
    }
}

/// Finds `canary_bytes` such that the canary rendered with it (and the ratio
/// derived from it) is exactly that long.
fn settle_size(summary: &Summary, fixed_len: usize) -> Result<(u64, f64)> {
    let measure = |bytes: u64, ratio: f64| -> u64 {
        (fixed_len + compiler_block(summary, Some((bytes, ratio))).len()) as u64
    };
    let source = summary.source_bytes;
    let mut seen: Vec<u64> = Vec::new();
    let mut candidate = 0u64;
    for _ in 0..64 {
        let size = measure(candidate, ratio(source, candidate, 3));
        if size == candidate {
            return Ok((candidate, ratio(source, candidate, 3)));
        }
        seen.push(candidate);
        if seen.contains(&size) {
            break;
        }
        candidate = size;
    }
    for decimals in [2, 1, 0] {
        for &size in &seen {
            let r = ratio(source, size, decimals);
            if measure(size, r) == size {
                return Ok((size, r));
            }
        }
    }
    Err(Error::invalid(
        "serialized-size accounting did not converge",
    ))
}

/// Renders the `compiler` block; `sizes` adds `canary_bytes`,
/// `byte_compression_ratio` and the provenance digest.
fn compiler_block(s: &Summary, sizes: Option<(u64, f64)>) -> Vec<u8> {
    let base = base_compiler_block(s, sizes);
    if s.extra_members.is_empty() {
        base
    } else {
        merge_members(&base, &s.extra_members)
    }
}

/// Splits a canonical JSON object into its members `(key, "key":value)`.
fn object_members(obj: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut members = Vec::new();
    let inner = &obj[1..obj.len() - 1];
    let (mut depth, mut in_string, mut escaped, mut start) = (0usize, false, false, 0usize);
    for (i, &b) in inner.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => {
                members.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner.is_empty() {
        members.push(&inner[start..]);
    }
    members
        .into_iter()
        .map(|m| {
            let end = m[1..]
                .iter()
                .position(|&b| b == b'"')
                .map_or(m.len(), |p| p + 1);
            (&m[1..end], m)
        })
        .collect()
}

/// Inserts `extra` members into the canonical object `base`, in key order.
fn merge_members(base: &[u8], extra: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut rendered: Vec<(Vec<u8>, Vec<u8>)> = object_members(base)
        .into_iter()
        .map(|(k, m)| (k.to_vec(), m.to_vec()))
        .collect();
    for (k, v) in extra {
        let mut m = Vec::with_capacity(k.len() + v.len() + 3);
        canon::write_str(&mut m, k);
        m.push(b':');
        m.extend_from_slice(v);
        rendered.push((k.as_bytes().to_vec(), m));
    }
    rendered.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::with_capacity(base.len() + 64);
    out.push(b'{');
    for (i, (_, m)) in rendered.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m);
    }
    out.push(b'}');
    out
}

fn base_compiler_block(s: &Summary, sizes: Option<(u64, f64)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(2048);
    let mut o = ObjectWriter::new(&mut out);
    o.i64(
        "approximate_timing_records",
        s.approximate_timing_records as i64,
    );
    if sizes.is_some() {
        o.str("artifact_provenance_sha256", &s.artifact_provenance_sha256);
    }
    if let Some((_, ratio)) = sizes {
        o.f64("byte_compression_ratio", ratio);
    }
    o.str(
        "calibration_evaluation_sha256",
        &s.calibration_evaluation_sha256,
    );
    if let Some((bytes, _)) = sizes {
        o.i64("canary_bytes", bytes as i64);
    }
    o.i64("canary_events", s.canary_events as i64);
    if s.uncertain_events > 0 {
        let v = o.key("capture_uncertainty");
        let mut c = ObjectWriter::new(v);
        c.i64("compute_fields_uncertain_events", s.uncertain_events as i64);
        c.str("status", "rank_local_compute_fields_uncertain");
        c.end();
    }
    o.f64("event_compression_ratio", s.event_compression_ratio);
    o.str("execution_semantic_sha256", &s.execution_semantic_sha256);
    o.i64("expanded_canary_events", s.expanded_canary_events as i64);
    {
        let f = &s.fidelity;
        let v = o.key("fidelity");
        let mut fo = ObjectWriter::new(v);
        fo.i64(
            "approximate_timing_records",
            f.approximate_timing_records as i64,
        );
        fo.f64("encoded_gap_total_us", f.encoded_gap_total_us);
        let mut named: Vec<(&str, f64)> = FIDELITY_FIELDS.iter().copied().zip(f.maxima).collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        for (name, v) in named {
            fo.f64(name, v);
        }
        fo.str("mode", f.mode());
        fo.f64("source_gap_total_us", f.source_gap_total_us);
        fo.f64("total_gap_error_us", f.total_gap_error_us);
        fo.end();
    }
    {
        let v = o.key("fidelity_budget");
        let mut named: Vec<(&str, f64)> = s
            .budgets
            .entries()
            .iter()
            .filter_map(|&(n, b)| b.map(|b| (n, b)))
            .collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        let mut bo = ObjectWriter::new(v);
        for (name, b) in named {
            bo.f64(name, b);
        }
        bo.end();
    }
    o.str("producer", PRODUCER);
    o.i64(
        "recursive_timing_records",
        s.recursive_timing_records as i64,
    );
    o.i64("sequence_motif_count", s.sequence_motif_count as i64);
    o.i64("source_bytes", s.source_bytes as i64);
    if let Some(reason) = &s.source_coverage_reason {
        o.str("source_coverage_reason", reason);
    }
    o.str("source_coverage_status", s.source_coverage_status);
    o.i64("source_events", s.source_events as i64);
    o.str("source_trace_sha256", &s.source_trace_sha256);
    o.i64(
        "stored_approximate_timing_records",
        s.stored_approximate_timing_records as i64,
    );
    o.i64(
        "stored_recursive_timing_records",
        s.stored_recursive_timing_records as i64,
    );
    o.str("tail_signal", s.tail_signal);
    o.i64("timing_group_count", s.timing_group_count as i64);
    o.str("timing_mode", s.timing_mode);
    o.i64("timing_sample_limit", s.timing_sample_limit as i64);
    o.str(
        "timing_sample_limit_mode",
        if s.timing_sample_limits_by_group.is_empty() {
            "uniform"
        } else {
            "per_group"
        },
    );
    if !s.timing_sample_limits_by_group.is_empty() {
        let v = o.key("timing_sample_limits_by_group");
        let mut entries: Vec<(String, u64)> = s
            .timing_sample_limits_by_group
            .iter()
            .map(|&(g, l)| (g.to_string(), l))
            .collect();
        entries.sort();
        let mut lo = ObjectWriter::new(v);
        for (g, l) in entries {
            lo.i64(&g, l as i64);
        }
        lo.end();
    }
    o.i64("trace_events", s.trace_events as i64);
    o.end();
    out
}
