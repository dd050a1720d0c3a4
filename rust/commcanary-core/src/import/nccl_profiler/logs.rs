//! A log directory's files, grouped by process.

use std::path::{Path, PathBuf};

use commcanary_nccl_log::frame::{Comm, Header};
use commcanary_nccl_log::{Frame, Record, read_segment};
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::limits;

/// The extension of a log segment.
pub const EXTENSION: &str = "ccnl";

/// Everything one process's segments hold.
#[derive(Debug, Clone, Default)]
pub struct ProcessLog {
    /// The first segment's header.
    pub header: Header,
    /// Communicators, by context index.
    pub comms: Vec<Comm>,
    /// Resolved string pointers.
    pub strings: FxHashMap<u64, String>,
    /// Every record, in file order.
    pub records: Vec<Record>,
    /// Records refused by full rings (the last count per thread, summed).
    pub dropped: u64,
    /// Records in cut last frames, skipped.
    pub torn: u64,
    /// Its segment files, in order.
    pub files: Vec<PathBuf>,
    /// Bytes read.
    pub bytes: u64,
    /// Segments that end with a seal.
    pub sealed: usize,
    /// Contexts `finalize`d.
    pub finalized: Vec<u32>,
}

impl ProcessLog {
    /// `host-pid`, as the files are named.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}-{}", self.header.host, self.header.pid)
    }

    /// The text of a string pointer (empty when unknown).
    #[must_use]
    pub fn text(&self, pointer: u64) -> &str {
        self.strings.get(&pointer).map_or("", String::as_str)
    }
}

/// The segment files under `dir` (not recursive), sorted by name.
///
/// # Errors
/// The directory cannot be listed, or holds no segment.
pub fn segment_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::new(
            crate::error::ErrorKind::Io,
            format!("{}: {e}", dir.display()),
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == EXTENSION) && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::invalid(format!(
            "{}: no NCCL profiler logs (*.{EXTENSION}) in this directory",
            dir.display()
        )));
    }
    Ok(files)
}

/// Reads every segment under `dir` and groups them by process.
///
/// # Errors
/// An unreadable file, one over `max_input_bytes`, or a damaged segment:
/// one line naming the file.
pub fn read_dir(dir: &Path) -> Result<Vec<ProcessLog>> {
    let (logs, damaged) = read_files(&segment_files(dir)?);
    match damaged.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(logs),
    }
}

/// Reads one segment file (bounded).
///
/// # Errors
/// Unreadable, too large, or damaged: the message names the file.
pub fn read_segment_file(path: &Path) -> Result<(commcanary_nccl_log::Segment, u64)> {
    let limit = limits::current().max_input_bytes;
    let io = |e: std::io::Error| {
        Error::new(
            crate::error::ErrorKind::Io,
            format!("{}: {e}", path.display()),
        )
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > limit {
        return Err(limits::exceeded(path.display(), "max_input_bytes", limit));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let seg =
        read_segment(&bytes).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    Ok((seg, size))
}

/// Reads `files` and groups their segments by process; a damaged file is
/// left out and returned with its error.
#[must_use]
pub fn read_files(files: &[PathBuf]) -> (Vec<ProcessLog>, Vec<(PathBuf, Error)>) {
    let mut segments: Vec<(PathBuf, commcanary_nccl_log::Segment, u64)> = Vec::new();
    let mut damaged = Vec::new();
    for path in files {
        match read_segment_file(path) {
            Ok((seg, size)) => segments.push((path.clone(), seg, size)),
            Err(e) => damaged.push((path.clone(), e)),
        }
    }
    (from_segments(segments), damaged)
}

/// Segments already read (`(path, segment, bytes)`), grouped by process and
/// ordered by segment number.
#[must_use]
pub fn from_segments(
    mut segments: Vec<(PathBuf, commcanary_nccl_log::Segment, u64)>,
) -> Vec<ProcessLog> {
    let mut by_process: FxHashMap<(String, u32), ProcessLog> = FxHashMap::default();
    let mut order: Vec<(String, u32)> = Vec::new();
    segments.sort_by(|a, b| {
        (&a.1.header.host, a.1.header.pid, a.1.header.segment).cmp(&(
            &b.1.header.host,
            b.1.header.pid,
            b.1.header.segment,
        ))
    });
    let mut drops: FxHashMap<(String, u32, u32), u64> = FxHashMap::default();
    for (path, seg, size) in segments {
        let key = (seg.header.host.clone(), seg.header.pid);
        let log = by_process.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            ProcessLog {
                header: seg.header.clone(),
                ..ProcessLog::default()
            }
        });
        log.files.push(path);
        log.bytes += size;
        log.sealed += usize::from(seg.sealed);
        log.torn += seg.torn_records;
        for frame in seg.frames {
            match frame {
                Frame::Comm(c) => {
                    let at = c.context as usize;
                    if at >= log.comms.len() {
                        log.comms.resize(at + 1, Comm::default());
                    }
                    log.comms[at] = c;
                }
                Frame::String { pointer, text } => {
                    log.strings.insert(pointer, text);
                }
                Frame::Records { records, .. } => log.records.extend(records),
                Frame::Drops { thread, dropped } => {
                    let d = drops.entry((key.0.clone(), key.1, thread)).or_default();
                    *d = (*d).max(dropped);
                }
                Frame::Finalize { context, .. } => log.finalized.push(context),
                Frame::Header(_) | Frame::Seal { .. } => {}
            }
        }
    }
    for ((host, pid, _), d) in drops {
        if let Some(log) = by_process.get_mut(&(host, pid)) {
            log.dropped += d;
        }
    }
    order
        .into_iter()
        .filter_map(|k| by_process.remove(&k))
        .collect()
}
