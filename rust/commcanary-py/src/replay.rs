//! Bindings for replay, report reading and report verification.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::canary::read::{Canary, read_canary};
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use commcanary_core::output::write_atomic_parts;
use commcanary_core::report::read::{Report, SampleMode, Samples, read_report};
use commcanary_core::report::run::{ReplayRun, replay_canary_bytes};
use commcanary_core::report::{
    SampleColumns, Section, join_sections, recomputed_exposed, sample_columns, section_json,
    section_pieces, verify,
};
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::detached;
use crate::settings::PyReplaySettings;

/// The bytes of `data`, or of the file at `path` read with the input bound.
fn input_bytes(
    data: Option<PyBackedBytes>,
    path: &str,
) -> impl FnOnce() -> commcanary_core::Result<Bytes> + Send + use<> {
    let path = PathBuf::from(path);
    move || match data {
        Some(d) => Ok(Bytes::Python(d)),
        None => read_input(&path, MAX_INPUT_BYTES).map(Bytes::Owned),
    }
}

/// Input bytes: held by Python (no copy) or read from a file.
pub(crate) enum Bytes {
    Python(PyBackedBytes),
    Owned(commcanary_core::input::InputBytes),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Python(b) => b,
            Self::Owned(v) => v,
        }
    }
}

/// Reads input bytes (see [`input_bytes`]) with the interpreter released.
pub(crate) fn read_bytes(
    py: Python<'_>,
    data: Option<PyBackedBytes>,
    path: &str,
) -> PyResult<Bytes> {
    detached(py, Some(path), input_bytes(data, path))
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
    let stored: Vec<(String, Vec<f64>)> = floats.collect();
    for (name, values) in commcanary_core::report::derived_sample_columns(&stored) {
        d.set_item(name, values.into_pyarray(py))?;
    }
    for (name, values) in stored {
        d.set_item(name, values.into_pyarray(py))?;
    }
    if let Some(u) = uncertain {
        d.set_item("compute_fields_uncertain", u.clone().into_pyarray(py))?;
    }
    Ok(d)
}

fn bytes_list<'py>(py: Python<'py>, items: &[Vec<u8>]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for item in items {
        list.append(PyBytes::new(py, item))?;
    }
    Ok(list)
}

/// A replay report: canonical bytes, sections and sample columns.
#[pyclass(frozen, name = "ReplayReport", module = "commcanary._core")]
pub struct PyReplayReport {
    run: Arc<ReplayRun>,
}

#[pymethods]
impl PyReplayReport {
    /// The report's canonical JSON bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &join_sections(&self.run.sections))
    }

    /// Writes the report atomically to `path` (streamed, never joined in memory).
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let run = Arc::clone(&self.run);
        detached(py, None, move || {
            let mut keys = Vec::new();
            let pieces = section_pieces(&run.sections, &mut keys);
            write_atomic_parts(&path, &pieces)
        })
    }

    /// Canonical JSON of every section but `samples`, by name.
    fn sections<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        sections_dict(py, &self.run.sections)
    }

    /// Sample columns as numpy arrays (rounded as stored), or `None`.
    fn samples<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let run = Arc::clone(&self.run);
        let columns: Option<SampleColumns> = detached(py, None, move || {
            Ok(run.replay.as_ref().map(sample_columns))
        })?;
        let Some(c) = columns else {
            return Ok(None);
        };
        let floats = c.floats.iter().map(|(n, v)| ((*n).to_owned(), v.clone()));
        columns_dict(
            py,
            &c.signature,
            self.run.per_iteration,
            floats,
            c.uncertain.as_ref(),
        )
        .map(Some)
    }

    /// Canonical JSON of the signatures samples refer to.
    fn sample_signatures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        bytes_list(py, &self.run.signatures)
    }

    /// The exposed latency of every occurrence, as a report stores it, kept
    /// even when the report carries no samples (what a page draws).
    fn exposed_us<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<f64>> {
        match &self.run.replay {
            Some(r) => commcanary_core::report::exposed_column(r),
            None => self.run.exposed_us.clone(),
        }
        .into_pyarray(py)
    }

    /// Scheduler resource of each signature.
    fn sample_resources(&self) -> Vec<String> {
        self.run.resources.clone()
    }
}

/// Replays the canary at `path` (or `data`, when given) under `settings`.
#[pyfunction]
#[pyo3(signature = (path, settings, *, data=None, include_samples=false))]
pub fn replay_canary(
    py: Python<'_>,
    path: String,
    settings: &PyReplaySettings,
    data: Option<PyBackedBytes>,
    include_samples: bool,
) -> PyResult<PyReplayReport> {
    let settings = Arc::clone(&settings.settings);
    let bytes = read_bytes(py, data, &path)?;
    let run = detached(py, Some(&path), move || {
        replay_canary_bytes(&bytes, &settings, include_samples)
    })?;
    Ok(PyReplayReport { run: Arc::new(run) })
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
        match &self.report.samples {
            Some(s) => bytes_list(py, &s.signatures),
            None => Ok(PyList::empty(py)),
        }
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
    data: Option<PyBackedBytes>,
) -> PyResult<PyReportDocument> {
    let bytes = read_bytes(py, data, &path)?;
    let mode = if samples {
        SampleMode::Parse
    } else {
        SampleMode::Skip
    };
    let report = detached(py, Some(&path), move || read_report(&bytes, mode))?;
    Ok(PyReportDocument {
        report: Arc::new(report),
    })
}

/// A report file and a canary file, each read and checked with its path in
/// any message.
fn report_and_canary(
    py: Python<'_>,
    report_path: &str,
    canary_path: &str,
    samples: SampleMode,
) -> PyResult<(Report, Canary)> {
    let report_bytes = read_bytes(py, None, report_path)?;
    let report = detached(py, Some(report_path), move || {
        read_report(&report_bytes, samples)
    })?;
    let canary_bytes = read_bytes(py, None, canary_path)?;
    let canary = detached(py, Some(canary_path), move || read_canary(&canary_bytes))?;
    Ok((report, canary))
}

/// Verifies a report against a canary: one dict per check, `name`,
/// `passed`, and the `expected` and `actual` JSON when it fails.
#[pyfunction]
pub fn verify_report_files<'py>(
    py: Python<'py>,
    report_path: String,
    canary_path: String,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let (report, canary) = report_and_canary(py, &report_path, &canary_path, SampleMode::Parse)?;
    let checks = detached(py, None, move || verify(&report, &canary))?;
    checks
        .into_iter()
        .map(|c| {
            let d = PyDict::new(py);
            d.set_item("name", c.name)?;
            d.set_item("passed", c.pass)?;
            d.set_item("expected", c.expected.map(|b| PyBytes::new(py, &b)))?;
            d.set_item("actual", c.actual.map(|b| PyBytes::new(py, &b)))?;
            Ok(d)
        })
        .collect()
}

/// The exposed latency of every occurrence of the model report at
/// `report_path`, recomputed by re-running its declared model over the
/// canary at `canary_path`: what a page draws for a report written without
/// samples.
#[pyfunction]
pub fn recomputed_exposed_us<'py>(
    py: Python<'py>,
    report_path: String,
    canary_path: String,
) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
    let (report, canary) = report_and_canary(py, &report_path, &canary_path, SampleMode::Skip)?;
    let exposed = detached(py, Some(&report_path), move || {
        recomputed_exposed(&report, &canary)
    })?;
    Ok(exposed.into_pyarray(py))
}

/// How many times a backend with `floor_per_step` charges its latency
/// floor to one occurrence of `op` over `ranks` ranks.
#[pyfunction]
pub fn algorithm_steps(op: &str, ranks: u32) -> f64 {
    commcanary_core::sim::cost::algorithm_steps(op.as_bytes(), f64::from(ranks))
}

/// How a measured run was made, as it crosses the boundary: a dict of these
/// names (`Measurement` in `commcanary._types`).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct MeasurementArgs {
    engine: String,
    host: String,
    torch_version: String,
    nproc: u32,
    iterations: u32,
    warmup: u32,
    compute_fill: String,
    compute_fill_scale: f64,
    bytes_scale: f64,
}

/// The report of a measured run of the canary at `path` (or `data`): the
/// five per-sample time columns (iteration-major, µs from each iteration's
/// origin) and how the run was made (`measurement`),
/// with `host_cpus` the cores its processes could use on its one host (0:
/// unknown, or several hosts) and `rank_cpu_share` the share of a core
/// each rank kept busy inside its collectives (0: not measured).
#[pyfunction]
#[pyo3(signature = (path, *, first_arrival_us, last_arrival_us, last_entry_us, completion_us, avg_rank_wait_us, measurement, data=None, include_samples=true, host_cpus=0, rank_cpu_share=0.0))]
#[allow(clippy::too_many_arguments)]
pub fn measured_report<'py>(
    py: Python<'py>,
    path: String,
    first_arrival_us: PyReadonlyArray1<'py, f64>,
    last_arrival_us: PyReadonlyArray1<'py, f64>,
    last_entry_us: PyReadonlyArray1<'py, f64>,
    completion_us: PyReadonlyArray1<'py, f64>,
    avg_rank_wait_us: PyReadonlyArray1<'py, f64>,
    measurement: MeasurementArgs,
    data: Option<PyBackedBytes>,
    include_samples: bool,
    host_cpus: u32,
    rank_cpu_share: f64,
) -> PyResult<PyReplayReport> {
    use commcanary_core::report::measured::{Measurement, measured_run};
    use commcanary_core::sim::measured::MeasuredTimes;
    let a = measurement;
    let m = Measurement {
        engine: a.engine,
        host: a.host,
        torch_version: a.torch_version,
        nproc: a.nproc,
        iterations: a.iterations,
        warmup: a.warmup,
        compute_fill: a.compute_fill,
        compute_fill_scale: a.compute_fill_scale,
        bytes_scale: a.bytes_scale,
        host_cpus,
        rank_cpu_share,
    };
    let column = |a: PyReadonlyArray1<'py, f64>| a.as_array().to_vec();
    let (first_arrival_us, last_arrival_us, last_entry_us, completion_us, avg_rank_wait_us) = (
        column(first_arrival_us),
        column(last_arrival_us),
        column(last_entry_us),
        column(completion_us),
        column(avg_rank_wait_us),
    );
    let bytes = read_bytes(py, data, &path)?;
    let run = detached(py, Some(&path), move || {
        let times = MeasuredTimes {
            first_arrival_us: &first_arrival_us,
            last_arrival_us: &last_arrival_us,
            last_entry_us: &last_entry_us,
            completion_us: &completion_us,
            avg_rank_wait_us: &avg_rank_wait_us,
        };
        measured_run(&bytes, &m, times, include_samples)
    })?;
    Ok(PyReplayReport { run: Arc::new(run) })
}
