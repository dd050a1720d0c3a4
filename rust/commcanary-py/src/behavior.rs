//! Bindings for behaviour verification and behaviour search.
//!
//! Configurations cross the boundary as a checked `Configurations` (see
//! `settings`) and tolerances as a dict of their API names
//! (`BehaviorTolerances` in `commcanary._types`); every rule on the values is
//! checked in the core.

use std::path::PathBuf;
use std::sync::Arc;

use std::sync::Mutex;

use commcanary_core::behavior::search::{SearchOptions, search_with_progress};
use commcanary_core::behavior::{
    Configuration, Run, Tolerances, evaluate, reference_program, runs,
};
use commcanary_core::canary::read::read_canary;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};

use crate::compiled::PyCompiled;
use crate::errors::detached;
use crate::replay::read_bytes;
use crate::settings::PyConfigurations;
use crate::trace::{PyTrace, compile_options};

/// Tolerances as they cross the boundary: a dict of their API names.
#[derive(FromPyObject, Clone, Copy)]
#[pyo3(from_item_all)]
pub struct ToleranceArgs {
    relative_tolerance_pct: f64,
    absolute_tolerance_us: f64,
    hidden_tolerance_points: f64,
    tail_recall_threshold: f64,
    ranking_tie_tolerance_us: f64,
}

fn tolerances(t: ToleranceArgs) -> commcanary_core::Result<Tolerances> {
    let t = Tolerances {
        relative_pct: t.relative_tolerance_pct,
        absolute_us: t.absolute_tolerance_us,
        hidden_points: t.hidden_tolerance_points,
        tail_recall: t.tail_recall_threshold,
        tie_us: t.ranking_tie_tolerance_us,
    };
    t.validate()?;
    Ok(t)
}

/// Checks behaviour tolerances with the core's rules; raises `OptionError` naming the first out of
/// range.
#[pyfunction]
pub fn check_tolerances(py: Python<'_>, tolerances: ToleranceArgs) -> PyResult<()> {
    detached(py, None, move || self::tolerances(tolerances).map(|_| ()))
}

/// The source side of behaviour checks: the trace's lossless program replayed
/// under each configuration.
#[pyclass(frozen, name = "BehaviorReference", module = "commcanary._core")]
pub struct PyBehaviorReference {
    configurations: Arc<Vec<Configuration>>,
    runs: Arc<Vec<Run>>,
    trace_events: usize,
}

#[pymethods]
impl PyBehaviorReference {
    /// Configuration names, in order.
    #[getter]
    fn configuration_names(&self) -> Vec<String> {
        self.configurations.iter().map(|c| c.name.clone()).collect()
    }

    /// Events in the source trace.
    #[getter]
    fn trace_events(&self) -> usize {
        self.trace_events
    }
}

/// Compiles `trace` losslessly and replays it under every configuration.
#[pyfunction]
pub fn behavior_reference(
    py: Python<'_>,
    trace: &PyTrace,
    configurations: &PyConfigurations,
) -> PyResult<PyBehaviorReference> {
    let configs = Arc::clone(&configurations.list);
    let inner = Arc::clone(&trace.inner);
    let c = Arc::clone(&configs);
    let source_runs = detached(py, Some(&trace.source), move || {
        let program = reference_program(&inner)?;
        runs(&program, &c)
    })?;
    Ok(PyBehaviorReference {
        configurations: configs,
        runs: Arc::new(source_runs),
        trace_events: trace.inner.events.len(),
    })
}

/// Replays a canary (file `path`, or `data`) under the reference's
/// configurations and checks it against the source runs. Returns a dict:
/// `rows_pass`, `ranking_pass`, `rows_json`, `ranking_json`, `source_events`.
#[pyfunction]
#[pyo3(signature = (reference, path, *, tolerances, data=None))]
pub fn evaluate_behavior<'py>(
    py: Python<'py>,
    reference: &PyBehaviorReference,
    path: PathBuf,
    tolerances: ToleranceArgs,
    data: Option<PyBackedBytes>,
) -> PyResult<Bound<'py, PyDict>> {
    let t = detached(py, None, || self::tolerances(tolerances))?;
    let display = path.display().to_string();
    let configs = Arc::clone(&reference.configurations);
    let source = Arc::clone(&reference.runs);
    let bytes = read_bytes(py, data, &display)?;
    let (evaluation, source_events) = detached(py, Some(&display), move || {
        let canary = read_canary(&bytes)?;
        drop(bytes);
        let canary_runs = runs(&canary.program, &configs)?;
        Ok((
            evaluate(&source, &canary_runs, &configs, &t),
            canary.source_events,
        ))
    })?;
    let d = PyDict::new(py);
    d.set_item("rows_pass", evaluation.rows_pass)?;
    d.set_item("ranking_pass", evaluation.ranking_pass)?;
    d.set_item("rows_json", PyBytes::new(py, &evaluation.rows_json))?;
    d.set_item("ranking_json", PyBytes::new(py, &evaluation.ranking_json))?;
    d.set_item("source_events", source_events)?;
    Ok(d)
}

/// Searches timing sample limits for the smallest behaviourally verified
/// canary of `trace`. Returns `(selected canary, selected options, ledger
/// JSON)`; the options dict has `timing_sample_limit` and
/// `timing_sample_limits_by_group` (list of pairs).
#[pyfunction]
#[pyo3(signature = (trace, reference, *, min_limit, max_limit, tolerances, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true, step_loops=true, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn behavior_search<'py>(
    py: Python<'py>,
    trace: &PyTrace,
    reference: &PyBehaviorReference,
    min_limit: i64,
    max_limit: i64,
    tolerances: ToleranceArgs,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
    step_loops: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<(PyCompiled, Bound<'py, PyDict>, Bound<'py, PyBytes>)> {
    let options = detached(py, None, || {
        let compile = compile_options(
            Some(max_limit),
            None,
            max_events,
            budgets,
            lossless_timing,
            sequence_motifs,
            step_loops,
            false,
        )?;
        SearchOptions::checked(min_limit, compile, self::tolerances(tolerances)?)
    })?;
    let inner = Arc::clone(&trace.inner);
    let configs = Arc::clone(&reference.configurations);
    let source = Arc::clone(&reference.runs);
    // The callback runs with the interpreter re-acquired; an error it raises
    // (an interrupt, say) stops the search and is what the caller gets.
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let tell = |done: u64, planned: u64| {
        let Some(callback) = &progress else {
            return true;
        };
        Python::attach(|py| match callback.call1(py, (done, planned)) {
            Ok(_) => true,
            Err(e) => {
                raised.lock().expect("not poisoned").get_or_insert(e);
                false
            }
        })
    };
    let outcome = detached(py, Some(&trace.source), || {
        search_with_progress(&inner, &source, &configs, &options, Some(&tell))
    });
    if let Some(e) = raised.into_inner().expect("not poisoned") {
        return Err(e);
    }
    let outcome = outcome?;
    let selected = PyDict::new(py);
    let chosen = &outcome.selected_options;
    selected.set_item("timing_sample_limit", chosen.timing_sample_limit)?;
    selected.set_item(
        "timing_sample_limits_by_group",
        chosen.timing_sample_limits_by_group.clone(),
    )?;
    selected.set_item("candidate_count", outcome.candidate_count)?;
    selected.set_item("accepted_candidates", outcome.accepted_candidates)?;
    let ledger = PyBytes::new(py, &outcome.ledger);
    Ok((PyCompiled::new(outcome.selected), selected, ledger))
}

/// Checks the behaviour search's lowest and highest limits by the core's
/// rules (before any work is done).
#[pyfunction]
pub fn check_search_limits(py: Python<'_>, min_limit: i64, max_limit: i64) -> PyResult<()> {
    detached(py, None, move || {
        commcanary_core::behavior::search::check_search_limits(min_limit, max_limit).map(|_| ())
    })
}
