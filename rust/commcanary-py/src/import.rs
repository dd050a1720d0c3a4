//! Importers: `import_kineto_file`.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::Error;
use commcanary_core::import::kineto::{KinetoOptions, import_kineto};
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use commcanary_core::json::JsonLimits;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::detached;
use crate::trace::PyTrace;

/// Imports one rank's PyTorch profiler (Kineto) trace (plain or gzip).
/// Returns the trace and a dict of counts (`imported`, `control`, `empty`,
/// `nested`).
#[pyfunction]
#[pyo3(signature = (path, *, workload_name="kineto-import".to_owned(), phase=None, process_group=None, max_input_bytes=None, max_json_items=None))]
pub(crate) fn import_kineto_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    workload_name: String,
    phase: Option<String>,
    process_group: Option<String>,
    max_input_bytes: Option<i64>,
    max_json_items: Option<i64>,
) -> PyResult<(PyTrace, Bound<'py, PyDict>)> {
    let display = path.display().to_string();
    let imported = detached(py, Some(&display), move || {
        let positive = |name: &'static str, v: Option<i64>, default: u64| match v {
            None => Ok(default),
            Some(n) if n >= 1 => Ok(n as u64),
            Some(_) => Err(Error::option(name, "must be at least 1")),
        };
        let max_bytes = positive("max_input_bytes", max_input_bytes, MAX_INPUT_BYTES)?;
        let max_items = positive(
            "max_json_items",
            max_json_items,
            JsonLimits::default().max_items,
        )?;
        if workload_name.is_empty() {
            return Err(Error::option("workload_name", "must be non-empty"));
        }
        if phase.as_deref() == Some("") {
            return Err(Error::option("phase", "must be non-empty"));
        }
        let options = KinetoOptions {
            workload_name,
            phase,
            process_group,
            json: JsonLimits {
                max_items,
                ..JsonLimits::default()
            },
        };
        let bytes = read_input(&path, max_bytes)?;
        import_kineto(&bytes, &options)
    })?;
    let counts = PyDict::new(py);
    counts.set_item("imported", imported.counts.imported)?;
    counts.set_item("control", imported.counts.control)?;
    counts.set_item("empty", imported.counts.empty)?;
    counts.set_item("nested", imported.counts.nested)?;
    let trace = PyTrace {
        inner: Arc::new(imported.trace),
        source: display,
    };
    Ok((trace, counts))
}
