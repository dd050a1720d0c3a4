//! `commcanary._core`: the thin PyO3 binding of `commcanary-core`.
//!
//! Every function converts its arguments to owned Rust values, releases the
//! interpreter while the core works (`Python::detach`), and converts the
//! result or maps the core error onto the exception hierarchy defined here.

mod behavior;
mod replay;

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::compile::{
    Budgets, CompileOptions, Compiled, FIDELITY_FIELDS, compile, compile_owned,
};
use commcanary_core::json::{JsonLimits, canon, parse};
use commcanary_core::output::write_atomic as core_write_atomic;
use commcanary_core::trace::{LoadOptions, Trace, flag, load, load_bytes};
use commcanary_core::{Error, ErrorKind, pyfloat};
use numpy::{IntoPyArray, PyArray1};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

create_exception!(
    _core,
    CommCanaryError,
    PyException,
    "Base class of every commcanary error."
);
create_exception!(
    _core,
    InputError,
    CommCanaryError,
    "An input is missing, unreadable, not JSON, over a resource limit, or invalid."
);
create_exception!(
    _core,
    OutputError,
    CommCanaryError,
    "An artifact could not be written (missing directory, symlink, I/O failure)."
);
create_exception!(
    _core,
    BudgetError,
    CommCanaryError,
    "Compilation cannot meet a requested fidelity guarantee (error budget, lossless timing)."
);

pub(crate) fn to_py_err(err: &Error, path: Option<&str>) -> PyErr {
    let message = match path {
        Some(p) => err.with_path(p),
        None => err.message().to_owned(),
    };
    match err.kind() {
        ErrorKind::Budget => BudgetError::new_err(message),
        ErrorKind::Output => OutputError::new_err(message),
        _ => InputError::new_err(message),
    }
}

/// A parsed `commcanary.trace.v1` trace held in columnar form.
#[pyclass(frozen, name = "Trace", module = "commcanary._core")]
pub(crate) struct PyTrace {
    pub(crate) inner: Arc<Trace>,
    pub(crate) source: String,
}

fn f64_column<'py>(py: Python<'py>, values: &[f64]) -> Bound<'py, PyArray1<f64>> {
    values.to_vec().into_pyarray(py)
}

#[pymethods]
impl PyTrace {
    /// Number of events.
    #[getter]
    fn event_count(&self) -> usize {
        self.inner.events.len()
    }

    /// Where the trace was read from (a path, or "<bytes>").
    #[getter]
    fn source(&self) -> &str {
        &self.source
    }

    /// Number of distinct operation signatures.
    #[getter]
    fn signature_count(&self) -> usize {
        self.inner.signatures.len()
    }

    /// Signature index of each event (input order), as a uint32 array.
    fn signature_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.inner.events.signature.clone().into_pyarray(py)
    }

    /// One timing column as a float64 array in input order (NaN where the
    /// event lacks the field). Names: start_us, gap_us, arrival_skew_us,
    /// compute_before_us, compute_overlap_us, compute_pressure, observed_exposed_us.
    fn column<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let ev = &self.inner.events;
        let values = match name {
            "start_us" => &ev.start_us,
            "gap_us" => &ev.gap_us,
            "arrival_skew_us" => &ev.arrival_skew_us,
            "compute_before_us" => &ev.compute_before_us,
            "compute_overlap_us" => &ev.compute_overlap_us,
            "compute_pressure" => &ev.compute_pressure,
            "observed_exposed_us" => &ev.observed_exposed_us,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unknown trace column {name:?}"
                )));
            }
        };
        Ok(f64_column(py, values))
    }

    /// Whether each event carries a per-rank arrival map, as a bool array.
    fn has_arrival_map<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        let v: Vec<bool> = self
            .inner
            .events
            .flags
            .iter()
            .map(|f| f & flag::HAS_ARRIVAL_MAP != 0)
            .collect();
        v.into_pyarray(py)
    }

    /// The signature table: one dict per signature (op, bytes, ranks, ...).
    fn signatures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for sig in &self.inner.signatures {
            let mut out = Vec::new();
            commcanary_core::canary::write::write_signature(&mut out, sig);
            list.append(PyBytes::new(py, &out))?;
        }
        Ok(list)
    }

    /// Compiles the trace into a canary (see `commcanary.compile`).
    #[pyo3(signature = (*, timing_sample_limit=128, timing_sample_limits_by_group=None, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true, allow_empty=false, compiler_members=None))]
    #[allow(clippy::too_many_arguments)]
    fn compile(
        &self,
        py: Python<'_>,
        timing_sample_limit: i64,
        timing_sample_limits_by_group: Option<Vec<(i64, i64)>>,
        max_events: Option<i64>,
        budgets: Option<Vec<(String, f64)>>,
        lossless_timing: bool,
        sequence_motifs: bool,
        allow_empty: bool,
        compiler_members: Option<Vec<(String, Vec<u8>)>>,
    ) -> PyResult<PyCompiled> {
        let mut options = compile_options(
            timing_sample_limit,
            timing_sample_limits_by_group,
            max_events,
            budgets,
            lossless_timing,
            sequence_motifs,
            allow_empty,
        )?;
        for (key, value) in compiler_members.unwrap_or_default() {
            options
                .compiler_members
                .push((key, canonical_member(&value)?));
        }
        let trace = Arc::clone(&self.inner);
        let compiled = py
            .detach(move || compile(&trace, &options))
            .map_err(|e| to_py_err(&e, Some(&self.source)))?;
        Ok(PyCompiled {
            inner: Arc::new(compiled),
        })
    }
}

/// Re-serializes one extra `compiler` member as canonical JSON.
fn canonical_member(value: &[u8]) -> PyResult<Vec<u8>> {
    let doc = parse(value, JsonLimits::default()).map_err(|e| to_py_err(&e, None))?;
    doc.root()
        .map(canon::to_vec)
        .ok_or_else(|| InputError::new_err("a compiler member must be a JSON value"))
}

pub(crate) fn compile_options(
    timing_sample_limit: i64,
    by_group: Option<Vec<(i64, i64)>>,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
    allow_empty: bool,
) -> PyResult<CompileOptions> {
    if timing_sample_limit < 2 {
        return Err(InputError::new_err(
            "timing_sample_limit must be at least 2",
        ));
    }
    if let Some(m) = max_events
        && m < 0
    {
        return Err(InputError::new_err("max_events must be non-negative"));
    }
    let mut b = Budgets::default();
    for (name, value) in budgets.unwrap_or_default() {
        let slot = match name.as_str() {
            "max_gap_error_us" => &mut b.gap,
            "max_skew_error_us" => &mut b.skew,
            "max_arrival_offset_error_us" => &mut b.arrival_offset,
            "max_compute_before_error_us" => &mut b.compute_before,
            "max_overlap_error_us" => &mut b.overlap,
            "max_pressure_error" => &mut b.pressure,
            "max_observed_exposed_error_us" => &mut b.observed_exposed,
            "max_prefix_gap_error_us" => &mut b.prefix_gap,
            _ => {
                return Err(InputError::new_err(format!(
                    "unknown fidelity budget {name:?}; expected one of {}",
                    FIDELITY_FIELDS.join(", ")
                )));
            }
        };
        if !(value >= 0.0 && value.is_finite()) {
            return Err(InputError::new_err(format!("{name} must be non-negative")));
        }
        *slot = Some(value);
    }
    let mut groups = Vec::new();
    for (g, l) in by_group.unwrap_or_default() {
        if g < 0 || l < 0 {
            return Err(InputError::new_err(
                "timing_sample_limits_by_group entries must be non-negative",
            ));
        }
        groups.push((g as usize, l as usize));
    }
    Ok(CompileOptions {
        timing_sample_limit: timing_sample_limit as usize,
        timing_sample_limits_by_group: groups,
        max_events: max_events.map(|m| m as u64),
        budgets: b,
        lossless_timing,
        sequence_motifs,
        allow_empty,
        compiler_members: Vec::new(),
    })
}

/// A compiled canary: its canonical bytes and its summary.
#[pyclass(frozen, name = "CompiledCanary", module = "commcanary._core")]
pub(crate) struct PyCompiled {
    pub(crate) inner: Arc<Compiled>,
}

#[pymethods]
impl PyCompiled {
    /// The canonical JSON bytes of the canary (exactly `canary_bytes` long).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.canary)
    }

    /// Writes the canary atomically to `path` (its directory must exist).
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let canary = Arc::clone(&self.inner);
        py.detach(move || core_write_atomic(&path, &canary.canary))
            .map_err(|e| to_py_err(&e, None))
    }

    /// The compile summary as a dict of plain Python values.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner.summary;
        let d = PyDict::new(py);
        d.set_item("source_events", s.source_events)?;
        d.set_item("trace_events", s.trace_events)?;
        d.set_item("canary_events", s.canary_events)?;
        d.set_item("expanded_canary_events", s.expanded_canary_events)?;
        d.set_item("sequence_motif_count", s.sequence_motif_count)?;
        d.set_item("timing_group_count", s.timing_group_count)?;
        d.set_item("event_compression_ratio", s.event_compression_ratio)?;
        d.set_item("byte_compression_ratio", s.byte_compression_ratio)?;
        d.set_item("source_bytes", s.source_bytes)?;
        d.set_item("canary_bytes", s.canary_bytes)?;
        d.set_item("timing_mode", s.timing_mode)?;
        d.set_item("tail_signal", s.tail_signal)?;
        d.set_item("timing_sample_limit", s.timing_sample_limit)?;
        d.set_item("recursive_timing_records", s.recursive_timing_records)?;
        d.set_item("approximate_timing_records", s.approximate_timing_records)?;
        d.set_item(
            "stored_recursive_timing_records",
            s.stored_recursive_timing_records,
        )?;
        d.set_item(
            "stored_approximate_timing_records",
            s.stored_approximate_timing_records,
        )?;
        d.set_item("fidelity_mode", s.fidelity.mode())?;
        let bounds = PyDict::new(py);
        for (name, v) in FIDELITY_FIELDS.iter().zip(s.fidelity.maxima) {
            bounds.set_item(*name, v)?;
        }
        d.set_item("bounds", bounds)?;
        d.set_item("source_gap_total_us", s.fidelity.source_gap_total_us)?;
        d.set_item("encoded_gap_total_us", s.fidelity.encoded_gap_total_us)?;
        d.set_item("total_gap_error_us", s.fidelity.total_gap_error_us)?;
        d.set_item("source_trace_sha256", &s.source_trace_sha256)?;
        d.set_item("execution_semantic_sha256", &s.execution_semantic_sha256)?;
        d.set_item(
            "calibration_evaluation_sha256",
            &s.calibration_evaluation_sha256,
        )?;
        d.set_item("artifact_provenance_sha256", &s.artifact_provenance_sha256)?;
        d.set_item("source_coverage_status", s.source_coverage_status)?;
        d.set_item(
            "source_coverage_reason",
            s.source_coverage_reason.as_deref(),
        )?;
        d.set_item("uncertain_events", s.uncertain_events)?;
        Ok(d)
    }

    /// The executed timing of the canary, one entry per occurrence in replay
    /// order: a dict of numpy arrays (signature, occurrence, gap_us,
    /// arrival_skew_us, compute_before_us, compute_overlap_us, compute_pressure).
    fn occurrences<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let program = &self.inner.program;
        let (signature, occurrence, gap, skew, before, overlap, pressure) = py.detach(|| {
            let mut cols = (
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
            );
            commcanary_core::canary::expand::for_each_occurrence(program, |_, occ| {
                let p = &program.points[occ.point as usize];
                let ranks = program.signatures[occ.signature as usize].rank_count();
                let offsets = program.point_offsets(p, ranks);
                let hi = offsets.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lo = offsets.iter().copied().fold(f64::INFINITY, f64::min);
                cols.0.push(occ.signature);
                cols.1.push(occ.occurrence);
                cols.2.push(occ.gap_us);
                cols.3.push(hi - lo);
                cols.4.push(p.compute_before_us);
                cols.5.push(p.compute_overlap_us);
                cols.6.push(p.compute_pressure);
            });
            cols
        });
        let d = PyDict::new(py);
        d.set_item("signature", signature.into_pyarray(py))?;
        d.set_item("occurrence", occurrence.into_pyarray(py))?;
        d.set_item("gap_us", gap.into_pyarray(py))?;
        d.set_item("arrival_skew_us", skew.into_pyarray(py))?;
        d.set_item("compute_before_us", before.into_pyarray(py))?;
        d.set_item("compute_overlap_us", overlap.into_pyarray(py))?;
        d.set_item("compute_pressure", pressure.into_pyarray(py))?;
        Ok(d)
    }
}

fn default_load_options() -> LoadOptions {
    LoadOptions::default()
}

/// Reads a trace file and compiles it in one step, releasing the input bytes
/// as soon as the source commitment is taken (lowest peak memory).
#[pyfunction]
#[pyo3(signature = (path, *, timing_sample_limit=128, timing_sample_limits_by_group=None, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true, allow_empty=false))]
#[allow(clippy::too_many_arguments)]
fn compile_file(
    py: Python<'_>,
    path: PathBuf,
    timing_sample_limit: i64,
    timing_sample_limits_by_group: Option<Vec<(i64, i64)>>,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
    allow_empty: bool,
) -> PyResult<PyCompiled> {
    let options = compile_options(
        timing_sample_limit,
        timing_sample_limits_by_group,
        max_events,
        budgets,
        lossless_timing,
        sequence_motifs,
        allow_empty,
    )?;
    let display = path.display().to_string();
    let load_options = default_load_options();
    let compiled = py
        .detach(move || {
            let trace = load(&path, &load_options)?;
            compile_owned(trace, &options)
        })
        .map_err(|e| to_py_err(&e, Some(&display)))?;
    Ok(PyCompiled {
        inner: Arc::new(compiled),
    })
}

/// Writes `data` to `path` atomically (temporary file, fsync, rename).
#[pyfunction]
fn write_atomic(py: Python<'_>, path: PathBuf, data: Vec<u8>) -> PyResult<()> {
    py.detach(move || core_write_atomic(&path, &data))
        .map_err(|e| to_py_err(&e, None))
}

/// Reads and validates a trace file (plain or gzip JSON).
#[pyfunction]
fn load_trace(py: Python<'_>, path: PathBuf) -> PyResult<PyTrace> {
    let display = path.display().to_string();
    let options = default_load_options();
    let trace = py
        .detach(|| load(&path, &options))
        .map_err(|e| to_py_err(&e, Some(&display)))?;
    Ok(PyTrace {
        inner: Arc::new(trace),
        source: display,
    })
}

/// Parses and validates a trace from bytes already in memory.
#[pyfunction]
#[pyo3(signature = (data, name="<bytes>"))]
fn load_trace_bytes(py: Python<'_>, data: Vec<u8>, name: &str) -> PyResult<PyTrace> {
    let options = default_load_options();
    let trace = py
        .detach(|| load_bytes(&data, &options))
        .map_err(|e| to_py_err(&e, Some(name)))?;
    Ok(PyTrace {
        inner: Arc::new(trace),
        source: name.to_owned(),
    })
}

/// Re-serializes JSON bytes as canonical JSON v1 (what CPython's
/// `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)` gives).
#[pyfunction]
fn canonical_json<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let doc = parse(data, JsonLimits::default()).map_err(|e| to_py_err(&e, None))?;
    let out = doc.root().map(canon::to_vec).unwrap_or_default();
    Ok(PyBytes::new(py, &out))
}

/// CPython's `repr(float)`, computed in Rust.
#[pyfunction]
fn float_repr(x: f64) -> String {
    pyfloat::repr(x)
}

/// CPython's `round(x, ndigits)`, computed in Rust.
#[pyfunction]
fn py_round(x: f64, ndigits: u32) -> f64 {
    pyfloat::round(x, ndigits)
}

#[pymodule]
mod _core {
    #[pymodule_export]
    use super::behavior::{
        PyBehaviorReference, behavior_reference, behavior_search, check_canary, evaluate_behavior,
        read_input_file,
    };
    #[pymodule_export]
    use super::replay::{
        PyReplayReport, PyReportDocument, read_report_file, replay_canary, verify_report_files,
    };
    #[pymodule_export]
    use super::{
        BudgetError, CommCanaryError, InputError, OutputError, PyCompiled, PyTrace, canonical_json,
        compile_file, float_repr, load_trace, load_trace_bytes, py_round, write_atomic,
    };

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("CANARY_FORMAT", commcanary_core::canary::CANARY_FORMAT)?;
        m.add("TRACE_FORMAT", commcanary_core::trace::TRACE_FORMAT)?;
        Ok(())
    }
}
