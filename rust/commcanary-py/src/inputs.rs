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

/// What a commcanary document file is (plain or gzip, within the input
/// bound), read by the core's readers (`commcanary_core::inspect`):
/// `(format, kind, facts)`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn inspect_file(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(String, &'static str, Vec<(String, String)>)> {
    let display = path.display().to_string();
    detached(py, Some(&display), move || {
        let bytes = read_input(&path, MAX_INPUT_BYTES)?;
        let found = commcanary_core::inspect::inspect(&bytes)?;
        Ok((found.format, found.kind, found.facts))
    })
}

/// The resource policy in force, as `(name, value)` pairs in documented order.
#[pyfunction]
pub fn resource_limits() -> Vec<(&'static str, u64)> {
    commcanary_core::limits::current().entries().to_vec()
}

/// Sets the named limits of the resource policy (the others keep their
/// values) and returns the previous policy's pairs. All or nothing: an
/// unknown name or a value below 1 changes nothing.
#[pyfunction]
pub fn set_resource_limits(values: Vec<(String, u64)>) -> PyResult<Vec<(&'static str, u64)>> {
    use commcanary_core::limits;
    let mut next = limits::current();
    for (name, value) in &values {
        next = next
            .with(name, *value)
            .map_err(|e| crate::errors::to_py_err(&e, None))?;
    }
    Ok(limits::set(next).entries().to_vec())
}
