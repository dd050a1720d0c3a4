//! One rank's Kineto files reduced to what the multi-rank importer needs: a
//! [`RankProfile`] of communication [`Call`]s with their times, sizes, steps,
//! phases and the compute around them.
//!
//! A file is read once by [`crate::import::stream`]; only communication ops,
//! `gloo:*` execution ranges, GPU kernels, annotations and the spans of CPU
//! ops (for compute) are kept, as compact columns. Several files of one rank
//! (profiling windows) are concatenated in time. Times are microseconds on
//! the rank's clock: `ts` plus the file's `baseTimeNanoseconds` offset from the
//! rank's epoch ([`RankProfile::epoch_ns`]), so windows with different bases
//! line up; cross-rank alignment happens later, in the job.
//!
//! Invariants: `calls` are sorted by `(arrival, file, index)`; every call has
//! `end ≥ arrival`; sizes are positive; a call whose message size cannot be
//! derived (no dtype anywhere) is counted in `undtyped` and not kept.

use std::path::Path;

use rustc_hash::FxHashMap;

use super::ops::Kind;
use super::scan::FileScan;
use crate::error::{Error, Result};
use crate::import::stream::{ScanLimits, scan_bytes, scan_file};

/// A process group as the ranks' headers declare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDecl {
    /// Global name (`pg_name`).
    pub name: String,
    /// Description (`pg_desc`), possibly empty.
    pub desc: String,
    /// Global ranks, in group-rank order.
    pub ranks: Vec<i64>,
}

/// One communication call of one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// What it is.
    pub kind: Kind,
    /// Index into [`RankProfile::names`]: the source op name.
    pub name: u32,
    /// Message bytes (the larger of input and output).
    pub bytes: i64,
    /// Input elements.
    pub in_elems: i64,
    /// Output elements.
    pub out_elems: i64,
    /// Tensors in the output list (list forms), else 1.
    pub out_tensors: i64,
    /// Canonical dtype.
    pub dtype: &'static str,
    /// Root or peer as a group rank (gloo), −1 when absent.
    pub peer: i64,
    /// Peer as a global rank (NCCL `Src Rank`/`Dst Rank`), −1 when absent.
    pub peer_global: i64,
    /// p2p tag, −1 when absent.
    pub tag: i64,
    /// Index into [`RankProfile::groups`] when the record names its group.
    pub group: i64,
    /// The group's sequence number when the record carries one, else −1.
    pub seq: i64,
    /// When the rank called it (µs, rank clock).
    pub arrival: f64,
    /// When it finished on this rank (execution range or kernel end).
    pub end: f64,
    /// Whether `end` is a measured execution end (not just the enqueue).
    pub end_measured: bool,
    /// Thread the execution ran on (interned), −1 when unknown.
    pub thread: i64,
    /// Thread that issued the call (interned).
    pub caller: u32,
    /// Summed duration of its linked GPU kernels, `NaN` when none.
    pub device_us: f64,
    /// Number of linked GPU kernels.
    pub kernels: u32,
    /// The NCCL algorithm its kernel names (index into
    /// [`super::ops::ALGORITHMS`]; 0 when unknown, as for gloo).
    pub algorithm: u8,
    /// `N` of the enclosing `ProfilerStep#N`, −1 when none.
    pub step: i64,
    /// Index into [`RankProfile::phases`], −1 when none.
    pub phase: i64,
    /// Compute on this rank since its previous call ended.
    pub compute_before: f64,
    /// Compute on this rank while the call ran.
    pub compute_overlap: f64,
    /// Which of the rank's files it came from.
    pub file: u32,
    /// Its position in that file's `traceEvents`.
    pub index: u64,
}

impl Call {
    /// A call of `kind` from `arrival` to `end` (not a measured end), with
    /// nothing else known: no size, group, sequence number, thread, kernel,
    /// step or phase; callers fill in what their source records.
    #[must_use]
    pub fn bare(kind: Kind, arrival: f64, end: f64) -> Call {
        Call {
            kind,
            name: 0,
            bytes: 0,
            in_elems: 0,
            out_elems: 0,
            out_tensors: 1,
            dtype: "unknown",
            peer: -1,
            peer_global: -1,
            tag: -1,
            group: -1,
            seq: -1,
            arrival,
            end,
            end_measured: false,
            thread: -1,
            caller: 0,
            device_us: f64::NAN,
            kernels: 0,
            algorithm: 0,
            step: -1,
            phase: -1,
            compute_before: 0.0,
            compute_overlap: 0.0,
            file: 0,
            index: 0,
        }
    }
}

/// The job groups `rank` is a member of (indices into `groups`), and each
/// one's index among them (a profile's own group index).
#[must_use]
pub fn groups_of_rank(groups: &[GroupDecl], rank: i64) -> (Vec<usize>, FxHashMap<usize, i64>) {
    let mine: Vec<usize> = (0..groups.len())
        .filter(|&g| groups[g].ranks.contains(&rank))
        .collect();
    let local = mine
        .iter()
        .enumerate()
        .map(|(i, &g)| (g, i as i64))
        .collect();
    (mine, local)
}

/// What was kept and skipped while reading a rank's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProfileCounts {
    /// `traceEvents` elements read.
    pub events: u64,
    /// Control ops (barrier, wait, …) skipped.
    pub control: u64,
    /// Zero-sized messages skipped.
    pub empty: u64,
    /// Nested duplicate `record_param_comms` records skipped.
    pub nested: u64,
    /// Calls whose element type appears nowhere (no size can be derived).
    pub undtyped: u64,
    /// Collective calls with no `gloo:*` execution range found.
    pub unlinked: u64,
}

/// One file of a rank, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    /// Decompressed bytes.
    pub bytes: u64,
    /// `baseTimeNanoseconds` (0 when absent).
    pub base_time_ns: i64,
    /// The process id that issued its communication calls, −1 when unknown:
    /// two files of one rank from two processes are two runs.
    pub process: i64,
}

/// One rank's communication, from one or more files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankProfile {
    /// `distributedInfo.rank` (or the rank given for the file).
    pub rank: i64,
    /// `distributedInfo.world_size`.
    pub world_size: Option<i64>,
    /// `distributedInfo.backend`.
    pub backend: Option<String>,
    /// `distributedInfo.pg_config`, plus groups named only by records.
    pub groups: Vec<GroupDecl>,
    /// Clock origin of this rank's times.
    pub epoch_ns: i64,
    /// Calls, sorted by arrival.
    pub calls: Vec<Call>,
    /// Source op names.
    pub names: Vec<String>,
    /// Phase names.
    pub phases: Vec<String>,
    /// `(N, start, end)` of every `ProfilerStep#N`, sorted.
    pub steps: Vec<(i64, f64, f64)>,
    /// When each barrier call was issued (µs, rank clock), sorted: barriers
    /// are not calls, but they count in the group's collective sequence.
    pub barriers: Vec<f64>,
    /// The files, in the order read.
    pub files: Vec<FileFacts>,
    /// What was skipped.
    pub counts: ProfileCounts,
}

/// One file's input: a path, or bytes already in memory.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A plain or gzip file.
    Path(&'a Path),
    /// A decompressed document.
    Bytes(&'a [u8]),
}

/// Reads one file of a rank. `rank` overrides (or stands in for) the
/// header's `distributedInfo.rank`.
///
/// # Errors
/// Unreadable or invalid input, a negative duration, unusable group
/// records, or a document that is not a Kineto trace.
pub fn read_file(
    source: Source<'_>,
    limits: &ScanLimits,
    rank: Option<i64>,
) -> Result<RankProfile> {
    let mut scan = FileScan::default();
    let scanned = match source {
        Source::Path(p) => scan_file(p, limits, &mut |e| scan.event(e)),
        Source::Bytes(b) => scan_bytes(b, limits, &mut |e| scan.event(e)),
    }?;
    let header = scan.header(&scanned.header)?;
    let rank = match (rank, header.rank) {
        (Some(r), _) | (None, Some(r)) => r,
        (None, None) => {
            return Err(Error::invalid(
                "has no distributedInfo.rank (a single file can be given one with --rank)",
            ));
        }
    };
    let mut profile = RankProfile {
        rank,
        world_size: header.world_size,
        backend: header.backend.clone(),
        groups: header.groups.clone(),
        epoch_ns: header.base_time_ns,
        files: vec![FileFacts {
            bytes: scanned.bytes,
            base_time_ns: header.base_time_ns,
            process: scan.process.unwrap_or(-1),
        }],
        ..RankProfile::default()
    };
    profile.counts.events = scanned.events;
    scan.finish_into(&mut profile)?;
    Ok(profile)
}

impl RankProfile {
    /// A copy of everything but the calls.
    #[must_use]
    pub fn clone_without_calls(&self) -> RankProfile {
        RankProfile {
            rank: self.rank,
            world_size: self.world_size,
            backend: self.backend.clone(),
            groups: self.groups.clone(),
            epoch_ns: self.epoch_ns,
            calls: Vec::new(),
            names: self.names.clone(),
            phases: self.phases.clone(),
            steps: self.steps.clone(),
            barriers: self.barriers.clone(),
            files: self.files.clone(),
            counts: self.counts,
        }
    }

    /// Appends the calls of another window of the same rank, shifting its
    /// times onto this profile's epoch.
    ///
    /// # Errors
    /// Windows that disagree on the rank's world size or groups.
    pub fn concat(&mut self, other: RankProfile) -> Result<()> {
        let process = |p: &RankProfile| p.files.iter().map(|f| f.process).find(|&id| id >= 0);
        if let (Some(mine), Some(theirs)) = (process(self), process(&other))
            && mine != theirs
        {
            return Err(Error::invalid(format!(
                "holds rank {} of process {theirs}, another file of rank {} is of process {mine}: traces of two runs (give one run's files, or each run's directory on its own)",
                self.rank, self.rank
            )));
        }
        if other.world_size != self.world_size {
            return Err(Error::invalid(format!(
                "says world_size {:?}, another file of rank {} says {:?}",
                other.world_size, self.rank, self.world_size
            )));
        }
        for g in &other.groups {
            if let Some(mine) = self.groups.iter().find(|m| m.name == g.name)
                && mine.ranks != g.ranks
            {
                return Err(Error::invalid(format!(
                    "lists process group '{}' with ranks {:?}, another file of rank {} with {:?}",
                    g.name, g.ranks, self.rank, mine.ranks
                )));
            }
        }
        let epoch = self.epoch_ns.min(other.epoch_ns);
        let shift_self = (self.epoch_ns - epoch) as f64 / 1000.0;
        let shift_other = (other.epoch_ns - epoch) as f64 / 1000.0;
        self.shift(shift_self);
        self.epoch_ns = epoch;
        let file_base = self.files.len() as u32;
        let names = remap_names(&mut self.names, &other.names);
        let phases = remap_names(&mut self.phases, &other.phases);
        let groups = self.merge_groups(&other.groups);
        for mut c in other.calls {
            c.arrival += shift_other;
            c.end += shift_other;
            c.file += file_base;
            c.name = names[c.name as usize];
            if c.phase >= 0 {
                c.phase = i64::from(phases[c.phase as usize]);
            }
            if c.group >= 0 {
                c.group = groups[c.group as usize];
            }
            self.calls.push(c);
        }
        self.steps.extend(
            other
                .steps
                .iter()
                .map(|&(n, s, e)| (n, s + shift_other, e + shift_other)),
        );
        self.barriers
            .extend(other.barriers.iter().map(|&t| t + shift_other));
        self.barriers.sort_by(f64::total_cmp);
        self.files.extend(other.files);
        self.add_counts(&other.counts);
        self.calls.sort_by(call_order);
        self.steps.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(())
    }

    fn shift(&mut self, by: f64) {
        if by == 0.0 {
            return;
        }
        for c in &mut self.calls {
            c.arrival += by;
            c.end += by;
        }
        for s in &mut self.steps {
            s.1 += by;
            s.2 += by;
        }
        for t in &mut self.barriers {
            *t += by;
        }
    }

    fn merge_groups(&mut self, theirs: &[GroupDecl]) -> Vec<i64> {
        intern_groups(&mut self.groups, theirs)
    }

    fn add_counts(&mut self, c: &ProfileCounts) {
        let m = &mut self.counts;
        m.events += c.events;
        m.control += c.control;
        m.empty += c.empty;
        m.nested += c.nested;
        m.undtyped += c.undtyped;
        m.unlinked += c.unlinked;
    }
}

/// Order of calls in a profile.
pub fn call_order(a: &Call, b: &Call) -> std::cmp::Ordering {
    a.arrival
        .total_cmp(&b.arrival)
        .then(a.file.cmp(&b.file))
        .then(a.index.cmp(&b.index))
}

/// Adds the groups of `theirs` that `mine` lacks (by name); the index in
/// `mine` of each of `theirs`.
pub(super) fn intern_groups(mine: &mut Vec<GroupDecl>, theirs: &[GroupDecl]) -> Vec<i64> {
    theirs
        .iter()
        .map(|g| match mine.iter().position(|m| m.name == g.name) {
            Some(i) => i as i64,
            None => {
                mine.push(g.clone());
                mine.len() as i64 - 1
            }
        })
        .collect()
}

/// Interns `theirs` into `mine`; the new index of each of `theirs`.
fn remap_names(mine: &mut Vec<String>, theirs: &[String]) -> Vec<u32> {
    let mut index: FxHashMap<String, u32> = mine
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i as u32))
        .collect();
    theirs
        .iter()
        .map(|n| {
            *index.entry(n.clone()).or_insert_with(|| {
                mine.push(n.clone());
                mine.len() as u32 - 1
            })
        })
        .collect()
}
