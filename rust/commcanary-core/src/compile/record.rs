//! The records a signature group compresses into, in terms of sample
//! indices: what the timing ladder ([`super::ladder`]) and the bounded
//! intervals ([`super::bounded`]) produce and the program builder consumes.

use crate::canary::IntervalErrors;

/// A record of a compiled group, in terms of sample indices.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupRecord {
    /// `weight` equal samples starting at `first` (weight 1: exact record).
    Plain {
        /// Sample index.
        first: u32,
        /// Run length.
        weight: u32,
    },
    /// Samples `first..first+period` repeated `repeats` times.
    Pattern {
        /// First sample of the period.
        first: u32,
        /// Period length.
        period: u32,
        /// Repetitions.
        repeats: u32,
    },
    /// A bounded interval.
    Bounded(Box<BoundedRecord>),
}

/// A bounded interval over samples `start..start+weight` (absolute indices).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundedRecord {
    /// First sample.
    pub start: u32,
    /// Number of samples.
    pub weight: u32,
    /// Absolute index of the representative sample.
    pub representative: u32,
    /// Position of the representative inside the group.
    pub representative_index: u32,
    /// `round(mean gap, 9)`.
    pub gap_us: f64,
    /// `round(sum of gaps, 9)`.
    pub gap_sum_us: f64,
    /// Error bounds.
    pub errors: IntervalErrors,
    /// SHA-256 of the canonical segment.
    pub segment_sha256: [u8; 32],
    /// Uncertain samples in the segment.
    pub uncertain_weight: u32,
}
