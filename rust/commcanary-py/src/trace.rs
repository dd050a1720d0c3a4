//! Traces and compilation: `load_trace`, `load_trace_bytes`, `compile_file`
//! and the `Trace` class.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::compile::{CompileOptions, RequestedOptions, compile, compile_owned};
use commcanary_core::output::write_atomic;
use commcanary_core::trace::{LoadOptions, Trace, flag, load, load_bytes};
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList};

use crate::compiled::PyCompiled;
use crate::errors::detached;

/// A parsed `commcanary.trace.v1` trace held in columnar form.
#[pyclass(frozen, name = "Trace", module = "commcanary._core")]
pub(crate) struct PyTrace {
    pub(crate) inner: Arc<Trace>,
    pub(crate) source: String,
}

/// Canonical JSON of a whole trace, events in input order.
fn trace_json(trace: &Trace) -> Vec<u8> {
    let order: Vec<u32> = (0..trace.events.len() as u32).collect();
    let mut out = Vec::new();
    trace.write_projection(&order, &mut |piece| out.extend_from_slice(piece));
    out
}

/// Builds checked compile options from the keyword arguments every compile
/// entry point takes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compile_options(
    timing_sample_limit: Option<i64>,
    by_group: Option<Vec<(i64, i64)>>,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
    step_loops: bool,
    allow_empty: bool,
) -> commcanary_core::Result<CompileOptions> {
    CompileOptions::checked(&RequestedOptions {
        timing_sample_limit,
        timing_sample_limits_by_group: by_group.unwrap_or_default(),
        max_events,
        budgets: budgets.unwrap_or_default(),
        lossless_timing,
        sequence_motifs,
        step_loops,
        allow_empty,
    })
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
        let values = self
            .inner
            .events
            .column(name)
            .ok_or_else(|| PyValueError::new_err(format!("unknown trace column {name:?}")))?;
        Ok(values.to_vec().into_pyarray(py))
    }

    /// The events as an Apache Arrow table (`commcanary.arrow.trace_table`;
    /// needs pyarrow, the `arrow` extra).
    fn to_arrow<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("commcanary.arrow")?
            .call_method1("trace_table", (slf,))
    }

    /// Whether each event carries a per-rank arrival map, as a bool array.
    fn has_arrival_map<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        let flags = &self.inner.events.flags;
        let v: Vec<bool> = flags
            .iter()
            .map(|f| f & flag::HAS_ARRIVAL_MAP != 0)
            .collect();
        v.into_pyarray(py)
    }

    /// The signature table: canonical JSON of each signature (op, bytes, ranks, ...).
    fn signatures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for sig in &self.inner.signatures {
            list.append(PyBytes::new(py, &commcanary_core::sim::signature_json(sig)))?;
        }
        Ok(list)
    }

    /// The trace as canonical `commcanary.trace.v1` JSON bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let trace = Arc::clone(&self.inner);
        let bytes = detached(py, None, move || Ok(trace_json(&trace)))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The source coverage a compile with `max_events` would record:
    /// `(status, reason)`, without compiling.
    #[pyo3(signature = (max_events=None))]
    fn source_coverage(&self, max_events: Option<u64>) -> (&'static str, Option<String>) {
        commcanary_core::compile::source_coverage(&self.inner, max_events)
    }

    /// Writes the trace atomically to `path` as canonical JSON.
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let trace = Arc::clone(&self.inner);
        detached(py, None, move || write_atomic(&path, &trace_json(&trace)))
    }

    /// Compiles the trace into a canary (see `commcanary.compile`).
    #[pyo3(signature = (*, timing_sample_limit=None, timing_sample_limits_by_group=None, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true, step_loops=true, allow_empty=false, compiler_members=None))]
    #[allow(clippy::too_many_arguments)]
    fn compile(
        &self,
        py: Python<'_>,
        timing_sample_limit: Option<i64>,
        timing_sample_limits_by_group: Option<Vec<(i64, i64)>>,
        max_events: Option<i64>,
        budgets: Option<Vec<(String, f64)>>,
        lossless_timing: bool,
        sequence_motifs: bool,
        step_loops: bool,
        allow_empty: bool,
        compiler_members: Option<Vec<(String, PyBackedBytes)>>,
    ) -> PyResult<PyCompiled> {
        let trace = Arc::clone(&self.inner);
        let compiled = detached(py, Some(&self.source), move || {
            let mut options = compile_options(
                timing_sample_limit,
                timing_sample_limits_by_group,
                max_events,
                budgets,
                lossless_timing,
                sequence_motifs,
                step_loops,
                allow_empty,
            )?;
            for (key, value) in compiler_members.unwrap_or_default() {
                options.add_compiler_member(key, &value)?;
            }
            compile(&trace, &options)
        })?;
        Ok(PyCompiled::new(compiled))
    }
}

/// Checks compile options without compiling (what `compile_file` checks
/// first); raises `OptionError`.
#[pyfunction]
#[pyo3(signature = (*, timing_sample_limit=None, timing_sample_limits_by_group=None, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true, step_loops=true, allow_empty=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_compile_options(
    py: Python<'_>,
    timing_sample_limit: Option<i64>,
    timing_sample_limits_by_group: Option<Vec<(i64, i64)>>,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
    step_loops: bool,
    allow_empty: bool,
) -> PyResult<()> {
    detached(py, None, move || {
        compile_options(
            timing_sample_limit,
            timing_sample_limits_by_group,
            max_events,
            budgets,
            lossless_timing,
            sequence_motifs,
            step_loops,
            allow_empty,
        )
        .map(|_| ())
    })
}

/// Reads a trace file and compiles it in one step, releasing the input bytes
/// as soon as the source commitment is taken (lowest peak memory).
#[pyfunction]
#[pyo3(signature = (path, *, timing_sample_limit=None, timing_sample_limits_by_group=None, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true, step_loops=true, allow_empty=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn compile_file(
    py: Python<'_>,
    path: PathBuf,
    timing_sample_limit: Option<i64>,
    timing_sample_limits_by_group: Option<Vec<(i64, i64)>>,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
    step_loops: bool,
    allow_empty: bool,
) -> PyResult<PyCompiled> {
    let display = path.display().to_string();
    let compiled = detached(py, Some(&display), move || {
        let options = compile_options(
            timing_sample_limit,
            timing_sample_limits_by_group,
            max_events,
            budgets,
            lossless_timing,
            sequence_motifs,
            step_loops,
            allow_empty,
        )?;
        let trace = load(&path, &LoadOptions::default())?;
        compile_owned(trace, &options)
    })?;
    Ok(PyCompiled::new(compiled))
}

/// Reads and validates a trace file (plain or gzip JSON).
#[pyfunction]
pub(crate) fn load_trace(py: Python<'_>, path: PathBuf) -> PyResult<PyTrace> {
    let display = path.display().to_string();
    let trace = detached(py, Some(&display), move || {
        load(&path, &LoadOptions::default())
    })?;
    Ok(PyTrace {
        inner: Arc::new(trace),
        source: display,
    })
}

/// Parses and validates a trace from bytes already in memory.
#[pyfunction]
#[pyo3(signature = (data, name="<bytes>"))]
pub(crate) fn load_trace_bytes(
    py: Python<'_>,
    data: PyBackedBytes,
    name: &str,
) -> PyResult<PyTrace> {
    let trace = detached(py, Some(name), || {
        load_bytes(&data, &LoadOptions::default())
    })?;
    Ok(PyTrace {
        inner: Arc::new(trace),
        source: name.to_owned(),
    })
}
