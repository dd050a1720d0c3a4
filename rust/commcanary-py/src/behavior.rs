//! Bindings for behaviour verification and behaviour search.
//!
//! Configurations cross the boundary as tuples `(name, bandwidth_gbps,
//! latency_floor_us, compute_pressure, overlap_efficiency, iterations, seed,
//! max_replay_events)` and tolerances as `(relative_pct, absolute_us,
//! hidden_points, tail_recall, tie_us)`; the Python layer validates files and
//! keys and builds them.

use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::behavior::search::{SearchOptions, search};
use commcanary_core::behavior::{
    Configuration, Run, Tolerances, evaluate, reference_program, runs,
};
use commcanary_core::canary::read::read_canary;
use commcanary_core::trace::read_input;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::replay::{MAX_ARTIFACT_BYTES, read_file, settings};
use crate::{InputError, PyCompiled, PyTrace, compile_options, to_py_err};

/// A configuration as it crosses the boundary.
pub type ConfigTuple = (String, f64, f64, f64, f64, i64, i64, i64);
/// Tolerances as they cross the boundary.
pub type ToleranceTuple = (f64, f64, f64, f64, f64);

/// `(rows_pass, ranking_pass, rows_json, ranking_json, source_events)`.
pub type Evaluated<'py> = (
    Vec<bool>,
    bool,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    u64,
);

fn configurations(py: Python<'_>, list: Vec<ConfigTuple>) -> PyResult<Vec<Configuration>> {
    if !(2..=32).contains(&list.len()) {
        return Err(InputError::new_err(format!(
            "configurations must have between 2 and 32 entries, got {}",
            list.len()
        )));
    }
    let mut out: Vec<Configuration> = Vec::with_capacity(list.len());
    for (name, bw, floor, pressure, eta, iterations, seed, max_events) in list {
        if name.is_empty() || out.iter().any(|c| c.name == name) {
            return Err(InputError::new_err(format!(
                "configuration names must be non-empty and unique: {name:?}"
            )));
        }
        let s = settings(
            "simulated-nccl".to_owned(),
            bw,
            floor,
            pressure,
            eta,
            iterations,
            seed,
            max_events,
            Vec::new(),
        )
        .map_err(|e| InputError::new_err(format!("configuration {name:?}: {}", e.value(py))))?;
        out.push(Configuration { name, settings: s });
    }
    Ok(out)
}

fn tolerances(t: ToleranceTuple) -> PyResult<Tolerances> {
    let t = Tolerances {
        relative_pct: t.0,
        absolute_us: t.1,
        hidden_points: t.2,
        tail_recall: t.3,
        tie_us: t.4,
    };
    t.validate().map_err(|e| to_py_err(&e, None))?;
    Ok(t)
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
    configurations: Vec<ConfigTuple>,
) -> PyResult<PyBehaviorReference> {
    let configs = Arc::new(self::configurations(py, configurations)?);
    let inner = Arc::clone(&trace.inner);
    let c = Arc::clone(&configs);
    let source_runs = py
        .detach(move || {
            let program = reference_program(&inner)?;
            runs(&program, &c)
        })
        .map_err(|e| to_py_err(&e, Some(&trace.source)))?;
    Ok(PyBehaviorReference {
        configurations: configs,
        runs: Arc::new(source_runs),
        trace_events: trace.inner.events.len(),
    })
}

/// Replays a canary (file `path`, or `data`) under the reference's
/// configurations and checks it against the source runs. Returns
/// `(rows_pass, ranking_pass, rows_json, ranking_json, source_events)`.
#[pyfunction]
#[pyo3(signature = (reference, path, *, tolerances, data=None))]
pub fn evaluate_behavior<'py>(
    py: Python<'py>,
    reference: &PyBehaviorReference,
    path: PathBuf,
    tolerances: ToleranceTuple,
    data: Option<Vec<u8>>,
) -> PyResult<Evaluated<'py>> {
    let t = self::tolerances(tolerances)?;
    let display = path.display().to_string();
    let configs = Arc::clone(&reference.configurations);
    let source = Arc::clone(&reference.runs);
    let (evaluation, source_events) = py
        .detach(move || {
            let bytes = match data {
                Some(d) => d,
                None => read_input(&path, MAX_ARTIFACT_BYTES)?,
            };
            let canary = read_canary(&bytes)?;
            drop(bytes);
            let canary_runs = runs(&canary.program, &configs)?;
            Ok::<_, commcanary_core::Error>((
                evaluate(&source, &canary_runs, &configs, &t),
                canary.source_events,
            ))
        })
        .map_err(|e| to_py_err(&e, Some(&display)))?;
    Ok((
        evaluation.rows_pass,
        evaluation.ranking_pass,
        PyBytes::new(py, &evaluation.rows_json),
        PyBytes::new(py, &evaluation.ranking_json),
        source_events,
    ))
}

/// Searches timing sample limits for the smallest behaviourally verified
/// canary of `trace`. Returns `(selected canary, selected options, ledger
/// JSON)`; the options dict has `timing_sample_limit` and
/// `timing_sample_limits_by_group` (list of pairs).
#[pyfunction]
#[pyo3(signature = (trace, reference, *, min_limit, max_limit, tolerances, max_events=None, budgets=None, lossless_timing=false, sequence_motifs=true))]
#[allow(clippy::too_many_arguments)]
pub fn behavior_search<'py>(
    py: Python<'py>,
    trace: &PyTrace,
    reference: &PyBehaviorReference,
    min_limit: i64,
    max_limit: i64,
    tolerances: ToleranceTuple,
    max_events: Option<i64>,
    budgets: Option<Vec<(String, f64)>>,
    lossless_timing: bool,
    sequence_motifs: bool,
) -> PyResult<(PyCompiled, Bound<'py, PyDict>, Bound<'py, PyBytes>)> {
    if min_limit < 2 {
        return Err(InputError::new_err(
            "behavior_search_min_sample_limit must be at least 2",
        ));
    }
    let compile = compile_options(
        max_limit,
        None,
        max_events,
        budgets,
        lossless_timing,
        sequence_motifs,
        false,
    )?;
    let options = SearchOptions {
        min_limit: min_limit as usize,
        max_limit: max_limit as usize,
        compile,
        tolerances: self::tolerances(tolerances)?,
    };
    let inner = Arc::clone(&trace.inner);
    let configs = Arc::clone(&reference.configurations);
    let source = Arc::clone(&reference.runs);
    let outcome = py
        .detach(move || search(&inner, &source, &configs, &options))
        .map_err(|e| to_py_err(&e, Some(&trace.source)))?;
    let selected = PyDict::new(py);
    selected.set_item(
        "timing_sample_limit",
        outcome.selected_options.timing_sample_limit,
    )?;
    selected.set_item(
        "timing_sample_limits_by_group",
        outcome
            .selected_options
            .timing_sample_limits_by_group
            .clone(),
    )?;
    selected.set_item("candidate_count", outcome.candidate_count)?;
    selected.set_item("accepted_candidates", outcome.accepted_candidates)?;
    let ledger = PyBytes::new(py, &outcome.ledger);
    Ok((
        PyCompiled {
            inner: Arc::new(outcome.selected),
        },
        selected,
        ledger,
    ))
}

/// Fully validates a canary (structure, weights, commitments, sizes) and
/// returns its `compiler.source_events`.
#[pyfunction]
#[pyo3(signature = (path, *, data=None))]
pub fn check_canary(py: Python<'_>, path: PathBuf, data: Option<Vec<u8>>) -> PyResult<u64> {
    let display = path.display().to_string();
    py.detach(move || {
        let bytes = match data {
            Some(d) => d,
            None => read_input(&path, MAX_ARTIFACT_BYTES)?,
        };
        read_canary(&bytes).map(|c| c.source_events)
    })
    .map_err(|e| to_py_err(&e, Some(&display)))
}

/// Reads an input file (plain or gzip) with the size bound every command
/// applies, for the Python-side verifiers.
#[pyfunction]
pub fn read_input_file<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyBytes>> {
    let display = path.display().to_string();
    let bytes = py.detach(move || read_file(&path, &display))?;
    Ok(PyBytes::new(py, &bytes))
}
