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
//!   the same signature, so it does not depend on how events were grouped;
//! * a step loop runs its schedule: each iteration's variant lists
//!   `(slot, events)` pairs, and each pair is a logical event taking the
//!   next `events` occurrences of the slot's record stream. The stream reads
//!   on across iterations exactly as one leaf's records read (a record that
//!   runs across iterations hands out its gap the same way), so a loop and
//!   the flat program it came from execute the same occurrences.

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

/// Where a logical event starts reading its leaf's records: the record, the
/// occurrences of it already taken, and the gap already handed out of it (a
/// step loop's slot is read by one iteration after another, and a record may
/// run across iterations).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cursor {
    /// Record index within the leaf.
    pub record: u32,
    /// Occurrences of that record already taken.
    pub within: u64,
    /// Gap handed out of that record so far (runs and bounded intervals).
    pub handed: f64,
}

/// A logical event: one leaf instance, or one iteration's group of a step
/// loop's slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogicalEvent {
    /// Leaf index.
    pub leaf: u32,
    /// Signature index.
    pub signature: u32,
    /// Occurrences of the same signature before this event.
    pub base: u64,
    /// Where the event starts in its leaf's records.
    pub start: Cursor,
    /// Occurrences the event takes.
    pub take: u64,
}

/// Visits logical events in program order.
pub fn for_each_logical_event(program: &Program, mut f: impl FnMut(&LogicalEvent)) {
    let mut seen = vec![0u64; program.signatures.len()];
    for block in &program.blocks {
        if let Block::Loop(i) = *block {
            loop_events(program, &program.loops[i as usize], &mut seen, &mut f);
            continue;
        }
        let repeats = Program::block_repeats(block);
        let leaves = program.block_leaves(block);
        for _ in 0..repeats {
            for l in leaves.clone() {
                let leaf = &program.leaves[l as usize];
                let slot = &mut seen[leaf.signature as usize];
                let take = program.leaf_repeat(leaf);
                f(&LogicalEvent {
                    leaf: l,
                    signature: leaf.signature,
                    base: *slot,
                    start: Cursor::default(),
                    take,
                });
                *slot += take;
            }
        }
    }
}

/// The logical events of a step loop: each scheduled iteration's variant,
/// each of its events reading on from where its slot's stream stopped.
fn loop_events(
    program: &Program,
    step_loop: &super::StepLoop,
    seen: &mut [u64],
    f: &mut impl FnMut(&LogicalEvent),
) {
    let mut cursors = vec![Cursor::default(); step_loop.slot_count as usize];
    for &(variant, iterations) in &step_loop.schedule {
        for _ in 0..iterations {
            for &(slot, take) in &step_loop.variants[variant as usize] {
                let l = step_loop.first_leaf + slot;
                let leaf = &program.leaves[l as usize];
                let base = &mut seen[leaf.signature as usize];
                let event = LogicalEvent {
                    leaf: l,
                    signature: leaf.signature,
                    base: *base,
                    start: cursors[slot as usize],
                    take,
                };
                f(&event);
                *base += take;
                let mut reader = RecordReader::new(program, &event);
                reader.skip(take);
                cursors[slot as usize] = reader.cursor;
            }
        }
    }
}

/// Reads a leaf's records occurrence by occurrence from a [`Cursor`].
struct RecordReader<'p> {
    program: &'p Program,
    records: &'p [Record],
    cursor: Cursor,
    /// The current pattern's residual, when the cursor is in a pattern.
    residual: Option<f64>,
}

impl<'p> RecordReader<'p> {
    fn new(program: &'p Program, event: &LogicalEvent) -> Self {
        let leaf = &program.leaves[event.leaf as usize];
        Self {
            program,
            records: program.leaf_records(leaf),
            cursor: event.start,
            residual: None,
        }
    }

    /// Passes `n` occurrences, stepping over whole records where it can.
    fn skip(&mut self, mut n: u64) {
        while n > 0 {
            let Some(record) = self.records.get(self.cursor.record as usize) else {
                return;
            };
            let left = self.program.record_weight(record) - self.cursor.within;
            if left <= n {
                n -= left;
                self.next_record();
                continue;
            }
            if matches!(record, Record::Pattern { .. }) {
                // A pattern's gaps do not depend on what was handed out.
                self.cursor.within += n;
                return;
            }
            for _ in 0..n {
                self.next();
            }
            return;
        }
    }

    fn next_record(&mut self) {
        self.cursor = Cursor {
            record: self.cursor.record + 1,
            within: 0,
            handed: 0.0,
        };
        self.residual = None;
    }

    /// The next occurrence: `(gap, point, uncertain)`.
    fn next(&mut self) -> Option<(f64, u32, bool)> {
        let program = self.program;
        let record = self.records.get(self.cursor.record as usize)?;
        let j = self.cursor.within;
        let (weight, out) = match *record {
            Record::Plain { point, weight } => {
                let p = &program.points[point as usize];
                let total = if weight == 1 {
                    p.gap_us
                } else {
                    pyfloat::round(p.gap_us * weight as f64, 9)
                };
                let gap = self.spread_next(total, weight);
                (weight, (gap, point, p.uncertain))
            }
            Record::Bounded(b) => {
                let b = &program.bounded[b as usize];
                let gap = self.spread_next(b.gap_sum_us, b.weight);
                (b.weight, (gap, b.point, j < b.uncertain_weight))
            }
            Record::Pattern {
                first_point,
                period,
                repeats,
                gap_sum_us,
            } => {
                let residual = *self.residual.get_or_insert_with(|| {
                    let children = first_point..first_point + period;
                    let child_sum =
                        pyfloat::py_sum(children.map(|c| program.points[c as usize].gap_us));
                    gap_sum_us - repeats as f64 * child_sum
                });
                let weight = u64::from(period) * repeats;
                let c = first_point + (j % u64::from(period)) as u32;
                let p = &program.points[c as usize];
                let gap = if j + 1 == weight && residual != 0.0 {
                    p.gap_us + residual
                } else {
                    p.gap_us
                };
                (weight, (gap, c, p.uncertain))
            }
        };
        self.cursor.within += 1;
        if self.cursor.within >= weight {
            self.next_record();
        }
        Some(out)
    }

    /// Occurrence `within` of `total` spread over `weight`: `total / weight`
    /// each, the last absorbing the rounding residual.
    fn spread_next(&mut self, total: f64, weight: u64) -> f64 {
        if self.cursor.within + 1 == weight {
            total - self.cursor.handed
        } else {
            let share = total / weight as f64;
            self.cursor.handed += share;
            share
        }
    }
}

/// Visits the occurrences of one logical event.
pub fn for_each_occurrence_of(
    program: &Program,
    event: &LogicalEvent,
    mut f: impl FnMut(&Occurrence),
) {
    let mut reader = RecordReader::new(program, event);
    for position in 0..event.take {
        let Some((gap_us, point, uncertain)) = reader.next() else {
            return;
        };
        f(&Occurrence {
            signature: event.signature,
            occurrence: event.base + position,
            gap_us,
            point,
            uncertain,
        });
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
        if let Block::Loop(i) = *block {
            let step_loop = &program.loops[i as usize];
            events = events.saturating_add(step_loop.logical_events());
            for l in program.block_leaves(block) {
                occurrences =
                    occurrences.saturating_add(program.leaf_repeat(&program.leaves[l as usize]));
            }
            continue;
        }
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
