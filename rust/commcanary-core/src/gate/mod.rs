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
//!   smallest detectable regression that follow from it;
//! * [`policy`] — the predeclared policy document (`commcanary.gate_policy.v1`).
//!
//! Invariants: the same inputs and seed give the same bits; runs whose
//! values are all equal (deterministic model replays) give a zero-width
//! interval, so their verdict is the point verdict and never
//! `inconclusive`; every function is total on finite input (a side with no
//! runs is refused by the caller, [`check_sides`]).

mod calibrate;
mod interval;
mod judge;
pub mod policy;

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

/// One statistic to judge: its values over each side's runs, the runs'
/// samples where the statistic is a quantile of them, how the interval is
/// drawn and the threshold.
#[derive(Debug, Clone)]
pub struct StatisticRequest {
    /// The statistic over the baseline's runs.
    pub baseline: Vec<f64>,
    /// The statistic over the candidate's runs.
    pub candidate: Vec<f64>,
    /// Each baseline run's samples (any order), when they are carried.
    pub baseline_samples: Option<Vec<Vec<f64>>>,
    /// Each candidate run's samples (any order), when they are carried.
    pub candidate_samples: Option<Vec<Vec<f64>>>,
    /// How the interval is drawn.
    pub bootstrap: Bootstrap,
    /// The fail threshold.
    pub thresholds: Thresholds,
    /// Which way the statistic gets worse.
    pub direction: Direction,
}

/// A judged statistic: its change, interval and verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// The change and its interval.
    pub change: Change,
    /// The verdict.
    pub verdict: Verdict,
}

/// Judges one statistic: checks the sides, sorts the samples, draws the
/// interval and applies the rule.
///
/// # Errors
/// A side with no runs, a value that is not finite, samples for another
/// number of runs, or bootstrap options out of range.
pub fn judge_statistic(mut request: StatisticRequest) -> Result<Judged> {
    let b = &request.bootstrap;
    if b.resamples == 0 || b.resamples > 100_000 {
        return Err(Error::option("resamples", "must be between 1 and 100000"));
    }
    if !(b.confidence > 0.0 && b.confidence < 1.0) {
        return Err(Error::option(
            "confidence",
            "must be between 0 and 1 (exclusive)",
        ));
    }
    if b.quantile.is_some_and(|q| !(0.0..=100.0).contains(&q)) {
        return Err(Error::option("quantile", "must be between 0 and 100"));
    }
    for samples in [
        &mut request.baseline_samples,
        &mut request.candidate_samples,
    ]
    .into_iter()
    .flatten()
    {
        for run in samples.iter_mut() {
            if run.iter().any(|v| !v.is_finite()) {
                return Err(Error::invalid(
                    "a run's samples hold a value that is not finite",
                ));
            }
            run.sort_by(f64::total_cmp);
        }
    }
    let baseline = Side {
        values: &request.baseline,
        samples: request.baseline_samples.as_deref(),
    };
    let candidate = Side {
        values: &request.candidate,
        samples: request.candidate_samples.as_deref(),
    };
    check_sides(&baseline, &candidate)?;
    let change = change_interval(&baseline, &candidate, &request.bootstrap);
    Ok(Judged {
        change,
        verdict: judge(&change, &request.thresholds, request.direction),
    })
}

/// A statistic calibrated on repeated runs of one configuration: its noise,
/// the threshold it gets and the smallest regression the gate then fails.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// The runs' noise.
    pub noise: Noise,
    /// Percent threshold.
    pub threshold_pct: f64,
    /// Absolute threshold (the statistic's unit).
    pub threshold_abs: f64,
    /// Smallest detectable regression, percent of the mean.
    pub detectable_pct: Option<f64>,
}

/// Calibrates one statistic from its values over repeated runs (in the
/// order they were made), for a gate with `runs` per side at `confidence`.
///
/// # Errors
/// Fewer than two values or one that is not finite, or options out of
/// range, named as the API spells them.
pub fn calibrate_statistic(
    values: &[f64],
    runs: usize,
    confidence: f64,
    policy: &NoisePolicy,
) -> Result<Calibration> {
    if values.len() < 2 {
        return Err(Error::invalid(
            "calibration needs at least two runs of one configuration",
        ));
    }
    if values.iter().any(|v| !v.is_finite()) {
        return Err(Error::invalid("a run's value is not a finite number"));
    }
    if runs == 0 {
        return Err(Error::option("runs", "must be at least 1"));
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(Error::option(
            "confidence",
            "must be between 0 and 1 (exclusive)",
        ));
    }
    if !(policy.multiple > 0.0 && policy.multiple.is_finite()) {
        return Err(Error::option("multiple", "must be positive"));
    }
    for (name, v) in [
        ("floor_pct", policy.floor_pct),
        ("floor_abs", policy.floor_absolute),
    ] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(Error::option(name, "must be non-negative"));
        }
    }
    let noise = noise(values);
    let (threshold_pct, threshold_abs) = threshold_for(&noise, policy);
    Ok(Calibration {
        noise,
        threshold_pct,
        threshold_abs,
        detectable_pct: detectable_regression(&noise, threshold_pct, runs, confidence),
    })
}
