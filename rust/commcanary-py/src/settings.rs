//! Bindings for replay settings, backend files and configuration lists: each
//! crosses the boundary once, as JSON the core's settings codec reads, and
//! lives on as a frozen, checked object.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::behavior::{
    Configuration, read_configuration_file, read_configurations, read_physical_configurations,
};
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use commcanary_core::output::write_atomic;
use commcanary_core::sim::settings::codec;
use commcanary_core::sim::{BACKEND_SETTINGS, FileRole, Settings};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::errors::detached;

/// Replay settings the core has checked (`ReplaySettings(json)`).
#[pyclass(frozen, name = "ReplaySettings", module = "commcanary._core")]
pub struct PyReplaySettings {
    pub(crate) settings: Arc<Settings>,
}

#[pymethods]
impl PyReplaySettings {
    /// Checks a request: a JSON object of backend settings and the run's
    /// `iterations`, `seed`, `max_replay_events` and `ablations` (absent:
    /// the default); raises `OptionError` naming the first bad one.
    #[new]
    fn new(py: Python<'_>, data: PyBackedBytes) -> PyResult<Self> {
        let settings = detached(py, None, move || codec::settings_from_request(&data))?;
        Ok(Self {
            settings: Arc::new(settings),
        })
    }

    /// Every setting, canonical JSON (overrides as `[op, floor, bandwidth]`).
    fn request_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &codec::request_json(&self.settings))
    }

    /// The `backend` section a report of these settings carries.
    fn backend_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &codec::backend_json(&self.settings))
    }
}

/// The settings of the backend file at `path` (`commcanary calibrate -o`);
/// raises `InputError` naming the field.
#[pyfunction]
pub fn read_backend_file(py: Python<'_>, path: String) -> PyResult<PyReplaySettings> {
    let file = PathBuf::from(&path);
    let settings = detached(py, Some(&path), move || {
        let bytes = read_input(&file, MAX_INPUT_BYTES)?;
        codec::read_backend_file(&bytes)
    })?;
    Ok(PyReplaySettings {
        settings: Arc::new(settings),
    })
}

/// Writes a backend file atomically: `settings`' backend, and the
/// calibration's `fitted_from` and `errors` (JSON).
#[pyfunction]
pub fn write_backend_file(
    py: Python<'_>,
    path: PathBuf,
    settings: &PyReplaySettings,
    fitted_from: PyBackedBytes,
    errors: PyBackedBytes,
) -> PyResult<()> {
    let settings = Arc::clone(&settings.settings);
    detached(py, None, move || {
        let bytes = codec::backend_file_json(&settings, &fitted_from, &errors)?;
        write_atomic(&path, &bytes)
    })
}

/// Every backend setting: `(name, role)`, sorted by name, `role` one of
/// `required`, `calibrated` (a backend file's) and `run` (a what-if).
pub(crate) fn backend_settings() -> Vec<(&'static str, &'static str)> {
    BACKEND_SETTINGS
        .iter()
        .map(|s| {
            let role = match s.file {
                FileRole::Required => "required",
                FileRole::Calibrated => "calibrated",
                FileRole::Run => "run",
            };
            (s.name, role)
        })
        .collect()
}

/// The default settings, as a request gives them (JSON).
pub(crate) fn default_settings_json() -> Vec<u8> {
    codec::request_json(&Settings::default())
}

/// A checked behaviour configuration list.
#[pyclass(frozen, name = "Configurations", module = "commcanary._core")]
pub struct PyConfigurations {
    pub(crate) list: Arc<Vec<Configuration>>,
    resolved: Vec<u8>,
}

#[pymethods]
impl PyConfigurations {
    /// The list with every default filled in (canonical JSON).
    fn resolved_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.resolved)
    }

    /// The names, in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.list.iter().map(|c| c.name.clone()).collect()
    }
}

/// Checks a behaviour configuration list (JSON; `place` names it in
/// errors); raises `InputError` for the first broken rule.
#[pyfunction]
pub fn configurations(
    py: Python<'_>,
    data: PyBackedBytes,
    place: String,
) -> PyResult<PyConfigurations> {
    let (list, resolved) = detached(py, None, move || read_configurations(&data, &place))?;
    Ok(PyConfigurations {
        list: Arc::new(list),
        resolved,
    })
}

/// Checks a list of physical configurations (JSON; `place` names it) and
/// returns it with every default filled in (canonical JSON).
#[pyfunction]
pub fn physical_configurations<'py>(
    py: Python<'py>,
    data: PyBackedBytes,
    place: String,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = detached(py, None, move || {
        read_physical_configurations(&data, &place)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Reads and checks a configuration file (bounded input): a JSON list, or an
/// object whose only member is `configurations`; raises `InputError`.
#[pyfunction]
pub fn configuration_file(py: Python<'_>, path: String) -> PyResult<PyConfigurations> {
    let file = PathBuf::from(&path);
    let bytes = detached(py, Some(&path), move || read_input(&file, MAX_INPUT_BYTES))?;
    let (list, resolved) = detached(py, None, move || read_configuration_file(&bytes, &path))?;
    Ok(PyConfigurations {
        list: Arc::new(list),
        resolved,
    })
}
