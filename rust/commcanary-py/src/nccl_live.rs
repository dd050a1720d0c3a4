//! `NcclFollower`: the NCCL profiler plugin's log directory followed while
//! the job runs (`commcanary_core::import::nccl_profiler::live`), for the
//! agent.

use std::path::PathBuf;
use std::sync::Mutex;

use commcanary_core::import::nccl_profiler::live::{CommLive, Follower};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::detached;

/// One process as a poll returns it.
struct Seen {
    host: String,
    pid: u32,
    rank: i64,
    dropped: u64,
    lost: u64,
    sealed: bool,
    comms: Vec<CommLive>,
}

/// Follows one log directory. `poll()` reads what the segments gained and
/// returns `(processes, damaged)`: per process a dict (`host`, `pid`,
/// `rank`, `dropped`, `lost`, `sealed`, `comms`: dicts with `group`,
/// `nranks`, `rank`, `enqueued`, `last_enqueued`, `last_completed`,
/// `in_flight`, `observed`, `last_progress_ns`, `finalized`), and the
/// segments no longer read with why.
#[pyclass(frozen, name = "NcclFollower", module = "commcanary._core")]
pub(crate) struct PyNcclFollower {
    inner: Mutex<Follower>,
}

#[pymethods]
impl PyNcclFollower {
    #[new]
    fn new(directory: PathBuf) -> Self {
        Self {
            inner: Mutex::new(Follower::new(&directory)),
        }
    }

    /// Reads what every segment gained since the last poll.
    fn poll<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Vec<String>)> {
        let (seen, damaged) = detached(py, None, || {
            let mut f = self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f.poll()?;
            let seen: Vec<Seen> = f
                .processes
                .values()
                .map(|p| Seen {
                    host: p.header.host.clone(),
                    pid: p.header.pid,
                    rank: p.header.world_rank,
                    dropped: p.dropped,
                    lost: p.lost,
                    sealed: p.sealed,
                    comms: p.comms.clone(),
                })
                .collect();
            Ok((seen, f.damaged()))
        })?;
        let out = PyList::empty(py);
        for s in seen {
            let d = PyDict::new(py);
            d.set_item("host", s.host)?;
            d.set_item("pid", s.pid)?;
            d.set_item("rank", s.rank)?;
            d.set_item("dropped", s.dropped)?;
            d.set_item("lost", s.lost)?;
            d.set_item("sealed", s.sealed)?;
            let comms = PyList::empty(py);
            for c in s.comms {
                let e = PyDict::new(py);
                e.set_item("group", c.group)?;
                e.set_item("nranks", c.nranks)?;
                e.set_item("rank", c.rank)?;
                e.set_item("enqueued", c.enqueued)?;
                e.set_item("last_enqueued", c.last_enqueued)?;
                e.set_item("last_completed", c.last_completed)?;
                e.set_item("in_flight", c.in_flight)?;
                e.set_item("observed", c.observed)?;
                e.set_item("last_progress_ns", c.last_progress_ns)?;
                e.set_item("finalized", c.finalized)?;
                comms.append(e)?;
            }
            d.set_item("comms", comms)?;
            out.append(d)?;
        }
        Ok((out, damaged))
    }
}
