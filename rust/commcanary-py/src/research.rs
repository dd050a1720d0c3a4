//! Research controls: `baseline_trace` (the reference's baselines) and
//! `reduce_trace` (ddmin with the native ranking oracle, or a Python
//! callable).

use std::sync::Arc;

use commcanary_core::behavior::default_configurations;
use commcanary_core::research::baseline::{Options as BaselineOptions, baseline};
use commcanary_core::research::reduce::{self, Options as ReduceOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{detached, to_py_err};
use crate::settings::PyConfigurations;
use crate::trace::PyTrace;

/// The `method` baseline of `trace` (spec §7.2), a new trace whose workload
/// says it is one. `gaps` is `reference` (`gap_us`, else
/// `compute_before_us`) or `observed` (the start-to-start gap).
#[pyfunction]
#[pyo3(signature = (trace, method, *, sample_count=8, partial=false, cluster_count=8, strata_per_group=4, seed=0, gaps="reference"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn baseline_trace(
    py: Python<'_>,
    trace: &PyTrace,
    method: &str,
    sample_count: i64,
    partial: bool,
    cluster_count: i64,
    strata_per_group: i64,
    seed: i64,
    gaps: &str,
) -> PyResult<PyTrace> {
    let inner = Arc::clone(&trace.inner);
    let method = method.to_owned();
    let gaps = gaps.to_owned();
    let out = detached(py, Some(&trace.source), move || {
        let options = BaselineOptions::requested(
            &method,
            sample_count,
            partial,
            cluster_count,
            strata_per_group,
            seed,
            &gaps,
        )?;
        baseline(&inner, &options)
    })?;
    Ok(PyTrace {
        inner: Arc::new(out),
        source: trace.source.clone(),
    })
}

/// ddmin-reduces `trace` (spec §7.1). Without `oracle` the ranking oracle
/// runs natively; with one, `oracle(indices)` (the kept event indices,
/// ascending) decides. Returns `(trace, {original, reduced, calls,
/// exhausted})`.
#[pyfunction]
#[pyo3(signature = (trace, *, tie_us=0.001, budget=256, timing_sample_limit=None, configurations=None, oracle=None))]
pub(crate) fn reduce_trace<'py>(
    py: Python<'py>,
    trace: &PyTrace,
    tie_us: f64,
    budget: i64,
    timing_sample_limit: Option<i64>,
    configurations: Option<&PyConfigurations>,
    oracle: Option<Bound<'py, PyAny>>,
) -> PyResult<(PyTrace, Bound<'py, PyDict>)> {
    let source = trace.source.clone();
    let configurations = match configurations {
        Some(list) => list.list.as_ref().clone(),
        None => default_configurations(),
    };
    let options = detached(py, Some(&source), move || {
        ReduceOptions::requested(tie_us, budget, timing_sample_limit, configurations)
    })?;
    let inner = Arc::clone(&trace.inner);
    let reduction = match oracle {
        None => detached(py, Some(&source), move || reduce::reduce(&inner, &options))?,
        Some(callable) => {
            let n = inner.events.len();
            reduce::check(n, &options).map_err(|e| to_py_err(&e, Some(&source)))?;
            let mut raised: Option<PyErr> = None;
            let outcome = reduce::ddmin(n, options.budget, &mut |kept| match callable
                .call1((kept.to_vec(),))
                .and_then(|r| r.is_truthy())
            {
                Ok(keep) => Ok(keep),
                Err(e) => {
                    raised = Some(e);
                    Err(reduce::oracle_failed())
                }
            });
            if let Some(e) = raised {
                return Err(e);
            }
            let outcome = outcome.map_err(|e| to_py_err(&e, Some(&source)))?;
            reduce::reduced_trace(&inner, outcome, &options)
                .map_err(|e| to_py_err(&e, Some(&source)))?
        }
    };
    let info = PyDict::new(py);
    info.set_item("original", reduction.original)?;
    info.set_item("reduced", reduction.outcome.kept.len())?;
    info.set_item("calls", reduction.outcome.calls)?;
    info.set_item("exhausted", reduction.outcome.exhausted)?;
    let out = PyTrace {
        inner: Arc::new(reduction.trace),
        source,
    };
    Ok((out, info))
}

/// Checks the reduction's options by the core's rules (before any work):
/// the oracle budget, the tie tolerance and the timing sample limit.
#[pyfunction]
#[pyo3(signature = (tie_us, budget, timing_sample_limit=None))]
pub(crate) fn check_reduce_options(
    py: Python<'_>,
    tie_us: f64,
    budget: i64,
    timing_sample_limit: Option<i64>,
) -> PyResult<()> {
    detached(py, None, move || {
        ReduceOptions::requested(tie_us, budget, timing_sample_limit, Vec::new()).map(|_| ())
    })
}
