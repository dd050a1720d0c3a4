//! Assembles the canary bytes once the program is built: the summary (with
//! the source commitment), the body as pieces that refer to each leaf's JSON
//! instead of copying it, the streamed provenance digest, and `canary_bytes`
//! settled at its fixed point (the size written inside the file is the file's
//! size).

use sha2::{Digest, Sha256};

use rustc_hash::FxHashMap;

use super::samples::Ordering;
use super::{CompileOptions, Compiled, Encoded, PRODUCER, Summary};
use crate::canary::write::{ProgramWriter, timing_columns, write_loop_tail};
use crate::canary::{Block, FIDELITY_FIELDS, Program, Record};
use crate::error::{Error, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::pyfloat::round;
use crate::trace::{Trace, hex};

/// Every stored leaf serialized once, back to back.
pub(super) struct LeafJson {
    json: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl LeafJson {
    /// Serializes the leaves of `program`.
    pub(super) fn of(program: &Program) -> Self {
        let mut json: Vec<u8> = Vec::new();
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(program.leaves.len());
        let writer = ProgramWriter::new(program);
        for leaf in &program.leaves {
            let start = json.len();
            writer.write_leaf(&mut json, leaf);
            spans.push((start, json.len()));
        }
        Self { json, spans }
    }

    /// A dense id per distinct leaf text, in leaf order (what motifs repeat).
    pub(super) fn keys(&self) -> Vec<u32> {
        let mut ids: FxHashMap<&[u8], u32> = FxHashMap::default();
        self.spans
            .iter()
            .map(|&(a, b)| {
                let next = ids.len() as u32;
                *ids.entry(&self.json[a..b]).or_insert(next)
            })
            .collect()
    }

    fn bytes<'a>(&'a self, p: &'a Piece) -> &'a [u8] {
        match p {
            Piece::Owned(v) => v,
            Piece::Leaf(l) => {
                let (a, b) = self.spans[*l as usize];
                &self.json[a..b]
            }
        }
    }
}

/// Stage 6: the summary, the body and the final bytes.
///
/// # Errors
/// A `canary_bytes` that never settles (not expected for real inputs).
pub(super) fn finish(
    trace: &Trace,
    options: &CompileOptions,
    ordering: &Ordering,
    count: usize,
    encoded: Encoded,
    (source_trace_sha256, source_bytes): (String, u64),
) -> Result<Compiled> {
    let mut summary = summarize(trace, options, ordering, count, &encoded);
    summary.source_trace_sha256 = source_trace_sha256;
    summary.source_bytes = source_bytes;
    let Encoded {
        program, leaves, ..
    } = encoded;
    let pieces = body_pieces(&program, trace);
    let canary = render(&mut summary, &pieces, &leaves)?;
    Ok(Compiled {
        program,
        summary,
        canary,
    })
}

/// `(stored records, stored bounded records)` over the stored leaves.
fn stored_counts(program: &Program) -> (u64, u64) {
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
    (stored_recursive, stored_approximate)
}

/// Whether the canary covers its whole source, and why not.
pub(super) fn coverage(trace: &Trace, count: usize) -> (&'static str, Option<String>) {
    let total = trace.events.len();
    if count < total {
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
    }
}

/// The summary, without the source commitment and the sizes.
fn summarize(
    trace: &Trace,
    options: &CompileOptions,
    ordering: &Ordering,
    count: usize,
    e: &Encoded,
) -> Summary {
    let program = &e.program;
    let (stored_recursive, stored_approximate) = stored_counts(program);
    let motif_count = program
        .blocks
        .iter()
        .filter(|b| matches!(b, Block::Motif { .. }))
        .count() as u64;
    let canary_events = program.blocks.len() as u64;
    let (coverage, reason) = coverage(trace, count);
    let group_count = e.groups.spans.len() as u64;
    Summary {
        source_events: count as u64,
        trace_events: trace.events.len() as u64,
        canary_events,
        expanded_canary_events: group_count,
        sequence_motif_count: motif_count,
        timing_group_count: group_count,
        event_compression_ratio: if canary_events == 0 {
            0.0
        } else {
            round(count as f64 / canary_events as f64, 3)
        },
        byte_compression_ratio: 0.0,
        source_bytes: 0,
        canary_bytes: 0,
        timing_mode: ordering.mode.name(),
        tail_signal: if program.has_observed {
            "observed_exposed_us"
        } else {
            "structural-proxy"
        },
        timing_sample_limit: options.timing_sample_limit as u64,
        timing_sample_limits_by_group: e
            .groups
            .overrides
            .iter()
            .map(|&(g, l)| (g as u64, l as u64))
            .collect(),
        recursive_timing_records: e.recursive,
        approximate_timing_records: e.fidelity.approximate_timing_records,
        stored_recursive_timing_records: stored_recursive,
        stored_approximate_timing_records: stored_approximate,
        fidelity: e.fidelity,
        budgets: options.budgets,
        source_trace_sha256: String::new(),
        execution_semantic_sha256: e.execution_semantic_sha256.clone(),
        calibration_evaluation_sha256: e.calibration_evaluation_sha256.clone(),
        artifact_provenance_sha256: String::new(),
        source_coverage_status: coverage,
        source_coverage_reason: reason,
        uncertain_events: e.uncertain_events,
        extra_members: options.compiler_members.clone(),
    }
}

/// The canary body after `{"compiler":{...},`, as pieces: events (motif
/// wrappers around leaf references), then the remaining top-level members in
/// key order.
fn body_pieces(program: &Program, trace: &Trace) -> Vec<Piece> {
    let mut pieces: Vec<Piece> = vec![Piece::Owned(b"\"events\":[".to_vec())];
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
            Block::Loop(i) => {
                sep.extend_from_slice(b"{\"loop\":[");
                pieces.push(Piece::Owned(sep));
                for l in program.block_leaves(block) {
                    if l > program.loops[i as usize].first_leaf {
                        pieces.push(Piece::Owned(b",".to_vec()));
                    }
                    pieces.push(Piece::Leaf(l));
                }
                let mut close = Vec::new();
                write_loop_tail(&mut close, &program.loops[i as usize]);
                pieces.push(Piece::Owned(close));
            }
        }
    }
    pieces.push(Piece::Owned(closing_members(program, trace)));
    pieces
}

/// `],"format":…,"signatures":…,"source_format":…,"system":…,
/// "timing_columns":…,"workload":…}`.
fn closing_members(program: &Program, trace: &Trace) -> Vec<u8> {
    let writer = ProgramWriter::new(program);
    let mut rest = Vec::new();
    rest.extend_from_slice(b"],\"format\":");
    canon::write_str(&mut rest, program.format());
    rest.extend_from_slice(b",\"signatures\":");
    writer.write_signatures(&mut rest);
    rest.extend_from_slice(b",\"source_format\":");
    rest.extend_from_slice(trace.member("format").unwrap_or(b"\"commcanary.trace.v1\""));
    rest.extend_from_slice(b",\"system\":");
    rest.extend_from_slice(trace.member("system").unwrap_or(b"{}"));
    rest.extend_from_slice(b",\"timing_columns\":[");
    for (i, c) in timing_columns(program).iter().enumerate() {
        if i > 0 {
            rest.push(b',');
        }
        canon::write_str(&mut rest, c);
    }
    rest.extend_from_slice(b"],\"workload\":");
    rest.extend_from_slice(trace.member("workload").unwrap_or(b"{}"));
    rest.push(b'}');
    rest
}

/// Hashes the provenance over the streamed pieces, settles the size and
/// writes the bytes (the only full copy of the canary).
fn render(summary: &mut Summary, pieces: &[Piece], leaves: &LeafJson) -> Result<Vec<u8>> {
    let body_len: usize = pieces.iter().map(|p| leaves.bytes(p).len()).sum();
    let mut hasher = Sha256::new();
    hasher.update(b"{\"compiler\":");
    hasher.update(compiler_block(summary, None));
    hasher.update(b",");
    for p in pieces {
        hasher.update(leaves.bytes(p));
    }
    summary.artifact_provenance_sha256 = hex(&hasher.finalize());
    let fixed_len = 12 + 1 + body_len;
    let (canary_bytes, ratio) = settle_size(summary, fixed_len)?;
    summary.canary_bytes = canary_bytes;
    summary.byte_compression_ratio = ratio;
    let mut canary = Vec::with_capacity(canary_bytes as usize);
    canary.extend_from_slice(b"{\"compiler\":");
    canary.extend_from_slice(&compiler_block(summary, Some((canary_bytes, ratio))));
    canary.push(b',');
    for p in pieces {
        canary.extend_from_slice(leaves.bytes(p));
    }
    debug_assert_eq!(canary.len() as u64, canary_bytes);
    Ok(canary)
}

/// A piece of the canary body.
enum Piece {
    /// Bytes owned by the piece list.
    Owned(Vec<u8>),
    /// The JSON of a stored leaf.
    Leaf(u32),
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
