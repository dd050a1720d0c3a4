//! Bindings for replay, report reading and report verification.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::canary::read::{
    Canary, read_canary, read_canary_deferred, verify_program_digests,
};
use commcanary_core::output::write_atomic_parts;
use commcanary_core::report::read::{Report, SampleMode, Samples, read_report};
use commcanary_core::report::{
    SampleColumns, Section, join_sections, sample_columns, section_json, section_pieces, sections,
    verify,
};
use commcanary_core::sim::{Ablations, Settings, replay};
use commcanary_core::trace::read_input;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::to_py_err;

/// Largest artifact (or decompressed trace) any command reads.
pub(crate) const MAX_ARTIFACT_BYTES: u64 = 4 << 30;

pub(crate) fn read_file(path: &std::path::Path, display: &str) -> PyResult<Vec<u8>> {
    read_input(path, MAX_ARTIFACT_BYTES).map_err(|e| to_py_err(&e, Some(display)))
}

/// Replay settings from keyword arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) fn settings(
    label: String,
    bandwidth_gbps: f64,
    latency_floor_us: f64,
    compute_pressure: f64,
    overlap_efficiency: f64,
    iterations: i64,
    seed: i64,
    max_replay_events: i64,
    ablations: Vec<String>,
) -> PyResult<Settings> {
    let ablations =
        Ablations::parse(ablations.iter().map(String::as_str)).map_err(|e| to_py_err(&e, None))?;
    let iterations = u32::try_from(iterations)
        .ok()
        .filter(|&i| i >= 1)
        .ok_or_else(|| crate::InputError::new_err("iterations must be at least 1"))?;
    let max_replay_events = u64::try_from(max_replay_events)
        .map_err(|_| crate::InputError::new_err("max_replay_events must be at least 1"))?;
    let s = Settings {
        label,
        bandwidth_gbps,
        latency_floor_us,
        compute_pressure,
        overlap_efficiency,
        iterations,
        seed,
        max_replay_events,
        ablations,
    };
    s.validate().map_err(|e| to_py_err(&e, None))?;
    Ok(s)
}

fn sections_dict<'py>(py: Python<'py>, sections: &[Section]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for section in sections {
        if section.0 != "samples" {
            d.set_item(section.0, PyBytes::new(py, &section_json(section)))?;
        }
    }
    Ok(d)
}

fn columns_dict<'py>(
    py: Python<'py>,
    signature: &[u32],
    per_iteration: usize,
    floats: impl Iterator<Item = (String, Vec<f64>)>,
    uncertain: Option<&Vec<bool>>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("signature", signature.to_vec().into_pyarray(py))?;
    let iteration: Vec<u32> = (0..signature.len())
        .map(|i| i.checked_div(per_iteration).unwrap_or(0) as u32)
        .collect();
    d.set_item("iteration", iteration.into_pyarray(py))?;
    for (name, values) in floats {
        d.set_item(name, values.into_pyarray(py))?;
    }
    if let Some(u) = uncertain {
        d.set_item("compute_fields_uncertain", u.clone().into_pyarray(py))?;
    }
    Ok(d)
}

/// A replay report: canonical bytes, sections and sample columns.
#[pyclass(frozen, name = "ReplayReport", module = "commcanary._core")]
pub struct PyReplayReport {
    all: Arc<Vec<Section>>,
    replay: Option<Arc<commcanary_core::sim::Replay>>,
    per_iteration: usize,
    signatures: Vec<Vec<u8>>,
    resources: Vec<String>,
}

#[pymethods]
impl PyReplayReport {
    /// The report's canonical JSON bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &join_sections(&self.all))
    }

    /// Writes the report atomically to `path` (streamed, never joined in memory).
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let all = Arc::clone(&self.all);
        py.detach(move || {
            let mut keys = Vec::new();
            let pieces = section_pieces(&all, &mut keys);
            write_atomic_parts(&path, &pieces)
        })
        .map_err(|e| to_py_err(&e, None))
    }

    /// Canonical JSON of every section but `samples`, by name.
    fn sections<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        sections_dict(py, &self.all)
    }

    /// Sample columns as numpy arrays (rounded as stored), or `None`.
    fn samples<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(r) = &self.replay else {
            return Ok(None);
        };
        let r = Arc::clone(r);
        let c: SampleColumns = py.detach(move || sample_columns(&r));
        let floats = c.floats.iter().map(|(n, v)| ((*n).to_owned(), v.clone()));
        columns_dict(
            py,
            &c.signature,
            self.per_iteration,
            floats,
            c.uncertain.as_ref(),
        )
        .map(Some)
    }

    /// Canonical JSON of the signatures samples refer to.
    fn sample_signatures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for s in &self.signatures {
            list.append(PyBytes::new(py, s))?;
        }
        Ok(list)
    }

    /// Scheduler resource of each signature.
    fn sample_resources(&self) -> Vec<String> {
        self.resources.clone()
    }
}

fn run_replay(
    canary: &Canary,
    s: &Settings,
    include_samples: bool,
) -> commcanary_core::Result<PyReplayReport> {
    let r = replay(&canary.program, s)?;
    let all = sections(canary, &r, s, include_samples);
    Ok(PyReplayReport {
        all: Arc::new(all),
        per_iteration: r.per_iteration,
        signatures: r
            .signatures
            .iter()
            .map(commcanary_core::sim::signature_json)
            .collect(),
        resources: r.resources.clone(),
        replay: include_samples.then(|| Arc::new(r)),
    })
}

/// Replays the canary at `path` (or `data`, when given) under the settings.
#[pyfunction]
#[pyo3(signature = (path, *, data=None, label="simulated-nccl".to_owned(), bandwidth_gbps=55.0, latency_floor_us=7.5, compute_pressure=0.55, overlap_efficiency=0.72, iterations=1, seed=7, max_replay_events=1_000_000, ablations=Vec::new(), include_samples=false))]
#[allow(clippy::too_many_arguments)]
pub fn replay_canary(
    py: Python<'_>,
    path: String,
    data: Option<Vec<u8>>,
    label: String,
    bandwidth_gbps: f64,
    latency_floor_us: f64,
    compute_pressure: f64,
    overlap_efficiency: f64,
    iterations: i64,
    seed: i64,
    max_replay_events: i64,
    ablations: Vec<String>,
    include_samples: bool,
) -> PyResult<PyReplayReport> {
    let s = settings(
        label,
        bandwidth_gbps,
        latency_floor_us,
        compute_pressure,
        overlap_efficiency,
        iterations,
        seed,
        max_replay_events,
        ablations,
    )?;
    let bytes = match data {
        Some(d) => d,
        None => read_file(path.as_ref(), &path)?,
    };
    py.detach(|| {
        let canary = read_canary_deferred(&bytes)?;
        drop(bytes);
        // The program commitments are rechecked on a second core while the
        // replay already runs; a mismatch still fails the command.
        std::thread::scope(|scope| {
            let digests = scope.spawn(|| verify_program_digests(&canary));
            let report = run_replay(&canary, &s, include_samples);
            digests.join().map_err(|_| {
                commcanary_core::Error::invalid("internal error: digest worker panicked")
            })??;
            report
        })
    })
    .map_err(|e| to_py_err(&e, Some(&path)))
}

/// A structurally validated report read from disk.
#[pyclass(frozen, name = "ReportDocument", module = "commcanary._core")]
pub struct PyReportDocument {
    report: Arc<Report>,
}

fn samples_dict<'py>(py: Python<'py>, s: &Samples) -> PyResult<Bound<'py, PyDict>> {
    let floats = s.columns.iter().map(|(n, v)| (n.clone(), v.clone()));
    columns_dict(
        py,
        &s.signature,
        s.per_iteration,
        floats,
        s.uncertain.as_ref(),
    )
}

#[pymethods]
impl PyReportDocument {
    /// Canonical JSON of every section but `samples`, by name.
    fn sections<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, _) in &self.report.sections {
            if let Some(json) = self.report.section_json(name) {
                d.set_item(name, PyBytes::new(py, &json))?;
            }
        }
        Ok(d)
    }

    /// Whether the report embeds samples.
    #[getter]
    fn has_samples(&self) -> bool {
        self.report.has_samples
    }

    /// Sample columns (when they were read), as numpy arrays.
    fn samples<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.report
            .samples
            .as_ref()
            .map(|s| samples_dict(py, s))
            .transpose()
    }

    /// Canonical JSON of the signatures samples refer to.
    fn sample_signatures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        if let Some(s) = &self.report.samples {
            for sig in &s.signatures {
                list.append(PyBytes::new(py, sig))?;
            }
        }
        Ok(list)
    }
}

/// Reads and structurally validates a report. With `samples=False` the
/// samples are syntax-checked but not materialised (fast; enough to compare).
#[pyfunction]
#[pyo3(signature = (path, *, samples=true, data=None))]
pub fn read_report_file(
    py: Python<'_>,
    path: String,
    samples: bool,
    data: Option<Vec<u8>>,
) -> PyResult<PyReportDocument> {
    let bytes = match data {
        Some(d) => d,
        None => read_file(path.as_ref(), &path)?,
    };
    let mode = if samples {
        SampleMode::Parse
    } else {
        SampleMode::Skip
    };
    let report = py
        .detach(|| read_report(&bytes, mode))
        .map_err(|e| to_py_err(&e, Some(&path)))?;
    Ok(PyReportDocument {
        report: Arc::new(report),
    })
}

/// Verifies a report against a canary: list of (check, passed, expected, actual).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn verify_report_files(
    py: Python<'_>,
    report_path: String,
    canary_path: String,
) -> PyResult<Vec<(String, bool, Option<Vec<u8>>, Option<Vec<u8>>)>> {
    let report_bytes = read_file(report_path.as_ref(), &report_path)?;
    let report = py
        .detach(|| read_report(&report_bytes, SampleMode::Parse))
        .map_err(|e| to_py_err(&e, Some(&report_path)))?;
    drop(report_bytes);
    let canary_bytes = read_file(canary_path.as_ref(), &canary_path)?;
    let canary = py
        .detach(|| read_canary(&canary_bytes))
        .map_err(|e| to_py_err(&e, Some(&canary_path)))?;
    drop(canary_bytes);
    let checks = py
        .detach(|| verify(&report, &canary))
        .map_err(|e| to_py_err(&e, None))?;
    Ok(checks
        .into_iter()
        .map(|c| (c.name.to_owned(), c.pass, c.expected, c.actual))
        .collect())
}
