//! `commcanary._core`: the thin PyO3 binding of `commcanary-core`.
//!
//! Every function converts its arguments to owned Rust values (in-memory
//! inputs stay Python-owned through `PyBackedBytes`, never copied), runs the
//! core with the interpreter released through [`errors::detached`] (which
//! also maps core errors and worker panics onto `commcanary.errors`), and
//! converts the result. No rule about values lives here: the core checks
//! every option, configuration and document. Defaults and name lists are
//! exported once, from the core, as module constants Python reads.
//!
//! Modules: `trace` (loading and compiling), `compiled` (the compiled
//! canary), `replay` (replay, reports, report verification), `behavior`
//! (behaviour verification and search), `inputs` (bounded reads and canary
//! validation for the Python verifiers), `import` (importers), `errors`
//! (the boundary).

mod behavior;
mod compiled;
mod diagnose;
mod distributed;
mod errors;
mod export;
mod gate;
mod import;
mod inputs;
mod nccl_live;
mod replay;
mod research;
mod settings;
mod sharded;
mod signing;
mod trace;

use std::path::PathBuf;

use commcanary_core::json::{JsonLimits, canon, parse};
use commcanary_core::output::write_atomic as core_write_atomic;
use commcanary_core::pyfloat;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::errors::detached;

/// Writes `data` to `path` atomically (temporary file, fsync, rename).
#[pyfunction]
fn write_atomic(py: Python<'_>, path: PathBuf, data: PyBackedBytes) -> PyResult<()> {
    detached(py, None, move || core_write_atomic(&path, &data))
}

/// Re-serializes JSON bytes as canonical JSON v1 (what CPython's
/// `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)` gives).
#[pyfunction]
fn canonical_json<'py>(py: Python<'py>, data: PyBackedBytes) -> PyResult<Bound<'py, PyBytes>> {
    let out = detached(py, None, move || {
        let doc = parse(&data, JsonLimits::default())?;
        Ok(doc.root().map(canon::to_vec).unwrap_or_default())
    })?;
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

/// The default behaviour tolerances, by their API names.
fn default_tolerances(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let t = commcanary_core::behavior::Tolerances::default();
    let d = PyDict::new(py);
    d.set_item("relative_tolerance_pct", t.relative_pct)?;
    d.set_item("absolute_tolerance_us", t.absolute_us)?;
    d.set_item("hidden_tolerance_points", t.hidden_points)?;
    d.set_item("tail_recall_threshold", t.tail_recall)?;
    d.set_item("ranking_tie_tolerance_us", t.tie_us)?;
    Ok(d)
}

/// Every document format, by kind (`trace`, `canary`, ...).
fn formats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (format, noun) in commcanary_core::document::KINDS {
        let role = if format == commcanary_core::document::CANARY_LOOP {
            "canary_step_loop".to_owned()
        } else {
            noun.replace(' ', "_").replace("behaviour", "behavior")
        };
        d.set_item(role, format)?;
    }
    Ok(d)
}

#[pymodule]
mod _core {
    #[pymodule_export]
    use super::behavior::{
        PyBehaviorReference, behavior_reference, behavior_search, check_search_limits,
        check_tolerances, evaluate_behavior,
    };
    #[pymodule_export]
    use super::compiled::{PyCompiled, canary_occurrences};
    #[pymodule_export]
    use super::diagnose::{
        bus_factor, comm_perf, diagnose_hang, diagnose_stragglers, read_flight_recorder_file,
        recover_steps, recover_trace_steps, straggler_rules,
    };
    #[pymodule_export]
    use super::distributed::{PyKinetoPartials, dump_partial, evidence_files, kineto_partial};
    #[pymodule_export]
    use super::export::{export_param, job_timeline, read_hang_document, table_columns};
    #[pymodule_export]
    use super::gate::{judge_runs, read_gate_policy, run_noise, write_gate_policy};
    #[pymodule_export]
    use super::import::{
        check_kineto_job_options, import_kineto_file, import_kineto_job, import_kineto_partials,
        import_nccl_profiler, read_clock_offsets,
    };
    #[pymodule_export]
    use super::inputs::{
        check_canary, inspect_file, read_input_file, resource_limits, set_resource_limits,
    };
    #[pymodule_export]
    use super::nccl_live::PyNcclFollower;
    #[pymodule_export]
    use super::replay::{
        PyReplayReport, PyReportDocument, algorithm_steps, measured_report, read_report_file,
        recomputed_exposed_us, replay_canary, verify_report_files,
    };
    #[pymodule_export]
    use super::research::{baseline_trace, check_reduce_options, reduce_trace};
    #[pymodule_export]
    use super::settings::{
        PyConfigurations, PyReplaySettings, configuration_file, configurations,
        physical_configurations, read_backend_file, write_backend_file,
    };
    #[pymodule_export]
    use super::sharded::{
        PyShardedImport, kineto_join, kineto_rank, sharded_events, sharded_prepare, sharded_split,
        sharded_votes,
    };
    #[pymodule_export]
    use super::signing::{
        private_key_id, sign_file, signing_keypair, trusted_key_ids, verify_file,
    };
    #[pymodule_export]
    use super::trace::{
        PyTrace, check_compile_options, compile_file, load_trace, load_trace_bytes,
    };
    #[pymodule_export]
    use super::{canonical_json, float_repr, py_round, write_atomic};

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use commcanary_core as core;
        use pyo3::types::PyModuleMethods;
        let py = m.py();
        // A panic is reported once, as an internal error (exit 70); its own
        // report and backtrace only under `commcanary --debug`.
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::env::var_os("COMMCANARY_DEBUG").is_some() {
                report(info);
            }
        }));
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("CANARY_FORMAT", core::canary::CANARY_FORMAT)?;
        m.add("CANARY_LOOP_FORMAT", core::canary::CANARY_LOOP_FORMAT)?;
        m.add("TRACE_FORMAT", core::trace::TRACE_FORMAT)?;
        m.add("REPORT_FORMAT", core::report::REPORT_FORMAT)?;
        m.add("REPLAY_MODEL", core::sim::MODEL_VERSION)?;
        m.add("CANONICAL_JSON", core::document::CANONICAL_JSON)?;
        m.add("MEASURED_MODE", core::report::measured::MEASURED_MODE)?;
        m.add(
            "KNOWN_OPS",
            super::PyTuple::new(m.py(), core::trace::KNOWN_OPS)?,
        )?;
        m.add("FORMATS", super::formats(py)?)?;
        m.add(
            "FIDELITY_FIELDS",
            super::PyTuple::new(py, core::canary::FIDELITY_FIELDS)?,
        )?;
        m.add(
            "ABLATIONS",
            super::PyTuple::new(py, core::sim::ABLATION_NAMES)?,
        )?;
        m.add(
            "TRACE_COLUMNS",
            super::PyTuple::new(py, core::trace::TIMING_COLUMNS)?,
        )?;
        m.add(
            "DEFAULT_SETTINGS_JSON",
            super::PyBytes::new(py, &super::settings::default_settings_json()),
        )?;
        m.add(
            "SIMULATED_BACKEND_SCHEMA_JSON",
            super::PyBytes::new(py, &core::sim::settings::codec::simulated_backend_schema()),
        )?;
        m.add(
            "BACKEND_SETTINGS",
            super::PyTuple::new(py, super::settings::backend_settings())?,
        )?;
        m.add(
            "DEFAULT_CONFIGURATIONS_JSON",
            super::PyBytes::new(py, &core::behavior::default_configurations_json()),
        )?;
        m.add("DEFAULT_TOLERANCES", super::default_tolerances(py)?)?;
        m.add(
            "DEFAULT_TIMING_SAMPLE_LIMIT",
            core::compile::DEFAULT_TIMING_SAMPLE_LIMIT,
        )?;
        m.add(
            "MAX_REPLAY_EVENTS_LIMIT",
            core::sim::MAX_REPLAY_EVENTS_LIMIT,
        )?;
        m.add("MAX_INPUT_BYTES", core::input::MAX_INPUT_BYTES)?;
        m.add(
            "DEFAULT_RESOURCE_LIMITS",
            core::limits::Limits::DEFAULT.entries().to_vec(),
        )?;
        m.add(
            "CONFIGURATION_COUNT_RANGE",
            (
                core::behavior::MIN_CONFIGURATIONS,
                core::behavior::MAX_CONFIGURATIONS,
            ),
        )?;
        m.add(
            "CLOCK_OFFSETS_RULE",
            core::import::kineto::job::CLOCK_OFFSETS_RULE,
        )?;
        m.add("INJECT_PANIC_VAR", core::fault::INJECT_PANIC_VAR)?;
        m.add(
            "INJECT_WRITE_ERROR_VAR",
            core::fault::INJECT_WRITE_ERROR_VAR,
        )?;
        Ok(())
    }
}
