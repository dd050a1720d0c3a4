//! The sharded job import's steps (`commcanary_core::import::kineto::sharded`)
//! as a cluster runs them: the per-rank and per-shard steps are functions
//! of bytes a worker task calls, the job-wide ones are methods of
//! `ShardedImport`, which the client holds between them. Every call
//! releases the interpreter.

use std::collections::HashMap;
use std::sync::Mutex;

use commcanary_core::error::Result as CoreResult;
use commcanary_core::import::kineto::job::CallFacts;
use std::path::PathBuf;

use commcanary_core::import::kineto::job::join_profiles;
use commcanary_core::import::kineto::ranges::{self, UnitCheck};
use commcanary_core::import::kineto::sharded::{
    Piece, Shape, ShardEvents, ShardPrepared, assemble, encode_head, encode_named_sets,
    encode_placements, encode_votes, frame, frame_heads, labels_from_votes, own_candidate_sets,
    place_shards, sets_by_index, shard_events, shard_map, shard_prepare, shard_votes, split,
};
use commcanary_core::import::kineto::{
    AlignedJob, CacheStats, JobOptions, codec, profiles_from_partials,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::distributed::{PartialOut, PyKinetoPartials, read_partial};
use crate::errors::detached;
use crate::import::job_result;
use crate::trace::PyTrace;

fn pieces(list: Vec<Vec<u8>>) -> CoreResult<Vec<Piece>> {
    list.iter().map(|b| Piece::decode(b)).collect()
}

/// One file of a job read (as `kineto_partial` reads it) with what the
/// sharded plan takes as the rank is read: `(partial, head, named candidate
/// sets)`, the partial as `kineto_partial` returns it, the other two `None`
/// on an error.
#[pyfunction]
#[pyo3(signature = (path, label, *, rank=None, cache_dir=None))]
#[allow(clippy::type_complexity)]
pub(crate) fn kineto_rank<'py>(
    py: Python<'py>,
    path: PathBuf,
    label: String,
    rank: Option<i64>,
    cache_dir: Option<PathBuf>,
) -> PyResult<(
    PartialOut<'py>,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
)> {
    let (partial, more) = read_partial(py, path, label, rank, cache_dir, |p| {
        (encode_head(p), encode_named_sets(&own_candidate_sets(p)))
    })?;
    Ok(match more {
        Some((head, sets)) => (
            partial,
            Some(PyBytes::new(py, &head)),
            Some(PyBytes::new(py, &sets)),
        ),
        None => (partial, None, None),
    })
}

/// A rank's files' profiles (in the order `ShardedImport.slot_files` gives)
/// joined into the rank's profile, on a worker: the windows of one rank.
#[pyfunction]
pub(crate) fn kineto_join<'py>(
    py: Python<'py>,
    profiles: Vec<Vec<u8>>,
    labels: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = detached(py, None, move || {
        let decoded = (profiles.iter())
            .map(|b| codec::decode(b))
            .collect::<CoreResult<Vec<_>>>()?;
        Ok(codec::encode(&join_profiles(decoded, &labels)?))
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// Step 4, on the worker holding a batch of ranks: each `(slot, profile)`
/// cut into one piece per unit (a range of steps of a shard), as `(unit,
/// piece)` in rank order.
#[pyfunction]
pub(crate) fn sharded_split<'py>(
    py: Python<'py>,
    shape: Vec<u8>,
    ranks: Vec<(usize, Vec<u8>)>,
    shard_of_group: Vec<u32>,
    shards: u32,
    bounds: Vec<i64>,
) -> PyResult<Vec<(u32, Bound<'py, PyBytes>)>> {
    let cut = detached(py, None, move || {
        let shape = Shape::decode(&shape)?;
        let mut out = Vec::new();
        for (slot, profile) in ranks {
            let p = codec::decode(&profile)?;
            for (s, piece) in split(&shape, slot, p, &shard_of_group, shards, &bounds)? {
                out.push((s, piece.encode()));
            }
        }
        Ok(out)
    })?;
    Ok(cut
        .into_iter()
        .map(|(s, b)| (s, PyBytes::new(py, &b)))
        .collect())
}

fn each_shard<'py, T: Send>(
    py: Python<'py>,
    shape: Vec<u8>,
    shards: Vec<Vec<Vec<u8>>>,
    step: impl Fn(&Shape, usize, Vec<Piece>) -> CoreResult<T> + Send,
) -> PyResult<Vec<T>> {
    detached(py, None, move || {
        let shape = Shape::decode(&shape)?;
        (shards.into_iter().enumerate())
            .map(|(k, list)| step(&shape, k, pieces(list)?))
            .collect::<CoreResult<Vec<_>>>()
    })
}

fn as_bytes<'py>(py: Python<'py>, out: &[Vec<u8>]) -> Vec<Bound<'py, PyBytes>> {
    out.iter().map(|b| PyBytes::new(py, b)).collect()
}

/// A unit's result and its check, as bytes.
type Checked<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>);

fn checked<'py>(py: Python<'py>, out: &[(Vec<u8>, UnitCheck)]) -> Vec<Checked<'py>> {
    out.iter()
        .map(|(b, c)| (PyBytes::new(py, b), PyBytes::new(py, &c.encode())))
        .collect()
}

/// Step 5, per unit of a group (each its pieces): the first pass's thread
/// votes and the unit's check, as `(votes, check)`.
#[pyfunction]
pub(crate) fn sharded_votes<'py>(
    py: Python<'py>,
    shape: Vec<u8>,
    shards: Vec<Vec<Vec<u8>>>,
) -> PyResult<Vec<Checked<'py>>> {
    let out = each_shard(py, shape, shards, |shape, _, p| {
        let (votes, check) = shard_votes(shape, p)?;
        Ok((encode_votes(&votes), check))
    })?;
    Ok(checked(py, &out))
}

/// Step 6, per unit of a group: the second pass, the complete instances to
/// order, and the unit's check, as `(prepared, check)`.
#[pyfunction]
pub(crate) fn sharded_prepare<'py>(
    py: Python<'py>,
    shape: Vec<u8>,
    shards: Vec<Vec<Vec<u8>>>,
    labels: Vec<u8>,
) -> PyResult<Vec<Checked<'py>>> {
    let out = each_shard(py, shape, shards, move |shape, _, p| {
        let (prepared, check) = shard_prepare(shape, p, &labels)?;
        Ok((prepared.encode(), check))
    })?;
    Ok(checked(py, &out))
}

/// Step 8, per shard of a group (with its placements): its events and
/// partial collectives.
#[pyfunction]
#[pyo3(signature = (shape, shards, labels, placements, phase=None))]
pub(crate) fn sharded_events<'py>(
    py: Python<'py>,
    shape: Vec<u8>,
    shards: Vec<Vec<Vec<u8>>>,
    labels: Vec<u8>,
    placements: Vec<Vec<u8>>,
    phase: Option<String>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let out = each_shard(py, shape, shards, move |shape, k, p| {
        let at = placements.get(k).map_or(&[][..], Vec::as_slice);
        Ok(shard_events(shape, p, &labels, at, phase.as_deref())?.encode())
    })?;
    Ok(as_bytes(py, &out))
}

/// What the client keeps between the job-wide steps.
struct State {
    frame: AlignedJob,
    facts: CallFacts,
    slot_files: Vec<Vec<usize>>,
    steps: (i64, i64),
    files: u64,
    options: JobOptions,
    shape: Vec<u8>,
    groups: usize,
    source: String,
    stats: CacheStats,
    placed: Option<Placed>,
    events: Vec<ShardEvents>,
}

/// The job's event order as `(shard, index)`, the ambiguous count and the
/// origin, from `place` for `assemble`.
type Placed = (Vec<(usize, usize)>, u64, f64);

/// A job import's client side on a cluster: framed from the ranks' heads,
/// then fed each step's results.
#[pyclass(name = "ShardedImport", module = "commcanary._core")]
pub(crate) struct PyShardedImport {
    state: Mutex<State>,
}

impl PyShardedImport {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[pymethods]
impl PyShardedImport {
    /// Step 1: the files' heads (a `KinetoPartials` of the heads
    /// `kineto_rank` gave, less their last `HEAD_FACTS_BYTES`, which are
    /// `facts`), checked and each rank's windows joined as the one-process
    /// import does; `None` when no call lies in a `ProfilerStep`.
    #[staticmethod]
    #[pyo3(signature = (labels, heads, facts, *, workload_name="kineto-import".to_owned(), phase=None, clock_offsets=None, strict=false))]
    #[allow(clippy::too_many_arguments)]
    fn frame(
        py: Python<'_>,
        labels: Vec<String>,
        heads: PyRef<'_, PyKinetoPartials>,
        facts: Vec<Vec<u8>>,
        workload_name: String,
        phase: Option<String>,
        clock_offsets: Option<HashMap<i64, f64>>,
        strict: bool,
    ) -> PyResult<Option<Self>> {
        let source = labels.join(", ");
        let files = labels.len() as u64;
        let heads = heads.take();
        let framed = detached(py, None, move || {
            let options = JobOptions::requested(
                workload_name,
                phase,
                None,
                labels.len(),
                clock_offsets.unwrap_or_default(),
                strict,
            )?;
            let (profiles, stats) = profiles_from_partials(heads, &labels)?;
            let heads = frame_heads(profiles, &facts)?;
            let framed = frame(heads, &labels, &options.clock_offsets_us)?;
            Ok(framed.map(|(frame, facts, slot_files, steps)| {
                let shape = Shape::of(&frame);
                State {
                    groups: shape.groups.len(),
                    shape: shape.encode(),
                    frame,
                    facts,
                    slot_files,
                    steps,
                    files,
                    options,
                    source: String::new(),
                    stats,
                    placed: None,
                    events: Vec::new(),
                }
            }))
        })?;
        Ok(framed.map(|mut state| {
            state.source = source;
            Self {
                state: Mutex::new(state),
            }
        }))
    }

    /// The job's shape, for every worker step.
    fn shape<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.lock().shape)
    }

    /// The file (index into the labels) of each slot.
    fn slot_files(&self) -> Vec<Vec<usize>> {
        self.lock().slot_files.clone()
    }

    /// Step 3: each group's shard and the number of shards, from every
    /// rank's named candidate sets (`kineto_rank`'s last item).
    fn shard_map(&self, py: Python<'_>, named: Vec<Vec<u8>>) -> PyResult<(Vec<u32>, u32)> {
        let groups = self.lock().frame.groups.clone();
        detached(py, None, move || {
            let sets = sets_by_index(&groups, &named)?;
            shard_map(groups.len(), sets.iter().map(Vec::as_slice))
        })
    }

    /// Each range's first step but the first's, for `range_count` ranges a
    /// shard (`None`: as many as the job's `profile_bytes` over its `shards`
    /// and the cluster's `threads` want, `ranges::range_count`).
    #[pyo3(signature = (profile_bytes, shards, threads, range_count=None))]
    fn range_bounds(
        &self,
        profile_bytes: u64,
        shards: u32,
        threads: u32,
        range_count: Option<u32>,
    ) -> Vec<i64> {
        let steps = self.lock().steps;
        let count = range_count
            .unwrap_or_else(|| ranges::range_count(steps, profile_bytes, shards, threads));
        ranges::range_bounds(steps, count)
    }

    /// The units (their ids, in order) after a round of checks (one
    /// `sharded_votes` or `sharded_prepare` check a unit), with `per_shard`
    /// ranges a shard: `(units, merged)`, `merged` the indices of the units
    /// to run again.
    #[staticmethod]
    fn settle(
        py: Python<'_>,
        units: Vec<Vec<u32>>,
        checks: Vec<Vec<u8>>,
        per_shard: u32,
    ) -> PyResult<(Vec<Vec<u32>>, Vec<usize>)> {
        detached(py, None, move || {
            let checks = (checks.iter())
                .map(|c| UnitCheck::decode(c))
                .collect::<CoreResult<Vec<_>>>()?;
            ranges::settle(&units, &checks, per_shard)
        })
    }

    /// The job's thread labels from every shard's votes.
    fn labels<'py>(&self, py: Python<'py>, votes: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = detached(py, None, move || {
            labels_from_votes(votes.iter().map(Vec::as_slice))
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Step 7: every shard's prepared instances placed; each shard's
    /// placements, for its events step.
    fn place<'py>(
        &self,
        py: Python<'py>,
        prepared: Vec<Vec<u8>>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let groups = self.lock().groups;
        let (origin, per_shard, order, ambiguous) = detached(py, None, move || {
            let shards = prepared
                .iter()
                .map(|b| ShardPrepared::decode(b))
                .collect::<CoreResult<Vec<_>>>()?;
            let ambiguous = shards.iter().map(|s| s.ambiguous).sum::<u64>();
            let (origin, per_shard, order) = place_shards(groups, &shards);
            Ok((origin, per_shard, order, ambiguous))
        })?;
        self.lock().placed = Some((order, ambiguous, origin));
        Ok(per_shard
            .iter()
            .map(|p| PyBytes::new(py, &encode_placements(origin, p)))
            .collect())
    }

    /// Step 8's results, in shard order, a group at a time (each decoded as
    /// it comes, so the client holds the shards' events once).
    fn add_events(&self, py: Python<'_>, events: Vec<Vec<u8>>) -> PyResult<()> {
        let decoded = detached(py, None, move || {
            events
                .iter()
                .map(|b| ShardEvents::decode(b))
                .collect::<CoreResult<Vec<_>>>()
        })?;
        self.lock().events.extend(decoded);
        Ok(())
    }

    /// Step 9: the import from every shard's events, as
    /// `import_kineto_partials` returns it.
    fn assemble<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(PyTrace, Bound<'py, PyDict>, Bound<'py, PyList>)> {
        let mut state = self.lock();
        let Some((order, ambiguous, origin)) = state.placed.take() else {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "assemble() before place()",
            ));
        };
        let source = std::mem::take(&mut state.source);
        let events = std::mem::take(&mut state.events);
        let state = &*state;
        let job = detached(py, None, || {
            assemble(
                &state.frame,
                state.facts,
                events,
                &order,
                ambiguous,
                origin,
                state.files,
                &state.options,
            )
        })?;
        job_result(py, job, &state.stats, source)
    }
}
