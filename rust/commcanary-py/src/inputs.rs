//! Reading inputs for the Python-side verifiers: a file with the input bound
//! every command applies, and a full validation of a canary.

use std::path::PathBuf;

use commcanary_core::canary::read::read_canary;
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::errors::detached;
use crate::replay::read_bytes;

/// Fully validates a canary (structure, weights, commitments, sizes) and
/// returns its `compiler.source_events`.
#[pyfunction]
#[pyo3(signature = (path, *, data=None))]
pub fn check_canary(py: Python<'_>, path: PathBuf, data: Option<PyBackedBytes>) -> PyResult<u64> {
    let display = path.display().to_string();
    let bytes = read_bytes(py, data, &display)?;
    detached(py, Some(&display), move || {
        read_canary(&bytes).map(|c| c.source_events)
    })
}

/// Reads an input file (plain or gzip) with the size bound every command
/// applies, for the Python-side verifiers.
#[pyfunction]
pub fn read_input_file<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyBytes>> {
    let display = path.display().to_string();
    let bytes = detached(py, Some(&display), move || {
        read_input(&path, MAX_INPUT_BYTES)
    })?;
    Ok(PyBytes::new(py, &bytes))
}
