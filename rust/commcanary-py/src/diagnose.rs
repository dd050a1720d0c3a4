//! Diagnoses: `diagnose_hang` (who hung, and where),
//! `diagnose_stragglers` (who is slow, and what it costs) and
//! `recover_steps` (iteration boundaries from the collective sequence).

use std::path::PathBuf;

use commcanary_core::analysis::evidence::{GatherOptions, gather_with};
use commcanary_core::analysis::hang::{HangReport, diagnose};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::distributed::{ReadsArg, remote_reads};
use crate::errors::detached;

/// The evidence an analysis reads in `paths`: read here, or from the
/// partials distributed tasks returned (`reads`).
pub(crate) fn evidence(
    analysis: &str,
    paths: &[PathBuf],
    cache_dir: Option<PathBuf>,
    reads: Option<ReadsArg>,
) -> commcanary_core::Result<commcanary_core::analysis::evidence::Evidence> {
    let options = GatherOptions::for_analysis(analysis, cache_dir)?;
    gather_with(paths, &options, reads.map(remote_reads))
}

/// Gathers the evidence in `paths` (files or directories: Flight Recorder
/// dumps, profiler traces, stack dumps, exception texts) and diagnoses the
/// hang. Returns a dict with `verdict`, `lines` (what a person reads first)
/// and `document` (the `commcanary.hang.v1` canonical JSON bytes).
#[pyfunction]
#[pyo3(signature = (paths, *, cache_dir=None, reads=None))]
pub(crate) fn diagnose_hang<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    reads: Option<ReadsArg>,
) -> PyResult<Bound<'py, PyDict>> {
    let report: HangReport = detached(py, None, || {
        diagnose(evidence("hang", &paths, cache_dir, reads)?)
    })?;
    report_dict(
        py,
        ("verdict", report.verdict),
        report.lines,
        &report.document,
    )
}

/// Gathers the profiler traces in `paths` (files or directories) and
/// diagnoses stragglers. Returns a dict with `found` (bool), `lines` and
/// `document` (the `commcanary.stragglers.v1` canonical JSON bytes).
#[pyfunction]
#[pyo3(signature = (paths, *, cache_dir=None, reads=None))]
pub(crate) fn diagnose_stragglers<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    reads: Option<ReadsArg>,
) -> PyResult<Bound<'py, PyDict>> {
    use commcanary_core::analysis::stragglers;
    let report = detached(py, None, || {
        stragglers::diagnose(evidence("stragglers", &paths, cache_dir, reads)?)
    })?;
    let d = report_dict(py, ("found", report.found), report.lines, &report.document)?;
    d.set_item("members", members_dict(py, &report.members)?)?;
    Ok(d)
}

/// The per-instance member table: numeric columns as little-endian bytes
/// (`<i8` or `<f8`; numpy reads them without a copy, and only when asked),
/// `op` as a list of str.
fn members_dict<'py>(
    py: Python<'py>,
    m: &commcanary_core::analysis::stragglers::Members,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let ints = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let floats = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    for (name, col) in [
        ("instance", &m.instance),
        ("step", &m.step),
        ("rank", &m.rank),
        ("group", &m.group),
        ("bytes", &m.bytes),
    ] {
        d.set_item(name, PyBytes::new(py, &ints(col)))?;
    }
    for (name, col) in [
        ("arrival_us", &m.arrival_us),
        ("end_us", &m.end_us),
        ("lag_us", &m.lag_us),
        ("excess_us", &m.excess_us),
        ("inside_us", &m.inside_us),
    ] {
        d.set_item(name, PyBytes::new(py, &floats(col)))?;
    }
    d.set_item("op", m.op.clone())?;
    Ok(d)
}

/// Gathers the profiler traces in `paths` (files or directories) and
/// recovers each rank's steps from its collective sequence. Returns a dict
/// with `count` (steps), `lines` and `document` (the `commcanary.steps.v1`
/// canonical JSON bytes).
#[pyfunction]
#[pyo3(signature = (paths, *, cache_dir=None, reads=None))]
pub(crate) fn recover_steps<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    reads: Option<ReadsArg>,
) -> PyResult<Bound<'py, PyDict>> {
    use commcanary_core::analysis::steps;
    let report = detached(py, None, || {
        steps::diagnose(evidence("steps", &paths, cache_dir, reads)?)
    })?;
    report_dict(py, ("count", report.count), report.lines, &report.document)
}

/// The step of each event of a merged trace (`data`, a capture),
/// recovered from its ranks' collective sequences: −1 where none applies;
/// `None` when the sequence does not repeat.
#[pyfunction]
pub(crate) fn recover_trace_steps(py: Python<'_>, data: Vec<u8>) -> PyResult<Option<Vec<i64>>> {
    detached(py, None, move || {
        let trace = commcanary_core::trace::load_bytes(
            &data,
            &commcanary_core::trace::LoadOptions::default(),
        )?;
        commcanary_core::analysis::steps::trace_event_steps(&trace, "the merged capture")
    })
}

/// `{first.0: first.1, "lines": lines, "document": bytes}`.
fn report_dict<'py>(
    py: Python<'py>,
    first: (&str, impl IntoPyObject<'py>),
    lines: Vec<String>,
    document: &[u8],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(first.0, first.1)?;
    d.set_item("lines", lines)?;
    d.set_item("document", PyBytes::new(py, document))?;
    Ok(d)
}

/// Reads one Flight Recorder dump (pickle, decoded without running anything,
/// or JSON). Returns a dict: `version`, `comm_lib_version`, `encoding`,
/// `pg_config` (list of `{name, desc, ranks}`), `pg_status` (list of
/// `{pg_id, last_enqueued_collective, last_started_collective,
/// last_completed_collective}`), and `entries`: columns as numpy arrays
/// (`record_id`, `pg_id`, `op_id`, `collective_seq_id`, `p2p_seq_id`,
/// `time_created_ns`, `time_discovered_started_ns`,
/// `time_discovered_completed_ns`, `timeout_ms`, `input_numel`,
/// `output_numel`, `duration_ms`, `is_p2p`, `retired`) and lists
/// (`process_group`, `group_desc`, `profiling_name`, `op`, `state`,
/// `input_sizes`, `output_sizes`, `input_dtypes`, `output_dtypes`).
#[pyfunction]
pub(crate) fn read_flight_recorder_file<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<Bound<'py, PyDict>> {
    use commcanary_core::import::flight_recorder::{EntryState, read_dump};
    use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
    use numpy::IntoPyArray;
    let display = path.display().to_string();
    let dump = detached(py, Some(&display), || {
        read_dump(&read_input(&path, MAX_INPUT_BYTES)?)
    })?;
    let d = PyDict::new(py);
    d.set_item("version", &dump.version)?;
    d.set_item("comm_lib_version", &dump.comm_lib_version)?;
    d.set_item("encoding", dump.encoding)?;
    let config: Vec<Bound<'py, PyDict>> = dump
        .pg_config
        .iter()
        .map(|g| {
            let row = PyDict::new(py);
            row.set_item("name", &g.name)?;
            row.set_item("desc", &g.desc)?;
            row.set_item("ranks", g.ranks.clone())?;
            Ok(row)
        })
        .collect::<PyResult<_>>()?;
    d.set_item("pg_config", config)?;
    let status: Vec<Bound<'py, PyDict>> = dump
        .pg_status
        .iter()
        .map(|s| {
            let row = PyDict::new(py);
            row.set_item("pg_id", s.pg_id)?;
            row.set_item("last_enqueued_collective", s.enqueued)?;
            row.set_item("last_started_collective", s.started)?;
            row.set_item("last_completed_collective", s.completed)?;
            Ok(row)
        })
        .collect::<PyResult<_>>()?;
    d.set_item("pg_status", status)?;
    let e = &dump.entries;
    let cols = PyDict::new(py);
    let int = |f: fn(&commcanary_core::import::flight_recorder::FrEntry) -> i64| {
        e.iter().map(f).collect::<Vec<i64>>()
    };
    cols.set_item("record_id", int(|x| x.record_id).into_pyarray(py))?;
    cols.set_item("pg_id", int(|x| x.pg_id).into_pyarray(py))?;
    cols.set_item("op_id", int(|x| x.op_id).into_pyarray(py))?;
    cols.set_item("collective_seq_id", int(|x| x.seq).into_pyarray(py))?;
    cols.set_item("p2p_seq_id", int(|x| x.p2p_seq).into_pyarray(py))?;
    cols.set_item("time_created_ns", int(|x| x.created_ns).into_pyarray(py))?;
    cols.set_item(
        "time_discovered_started_ns",
        int(|x| x.started_ns).into_pyarray(py),
    )?;
    cols.set_item(
        "time_discovered_completed_ns",
        int(|x| x.completed_ns).into_pyarray(py),
    )?;
    cols.set_item("timeout_ms", int(|x| x.timeout_ms).into_pyarray(py))?;
    cols.set_item("input_numel", int(|x| x.in_numel).into_pyarray(py))?;
    cols.set_item("output_numel", int(|x| x.out_numel).into_pyarray(py))?;
    cols.set_item(
        "duration_ms",
        e.iter()
            .map(|x| x.duration_ms)
            .collect::<Vec<f64>>()
            .into_pyarray(py),
    )?;
    cols.set_item(
        "is_p2p",
        e.iter()
            .map(|x| x.is_p2p)
            .collect::<Vec<bool>>()
            .into_pyarray(py),
    )?;
    cols.set_item(
        "retired",
        e.iter()
            .map(|x| x.retired)
            .collect::<Vec<bool>>()
            .into_pyarray(py),
    )?;
    let text = |i: u32| dump.text(i).to_owned();
    cols.set_item(
        "process_group",
        e.iter()
            .map(|x| dump.groups[x.group as usize].0.clone())
            .collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "group_desc",
        e.iter()
            .map(|x| dump.groups[x.group as usize].1.clone())
            .collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "profiling_name",
        e.iter().map(|x| text(x.name)).collect::<Vec<_>>(),
    )?;
    cols.set_item("op", e.iter().map(|x| x.op).collect::<Vec<_>>())?;
    let state = |s: EntryState| match s {
        EntryState::Scheduled => "scheduled",
        EntryState::Started => "started",
        EntryState::Completed => "completed",
    };
    cols.set_item(
        "state",
        e.iter().map(|x| state(x.state)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "input_sizes",
        e.iter().map(|x| text(x.in_sizes)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "output_sizes",
        e.iter().map(|x| text(x.out_sizes)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "input_dtypes",
        e.iter().map(|x| text(x.in_dtypes)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "output_dtypes",
        e.iter().map(|x| text(x.out_dtypes)).collect::<Vec<_>>(),
    )?;
    d.set_item("entries", cols)?;
    Ok(d)
}

/// The straggler rules a live reader applies as `diagnose_stragglers` does:
/// `late_z` (a lateness above the median + `late_z` robust σ of all
/// lateness is late), `noise_floor` (σ is at least this fraction of the
/// median step) and `material_z` (a lateness must also exceed `material_z`
/// × the step-time σ).
#[pyfunction]
pub(crate) fn straggler_rules(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use commcanary_core::analysis::stragglers::{LATE_Z, MATERIAL_Z, NOISE_FLOOR};
    let out = PyDict::new(py);
    out.set_item("late_z", LATE_Z)?;
    out.set_item("material_z", MATERIAL_Z)?;
    out.set_item("noise_floor", NOISE_FLOOR)?;
    Ok(out)
}

/// nccl-tests' bus bandwidth factor of `op` over `ranks` ranks (2(n−1)/n
/// for all_reduce, (n−1)/n for all_gather, reduce_scatter and all_to_all,
/// 1 otherwise).
#[pyfunction]
pub(crate) fn bus_factor(op: &str, ranks: usize) -> f64 {
    commcanary_core::analysis::stragglers::bandwidth::bus_factor(op, ranks)
}

/// Communication performance from NCCL Inspector output files (or
/// directories of them), or a job's traces, against nccl-tests JSON runs. Returns the
/// `commcanary.comm_perf.v1` canonical JSON bytes and the human lines.
#[pyfunction]
#[pyo3(signature = (inspector, *, traces=Vec::new(), nccl_tests=Vec::new()))]
pub(crate) fn comm_perf(
    py: Python<'_>,
    inspector: Vec<PathBuf>,
    traces: Vec<PathBuf>,
    nccl_tests: Vec<PathBuf>,
) -> PyResult<(Vec<u8>, Vec<String>)> {
    detached(py, None, move || {
        commcanary_core::analysis::comm_perf::from_files(&inspector, &traces, &nccl_tests)
    })
}
