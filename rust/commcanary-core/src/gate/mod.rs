//! The statistical gate: judging a candidate against a baseline when each
//! side is several runs of one configuration, and calibrating that judgement
//! on the run-to-run noise of a configuration (A/A).
//!
//! * [`interval`] — the change of one gated statistic between two sides,
//!   with a confidence interval from a seeded, deterministic bootstrap over
//!   runs (and, where runs carry their samples, over each run's samples:
//!   a two-level bootstrap, so both run-to-run drift and within-run spread
//!   count);
//! * [`judge`] — the verdict of one statistic from its interval against its
//!   thresholds: `fail` when the interval lies wholly beyond the threshold,
//!   `pass` or `warn` (the estimate beyond half of it, as the one-run gate
//!   warns) when it lies wholly inside, `inconclusive` when it straddles it;
//! * [`calibrate`] — a statistic's noise over repeated runs of one
//!   configuration (split-half and leave-one-out drift) and the threshold and
//!   smallest detectable regression that follow from it.
//!
//! Invariants: the same inputs and seed give the same bits; runs whose
//! values are all equal (deterministic model replays) give a zero-width
//! interval, so their verdict is the point verdict and never
//! `inconclusive`; every function is total on finite input (a side with no
//! runs is refused by the caller, [`check_sides`]).

mod calibrate;
mod interval;
mod judge;

pub use calibrate::{
    Noise, NoisePolicy, detectable_regression, noise, normal_quantile, threshold_for,
};
pub use interval::{Bootstrap, Change, Side, change_interval};
pub use judge::{Direction, Thresholds, Verdict, judge};

use crate::error::{Error, Result};

/// Checks both sides have runs and every value is finite.
///
/// # Errors
/// A side with no runs, or a value that is not finite, named by side.
pub fn check_sides(baseline: &Side<'_>, candidate: &Side<'_>) -> Result<()> {
    for (name, side) in [("baseline", baseline), ("candidate", candidate)] {
        if side.values.is_empty() {
            return Err(Error::invalid(format!("the {name} side has no runs")));
        }
        if side.values.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "the {name} side has a value that is not a finite number"
            )));
        }
        if let Some(samples) = side.samples
            && samples.len() != side.values.len()
        {
            return Err(Error::invalid(format!(
                "the {name} side has {} runs but samples for {}",
                side.values.len(),
                samples.len()
            )));
        }
    }
    Ok(())
}
