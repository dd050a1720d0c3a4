//! The one resource policy: every bound applied to untrusted input before
//! anything is expanded or allocated for it.
//!
//! [`Limits`] names every limit; [`current`] is the policy in force for the
//! process and [`set`] replaces it (the CLI's root options and the Python
//! API's `commcanary.limits` do, before any work). Readers take their bounds
//! from [`current`] (the JSON reader's default limits, the trace loader's
//! default options, the input reader, the canary reader's expansion
//! preflight), so one setting governs traces,
//! Kineto files, Flight Recorder dumps, capture shards, canaries, reports
//! and every configuration or evidence file.
//!
//! Invariants:
//! * A refusal names the limit, its value and the flag that raises it
//!   ([`exceeded`]): `exceeds max_ranks=65536 (raise it with commcanary
//!   --max-ranks N)`.
//! * Counting uses checked arithmetic; a count that overflows `u64` is over
//!   every limit.
//! * Defaults admit the workloads the tool is built for: 10^6-event traces
//!   and GB-scale profiler traces (see `docs/resource-limits.md` for each
//!   reason).

use std::sync::RwLock;

use crate::error::Error;

/// Every bound on untrusted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes read from one file, after decompression.
    pub max_input_bytes: u64,
    /// Decompressed bytes per compressed byte, checked as a gzip stream is
    /// read once it has produced [`DECOMPRESSION_RATIO_FLOOR`] bytes.
    pub max_decompression_ratio: u64,
    /// JSON nesting depth (the root value is depth 1).
    pub max_json_depth: u32,
    /// JSON object members plus array elements in one document.
    pub max_json_items: u64,
    /// UTF-8 bytes of one JSON string or key.
    pub max_json_string_bytes: u64,
    /// Characters of one JSON number.
    pub max_json_number_chars: u64,
    /// Events in one trace.
    pub max_trace_events: u64,
    /// Ranks in one event or group.
    pub max_ranks: u64,
    /// JSON items inside one field of a trace event.
    pub max_field_items: u64,
    /// Occurrences a canary expands to (weights × motif repeats × periodic
    /// counts), computed from its compact form before anything expands.
    pub max_expanded_occurrences: u64,
    /// Bytes of one text evidence file (a stack dump, an exception text).
    pub max_text_bytes: u64,
}

/// Below this many decompressed bytes the ratio is not checked: small files
/// compress well for honest reasons, and cost nothing.
pub const DECOMPRESSION_RATIO_FLOOR: u64 = 64 << 20;

impl Limits {
    /// The defaults.
    pub const DEFAULT: Limits = Limits {
        max_input_bytes: 4 << 30,
        max_decompression_ratio: 200,
        max_json_depth: 64,
        max_json_items: 200_000_000,
        max_json_string_bytes: 1 << 20,
        max_json_number_chars: 1024,
        max_trace_events: 20_000_000,
        max_ranks: 65_536,
        max_field_items: 1_000_000,
        max_expanded_occurrences: 100_000_000,
        max_text_bytes: 64 << 20,
    };

    /// Every limit as `(name, value)`, in the documented order.
    #[must_use]
    pub fn entries(&self) -> [(&'static str, u64); 11] {
        [
            ("max_input_bytes", self.max_input_bytes),
            ("max_decompression_ratio", self.max_decompression_ratio),
            ("max_json_depth", u64::from(self.max_json_depth)),
            ("max_json_items", self.max_json_items),
            ("max_json_string_bytes", self.max_json_string_bytes),
            ("max_json_number_chars", self.max_json_number_chars),
            ("max_trace_events", self.max_trace_events),
            ("max_ranks", self.max_ranks),
            ("max_field_items", self.max_field_items),
            ("max_expanded_occurrences", self.max_expanded_occurrences),
            ("max_text_bytes", self.max_text_bytes),
        ]
    }

    /// These limits with `name` set to `value`.
    ///
    /// # Errors
    /// An unknown name, or a value below 1 (or above `u32::MAX` for the
    /// depth).
    pub fn with(mut self, name: &str, value: u64) -> Result<Self, Error> {
        if value < 1 {
            return Err(Error::invalid(format!("{name} must be at least 1")));
        }
        match name {
            "max_input_bytes" => self.max_input_bytes = value,
            "max_decompression_ratio" => self.max_decompression_ratio = value,
            "max_json_depth" => {
                self.max_json_depth = u32::try_from(value)
                    .map_err(|_| Error::invalid(format!("{name} must be at most {}", u32::MAX)))?;
            }
            "max_json_items" => self.max_json_items = value,
            "max_json_string_bytes" => self.max_json_string_bytes = value,
            "max_json_number_chars" => self.max_json_number_chars = value,
            "max_trace_events" => self.max_trace_events = value,
            "max_ranks" => self.max_ranks = value,
            "max_field_items" => self.max_field_items = value,
            "max_expanded_occurrences" => self.max_expanded_occurrences = value,
            "max_text_bytes" => self.max_text_bytes = value,
            _ => {
                return Err(Error::invalid(format!(
                    "no resource limit is named {name:?}"
                )));
            }
        }
        Ok(self)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

static POLICY: RwLock<Limits> = RwLock::new(Limits::DEFAULT);

/// The policy in force.
#[must_use]
pub fn current() -> Limits {
    *POLICY
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Replaces the policy in force; returns the previous one.
pub fn set(limits: Limits) -> Limits {
    let mut slot = POLICY
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::mem::replace(&mut *slot, limits)
}

/// The flag that raises `name`: `commcanary --max-ranks N`.
#[must_use]
pub fn flag(name: &str) -> String {
    format!("--{}", name.replace('_', "-"))
}

/// `(raise it with commcanary --name N)`: what a refusal of `name` ends with.
#[must_use]
pub fn hint(name: &str) -> String {
    format!("(raise it with commcanary {} N)", flag(name))
}

/// `what exceeds name=limit (raise it with commcanary --name N)`, a
/// [`crate::ErrorKind::Limit`] error.
#[must_use]
pub fn exceeded(what: impl std::fmt::Display, name: &str, limit: u64) -> Error {
    Error::limit(format!("{what} exceeds {name}={limit} {}", hint(name)))
}

/// Refuses a gzip stream that has produced `decompressed` bytes from
/// `compressed` input bytes at more than the policy's ratio (past the floor).
///
/// # Errors
/// The refusal, naming `max_decompression_ratio`.
pub fn check_ratio(compressed: u64, decompressed: u64, limits: &Limits) -> Result<(), Error> {
    if decompressed <= DECOMPRESSION_RATIO_FLOOR {
        return Ok(());
    }
    let ratio = limits.max_decompression_ratio;
    if decompressed / compressed.max(1) > ratio {
        return Err(Error::limit(format!(
            "inflates {compressed} compressed bytes to over {decompressed}, more than \
             max_decompression_ratio={ratio} times {}",
            hint("max_decompression_ratio")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_values_are_refused() {
        let l = Limits::DEFAULT;
        for (name, value) in l.entries() {
            assert_eq!(l.with(name, value).unwrap(), l);
        }
        assert!(l.with("max_ranks", 0).is_err());
        assert!(l.with("max_json_depth", u64::MAX).is_err());
        assert!(l.with("max_things", 3).is_err());
        assert_eq!(l.with("max_ranks", 7).unwrap().max_ranks, 7);
    }

    #[test]
    fn the_ratio_is_checked_past_the_floor_only() {
        let l = Limits::DEFAULT;
        assert!(check_ratio(1, DECOMPRESSION_RATIO_FLOOR, &l).is_ok());
        assert!(check_ratio(1 << 20, 100 << 20, &l).is_ok());
        let err = check_ratio(100_000, 100 << 20, &l).unwrap_err();
        assert!(
            err.to_string().contains("max_decompression_ratio=200"),
            "{err}"
        );
        assert!(
            err.to_string().contains("--max-decompression-ratio"),
            "{err}"
        );
    }

    #[test]
    fn a_refusal_names_limit_value_and_flag() {
        let e = exceeded("event 3 field 'ranks'", "max_ranks", 65_536);
        assert_eq!(
            e.to_string(),
            "event 3 field 'ranks' exceeds max_ranks=65536 (raise it with commcanary --max-ranks N)"
        );
    }
}
