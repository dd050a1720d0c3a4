//! What a distributed run passes across processes: one file's partial
//! (`kineto_partial`, `dump_partial`: run by a task on a worker, the
//! interpreter released), the files an analysis will read
//! (`evidence_files`), and the conversion of the partials the client
//! gathered back into the core's types (`file_partial`, `remote_reads`).

use std::path::PathBuf;

use commcanary_core::analysis::evidence::{DumpPartial, GatherOptions, RemoteReads, plan};
use std::sync::Mutex;

use commcanary_core::import::kineto::{FilePartial, codec, read_one};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::detached;

/// A Kineto file's partial as Python holds it: fingerprint, encoded
/// profile, error line, how it was served.
pub(crate) type KinetoPartialArg = (Option<Vec<u8>>, Option<Vec<u8>>, Option<String>, String);
/// A dump's partial as Python holds it: encoded dump, or error kind code and
/// path-free message.
pub(crate) type DumpPartialArg = (Option<Vec<u8>>, Option<u8>, Option<String>);
/// An analysis' remote reads: dump labels and partials, trace labels and
/// partials, in the plan's order.
pub(crate) type ReadsArg = (
    Vec<String>,
    Vec<DumpPartialArg>,
    Vec<String>,
    Vec<KinetoPartialArg>,
);

/// The core's `FilePartial` (decoded) from Python's tuple.
pub(crate) fn file_partial(
    label: &str,
    (fingerprint, profile, error, served): KinetoPartialArg,
) -> FilePartial {
    let profile = match (profile, error) {
        (_, Some(message)) => Err(message),
        (Some(bytes), None) => Ok(bytes),
        (None, None) => Err("a task returned no profile".to_owned()),
    };
    FilePartial::decoded(
        label,
        fingerprint.as_deref(),
        profile.as_deref().map_err(Clone::clone),
        &served,
    )
}

/// A job's Kineto partials gathered one at a time: each is decoded as it is
/// added, so the client never holds a job's encoded partials and their
/// profiles at once. `import_kineto_partials` takes them.
#[pyclass(name = "KinetoPartials", module = "commcanary._core")]
#[derive(Default)]
pub(crate) struct PyKinetoPartials {
    pub(crate) partials: Mutex<Vec<FilePartial>>,
}

#[pymethods]
impl PyKinetoPartials {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Decodes and keeps one file's partial (what `kineto_partial`
    /// returned), in file order; `label` names the file in errors.
    #[allow(clippy::type_complexity)]
    fn add(
        &self,
        label: &str,
        partial: (
            Option<Bound<'_, PyBytes>>,
            Option<Bound<'_, PyBytes>>,
            Option<String>,
            String,
        ),
    ) {
        let (fingerprint, profile, error, served) = partial;
        let profile = match (&profile, error) {
            (_, Some(message)) => Err(message),
            (Some(bytes), None) => Ok(bytes.as_bytes()),
            (None, None) => Err("a task returned no profile".to_owned()),
        };
        let decoded = FilePartial::decoded(
            label,
            fingerprint.as_ref().map(|b| b.as_bytes()),
            profile,
            &served,
        );
        self.lock().push(decoded);
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }
}

impl PyKinetoPartials {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<FilePartial>> {
        self.partials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the partials out (the object is empty afterwards).
    pub(crate) fn take(&self) -> Vec<FilePartial> {
        std::mem::take(&mut *self.lock())
    }
}

/// The core's `RemoteReads` from Python's tuple.
pub(crate) fn remote_reads((dump_labels, dumps, trace_labels, traces): ReadsArg) -> RemoteReads {
    RemoteReads {
        dump_labels,
        dumps: dumps
            .into_iter()
            .map(|(bytes, code, message)| DumpPartial {
                dump: match (bytes, message) {
                    (_, Some(message)) => Err((code.unwrap_or(u8::MAX), message)),
                    (Some(bytes), None) => Ok(bytes),
                    (None, None) => Err((u8::MAX, "a task returned no dump".to_owned())),
                },
            })
            .collect(),
        traces: traces
            .into_iter()
            .zip(&trace_labels)
            .map(|(t, label)| file_partial(label, t))
            .collect(),
        trace_labels,
    }
}

/// One file of a job read on its own, in Rust with the interpreter
/// released: the task a distributed import runs per file. Returns
/// `(fingerprint, profile, error, served)`: the file's BLAKE3 fingerprint
/// (`None` when it could not be read), its profile in the cache's codec
/// (`None` on an error), the error's one line naming `label`, and how it
/// was served (`"hit"`, `"parsed"`, `"parsed-unstored"`). Never raises for
/// the file's own faults: the merge reports them in the single-process
/// order.
#[pyfunction]
#[pyo3(signature = (path, label, *, rank=None, cache_dir=None))]
pub(crate) fn kineto_partial<'py>(
    py: Python<'py>,
    path: PathBuf,
    label: String,
    rank: Option<i64>,
    cache_dir: Option<PathBuf>,
) -> PyResult<PartialOut<'py>> {
    read_partial(py, path, label, rank, cache_dir, |_| ()).map(|(partial, _)| partial)
}

/// A file's partial as Python gets it: fingerprint, profile, error, served.
pub(crate) type PartialOut<'py> = (
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    Option<String>,
    &'static str,
);

/// One file read (`read_one`, the interpreter released) into its partial,
/// and what `extra` takes from its profile before it is encoded (`None` on
/// the file's error).
pub(crate) fn read_partial<'py, T: Send>(
    py: Python<'py>,
    path: PathBuf,
    label: String,
    rank: Option<i64>,
    cache_dir: Option<PathBuf>,
    extra: impl Fn(&commcanary_core::import::kineto::RankProfile) -> T + Send,
) -> PyResult<(PartialOut<'py>, Option<T>)> {
    let (fingerprint, read) = detached(py, None, move || {
        let (fingerprint, profile) = read_one(&path, &label, rank, cache_dir.as_deref());
        let read = profile.map(|(p, served)| (codec::encode(&p), served, extra(&p)));
        Ok((fingerprint, read))
    })?;
    let fp = fingerprint.as_ref().ok().map(|f| PyBytes::new(py, f));
    Ok(match read {
        Ok((bytes, served, more)) => (
            (fp, Some(PyBytes::new(py, &bytes)), None, served.name()),
            Some(more),
        ),
        Err(e) => ((fp, None, Some(e.message().to_owned()), "parsed"), None),
    })
}

/// The files the analysis `analysis` (`hang`, `stragglers`, `steps`,
/// `timeline`) reads in `paths`, listed and classified here: `(dumps,
/// traces)`, each a list of `(path, label)` for the tasks to read.
#[pyfunction]
#[pyo3(signature = (paths, analysis, *, cache_dir=None))]
#[allow(clippy::type_complexity)]
pub(crate) fn evidence_files(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    analysis: String,
    cache_dir: Option<PathBuf>,
) -> PyResult<(Vec<(PathBuf, String)>, Vec<(PathBuf, String)>)> {
    detached(py, None, move || {
        let options = GatherOptions::for_analysis(&analysis, cache_dir)?;
        let plan = plan(&paths, &options)?;
        Ok((plan.dump_files().to_vec(), plan.trace_files().to_vec()))
    })
}

/// One Flight Recorder dump read and decoded in Rust with the interpreter
/// released: the task a distributed analysis runs per dump. Returns
/// `(dump, kind, message)`: the dump in the core's codec, or the error's
/// kind code and path-free message. Never raises for the file's faults.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn dump_partial<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(Option<Bound<'py, PyBytes>>, Option<u8>, Option<String>)> {
    let partial = detached(py, None, move || Ok(DumpPartial::read(&path)))?;
    Ok(match partial.dump {
        Ok(bytes) => (Some(PyBytes::new(py, &bytes)), None, None),
        Err((code, message)) => (None, Some(code), Some(message)),
    })
}
