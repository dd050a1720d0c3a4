//! What a compilation may be asked: the timing sample limits, the event
//! ceiling, the eight error budgets and the switches.
//!
//! [`CompileOptions::checked`] is the one place caller-supplied values are
//! range-checked; every front end (the Python API, the command line, the
//! behaviour search) builds its options through it, so each bad value has one
//! message, naming the option as the API spells it ([`Error::option`]).

use crate::canary::FIDELITY_FIELDS;
use crate::error::{Error, Result};
use crate::json::{JsonLimits, canon, parse};

/// The default number of timing records kept per signature group.
pub const DEFAULT_TIMING_SAMPLE_LIMIT: usize = 128;

/// The one rule for a timing sample limit: at least 2 (a group keeps at
/// least its first and last record). Every front end and the compiler
/// itself check it here.
///
/// # Errors
/// A limit below 2, named `timing_sample_limit`.
pub fn checked_timing_sample_limit(limit: i64) -> Result<usize> {
    checked_sample_limit("timing_sample_limit", limit)
}

/// [`checked_timing_sample_limit`]'s rule for a limit the API names `name`
/// (the behaviour search's lowest limit).
///
/// # Errors
/// A limit below 2, named `name`.
pub fn checked_sample_limit(name: &'static str, limit: i64) -> Result<usize> {
    if limit < 2 {
        return Err(Error::option(name, "must be at least 2"));
    }
    usize::try_from(limit).map_err(|_| Error::option(name, "is too large"))
}

/// A count option that must be at least 1 (a sample count, a budget),
/// `default` when not given.
///
/// # Errors
/// A value below 1, named `name`.
pub fn checked_count(name: &'static str, value: Option<i64>, default: u64) -> Result<u64> {
    match value {
        None => Ok(default),
        Some(n) if n >= 1 => Ok(n as u64),
        Some(_) => Err(Error::option(name, "must be at least 1")),
    }
}

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

    /// Sets the budget called `name` (one of [`FIDELITY_FIELDS`]).
    ///
    /// # Errors
    /// An unknown name, or a value that is negative or not finite.
    pub fn set(&mut self, name: &str, value: f64) -> Result<()> {
        let index = FIDELITY_FIELDS
            .iter()
            .position(|f| *f == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown fidelity budget {name:?}; expected one of {}",
                    FIDELITY_FIELDS.join(", ")
                ))
            })?;
        if !(value >= 0.0 && value.is_finite()) {
            return Err(Error::option(
                FIDELITY_FIELDS[index],
                "must be non-negative",
            ));
        }
        let slot = match index {
            0 => &mut self.gap,
            1 => &mut self.skew,
            2 => &mut self.arrival_offset,
            3 => &mut self.compute_before,
            4 => &mut self.overlap,
            5 => &mut self.pressure,
            6 => &mut self.observed_exposed,
            _ => &mut self.prefix_gap,
        };
        *slot = Some(value);
        Ok(())
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
    /// Encode a trace with iterations (`step`) as a step loop when smaller.
    pub step_loops: bool,
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
            timing_sample_limit: DEFAULT_TIMING_SAMPLE_LIMIT,
            timing_sample_limits_by_group: Vec::new(),
            max_events: None,
            budgets: Budgets::default(),
            lossless_timing: false,
            sequence_motifs: true,
            step_loops: true,
            allow_empty: false,
            compiler_members: Vec::new(),
        }
    }
}

/// Caller-supplied compile options, unchecked (signed, as a front end
/// receives them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestedOptions {
    /// `timing_sample_limit`; `None` is [`DEFAULT_TIMING_SAMPLE_LIMIT`].
    pub timing_sample_limit: Option<i64>,
    /// `timing_sample_limits_by_group` as `(group, limit)` pairs.
    pub timing_sample_limits_by_group: Vec<(i64, i64)>,
    /// `max_events`.
    pub max_events: Option<i64>,
    /// Budgets by their [`FIDELITY_FIELDS`] names.
    pub budgets: Vec<(String, f64)>,
    /// `lossless_timing`.
    pub lossless_timing: bool,
    /// `sequence_motifs`.
    pub sequence_motifs: bool,
    /// `step_loops`.
    pub step_loops: bool,
    /// `allow_empty`.
    pub allow_empty: bool,
}

impl CompileOptions {
    /// Adds an extra `compiler` member from its JSON text, re-serialized as
    /// canonical JSON.
    ///
    /// # Errors
    /// Text that is not one JSON value.
    pub fn add_compiler_member(&mut self, key: String, json: &[u8]) -> Result<()> {
        let doc = parse(json, JsonLimits::default())?;
        let value = doc
            .root()
            .map(canon::to_vec)
            .ok_or_else(|| Error::invalid("a compiler member must be a JSON value"))?;
        self.compiler_members.push((key, value));
        Ok(())
    }

    /// Range-checks caller-supplied options and builds them.
    ///
    /// # Errors
    /// The first value out of range, as an [`Error::option`] naming it.
    pub fn checked(requested: &RequestedOptions) -> Result<Self> {
        let limit = checked_timing_sample_limit(
            requested
                .timing_sample_limit
                .unwrap_or(DEFAULT_TIMING_SAMPLE_LIMIT as i64),
        )?;
        let max_events = match requested.max_events {
            Some(m) if m < 0 => return Err(Error::option("max_events", "must be non-negative")),
            m => m.map(|m| m as u64),
        };
        let mut budgets = Budgets::default();
        for (name, value) in &requested.budgets {
            budgets.set(name, *value)?;
        }
        let mut groups = Vec::with_capacity(requested.timing_sample_limits_by_group.len());
        for &(group, group_limit) in &requested.timing_sample_limits_by_group {
            if group < 0 || group_limit < 0 {
                return Err(Error::option(
                    "timing_sample_limits_by_group",
                    "entries must be non-negative",
                ));
            }
            groups.push((group as usize, group_limit as usize));
        }
        Ok(Self {
            timing_sample_limit: limit,
            timing_sample_limits_by_group: groups,
            max_events,
            budgets,
            lossless_timing: requested.lossless_timing,
            sequence_motifs: requested.sequence_motifs,
            step_loops: requested.step_loops,
            allow_empty: requested.allow_empty,
            compiler_members: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn requested() -> RequestedOptions {
        RequestedOptions {
            sequence_motifs: true,
            step_loops: true,
            ..RequestedOptions::default()
        }
    }

    #[test]
    fn defaults_match_the_default_options() {
        assert_eq!(
            CompileOptions::checked(&requested()).unwrap(),
            CompileOptions::default()
        );
    }

    #[test]
    fn bad_values_name_their_option() {
        let mut r = requested();
        r.timing_sample_limit = Some(1);
        let e = CompileOptions::checked(&r).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Option);
        assert_eq!(e.option_name(), Some("timing_sample_limit"));
        assert_eq!(e.option_rule(), "must be at least 2");
        assert_eq!(e.message(), "timing_sample_limit must be at least 2");

        let mut r = requested();
        r.budgets = vec![("max_pressure_error".into(), -1.0)];
        let e = CompileOptions::checked(&r).unwrap_err();
        assert_eq!(e.option_name(), Some("max_pressure_error"));

        let mut r = requested();
        r.max_events = Some(-3);
        assert_eq!(
            CompileOptions::checked(&r).unwrap_err().option_name(),
            Some("max_events")
        );
    }

    #[test]
    fn an_unknown_budget_lists_the_known_ones() {
        let mut b = Budgets::default();
        let e = b.set("max_typo_us", 1.0).unwrap_err();
        assert!(e.message().contains("max_gap_error_us, max_skew_error_us"));
        b.set("max_prefix_gap_error_us", 0.5).unwrap();
        assert_eq!(b.prefix_gap, Some(0.5));
    }
}
