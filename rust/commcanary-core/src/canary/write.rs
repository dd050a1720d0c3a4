//! Canonical JSON of canary program parts.
//!
//! Layout (documented for users in `docs/formats/canary.md`):
//!
//! * signature: `{"bytes", ["channel"], "concurrent_groups", ["custom_op"],
//!   ["dtype"], "group", ["message_sequence"], "op", "phase", "ranks",
//!   ["receiver_rank"], ["reduction_op"], ["root_rank"], ["sender_rank"], ["tag"]}`
//! * leaf: `{"signature": index, "timing": [record, ...]}`
//! * motif: `{"motif": [leaf, ...], "repeats": R}`
//! * plain record: an array in the order of the canary's `timing_columns`:
//!   `[weight, gap_us, arrival_offsets_us, compute_before_us,
//!   compute_overlap_us, compute_pressure(, observed_exposed_us)(, compute_fields_uncertain)]`
//! * pattern record: `{"gap_sum_us", "pattern": [plain record, ...], "repeats"}`
//! * bounded record: `{"errors": [...], "interval": [...],
//!   "source_segment_sha256": hex}` with arrays in the order of
//!   [`interval_layout`] and [`error_layout`]. Those layouts are not stored:
//!   they follow from `timing_columns` (observed latency present or not,
//!   uncertain compute fields present or not), as the format document states.

use super::{Block, Bounded, Leaf, Point, Program, Record, StepLoop};
use crate::json::canon::{self, ObjectWriter};
use crate::trace::{Signature, hex};

/// The `interval` layout for a canary with (or without) observed latencies
/// and uncertain compute fields, as its `timing_columns` say.
#[must_use]
pub fn interval_layout(has_observed: bool, has_uncertain: bool) -> Vec<&'static str> {
    let mut columns = vec![
        "weight",
        "gap_sum_us",
        "gap_us",
        "representative_index",
        "arrival_offsets_us",
        "compute_before_us",
        "compute_overlap_us",
        "compute_pressure",
    ];
    if has_observed {
        columns.push("observed_exposed_us");
    }
    if has_uncertain {
        columns.push("uncertain_weight");
    }
    columns
}

/// The `errors` layout for a canary with (or without) observed latencies.
#[must_use]
pub fn error_layout(has_observed: bool) -> Vec<&'static str> {
    let mut columns = vec![
        "max_gap_error_us",
        "max_skew_error_us",
        "max_arrival_offset_error_us",
        "max_compute_before_error_us",
        "max_overlap_error_us",
        "max_pressure_error",
        "max_prefix_gap_error_us",
        "representative_gap_error_us",
    ];
    if has_observed {
        columns.push("max_observed_exposed_error_us");
    }
    columns
}

/// Column names of plain records, in order.
#[must_use]
pub fn timing_columns(program: &Program) -> Vec<&'static str> {
    let mut columns = vec![
        "weight",
        "gap_us",
        "arrival_offsets_us",
        "compute_before_us",
        "compute_overlap_us",
        "compute_pressure",
    ];
    if program.has_observed {
        columns.push("observed_exposed_us");
    }
    if program.has_uncertain() {
        columns.push("compute_fields_uncertain");
    }
    columns
}

/// Appends a signature object.
pub fn write_signature(out: &mut Vec<u8>, sig: &Signature) {
    let mut o = ObjectWriter::new(out);
    o.i64("bytes", sig.bytes);
    if let Some(c) = &sig.channel {
        canon::write_wtf8(o.key("channel"), c);
    }
    o.i64("concurrent_groups", sig.concurrent_groups);
    if sig.custom_op {
        o.bool("custom_op", true);
    }
    if let Some(d) = &sig.dtype {
        o.raw("dtype", d);
    }
    canon::write_wtf8(o.key("group"), &sig.group);
    if let Some(s) = sig.message_sequence {
        o.i64("message_sequence", s);
    }
    canon::write_wtf8(o.key("op"), &sig.op);
    canon::write_wtf8(o.key("phase"), &sig.phase);
    canon::write_i64_array(o.key("ranks"), &sig.ranks);
    sig.write_roles(&mut o);
    if let Some(t) = &sig.tag {
        canon::write_wtf8(o.key("tag"), t);
    }
    o.end();
}

/// Writes plain records and pattern children.
struct PointWriter {
    observed: bool,
    uncertain: bool,
}

impl PointWriter {
    fn write(
        &self,
        out: &mut Vec<u8>,
        program: &Program,
        point: &Point,
        weight: u64,
        ranks: usize,
    ) {
        out.push(b'[');
        canon::write_i64(out, weight as i64);
        out.push(b',');
        canon::write_f64_rounded(out, point.gap_us, 9);
        out.push(b',');
        canon::write_rounded_array(out, program.point_offsets(point, ranks), 9);
        out.push(b',');
        canon::write_f64_rounded(out, point.compute_before_us, 9);
        out.push(b',');
        canon::write_f64_rounded(out, point.compute_overlap_us, 9);
        out.push(b',');
        canon::write_f64_rounded(out, point.compute_pressure, 9);
        if self.observed {
            out.push(b',');
            canon::write_f64_rounded(out, point.observed_exposed_us, 9);
        }
        if self.uncertain {
            out.extend_from_slice(if point.uncertain { b",true" } else { b",false" });
        }
        out.push(b']');
    }
}

/// Appends what follows a loop's slot leaves:
/// `],"schedule":[[variant,iterations],...],"variants":[[[slot,events],...],...]}`.
pub fn write_loop_tail(out: &mut Vec<u8>, step_loop: &StepLoop) {
    let pairs = |out: &mut Vec<u8>, pairs: &[(u32, u64)]| {
        out.push(b'[');
        for (k, &(a, b)) in pairs.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.push(b'[');
            canon::write_i64(out, i64::from(a));
            out.push(b',');
            canon::write_i64(out, b as i64);
            out.push(b']');
        }
        out.push(b']');
    };
    out.extend_from_slice(b"],\"schedule\":");
    pairs(out, &step_loop.schedule);
    out.extend_from_slice(b",\"variants\":[");
    for (k, variant) in step_loop.variants.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        pairs(out, variant);
    }
    out.extend_from_slice(b"]}");
}

/// Serialises leaves and blocks of one program.
pub struct ProgramWriter<'p> {
    program: &'p Program,
    points: PointWriter,
}

impl<'p> ProgramWriter<'p> {
    /// A writer for `program`.
    #[must_use]
    pub fn new(program: &'p Program) -> Self {
        Self {
            program,
            points: PointWriter {
                observed: program.has_observed,
                uncertain: program.has_uncertain(),
            },
        }
    }

    /// Appends a leaf object.
    pub fn write_leaf(&self, out: &mut Vec<u8>, leaf: &Leaf) {
        let program = self.program;
        let ranks = program.signatures[leaf.signature as usize].rank_count();
        out.extend_from_slice(b"{\"signature\":");
        canon::write_i64(out, i64::from(leaf.signature));
        out.extend_from_slice(b",\"timing\":[");
        for (i, record) in program.leaf_records(leaf).iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match *record {
                Record::Plain { point, weight } => {
                    self.points
                        .write(out, program, &program.points[point as usize], weight, ranks);
                }
                Record::Pattern {
                    first_point,
                    period,
                    repeats,
                    gap_sum_us,
                } => {
                    let mut o = ObjectWriter::new(out);
                    o.f64("gap_sum_us", gap_sum_us);
                    let list = o.key("pattern");
                    list.push(b'[');
                    for c in first_point..first_point + period {
                        if c > first_point {
                            list.push(b',');
                        }
                        self.points
                            .write(list, program, &program.points[c as usize], 1, ranks);
                    }
                    list.push(b']');
                    o.i64("repeats", repeats as i64);
                    o.end();
                }
                Record::Bounded(b) => self.write_bounded(out, &program.bounded[b as usize], ranks),
            }
        }
        out.extend_from_slice(b"]}");
    }

    fn write_bounded(&self, out: &mut Vec<u8>, b: &Bounded, ranks: usize) {
        let program = self.program;
        let p = &program.points[b.point as usize];
        let e = &b.errors;
        out.extend_from_slice(b"{\"errors\":[");
        let mut errors = vec![
            e.gap,
            e.skew,
            e.arrival_offset,
            e.compute_before,
            e.overlap,
            e.pressure,
            e.prefix_gap,
            e.representative_gap,
        ];
        if program.has_observed {
            errors.push(e.observed);
        }
        for (i, v) in errors.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            canon::write_f64(out, *v);
        }
        out.extend_from_slice(b"],\"interval\":[");
        canon::write_i64(out, b.weight as i64);
        out.push(b',');
        canon::write_f64_rounded(out, b.gap_sum_us, 9);
        out.push(b',');
        canon::write_f64_rounded(out, p.gap_us, 9);
        out.push(b',');
        canon::write_i64(out, b.representative_index as i64);
        out.push(b',');
        canon::write_rounded_array(out, program.point_offsets(p, ranks), 9);
        out.push(b',');
        canon::write_f64_rounded(out, p.compute_before_us, 9);
        out.push(b',');
        canon::write_f64_rounded(out, p.compute_overlap_us, 9);
        out.push(b',');
        canon::write_f64_rounded(out, p.compute_pressure, 9);
        if program.has_observed {
            out.push(b',');
            canon::write_f64_rounded(out, p.observed_exposed_us, 9);
        }
        if self.points.uncertain {
            out.push(b',');
            canon::write_i64(out, b.uncertain_weight as i64);
        }
        out.extend_from_slice(b"],\"source_segment_sha256\":\"");
        out.extend_from_slice(hex(&b.segment_sha256).as_bytes());
        out.extend_from_slice(b"\"}");
    }

    /// Appends a block (a leaf, or a motif object).
    pub fn write_block(&self, out: &mut Vec<u8>, block: &Block) {
        match *block {
            Block::Leaf(l) => self.write_leaf(out, &self.program.leaves[l as usize]),
            Block::Motif {
                first_leaf,
                leaf_count,
                repeats,
            } => {
                out.extend_from_slice(b"{\"motif\":[");
                for l in first_leaf..first_leaf + leaf_count {
                    if l > first_leaf {
                        out.push(b',');
                    }
                    self.write_leaf(out, &self.program.leaves[l as usize]);
                }
                out.extend_from_slice(b"],\"repeats\":");
                canon::write_i64(out, repeats as i64);
                out.push(b'}');
            }
            Block::Loop(i) => {
                let step_loop = &self.program.loops[i as usize];
                out.extend_from_slice(b"{\"loop\":[");
                for l in step_loop.first_leaf..step_loop.first_leaf + step_loop.slot_count {
                    if l > step_loop.first_leaf {
                        out.push(b',');
                    }
                    self.write_leaf(out, &self.program.leaves[l as usize]);
                }
                write_loop_tail(out, step_loop);
            }
        }
    }

    /// Appends the `events` array.
    pub fn write_events(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, block) in self.program.blocks.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.write_block(out, block);
        }
        out.push(b']');
    }

    /// Appends the `signatures` array.
    pub fn write_signatures(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, sig) in self.program.signatures.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_signature(out, sig);
        }
        out.push(b']');
    }
}
