//! The `CompiledCanary` class: a compiled canary's bytes, summary and
//! occurrence columns.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::canary::expand::{OccurrenceColumns, occurrence_columns};
use commcanary_core::compile::{Compiled, FIDELITY_FIELDS};
use commcanary_core::output::write_atomic;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::detached;

/// A compiled canary: its canonical bytes and its summary.
#[pyclass(frozen, name = "CompiledCanary", module = "commcanary._core")]
pub(crate) struct PyCompiled {
    pub(crate) inner: Arc<Compiled>,
}

impl PyCompiled {
    pub(crate) fn new(compiled: Compiled) -> Self {
        Self {
            inner: Arc::new(compiled),
        }
    }
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
        detached(py, None, move || write_atomic(&path, &canary.canary))
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
    /// arrival_skew_us, compute_before_us, compute_overlap_us, compute_pressure,
    /// and arrival_offsets_us: every member's offset, concatenated).
    fn occurrences<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let compiled = Arc::clone(&self.inner);
        let c = detached(py, None, move || Ok(occurrence_columns(&compiled.program)))?;
        columns_dict(py, c)
    }
}

/// Occurrence columns as a dict of numpy arrays.
fn columns_dict(py: Python<'_>, c: OccurrenceColumns) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("signature", c.signature.into_pyarray(py))?;
    d.set_item("occurrence", c.occurrence.into_pyarray(py))?;
    d.set_item("gap_us", c.gap_us.into_pyarray(py))?;
    d.set_item("arrival_skew_us", c.arrival_skew_us.into_pyarray(py))?;
    d.set_item("compute_before_us", c.compute_before_us.into_pyarray(py))?;
    d.set_item("compute_overlap_us", c.compute_overlap_us.into_pyarray(py))?;
    d.set_item("compute_pressure", c.compute_pressure.into_pyarray(py))?;
    d.set_item("arrival_offsets_us", c.arrival_offsets_us.into_pyarray(py))?;
    Ok(d)
}

/// The occurrence columns of the canary at `path` (or `data`), as
/// `CompiledCanary.occurrences` gives them, with `signatures`: the canonical
/// JSON of each signature the `signature` column refers to.
#[pyfunction]
#[pyo3(signature = (path, *, data=None))]
pub(crate) fn canary_occurrences<'py>(
    py: Python<'py>,
    path: String,
    data: Option<pyo3::pybacked::PyBackedBytes>,
) -> PyResult<Bound<'py, PyDict>> {
    use commcanary_core::canary::read::read_canary;
    use commcanary_core::sim::signature_json;
    let bytes = crate::replay::read_bytes(py, data, &path)?;
    let (c, signatures) = detached(py, Some(&path), move || {
        let canary = read_canary(&bytes)?;
        let sigs: Vec<Vec<u8>> = canary
            .program
            .signatures
            .iter()
            .map(signature_json)
            .collect();
        Ok((occurrence_columns(&canary.program), sigs))
    })?;
    let d = columns_dict(py, c)?;
    let list: Vec<Bound<'py, PyBytes>> = signatures.iter().map(|s| PyBytes::new(py, s)).collect();
    d.set_item("signatures", list)?;
    Ok(d)
}
