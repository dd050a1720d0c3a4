//! Importers: `import_kineto_file` (one rank, the reference behaviour),
//! `import_kineto_job` (a job's per-rank files merged) and
//! `import_nccl_profiler` (the NCCL profiler plugin's logs); for a distributed
//! import, `import_kineto_partials` (the job merged from the files'
//! partials, `crate::distributed::kineto_partial`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use commcanary_core::analysis::steps::import_job_with_steps;
use commcanary_core::compile::checked_count;
use commcanary_core::import::kineto::{
    CacheStats, JobImport, JobOptions, KinetoOptions, check_import_names, describe, import_kineto,
    profiles_from_partials, read_files,
};
use commcanary_core::import::nccl_profiler::import_dir;
use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
use commcanary_core::json::JsonLimits;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::distributed::PyKinetoPartials;
use crate::errors::detached;
use crate::trace::PyTrace;

/// Imports one rank's PyTorch profiler (Kineto) trace (plain or gzip).
/// Returns the trace and a dict of counts (`imported`, `control`, `empty`,
/// `nested`).
#[pyfunction]
#[pyo3(signature = (path, *, rank=None, workload_name="kineto-import".to_owned(), phase=None, process_group=None, max_input_bytes=None, max_json_items=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn import_kineto_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    rank: Option<i64>,
    workload_name: String,
    phase: Option<String>,
    process_group: Option<String>,
    max_input_bytes: Option<i64>,
    max_json_items: Option<i64>,
) -> PyResult<(PyTrace, Bound<'py, PyDict>)> {
    let display = path.display().to_string();
    let imported = detached(py, Some(&display), move || {
        let max_bytes = checked_count("max_input_bytes", max_input_bytes, MAX_INPUT_BYTES)?;
        let max_items = checked_count(
            "max_json_items",
            max_json_items,
            JsonLimits::default().max_items,
        )?;
        check_import_names(&workload_name, phase.as_deref(), rank)?;
        let options = KinetoOptions {
            rank,
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

/// Imports a job's per-rank Kineto traces (one or more files per rank,
/// plain or gzip), read in parallel. `clock_offsets` maps a global rank to
/// microseconds added to its clock. Returns the trace, a dict of counts and
/// the partial collectives (dicts with `group`, `op`, `seen`, `missing`,
/// `start_us`, `step`).
#[pyfunction]
#[pyo3(signature = (paths, *, workload_name="kineto-import".to_owned(), phase=None, rank=None, clock_offsets=None, strict=false, cache_dir=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn import_kineto_job<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    workload_name: String,
    phase: Option<String>,
    rank: Option<i64>,
    clock_offsets: Option<HashMap<i64, f64>>,
    strict: bool,
    cache_dir: Option<PathBuf>,
) -> PyResult<(PyTrace, Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let labels: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let source = labels.join(", ");
    let job_labels = labels.clone();
    let job = detached(py, None, move || {
        let options = JobOptions::requested(
            workload_name,
            phase,
            rank,
            paths.len(),
            clock_offsets.unwrap_or_default(),
            strict,
        )?;
        let (profiles, stats) = read_files(&paths, &job_labels, rank, cache_dir.as_deref())?;
        import_job_with_steps(profiles, &job_labels, &options).map(|job| (job, stats))
    })?;
    let (job, stats) = job;
    job_result(py, job, &stats, source)
}

/// The job import's result as the Python side takes it: the trace, a dict
/// of counts and the partial collectives.
pub(crate) fn job_result<'py>(
    py: Python<'py>,
    job: JobImport,
    stats: &CacheStats,
    source: String,
) -> PyResult<(PyTrace, Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let counts = PyDict::new(py);
    let c = &job.counts;
    for (key, value) in [
        ("imported", c.imported),
        ("ranks", c.ranks),
        ("files", c.files),
        ("partial", c.partial),
        ("ambiguous", c.ambiguous),
        ("control", c.control),
        ("empty", c.empty),
        ("nested", c.nested),
        ("undtyped", c.undtyped),
        ("unlinked", c.unlinked),
        ("cache_hits", stats.hits),
        ("parsed", stats.parsed),
        ("cache_write_failures", stats.write_failures),
    ] {
        counts.set_item(key, value)?;
    }
    let partial = PyList::empty(py);
    for p in &job.partial {
        let d = PyDict::new(py);
        d.set_item("group", &p.group)?;
        d.set_item("op", &p.op)?;
        d.set_item("seen", &p.seen)?;
        d.set_item("missing", &p.missing)?;
        d.set_item("start_us", p.start_us)?;
        d.set_item("step", (p.step >= 0).then_some(p.step))?;
        d.set_item("text", describe(p))?;
        partial.append(d)?;
    }
    let trace = PyTrace {
        inner: Arc::new(job.trace),
        source,
    };
    Ok((trace, counts, partial))
}

/// Checks a job import's options before any file is read (what
/// `import_kineto_job` checks first); raises `OptionError`.
#[pyfunction]
#[pyo3(signature = (files, *, workload_name, phase=None, rank=None, clock_offsets=None, strict=false))]
pub(crate) fn check_kineto_job_options(
    py: Python<'_>,
    files: usize,
    workload_name: String,
    phase: Option<String>,
    rank: Option<i64>,
    clock_offsets: Option<HashMap<i64, f64>>,
    strict: bool,
) -> PyResult<()> {
    detached(py, None, move || {
        JobOptions::requested(
            workload_name,
            phase,
            rank,
            files,
            clock_offsets.unwrap_or_default(),
            strict,
        )
        .map(|_| ())
    })
}

/// Merges a job from its files' partials (`KinetoPartials`, one per file
/// in the order of `labels`, taken out of it), with `import_kineto_job`'s
/// options, checks, errors and result: the same trace, byte for byte.
#[pyfunction]
#[pyo3(signature = (labels, partials, *, workload_name="kineto-import".to_owned(), phase=None, rank=None, clock_offsets=None, strict=false))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn import_kineto_partials<'py>(
    py: Python<'py>,
    labels: Vec<String>,
    partials: PyRef<'py, PyKinetoPartials>,
    workload_name: String,
    phase: Option<String>,
    rank: Option<i64>,
    clock_offsets: Option<HashMap<i64, f64>>,
    strict: bool,
) -> PyResult<(PyTrace, Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let source = labels.join(", ");
    let partials = partials.take();
    let job = detached(py, None, move || {
        let options = JobOptions::requested(
            workload_name,
            phase,
            rank,
            labels.len(),
            clock_offsets.unwrap_or_default(),
            strict,
        )?;
        let (profiles, stats) = profiles_from_partials(partials, &labels)?;
        import_job_with_steps(profiles, &labels, &options).map(|job| (job, stats))
    })?;
    let (job, stats) = job;
    job_result(py, job, &stats, source)
}

/// Reads a clock-offset file (`{"rank": microseconds}`) by the core's rules;
/// raises `InputError` naming the file and the field.
#[pyfunction]
pub(crate) fn read_clock_offsets(py: Python<'_>, path: PathBuf) -> PyResult<HashMap<i64, f64>> {
    use commcanary_core::input::{MAX_INPUT_BYTES, read_input};
    let display = path.display().to_string();
    let pairs = detached(py, Some(&display), move || {
        commcanary_core::import::kineto::job::read_clock_offsets(&read_input(
            &path,
            MAX_INPUT_BYTES,
        )?)
    })?;
    Ok(pairs.into_iter().collect())
}

/// Imports a directory of NCCL profiler plugin logs
/// (`libnccl-profiler-commcanary.so`) as a job trace. Returns what
/// `import_kineto_job` returns, and per process (in rank order) a dict:
/// `label`, `rank`, `abi`, `segments`, `sealed`, `dropped`, `torn`,
/// `orphans`, and `comms` (dicts: `group`, `enqueued`, `last_enqueued`,
/// `last_completed`, `observed`).
#[pyfunction]
#[pyo3(signature = (directory, *, workload_name="nccl-profiler-import".to_owned(), strict=false))]
#[allow(clippy::type_complexity)]
pub(crate) fn import_nccl_profiler<'py>(
    py: Python<'py>,
    directory: PathBuf,
    workload_name: String,
    strict: bool,
) -> PyResult<(
    PyTrace,
    Bound<'py, PyDict>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
)> {
    let source = directory.display().to_string();
    let job = detached(py, None, move || {
        let options = JobOptions::requested(workload_name, None, None, 1, Vec::new(), strict)?;
        import_dir(&directory, &options)
    })?;
    let processes = PyList::empty(py);
    for p in &job.processes {
        let d = PyDict::new(py);
        d.set_item("label", &p.label)?;
        d.set_item("rank", p.rank)?;
        d.set_item("abi", p.abi)?;
        d.set_item("segments", p.segments.0)?;
        d.set_item("sealed", p.segments.1)?;
        d.set_item("dropped", p.dropped)?;
        d.set_item("torn", p.torn)?;
        d.set_item("orphans", p.orphans)?;
        let comms = PyList::empty(py);
        for (group, g) in &p.comms {
            let c = PyDict::new(py);
            c.set_item("group", group)?;
            c.set_item("enqueued", g.enqueued)?;
            c.set_item("last_enqueued", g.last_enqueued)?;
            c.set_item("last_completed", g.last_completed)?;
            c.set_item("observed", g.observed)?;
            comms.append(c)?;
        }
        d.set_item("comms", comms)?;
        processes.append(d)?;
    }
    let (trace, counts, partial) = job_result(py, job.import, &CacheStats::default(), source)?;
    Ok((trace, counts, partial, processes))
}
