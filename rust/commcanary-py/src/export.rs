//! Exporters: `export_param` (PARAM comms-replay JSON, one list or per-rank
//! files) and `job_timeline` (a job's Chrome-trace timeline).

use std::path::PathBuf;

use commcanary_core::canary::read::read_canary;
use commcanary_core::export::param::ParamOptions;
use commcanary_core::export::param_files::{prepare_param, require_target};
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::detached;

/// Exports a canary as PARAM comms-replay JSON: the reference single list at
/// `output`, and/or PARAM's per-rank `<rank>.json` files in `per_rank_dir`.
/// Everything is computed before anything is written. Returns a dict with
/// `entries`, `skipped` and `per_rank_entries` (entries per rank file).
#[pyfunction]
#[pyo3(signature = (path, *, output=None, per_rank_dir=None, dtype=None, skip_unsupported=false, compute_fill_us_per_gemm=None, compute_fill_gemm_dim=None, overlap_structure=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn export_param<'py>(
    py: Python<'py>,
    path: PathBuf,
    output: Option<PathBuf>,
    per_rank_dir: Option<PathBuf>,
    dtype: Option<String>,
    skip_unsupported: bool,
    compute_fill_us_per_gemm: Option<f64>,
    compute_fill_gemm_dim: Option<i64>,
    overlap_structure: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let display = path.display().to_string();
    let options = ParamOptions {
        dtype,
        skip_unsupported,
        compute_fill_us_per_gemm,
        compute_fill_gemm_dim,
        overlap_structure,
    };
    let prepared = detached(py, Some(&display), || {
        require_target(output.as_deref(), per_rank_dir.as_deref())?;
        let canary = read_canary(&read_input(&path, MAX_INPUT_BYTES)?)?;
        prepare_param(
            &canary.program,
            &options,
            output.as_deref(),
            per_rank_dir.as_deref(),
        )
    })?;
    detached(py, None, || {
        prepared.write(output.as_deref(), per_rank_dir.as_deref())
    })?;
    let (basic, per_rank) = (&prepared.basic, &prepared.per_rank);
    let result = PyDict::new(py);
    result.set_item("entries", basic.as_ref().map_or(0, |b| b.entries))?;
    result.set_item(
        "skipped",
        basic
            .as_ref()
            .map(|b| b.skipped)
            .or(per_rank.as_ref().map(|p| p.skipped))
            .unwrap_or(0),
    )?;
    let counts: Vec<u64> = per_rank
        .as_ref()
        .map(|p| p.files.iter().map(|f| f.2).collect())
        .unwrap_or_default();
    result.set_item("per_rank_entries", counts)?;
    Ok(result)
}

/// A hang document's `(world_size, [(group name, ranks)])`.
type HangJobArg = (i64, Vec<(String, Vec<i64>)>);

/// A hang mark: `(rank, pg_name or None, label)`.
type HangMarkArg = (i64, Option<String>, String);

/// Reads a `commcanary.hang.v1` document (bounded input) for a timeline:
/// its marks and the job it describes, by the core's rules.
#[pyfunction]
pub(crate) fn read_hang_document(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(Vec<HangMarkArg>, HangJobArg)> {
    let display = path.display().to_string();
    let (marks, job) = detached(py, Some(&display), move || {
        let bytes = read_input(&path, MAX_INPUT_BYTES)?;
        commcanary_core::export::timeline::read_hang_document(&bytes)
    })?;
    Ok((
        marks
            .into_iter()
            .map(|m| (m.rank, m.group, m.label))
            .collect(),
        (job.world, job.groups),
    ))
}

/// Gathers the profiler traces in `paths` and writes the job's timeline as
/// Chrome-trace JSON (Perfetto): `marks` are hang marks, `(rank, pg_name or
/// None, label)` each; `hang_job` is the hang document's `(world_size,
/// [(group name, ranks)])`, refused when the traces are of another job. Returns a dict with `bytes`, `events`, `ranks`,
/// `straggler_marks` and `hang_marks`.
#[pyfunction]
#[pyo3(signature = (paths, *, marks=Vec::new(), hang_job=None, cache_dir=None, reads=None))]
pub(crate) fn job_timeline<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    marks: Vec<(i64, Option<String>, String)>,
    hang_job: Option<HangJobArg>,
    cache_dir: Option<PathBuf>,
    reads: Option<crate::distributed::ReadsArg>,
) -> PyResult<Bound<'py, PyDict>> {
    use commcanary_core::export::timeline::{HangJob, HangMark, build};
    let hang_job = hang_job.map(|(world, groups)| HangJob { world, groups });
    let marks: Vec<HangMark> = marks
        .into_iter()
        .map(|(rank, group, label)| HangMark { rank, group, label })
        .collect();
    let t = detached(py, None, || {
        let evidence = crate::diagnose::evidence("timeline", &paths, cache_dir, reads)?;
        build(evidence, &marks, hang_job.as_ref())
    })?;
    let d = PyDict::new(py);
    d.set_item("bytes", PyBytes::new(py, &t.bytes))?;
    d.set_item("events", t.events)?;
    d.set_item("ranks", t.ranks)?;
    d.set_item("straggler_marks", t.straggler_marks)?;
    d.set_item("hang_marks", t.hang_marks)?;
    Ok(d)
}

/// The columns `names` (`(name, kind)`, kind `int`, `float` or `text`) of
/// the array `table` of a JSON document: numpy arrays for numbers, lists of
/// str for text, by name.
#[pyfunction]
pub(crate) fn table_columns<'py>(
    py: Python<'py>,
    document: pyo3::pybacked::PyBackedBytes,
    table: String,
    names: Vec<(String, String)>,
) -> PyResult<Bound<'py, PyDict>> {
    use commcanary_core::export::columns::{Column, Kind, table_columns};
    use numpy::IntoPyArray;
    let kinds: Vec<(String, Kind)> = names
        .into_iter()
        .map(|(name, kind)| {
            let kind = match kind.as_str() {
                "int" => Kind::Int,
                "float" => Kind::Float,
                _ => Kind::Text,
            };
            (name, kind)
        })
        .collect();
    let (columns, names) = detached(py, None, move || {
        table_columns(&document, &table, &kinds).map(|c| (c, kinds))
    })?;
    let d = PyDict::new(py);
    for ((name, _), column) in names.into_iter().zip(columns) {
        match column {
            Column::Int(v) => d.set_item(name, v.into_pyarray(py))?,
            Column::Float(v) => d.set_item(name, v.into_pyarray(py))?,
            Column::Text(v) => d.set_item(name, v)?,
        }
    }
    Ok(d)
}
