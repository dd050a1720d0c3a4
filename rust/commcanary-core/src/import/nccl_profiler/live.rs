//! Following a log directory while the job runs: how far each process got on
//! each communicator, from the frames written so far.
//!
//! [`Follower::poll`] reads each segment from where it stopped, whole frames
//! only (a frame cut at the end of a growing file, or whose checksum does not
//! match yet, is read again next time), and keeps per process, per
//! communicator: collectives enqueued, the last sequence number enqueued and
//! completed, the operations in flight, and when it last progressed (an
//! enqueue or a completion, host clock). Completion is the import's rule: an
//! operation whose children (kernel channels, proxy operations) all stopped.
//! Only the events in flight are kept, so memory follows the job's
//! concurrency, not its length.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use commcanary_nccl_log::event::kind;
use commcanary_nccl_log::frame::{Comm, Header};
use commcanary_nccl_log::record::{call, slot};
use commcanary_nccl_log::{Frame, Next, Record, next_frame};
use rustc_hash::FxHashMap;

use super::logs::EXTENSION;
use crate::error::{Error, ErrorKind, Result};

/// Children whose operation's start has not been read yet (another
/// thread's ring drained first), kept at most (per process); beyond, they
/// are counted and let go.
pub const MAX_EARLY: usize = 1 << 16;
/// Operations kept open per process, at most: beyond, the oldest is let go
/// (counted lost). A job whose mask shows no children never completes an
/// operation here, and must not grow without end.
pub const MAX_OPEN: usize = 1 << 16;
/// Bytes read from one file per poll, at most.
pub const MAX_READ: u64 = 64 << 20;

/// One communicator's progress in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommLive {
    /// Group name (`commName`, or `nccl:<id>`).
    pub group: String,
    /// `nranks`.
    pub nranks: i32,
    /// Rank in it.
    pub rank: i32,
    /// Collectives and p2p operations enqueued.
    pub enqueued: u64,
    /// Highest collective sequence number enqueued, −1 when none.
    pub last_enqueued: i64,
    /// Highest collective sequence number completed, −1 when none.
    pub last_completed: i64,
    /// Operations enqueued and not completed (among those whose completion
    /// can be seen: with children).
    pub in_flight: u64,
    /// Whether any operation had children (completion can be seen).
    pub observed: bool,
    /// Host ns of its last enqueue or completion.
    pub last_progress_ns: u64,
    /// Finalized.
    pub finalized: bool,
}

enum Open {
    Op {
        context: u32,
        seq: i64,
        children: u32,
        stopped: u32,
    },
    Child {
        op: u64,
    },
}

/// One process as followed.
#[derive(Default)]
pub struct ProcessLive {
    /// Its header.
    pub header: Header,
    /// Per context.
    pub comms: Vec<CommLive>,
    /// Records dropped by full rings (last count per thread, summed).
    pub dropped: u64,
    /// Early records let go (over [`MAX_EARLY`]).
    pub lost: u64,
    /// A segment of it is sealed at the end (a normal exit).
    pub sealed: bool,
    drops: FxHashMap<u32, u64>,
    open: FxHashMap<u64, Open>,
    /// Operation ids in the order they opened (some already gone).
    opened: std::collections::VecDeque<u64>,
    open_ops: usize,
    early: FxHashMap<u64, Vec<Record>>,
    early_count: usize,
}

struct FileState {
    offset: u64,
    process: Option<(String, u32)>,
    damaged: Option<String>,
}

/// The follower of one directory.
#[derive(Default)]
pub struct Follower {
    dir: PathBuf,
    files: BTreeMap<PathBuf, FileState>,
    /// Processes by (host, pid).
    pub processes: BTreeMap<(String, u32), ProcessLive>,
}

fn group_name(c: &Comm) -> String {
    if c.name.is_empty() {
        format!("nccl:{:016x}", c.comm_id)
    } else {
        c.name.clone()
    }
}

impl ProcessLive {
    fn progress(&mut self, context: u32, ts: u64, f: impl FnOnce(&mut CommLive)) {
        if let Some(c) = self.comms.get_mut(context as usize) {
            f(c);
            c.last_progress_ns = c.last_progress_ns.max(ts);
        }
    }

    /// Drops the ids of operations already gone from the front of the order.
    fn compact(&mut self) {
        while let Some(&id) = self.opened.front() {
            if matches!(self.open.get(&id), Some(Open::Op { .. })) {
                break;
            }
            self.opened.pop_front();
        }
    }

    fn stash(&mut self, parent: u64, r: Record) {
        if self.early_count >= MAX_EARLY {
            self.lost += 1;
            return;
        }
        self.early_count += 1;
        self.early.entry(parent).or_default().push(r);
    }

    fn record(&mut self, r: Record) {
        match r.call {
            call::START => match r.kind {
                kind::COLL | kind::CE_COLL | kind::P2P => {
                    let seq = match r.kind {
                        kind::COLL => r.payload[slot::COLL_SEQ].min(i64::MAX as u64) as i64,
                        kind::CE_COLL => r.payload[slot::CE_COLL_SEQ].min(i64::MAX as u64) as i64,
                        _ => -1,
                    };
                    self.open.insert(
                        r.id,
                        Open::Op {
                            context: r.context,
                            seq,
                            children: 0,
                            stopped: 0,
                        },
                    );
                    self.opened.push_back(r.id);
                    self.open_ops += 1;
                    while self.open_ops > MAX_OPEN {
                        let Some(old) = self.opened.pop_front() else {
                            break;
                        };
                        if matches!(self.open.get(&old), Some(Open::Op { .. })) {
                            self.open.remove(&old);
                            self.open_ops -= 1;
                            self.lost += 1;
                        }
                    }
                    self.progress(r.context, r.ts_ns, |c| {
                        c.enqueued += 1;
                        c.last_enqueued = c.last_enqueued.max(seq);
                    });
                    if let Some(waiting) = self.early.remove(&r.id) {
                        self.early_count -= waiting.len();
                        waiting.into_iter().for_each(|w| self.record(w));
                    }
                }
                kind::KERNEL_CH | kind::PROXY_OP => {
                    let Some(Open::Op {
                        context, children, ..
                    }) = self.open.get_mut(&r.parent)
                    else {
                        self.stash(r.parent, r);
                        return;
                    };
                    *children += 1;
                    let context = *context;
                    if *children == 1 {
                        if let Some(c) = self.comms.get_mut(context as usize) {
                            c.observed = true;
                            c.in_flight += 1;
                        }
                    }
                    self.open.insert(r.id, Open::Child { op: r.parent });
                    if let Some(waiting) = self.early.remove(&r.id) {
                        self.early_count -= waiting.len();
                        waiting.into_iter().for_each(|w| self.record(w));
                    }
                }
                _ => {}
            },
            call::STOP => match self.open.get(&r.id) {
                Some(Open::Child { op }) => {
                    let op = *op;
                    self.open.remove(&r.id);
                    let done = match self.open.get_mut(&op) {
                        Some(Open::Op {
                            context,
                            seq,
                            children,
                            stopped,
                        }) => {
                            *stopped += 1;
                            (*stopped == *children).then_some((*context, *seq))
                        }
                        _ => None,
                    };
                    if let Some((context, seq)) = done {
                        self.open.remove(&op);
                        self.open_ops -= 1;
                        self.progress(context, r.ts_ns, |c| {
                            c.in_flight = c.in_flight.saturating_sub(1);
                            c.last_completed = c.last_completed.max(seq);
                        });
                    }
                }
                // An enqueue stop (the op lives on until its children stop),
                // or the stop of an event not followed (groups, API events).
                Some(Open::Op { .. }) | None => {}
            },
            _ => {}
        }
    }

    fn frame(&mut self, frame: Frame) {
        match frame {
            Frame::Comm(c) => {
                let at = c.context as usize;
                if at >= self.comms.len() {
                    self.comms.resize(
                        at + 1,
                        CommLive {
                            group: String::new(),
                            nranks: 0,
                            rank: 0,
                            enqueued: 0,
                            last_enqueued: -1,
                            last_completed: -1,
                            in_flight: 0,
                            observed: false,
                            last_progress_ns: 0,
                            finalized: false,
                        },
                    );
                }
                let live = &mut self.comms[at];
                if live.group.is_empty() {
                    live.group = group_name(&c);
                    live.nranks = c.nranks;
                    live.rank = c.rank;
                }
            }
            Frame::Records { records, .. } => {
                records.into_iter().for_each(|r| self.record(r));
                self.compact();
            }
            Frame::Drops { thread, dropped } => {
                let d = self.drops.entry(thread).or_default();
                *d = (*d).max(dropped);
                self.dropped = self.drops.values().sum();
            }
            Frame::Finalize { context, .. } => {
                if let Some(c) = self.comms.get_mut(context as usize) {
                    c.finalized = true;
                }
            }
            Frame::Seal { .. } => self.sealed = true,
            Frame::Header(_) | Frame::String { .. } => {}
        }
    }
}

impl Follower {
    /// A follower of `dir` (nothing read yet).
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            ..Self::default()
        }
    }

    /// Reads what every segment gained since the last poll.
    ///
    /// # Errors
    /// The directory cannot be listed. A damaged segment is not an error: it
    /// is no longer read, and [`Follower::damaged`] names it.
    pub fn poll(&mut self) -> Result<()> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", self.dir.display())))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == EXTENSION))
            .collect();
        paths.sort();
        for path in paths {
            self.files.entry(path.clone()).or_insert(FileState {
                offset: 0,
                process: None,
                damaged: None,
            });
            self.read(&path);
        }
        Ok(())
    }

    fn read(&mut self, path: &Path) {
        use std::io::{Read, Seek, SeekFrom};
        let Some(state) = self.files.get_mut(path) else {
            return;
        };
        if state.damaged.is_some() {
            return;
        }
        let Ok(mut file) = std::fs::File::open(path) else {
            return;
        };
        if file.seek(SeekFrom::Start(state.offset)).is_err() {
            return;
        }
        let mut bytes = Vec::new();
        if file.take(MAX_READ).read_to_end(&mut bytes).is_err() {
            return;
        }
        let mut at = 0usize;
        loop {
            match next_frame(&bytes[at..]) {
                Next::Frame(frame, took) => {
                    at += took;
                    match (&state.process, frame) {
                        (None, Frame::Header(h)) => {
                            let key = (h.host.clone(), h.pid);
                            let p = self.processes.entry(key.clone()).or_default();
                            if p.header.pid == 0 {
                                p.header = h;
                            }
                            state.process = Some(key);
                        }
                        (None, _) => {
                            state.damaged = Some(format!("{}: no header frame", path.display()));
                            break;
                        }
                        (Some(key), frame) => {
                            if let Some(p) = self.processes.get_mut(key) {
                                p.frame(frame);
                            }
                        }
                    }
                }
                Next::Short => break,
                Next::BadChecksum(took) if at + took >= bytes.len() => break,
                Next::BadChecksum(_) => {
                    state.damaged = Some(format!(
                        "{}: byte {}: a frame's checksum does not match",
                        path.display(),
                        state.offset as usize + at
                    ));
                    break;
                }
                Next::Damaged(e) => {
                    state.damaged = Some(format!(
                        "{}: byte {}: {e}",
                        path.display(),
                        state.offset as usize + at
                    ));
                    break;
                }
            }
        }
        state.offset += at as u64;
    }

    /// The segments no longer read, and why.
    #[must_use]
    pub fn damaged(&self) -> Vec<String> {
        self.files
            .values()
            .filter_map(|f| f.damaged.clone())
            .collect()
    }

    /// Bytes read so far.
    #[must_use]
    pub fn bytes_read(&self) -> u64 {
        self.files.values().map(|f| f.offset).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn following_the_hang_job_byte_by_byte_ends_where_the_whole_read_does() {
        let src =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/nccl_profiler/hang4");
        let dir = std::env::temp_dir().join(format!("commcanary-nccl-live-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut sources: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let b = std::fs::read(&p).unwrap();
                (dir.join(p.file_name().unwrap()), b)
            })
            .collect();
        sources.sort();
        let mut f = Follower::new(&dir);
        // The files grow in uneven pieces; every poll sees a prefix.
        let longest = sources.iter().map(|s| s.1.len()).max().unwrap();
        let mut upto = 0;
        while upto < longest {
            upto = (upto + 997).min(longest);
            for (path, bytes) in &sources {
                std::fs::write(path, &bytes[..upto.min(bytes.len())]).unwrap();
            }
            f.poll().unwrap();
        }
        assert!(f.damaged().is_empty(), "{:?}", f.damaged());
        assert_eq!(f.processes.len(), 4);
        for p in f.processes.values() {
            let world = p.comms.iter().find(|c| c.group == "default_pg:0").unwrap();
            if p.header.world_rank == 3 {
                assert_eq!(
                    (world.last_enqueued, world.last_completed, world.in_flight),
                    (4, 4, 0)
                );
            } else {
                assert_eq!(
                    (world.last_enqueued, world.last_completed, world.in_flight),
                    (5, 4, 1)
                );
            }
            assert!(world.observed && world.last_progress_ns > 0);
            assert!(p.sealed, "the exit hook sealed it");
        }
        // A job whose mask shows no children: operations never complete here,
        // and what is kept stays bounded.
        let mut p = ProcessLive::default();
        p.frame(Frame::Comm(Comm {
            nranks: 2,
            ..Comm::default()
        }));
        let ops: Vec<Record> = (1..=(MAX_OPEN as u64 + 100))
            .map(|id| Record {
                call: call::START,
                kind: kind::COLL,
                id,
                ts_ns: id,
                ..Record::default()
            })
            .collect();
        p.frame(Frame::Records {
            thread: 0,
            records: ops,
        });
        assert_eq!((p.open.len(), p.lost), (MAX_OPEN, 100));
        assert!(p.opened.len() <= MAX_OPEN);
        assert_eq!(p.comms[0].enqueued, MAX_OPEN as u64 + 100);
        let mut broken = sources[0].1.clone();
        broken[40] ^= 0xff;
        std::fs::write(&sources[0].0, &broken).unwrap();
        let mut g = Follower::new(&dir);
        g.poll().unwrap();
        assert_eq!(g.damaged().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
