//! The one model every kind of evidence is reduced to before the diagnosis:
//! per rank, its collective and p2p calls in program order ([`Op`]), the
//! job's groups with how their membership is known ([`GroupInfo`]), and what
//! is known about each rank ([`RankEvidence`]).
//!
//! Invariants: `ops` of a rank are in program order (ring order for Flight
//! Recorder, arrival order for traces); an op's `group` indexes
//! [`Model::groups`]; `seq` is the group's collective sequence number
//! (1-based) for collectives and the p2p sequence number for p2p; times are
//! CLOCK_REALTIME nanoseconds (0 when unknown).

use std::collections::BTreeMap;

use crate::import::stacks::{ExceptionText, Frame, InFlightCall};

/// Where a fact came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// A Flight Recorder dump.
    FlightRecorder,
    /// A profiler (Kineto) trace.
    Trace,
}

impl Source {
    /// The evidence kind as the document spells it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Source::FlightRecorder => "flight_recorder",
            Source::Trace => "kineto",
        }
    }
}

/// No interned value (no frame, no text).
pub const NONE: u32 = u32::MAX;

/// One call of one rank. Texts and frames are interned in the [`Model`].
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Index into [`Model::groups`].
    pub group: usize,
    /// Collective sequence number (collectives) or p2p sequence number.
    pub seq: i64,
    /// Point-to-point.
    pub p2p: bool,
    /// p2p peer (a group rank for Flight Recorder, a global rank for
    /// traces; see [`Op::peer_is_global`]), −1 when unknown or not p2p.
    pub peer: i64,
    /// Whether [`Op::peer`] is a global rank.
    pub peer_is_global: bool,
    /// The root of a rooted collective (broadcast, reduce, gather,
    /// scatter) as a global rank, −1 when unknown (Flight Recorder entries
    /// do not record it; traces do).
    pub root: i64,
    /// Canonical op name.
    pub op: &'static str,
    /// Input sizes (canonical JSON text), interned.
    pub in_sizes: u32,
    /// Output sizes (canonical JSON text), interned.
    pub out_sizes: u32,
    /// Input dtypes, comma-joined, interned.
    pub in_dtypes: u32,
    /// Output dtypes, comma-joined, interned.
    pub out_dtypes: u32,
    /// Still in flight when the evidence was taken (or failed).
    pub pending: bool,
    /// When it was issued (CLOCK_REALTIME ns), 0 when unknown.
    pub time_ns: i64,
    /// The iteration (`ProfilerStep#N` or recovered), −1 when unknown.
    pub step: i64,
    /// The user's frame that issued it, interned, [`NONE`] when unknown.
    pub frame: u32,
    /// The group timeout, ms, −1 when unknown.
    pub timeout_ms: i64,
    /// When it completed (CLOCK_REALTIME ns: NCCL's
    /// `time_discovered_completed_ns`, a trace's measured end), 0 when
    /// unknown (gloo's dumps record none).
    pub done_ns: i64,
}

/// A process group as the diagnosis knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// Global name.
    pub name: String,
    /// Description.
    pub desc: String,
    /// Member global ranks, ascending (group-rank order when declared).
    pub ranks: Vec<i64>,
    /// How the membership is known.
    pub membership: String,
}

/// What is known about one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankEvidence {
    /// Its calls in program order.
    pub ops: Vec<Op>,
    /// Which source the ops came from, when any.
    pub source: Option<Source>,
    /// Whether the ops start at the beginning of the job (ring not wrapped,
    /// trace from step 0).
    pub from_start: bool,
    /// Earliest time the op evidence covers (ns), 0 when unknown.
    pub covers_from_ns: i64,
    /// The threads blocked in `torch.distributed`, from a stack dump.
    pub stacks: Vec<InFlightCall>,
    /// The exception the rank raised, from an exception text.
    pub exception: Option<ExceptionText>,
    /// Per `(group, enqueued, completed)` op counters from `pg_status`.
    pub status: Vec<(usize, i64, i64)>,
    /// The files this rank's evidence came from.
    pub files: Vec<String>,
}

/// All evidence of one job, reduced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    /// World size (as far as known).
    pub world: i64,
    /// The job's groups.
    pub groups: Vec<GroupInfo>,
    /// Per global rank.
    pub ranks: BTreeMap<i64, RankEvidence>,
    /// Sequence numbers are estimates (trace-only gloo evidence).
    pub seq_estimated: bool,
    /// How steps are known (`ProfilerStep`, recovered, or none).
    pub step_source: String,
    /// Facts worth a line in the report.
    pub notes: Vec<String>,
    /// Interned texts (sizes, dtypes).
    pub texts: Vec<String>,
    /// Interned frames.
    pub frames: Vec<Frame>,
    text_index: rustc_hash::FxHashMap<String, u32>,
    frame_index: rustc_hash::FxHashMap<Frame, u32>,
    /// Group name → index in `groups` (a job has thousands of groups).
    group_names: rustc_hash::FxHashMap<String, usize>,
}

impl Model {
    /// Interns a text.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.text_index.get(s) {
            return i;
        }
        let i = self.texts.len() as u32;
        self.texts.push(s.to_owned());
        self.text_index.insert(s.to_owned(), i);
        i
    }

    /// Interns a frame.
    pub fn intern_frame(&mut self, f: &Frame) -> u32 {
        if let Some(&i) = self.frame_index.get(f) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(f.clone());
        self.frame_index.insert(f.clone(), i);
        i
    }

    /// An interned text ("" for [`NONE`]).
    #[must_use]
    pub fn text(&self, i: u32) -> &str {
        self.texts.get(i as usize).map_or("", String::as_str)
    }

    /// An interned frame.
    #[must_use]
    pub fn frame(&self, i: u32) -> Option<&Frame> {
        self.frames.get(i as usize)
    }

    /// The index of the group named `name`, if the model has it.
    #[must_use]
    pub fn group_named(&self, name: &str) -> Option<usize> {
        match self.group_names.get(name) {
            Some(&i) if self.groups.get(i).is_some_and(|g| g.name == name) => Some(i),
            _ => self.groups.iter().position(|g| g.name == name),
        }
    }

    /// The group named `name`, added with `desc` when new.
    pub fn group_index(&mut self, name: &str, desc: &str) -> usize {
        if let Some(i) = self.group_named(name) {
            return i;
        }
        self.group_names.insert(name.to_owned(), self.groups.len());
        self.groups.push(GroupInfo {
            name: name.to_owned(),
            desc: desc.to_owned(),
            ranks: Vec::new(),
            membership: String::new(),
        });
        self.groups.len() - 1
    }
}

/// The first frame of a stack (innermost first) that is the user's code: not
/// in `torch/`, not in an installed package, not the standard library.
#[must_use]
pub fn user_frame(frames: &[Frame]) -> Option<Frame> {
    frames
        .iter()
        .find(|f| {
            let file = f.file.as_str();
            !(file.contains("/torch/")
                || file.contains("site-packages/")
                || file.contains("dist-packages/")
                || file.contains("/lib/python")
                || file.starts_with('<'))
        })
        .cloned()
}
