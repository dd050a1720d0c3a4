//! The canary program: the in-memory model of `commcanary.canary.v3`.
//!
//! A canary is an ordered [`Program`] of [`Block`]s. A block is a leaf (one
//! group of consecutive source events with the same [`Signature`]) or a
//! sequence motif (a template of leaves repeated back to back). A leaf holds
//! timing [`Record`]s that cover its source events contiguously and in order:
//!
//! * `Plain` — `weight` identical occurrences of one timing [`Point`] (weight 1
//!   is an exact record, more is a run);
//! * `Pattern` — `period` exact points repeated `repeats` times;
//! * `Bounded` — a bounded interval: `weight` source events summarised by a
//!   representative point, the exact gap sum, per-field error bounds and the
//!   SHA-256 of the summarised source segment.
//!
//! Invariants (checked by the reader, guaranteed by the compiler): records of
//! a leaf cover `0..repeat` without gaps; a motif has at least two leaves and
//! two repeats and contains no motif; adjacent leaves differ in signature;
//! every point's offsets vector has the signature's rank count entries.
//!
//! [`expand`] walks the program as the replay model executes it: logical
//! events in order, occurrences in record order, each with its gap (exact
//! residual absorption on the last occurrence of a record) and its occurrence
//! index among events of the same signature.

pub mod commit;
pub mod expand;
pub mod read;
pub mod write;

use crate::trace::Signature;

/// The canary format string written by this crate for flat programs; it
/// also names the execution semantics every commitment is defined over, so a
/// loop canary and the flat canary of one trace share their commitments.
pub const CANARY_FORMAT: &str = crate::document::CANARY;

/// The canary format string of a program with a step loop.
pub const CANARY_LOOP_FORMAT: &str = crate::document::CANARY_LOOP;

/// The eight fidelity fields of a canary's bounds and budgets, in
/// budget-check order.
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

/// One timing sample as the replay model consumes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Readiness gap from the previous collective (9 decimals).
    pub gap_us: f64,
    /// Compute before the collective (descriptive).
    pub compute_before_us: f64,
    /// Compute that can hide communication.
    pub compute_overlap_us: f64,
    /// Compute pressure (6 decimals).
    pub compute_pressure: f64,
    /// Measured exposed latency, `NaN` when absent.
    pub observed_exposed_us: f64,
    /// Start of this point's per-rank arrival offsets in [`Program::offsets`].
    pub offsets_at: u32,
    /// Rank-local compute fields disagreed in the source.
    pub uncertain: bool,
}

/// Per-field error bounds of a bounded interval (all `_us` at 9 decimals,
/// pressure at 6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalErrors {
    /// max |gap − mean gap|
    pub gap: f64,
    /// max |skew − representative skew|
    pub skew: f64,
    /// max over ranks of |offset − representative offset|
    pub arrival_offset: f64,
    /// max |compute_before − representative|
    pub compute_before: f64,
    /// max |overlap − representative|
    pub overlap: f64,
    /// max |pressure − representative|
    pub pressure: f64,
    /// max |observed − representative|, `NaN` without observations
    pub observed: f64,
    /// max over prefixes of |partial gap sum − k · mean gap|
    pub prefix_gap: f64,
    /// |representative gap − mean gap|
    pub representative_gap: f64,
}

impl IntervalErrors {
    /// The errors a canary's fidelity bounds are maxima of, in
    /// [`FIDELITY_FIELDS`] order (a missing observed error counts as 0).
    #[must_use]
    pub fn fidelity_values(&self) -> [f64; 8] {
        [
            self.gap,
            self.skew,
            self.arrival_offset,
            self.compute_before,
            self.overlap,
            self.pressure,
            if self.observed.is_nan() {
                0.0
            } else {
                self.observed
            },
            self.prefix_gap,
        ]
    }
}

/// A bounded-interval record.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounded {
    /// Representative values; its `gap_us` is the rounded mean gap.
    pub point: u32,
    /// Number of source events summarised.
    pub weight: u64,
    /// Exact sum of the summarised gaps (9 decimals).
    pub gap_sum_us: f64,
    /// Position of the representative inside its leaf.
    pub representative_index: u64,
    /// Error bounds.
    pub errors: IntervalErrors,
    /// SHA-256 of the canonical summarised segment.
    pub segment_sha256: [u8; 32],
    /// Number of summarised events with uncertain compute fields.
    pub uncertain_weight: u64,
}

/// A timing record of a leaf.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// `weight` occurrences of one point.
    Plain {
        /// The point.
        point: u32,
        /// Occurrences (≥ 1).
        weight: u64,
    },
    /// `period` consecutive points repeated `repeats` times.
    Pattern {
        /// First point of the period.
        first_point: u32,
        /// Points per period.
        period: u32,
        /// Number of periods (≥ 2).
        repeats: u64,
        /// Exact gap sum of the covered source events (9 decimals).
        gap_sum_us: f64,
    },
    /// Index into [`Program::bounded`].
    Bounded(u32),
}

/// One group of same-signature events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    /// Index into [`Program::signatures`].
    pub signature: u32,
    /// First record in [`Program::records`].
    pub first_record: u32,
    /// Number of records.
    pub record_count: u32,
}

/// A top-level program element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// One leaf (index into [`Program::leaves`]).
    Leaf(u32),
    /// A template of leaves repeated back to back.
    Motif {
        /// First template leaf.
        first_leaf: u32,
        /// Template length.
        leaf_count: u32,
        /// Repetitions (≥ 2).
        repeats: u64,
    },
    /// A step loop (index into [`Program::loops`]).
    Loop(u32),
}

/// A training loop: the slots of one iteration, the iteration shapes
/// (variants) and the order they run in (the schedule).
///
/// A slot is the k-th group of one signature within an iteration; its leaf
/// holds the timing of that group across every iteration, in execution
/// order, as one record stream. Iteration `i` runs the variant the schedule
/// names for it: a list of `(slot, events)` pairs, each a logical event that
/// takes the next `events` occurrences of its slot's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLoop {
    /// First slot leaf in [`Program::leaves`].
    pub first_leaf: u32,
    /// Number of slots (their leaves follow `first_leaf`).
    pub slot_count: u32,
    /// Each variant's logical events, `(slot, events)`.
    pub variants: Vec<Vec<(u32, u64)>>,
    /// `(variant, consecutive iterations)` in execution order.
    pub schedule: Vec<(u32, u64)>,
}

impl StepLoop {
    /// Number of iterations the schedule runs.
    #[must_use]
    pub fn iterations(&self) -> u64 {
        self.schedule
            .iter()
            .fold(0u64, |a, &(_, n)| a.saturating_add(n))
    }

    /// Logical events over the whole schedule (saturating).
    #[must_use]
    pub fn logical_events(&self) -> u64 {
        self.schedule.iter().fold(0u64, |a, &(v, n)| {
            let len = self.variants.get(v as usize).map_or(0, Vec::len) as u64;
            a.saturating_add(len.saturating_mul(n))
        })
    }

    /// Occurrences each slot's stream must hold: what the schedule takes
    /// from it (saturating).
    #[must_use]
    pub fn slot_demand(&self) -> Vec<u64> {
        // How often each variant runs, then what each run takes: linear in
        // the schedule plus the variants (a hostile file cannot make it
        // quadratic).
        let mut runs = vec![0u64; self.variants.len()];
        for &(v, n) in &self.schedule {
            if let Some(r) = runs.get_mut(v as usize) {
                *r = r.saturating_add(n);
            }
        }
        let mut demand = vec![0u64; self.slot_count as usize];
        for (variant, &n) in self.variants.iter().zip(&runs) {
            for &(slot, events) in variant {
                if let Some(d) = demand.get_mut(slot as usize) {
                    *d = d.saturating_add(events.saturating_mul(n));
                }
            }
        }
        demand
    }
}

/// A canary program with its storage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Program {
    /// Operation identities.
    pub signatures: Vec<Signature>,
    /// Timing points.
    pub points: Vec<Point>,
    /// Flat per-rank arrival offsets.
    pub offsets: Vec<f64>,
    /// Records of all leaves.
    pub records: Vec<Record>,
    /// Bounded-interval details.
    pub bounded: Vec<Bounded>,
    /// Stored leaves.
    pub leaves: Vec<Leaf>,
    /// The program, in order.
    pub blocks: Vec<Block>,
    /// Step loops that [`Block::Loop`] refers to.
    pub loops: Vec<StepLoop>,
    /// Points carry `observed_exposed_us`.
    pub has_observed: bool,
}

impl Program {
    /// The offsets of `point`.
    #[must_use]
    pub fn point_offsets(&self, point: &Point, rank_count: usize) -> &[f64] {
        &self.offsets[point.offsets_at as usize..point.offsets_at as usize + rank_count]
    }

    /// The records of `leaf`.
    #[must_use]
    pub fn leaf_records(&self, leaf: &Leaf) -> &[Record] {
        &self.records[leaf.first_record as usize..(leaf.first_record + leaf.record_count) as usize]
    }

    /// Number of source events a record covers.
    #[must_use]
    pub fn record_weight(&self, record: &Record) -> u64 {
        match record {
            Record::Plain { weight, .. } => *weight,
            Record::Pattern {
                period, repeats, ..
            } => u64::from(*period).saturating_mul(*repeats),
            Record::Bounded(b) => self.bounded[*b as usize].weight,
        }
    }

    /// Number of source events a leaf covers.
    #[must_use]
    pub fn leaf_repeat(&self, leaf: &Leaf) -> u64 {
        self.leaf_records(leaf)
            .iter()
            .map(|r| self.record_weight(r))
            .fold(0u64, u64::saturating_add)
    }

    /// Whether the program holds a step loop (written as
    /// [`CANARY_LOOP_FORMAT`]).
    #[must_use]
    pub fn has_loop(&self) -> bool {
        !self.loops.is_empty()
    }

    /// The format the program is written as: the loop format when it holds
    /// a step loop, else the flat one.
    #[must_use]
    pub fn format(&self) -> &'static str {
        if self.has_loop() {
            CANARY_LOOP_FORMAT
        } else {
            CANARY_FORMAT
        }
    }

    /// Whether any point has uncertain compute fields.
    #[must_use]
    pub fn has_uncertain(&self) -> bool {
        self.points.iter().any(|p| p.uncertain)
            || self.bounded.iter().any(|b| b.uncertain_weight > 0)
    }

    /// The leaves of a block.
    #[must_use]
    pub fn block_leaves(&self, block: &Block) -> std::ops::Range<u32> {
        match *block {
            Block::Leaf(l) => l..l + 1,
            Block::Loop(i) => {
                let l = &self.loops[i as usize];
                l.first_leaf..l.first_leaf + l.slot_count
            }
            Block::Motif {
                first_leaf,
                leaf_count,
                ..
            } => first_leaf..first_leaf + leaf_count,
        }
    }

    /// Repetitions of a block (1 for a leaf and a loop, whose slots are
    /// not repeated but consumed by its schedule).
    #[must_use]
    pub fn block_repeats(block: &Block) -> u64 {
        match *block {
            Block::Leaf(_) | Block::Loop(_) => 1,
            Block::Motif { repeats, .. } => repeats,
        }
    }
}
