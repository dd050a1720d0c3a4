//! The statistical gate: one statistic judged over repeated runs, and a
//! statistic's run-to-run noise (`commcanary_core::gate`).

use std::collections::HashMap;
use std::path::PathBuf;

use commcanary_core::gate::policy::{
    Policy, THRESHOLD_NAMES, calibration_object, policy_digest, policy_json, read_policy,
};
use commcanary_core::gate::{
    Bootstrap, Direction, NoisePolicy, StatisticRequest, Thresholds, calibrate_statistic,
    judge_statistic,
};
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use commcanary_core::output::write_atomic;
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::detached;

fn columns(arrays: Option<Vec<PyReadonlyArray1<'_, f64>>>) -> Option<Vec<Vec<f64>>> {
    arrays.map(|runs| runs.iter().map(|a| a.as_array().to_vec()).collect())
}

/// Judges one statistic over repeated runs: its change from `baseline` to
/// `candidate` (one value per run), a seeded bootstrap interval (over each
/// run's samples too, when given, for a `quantile` statistic) and the
/// verdict against the threshold (`threshold_pct` of the baseline and
/// `threshold_abs` in the statistic's unit; `decrease`: lower is worse).
#[pyfunction]
#[pyo3(signature = (baseline, candidate, *, threshold_abs, threshold_pct=None, decrease=false, baseline_samples=None, candidate_samples=None, quantile=None, resamples=2000, confidence=0.95, seed=0))]
#[allow(clippy::too_many_arguments)]
pub fn judge_runs<'py>(
    py: Python<'py>,
    baseline: PyReadonlyArray1<'py, f64>,
    candidate: PyReadonlyArray1<'py, f64>,
    threshold_abs: f64,
    threshold_pct: Option<f64>,
    decrease: bool,
    baseline_samples: Option<Vec<PyReadonlyArray1<'py, f64>>>,
    candidate_samples: Option<Vec<PyReadonlyArray1<'py, f64>>>,
    quantile: Option<f64>,
    resamples: u32,
    confidence: f64,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let request = StatisticRequest {
        baseline: baseline.as_array().to_vec(),
        candidate: candidate.as_array().to_vec(),
        baseline_samples: columns(baseline_samples),
        candidate_samples: columns(candidate_samples),
        bootstrap: Bootstrap {
            resamples,
            confidence,
            seed,
            quantile,
        },
        thresholds: Thresholds {
            percent: threshold_pct,
            absolute: threshold_abs,
        },
        direction: if decrease {
            Direction::Decrease
        } else {
            Direction::Increase
        },
    };
    let judged = detached(py, None, move || judge_statistic(request))?;
    let c = judged.change;
    let d = PyDict::new(py);
    d.set_item("baseline", c.baseline)?;
    d.set_item("candidate", c.candidate)?;
    d.set_item("estimate", c.estimate)?;
    d.set_item("low", c.low)?;
    d.set_item("high", c.high)?;
    d.set_item("estimate_pct", c.estimate_pct)?;
    d.set_item("low_pct", c.low_pct)?;
    d.set_item("high_pct", c.high_pct)?;
    d.set_item("verdict", judged.verdict.name())?;
    Ok(d)
}

/// A statistic's run-to-run noise over repeated runs of one configuration
/// (in the order they were made), the threshold it gets (`multiple` × the
/// worse drift, never below the floors) and the smallest regression a gate
/// with `runs` per side fails at `confidence`.
#[pyfunction]
#[pyo3(signature = (values, *, runs, confidence=0.95, multiple=1.5, floor_pct=1.0, floor_abs=1.0))]
pub fn run_noise<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    runs: usize,
    confidence: f64,
    multiple: f64,
    floor_pct: f64,
    floor_abs: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let values = values.as_array().to_vec();
    let policy = NoisePolicy {
        multiple,
        floor_pct,
        floor_absolute: floor_abs,
    };
    let c = detached(py, None, move || {
        calibrate_statistic(&values, runs, confidence, &policy)
    })?;
    let n = c.noise;
    let d = PyDict::new(py);
    d.set_item("runs", n.runs)?;
    d.set_item("mean", n.mean)?;
    d.set_item("sd", n.sd)?;
    d.set_item("split_half", n.split_half)?;
    d.set_item("leave_one_out", n.leave_one_out)?;
    d.set_item("drift_pct", n.drift_pct())?;
    d.set_item("threshold_pct", c.threshold_pct)?;
    d.set_item("threshold_abs", c.threshold_abs)?;
    d.set_item("detectable_pct", c.detectable_pct)?;
    Ok(d)
}

/// Reads a gate policy file (`commcanary.gate_policy.v1`): its confidence,
/// resamples, seed, runs per side, the nine thresholds, how it was
/// calibrated (JSON, or `None`) and the SHA-256 of the file's bytes.
#[pyfunction]
pub fn read_gate_policy(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let display = path.display().to_string();
    let (policy, digest) = detached(py, Some(&display), move || {
        let bytes = read_input(&path, MAX_INPUT_BYTES)?;
        Ok((read_policy(&bytes)?, policy_digest(&bytes)))
    })?;
    let d = PyDict::new(py);
    d.set_item("confidence", policy.confidence)?;
    d.set_item("resamples", policy.resamples)?;
    d.set_item("seed", policy.seed)?;
    d.set_item("min_runs", policy.min_runs)?;
    let thresholds = PyDict::new(py);
    for (name, value) in THRESHOLD_NAMES.iter().zip(policy.thresholds) {
        thresholds.set_item(name, value)?;
    }
    d.set_item("thresholds", thresholds)?;
    d.set_item(
        "calibration",
        policy.calibration.map(|c| PyBytes::new(py, &c)),
    )?;
    d.set_item("sha256", digest)?;
    Ok(d)
}

/// Writes a gate policy file atomically (canonical JSON); the values are
/// checked by the core first. Returns the SHA-256 of the bytes written.
#[pyfunction]
#[pyo3(signature = (path, *, confidence, resamples, seed, min_runs, thresholds, calibration=None))]
#[allow(clippy::too_many_arguments)]
pub fn write_gate_policy(
    py: Python<'_>,
    path: PathBuf,
    confidence: f64,
    resamples: u32,
    seed: u64,
    min_runs: u32,
    thresholds: HashMap<String, f64>,
    calibration: Option<PyBackedBytes>,
) -> PyResult<String> {
    let calibration = calibration.map(|c| c.to_vec());
    detached(py, None, move || {
        let mut table = [f64::NAN; 9];
        for (slot, name) in table.iter_mut().zip(THRESHOLD_NAMES) {
            *slot = thresholds.get(name).copied().unwrap_or(f64::NAN);
        }
        let calibration = calibration.as_deref().map(calibration_object).transpose()?;
        let policy = Policy {
            confidence,
            resamples,
            seed,
            min_runs,
            thresholds: table,
            calibration,
        };
        let bytes = policy_json(&policy)?;
        write_atomic(&path, &bytes)?;
        Ok(policy_digest(&bytes))
    })
}
