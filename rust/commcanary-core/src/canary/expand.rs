//! Expansion of a [`Program`] into ordered occurrences.
//!
//! Rules (the replay model's §4.2, shared by the execution commitment):
//!
//! * logical events are the leaves in block order, motif templates repeated;
//! * a record of weight `w` and gap sum `G` yields `w` occurrences; the first
//!   `w − 1` get `G / w`, the last gets `G` minus what was handed out, so the
//!   record's total is exact. A plain record's `G` is its gap (`w = 1`) or
//!   `round(gap · w, 9)` (a run);
//! * a pattern yields its period `repeats` times; the difference between its
//!   stored gap sum and `repeats · sum(period gaps)` is added to its very last
//!   occurrence;
//! * an occurrence's index is its position among all logical occurrences of
//!   the same signature, so it does not depend on how events were grouped.

use super::{Block, Program, Record};
use crate::pyfloat;

/// One executed occurrence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Occurrence {
    /// Signature index.
    pub signature: u32,
    /// Position among occurrences of the same signature.
    pub occurrence: u64,
    /// Readiness gap.
    pub gap_us: f64,
    /// The timing point supplying every other field.
    pub point: u32,
    /// The occurrence comes from an uncertain source event.
    pub uncertain: bool,
}

/// A logical event: one leaf instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalEvent {
    /// Leaf index.
    pub leaf: u32,
    /// Signature index.
    pub signature: u32,
    /// Occurrences of the same signature before this event.
    pub base: u64,
}

/// Visits logical events in program order.
pub fn for_each_logical_event(program: &Program, mut f: impl FnMut(&LogicalEvent)) {
    let mut seen = vec![0u64; program.signatures.len()];
    for block in &program.blocks {
        let repeats = Program::block_repeats(block);
        let leaves = program.block_leaves(block);
        for _ in 0..repeats {
            for l in leaves.clone() {
                let leaf = &program.leaves[l as usize];
                let slot = &mut seen[leaf.signature as usize];
                f(&LogicalEvent {
                    leaf: l,
                    signature: leaf.signature,
                    base: *slot,
                });
                *slot += program.leaf_repeat(leaf);
            }
        }
    }
}

/// Visits the occurrences of one logical event.
pub fn for_each_occurrence_of(
    program: &Program,
    event: &LogicalEvent,
    mut f: impl FnMut(&Occurrence),
) {
    let leaf = &program.leaves[event.leaf as usize];
    let mut position = 0u64;
    let mut emit = |gap: f64, point: u32, uncertain: bool| {
        f(&Occurrence {
            signature: event.signature,
            occurrence: event.base + position,
            gap_us: gap,
            point,
            uncertain,
        });
        position += 1;
    };
    for record in program.leaf_records(leaf) {
        match *record {
            Record::Plain { point, weight } => {
                let p = &program.points[point as usize];
                let total = if weight == 1 {
                    p.gap_us
                } else {
                    pyfloat::round(p.gap_us * weight as f64, 9)
                };
                spread(total, weight, |gap, _| emit(gap, point, p.uncertain));
            }
            Record::Bounded(b) => {
                let b = &program.bounded[b as usize];
                let uncertain = b.uncertain_weight;
                spread(b.gap_sum_us, b.weight, |gap, j| {
                    emit(gap, b.point, j < uncertain)
                });
            }
            Record::Pattern {
                first_point,
                period,
                repeats,
                gap_sum_us,
            } => {
                let children = first_point..first_point + period;
                let child_sum =
                    pyfloat::py_sum(children.clone().map(|c| program.points[c as usize].gap_us));
                let residual = gap_sum_us - repeats as f64 * child_sum;
                for r in 0..repeats {
                    for c in children.clone() {
                        let p = &program.points[c as usize];
                        let last = r + 1 == repeats && c + 1 == first_point + period;
                        let gap = if last && residual != 0.0 {
                            p.gap_us + residual
                        } else {
                            p.gap_us
                        };
                        emit(gap, c, p.uncertain);
                    }
                }
            }
        }
    }
}

/// Splits `total` over `weight` occurrences: `total / weight` each, the last
/// absorbing the rounding residual. Calls `f(gap, j)`.
fn spread(total: f64, weight: u64, mut f: impl FnMut(f64, u64)) {
    let share = total / weight as f64;
    let mut assigned = 0.0;
    for j in 0..weight {
        if j + 1 == weight {
            f(total - assigned, j);
        } else {
            assigned += share;
            f(share, j);
        }
    }
}

/// Visits every occurrence of the program in execution order.
pub fn for_each_occurrence(program: &Program, mut f: impl FnMut(&LogicalEvent, &Occurrence)) {
    for_each_logical_event(program, |event| {
        for_each_occurrence_of(program, event, |occ| f(event, occ));
    });
}

/// Number of logical events and occurrences, computed from the compact form
/// without expanding it (saturating at `u64::MAX`).
#[must_use]
pub fn expanded_counts(program: &Program) -> (u64, u64) {
    let mut events = 0u64;
    let mut occurrences = 0u64;
    for block in &program.blocks {
        let repeats = Program::block_repeats(block);
        let mut per_pass_events = 0u64;
        let mut per_pass_occ = 0u64;
        for l in program.block_leaves(block) {
            per_pass_events += 1;
            per_pass_occ =
                per_pass_occ.saturating_add(program.leaf_repeat(&program.leaves[l as usize]));
        }
        events = events.saturating_add(per_pass_events.saturating_mul(repeats));
        occurrences = occurrences.saturating_add(per_pass_occ.saturating_mul(repeats));
    }
    (events, occurrences)
}

/// The executed timing of a program, one entry per occurrence in execution
/// order (what a caller inspects or plots).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OccurrenceColumns {
    /// Signature index.
    pub signature: Vec<u32>,
    /// Occurrence number within its signature.
    pub occurrence: Vec<u64>,
    /// Readiness gap, µs.
    pub gap_us: Vec<f64>,
    /// Cross-rank arrival skew (max − min arrival offset), µs.
    pub arrival_skew_us: Vec<f64>,
    /// Compute before the collective, µs.
    pub compute_before_us: Vec<f64>,
    /// Compute that can hide the collective, µs.
    pub compute_overlap_us: Vec<f64>,
    /// Compute pressure.
    pub compute_pressure: Vec<f64>,
    /// Each occurrence's per-rank arrival offsets, in its signature's rank
    /// order, concatenated (µs).
    pub arrival_offsets_us: Vec<f64>,
}

/// Expands `program` into [`OccurrenceColumns`].
#[must_use]
pub fn occurrence_columns(program: &Program) -> OccurrenceColumns {
    let mut cols = OccurrenceColumns::default();
    for_each_occurrence(program, |_, occ| {
        let p = &program.points[occ.point as usize];
        let ranks = program.signatures[occ.signature as usize].rank_count();
        let offsets = program.point_offsets(p, ranks);
        let hi = offsets.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = offsets.iter().copied().fold(f64::INFINITY, f64::min);
        cols.arrival_offsets_us.extend_from_slice(offsets);
        cols.signature.push(occ.signature);
        cols.occurrence.push(occ.occurrence);
        cols.gap_us.push(occ.gap_us);
        cols.arrival_skew_us.push(hi - lo);
        cols.compute_before_us.push(p.compute_before_us);
        cols.compute_overlap_us.push(p.compute_overlap_us);
        cols.compute_pressure.push(p.compute_pressure);
    });
    cols
}

/// Whether a block is a motif.
#[must_use]
pub fn is_motif(block: &Block) -> bool {
    matches!(block, Block::Motif { .. })
}
