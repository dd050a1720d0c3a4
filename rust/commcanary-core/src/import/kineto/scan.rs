//! The per-file pass: [`FileScan`] is fed every `traceEvents` element and
//! keeps, as compact columns, only what becomes a [`Call`] or informs one —
//! `c10d::*` ops and `record_param_comms` records (parsed `args`), `gloo:*`
//! execution ranges, NCCL kernels by `External id`, `ProfilerStep#N` and other
//! user annotations, and the spans of CPU ops and compute kernels.
//!
//! [`FileScan::finish_into`] then links each `c10d::` call to its `gloo:`
//! range (FIFO per algorithm name, on another thread for collectives and on
//! the calling thread for send/recv: the range starts after the call), each
//! record to its kernels, and computes steps, phases and compute time.

use rustc_hash::FxHashMap;

use super::ops::{self, Kind};
use super::profile::{Call, GroupDecl, ProfileCounts, RankProfile, call_order, intern_groups};
use super::single::{RecordFacts, SingleScan, group_ranks, integer};
use super::timeline::{Intervals, Ranges};
use crate::error::{Error, Result};
use crate::import::stream::RawEvent;
use crate::json::{JsonLimits, Value, parse_into};

/// Where a call's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// A `c10d::*` CPU op (gloo and other CPU backends).
    C10d,
    /// A `record_param_comms` record (NCCL).
    ParamComms,
}

/// A communication record as read.
#[derive(Debug, Clone)]
pub(super) struct RawCall {
    origin: Origin,
    kind: Kind,
    name: u32,
    thread: u32,
    ts: f64,
    dur: f64,
    in_elems: i64,
    out_elems: i64,
    out_tensors: i64,
    dtype: Option<&'static str>,
    peer: i64,
    peer_global: i64,
    tag: i64,
    group: i64,
    seq: i64,
    external_id: i64,
    index: u64,
}

/// What a `record_param_comms` record became, for the nesting sweep
/// ([`FileScan::drop_nested`]): a call, a control op, or a record the
/// single-rank filter left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordIs {
    /// The call at this index of [`FileScan::calls`].
    Call(usize),
    /// A control op; `true` for a barrier.
    Control(bool),
    /// A record of a group the single-rank filter leaves out.
    LeftOut,
}

/// The span of one `record_param_comms` record on its thread.
#[derive(Debug, Clone, Copy)]
struct RecordSpan {
    thread: u32,
    ts: f64,
    end: f64,
    is: RecordIs,
}

/// A `gloo:*` execution range.
#[derive(Debug, Clone, Copy)]
struct GlooRange {
    algorithm: u8,
    thread: u32,
    ts: f64,
    end: f64,
    dtype: Option<&'static str>,
    elems: i64,
}

/// Header facts of one file.
#[derive(Debug, Clone, Default)]
pub(super) struct Header {
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    pub backend: Option<String>,
    pub groups: Vec<GroupDecl>,
    pub base_time_ns: i64,
}

const GLOO_ALGORITHMS: [&str; 11] = [
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "all_to_all",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "barrier",
];

/// Accumulates one file.
#[derive(Debug, Default)]
pub(super) struct FileScan {
    threads: FxHashMap<Vec<u8>, u32>,
    thread_keys: Vec<i64>,
    key_scratch: Vec<u8>,
    names: Vec<String>,
    name_index: FxHashMap<String, u32>,
    phases: Vec<String>,
    phase_index: FxHashMap<String, u32>,
    groups: Vec<GroupDecl>,
    calls: Vec<RawCall>,
    gloo: Vec<GlooRange>,
    kernels: FxHashMap<i64, (f64, u32, f64, u8)>,
    gpu_compute: Vec<(f64, f64)>,
    /// Per thread, CPU-op spans; merged into disjoint spans whenever they
    /// double, so memory follows the compute structure, not the op count.
    cpu_spans: Vec<Vec<(f64, f64)>>,
    cpu_merged: Vec<usize>,
    steps: Vec<(i64, f64, f64)>,
    phase_ranges: Vec<(u32, u32, f64, f64)>,
    control: u64,
    barriers: Vec<f64>,
    /// Every `record_param_comms` record, for the nesting sweep.
    record_spans: Vec<RecordSpan>,
    /// The process that issued the communication calls (the `pid` of the
    /// first one), when it is an integer.
    pub(super) process: Option<i64>,
    /// Limits of each event's `args` document.
    pub(super) json: JsonLimits,
    /// Set for a single-rank import ([`super::single`]): what it writes of
    /// each `record_param_comms` record besides its call.
    pub(super) single: Option<SingleScan>,
}

impl FileScan {
    /// A scan in single-rank mode: `args` read within `json`, and what
    /// [`super::single`] writes of each record kept in `single`.
    pub(super) fn single_rank(json: JsonLimits, single: SingleScan) -> Self {
        FileScan {
            json,
            single: Some(single),
            ..FileScan::default()
        }
    }
}

fn args_doc(e: &RawEvent<'_>, limits: JsonLimits) -> Result<Option<crate::json::Doc>> {
    match &e.args {
        None => Ok(None),
        // Sized from the text (a value per few bytes, strings no longer
        // than the text) so the small document never regrows.
        Some(text) => parse_into(
            text,
            limits,
            crate::json::Doc::with_capacity(text.len() / 4 + 4, text.len()),
        )
        .map(Some)
        .map_err(|err| Error::invalid(format!("traceEvents[{}] args: {}", e.index, err.message()))),
    }
}

impl FileScan {
    /// Takes one `traceEvents` element.
    pub(super) fn event(&mut self, e: &RawEvent<'_>) -> Result<()> {
        if e.ph.as_deref() != Some("X") {
            return Ok(());
        }
        let (Some(ts), Some(name)) = (e.ts, e.name.as_deref()) else {
            return Ok(());
        };
        let dur = e.dur.unwrap_or(0.0);
        if dur < 0.0 || !dur.is_finite() || !ts.is_finite() {
            return Err(Error::invalid(format!(
                "traceEvents[{}] ('{name}') has a negative or non-finite duration {dur}",
                e.index
            )));
        }
        match e.cat.as_deref() {
            Some("kernel") => self.kernel(e, name, ts, dur),
            Some("user_annotation") => self.annotation(e, name, ts, dur),
            None | Some("cpu_op") => self.cpu_op(e, name, ts, dur),
            _ => Ok(()),
        }
    }

    fn thread(&mut self, e: &RawEvent<'_>) -> u32 {
        let (pid, tid) = (
            e.pid.as_deref().unwrap_or(b""),
            e.tid.as_deref().unwrap_or(b""),
        );
        let key = &mut self.key_scratch;
        key.clear();
        key.extend_from_slice(pid);
        key.push(b'/');
        key.extend_from_slice(tid);
        if let Some(&id) = self.threads.get(key.as_slice()) {
            return id;
        }
        let key = key.clone();
        let id = self.threads.len() as u32;
        self.thread_keys.push(stable_key(&key));
        self.threads.insert(key, id);
        id
    }

    fn kernel(&mut self, e: &RawEvent<'_>, name: &str, ts: f64, dur: f64) -> Result<()> {
        if !name.starts_with("nccl") {
            self.gpu_compute.push((ts, ts + dur));
            return Ok(());
        }
        let doc = args_doc(e, self.json)?;
        let id = doc
            .as_ref()
            .and_then(|d| d.root())
            .and_then(|a| integer(a.get("External id")));
        if let Some(id) = id {
            let slot = self
                .kernels
                .entry(id)
                .or_insert((0.0, 0, f64::NEG_INFINITY, 0));
            slot.0 += dur;
            slot.1 += 1;
            slot.2 = slot.2.max(ts + dur);
            slot.3 = slot.3.max(ops::nccl_algorithm(name));
        }
        Ok(())
    }

    fn annotation(&mut self, e: &RawEvent<'_>, name: &str, ts: f64, dur: f64) -> Result<()> {
        if let Some(algorithm) = name.strip_prefix("gloo:") {
            return self.gloo_range(e, algorithm, ts, dur);
        }
        if let Some(n) = name.strip_prefix("ProfilerStep#") {
            let Some(n) = n.trim().parse::<i64>().ok().filter(|n| *n >= 0) else {
                return Err(Error::invalid(format!(
                    "traceEvents[{}].name: step marker '{}' has no step number (expected ProfilerStep#N, N ≥ 0)",
                    e.index,
                    name.chars().take(64).collect::<String>()
                )));
            };
            self.steps.push((n, ts, ts + dur));
            return Ok(());
        }
        if name.starts_with("nccl:") || name.starts_with("c10d") || name.starts_with("## ") {
            return Ok(());
        }
        let thread = self.thread(e);
        let next = self.phases.len() as u32;
        let id = *self.phase_index.entry(name.to_owned()).or_insert(next);
        if id == next {
            self.phases.push(name.to_owned());
        }
        self.phase_ranges.push((thread, id, ts, ts + dur));
        Ok(())
    }

    fn gloo_range(&mut self, e: &RawEvent<'_>, algorithm: &str, ts: f64, dur: f64) -> Result<()> {
        let Some(code) = GLOO_ALGORITHMS.iter().position(|a| *a == algorithm) else {
            return Ok(());
        };
        let doc = args_doc(e, self.json)?;
        let args = doc.as_ref().and_then(|d| d.root());
        let dtype = args
            .and_then(|a| a.get("Input type"))
            .and_then(|t| t.element(0))
            .and_then(|t| t.as_str())
            .and_then(ops::dtype)
            .map(|d| d.0);
        let elems = args
            .and_then(|a| a.get("Input Dims"))
            .and_then(|d| d.element(0))
            .and_then(|d| ops::elements(d, true))
            .map_or(0, |x| x.0);
        let thread = self.thread(e);
        self.gloo.push(GlooRange {
            algorithm: code as u8,
            thread,
            ts,
            end: ts + dur,
            dtype,
            elems,
        });
        Ok(())
    }

    fn cpu_op(&mut self, e: &RawEvent<'_>, name: &str, ts: f64, dur: f64) -> Result<()> {
        let comm = name == "record_param_comms" || name.starts_with("c10d::");
        if comm && self.process.is_none() {
            self.process = e
                .pid
                .as_deref()
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|t| t.trim().parse::<i64>().ok());
        }
        if name == "record_param_comms" {
            return self.param_comms(e, ts, dur);
        }
        if name.starts_with("c10d::") {
            if let Some(single) = &mut self.single {
                // A single-rank import reads `record_param_comms` records
                // only; it counts these to say why it found none.
                single.c10d_calls += 1;
                return Ok(());
            }
            return self.c10d(e, name, ts, dur);
        }
        if e.cat.is_some() {
            let thread = self.thread(e);
            self.push_cpu_span(thread as usize, ts, ts + dur);
        }
        Ok(())
    }

    fn intern_name(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.name_index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.name_index.insert(name.to_owned(), i);
        i
    }

    fn c10d(&mut self, e: &RawEvent<'_>, name: &str, ts: f64, dur: f64) -> Result<()> {
        let normalized = ops::normalize(name);
        let Some(kind) = Kind::of_normalized(&normalized) else {
            self.control += 1;
            if normalized == "barrier" {
                self.barriers.push(ts);
            }
            return Ok(());
        };
        let doc = args_doc(e, self.json)?;
        let args = doc.as_ref().and_then(|d| d.root());
        let field = |k: &str| args.and_then(|a| a.get(k));
        let (dims, types, concrete) = (
            field("Input Dims"),
            field("Input type"),
            field("Concrete Inputs"),
        );
        let type_at = |i: usize| types.and_then(|t| t.element(i)).and_then(|t| t.as_str());
        let count = |i: usize| {
            let tensor = type_at(i).is_some_and(|t| !t.is_empty() && !t.starts_with("Scalar"));
            dims.and_then(|d| d.element(i))
                .map_or(Some((0, 0)), |d| ops::elements(d, tensor))
        };
        let scalar = |i: usize| {
            concrete
                .and_then(|c| c.element(i))
                .and_then(|v| v.as_str())
                .and_then(|s| s.trim().parse::<i64>().ok())
        };
        let layout = ops::layout(&normalized);
        let bad = || {
            Error::invalid(format!(
                "traceEvents[{}] ('{name}') has unusable Input Dims",
                e.index
            ))
        };
        let (out_elems, out_tensors) = count(layout.output).ok_or_else(bad)?;
        let in_elems = match layout.input {
            Some(i) => count(i).ok_or_else(bad)?.0,
            None => out_elems,
        };
        let dtype = [Some(layout.output), layout.input]
            .into_iter()
            .flatten()
            .find_map(|i| type_at(i).and_then(ops::dtype))
            .map(|d| d.0);
        let stored = if kind == Kind::Other {
            normalized.as_str()
        } else {
            name
        };
        let call = RawCall {
            origin: Origin::C10d,
            kind,
            name: self.intern_name(stored),
            thread: self.thread(e),
            ts,
            dur,
            in_elems,
            out_elems,
            out_tensors: out_tensors.max(1),
            dtype,
            peer: layout.scalar.and_then(scalar).unwrap_or(-1),
            peer_global: -1,
            tag: layout.tag.and_then(scalar).unwrap_or(-1),
            group: -1,
            seq: -1,
            external_id: -1,
            index: e.index as u64,
        };
        self.calls.push(call);
        Ok(())
    }

    fn param_comms(&mut self, e: &RawEvent<'_>, ts: f64, dur: f64) -> Result<()> {
        let doc = args_doc(e, self.json)?;
        let Some(args) = doc
            .as_ref()
            .and_then(|d| d.root())
            .filter(|a| a.get("Collective name").is_some())
        else {
            return Ok(());
        };
        let raw_name = args
            .get("Collective name")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let normalized = ops::normalize(raw_name);
        let thread = self.thread(e);
        let mut span = RecordSpan {
            thread,
            ts,
            end: ts + dur,
            is: RecordIs::LeftOut,
        };
        let Some(kind) = Kind::of_normalized(&normalized) else {
            // Counted once the sweep knows it is no nested duplicate.
            span.is = RecordIs::Control(normalized == "barrier");
            self.record_spans.push(span);
            return Ok(());
        };
        let group_name = match args.get("Process Group Name").and_then(|v| v.as_str()) {
            None | Some("") => "default",
            Some(g) => g,
        };
        if self
            .single
            .as_ref()
            .is_some_and(|s| s.leaves_out(group_name))
        {
            self.record_spans.push(span);
            return Ok(());
        }
        let in_elems = integer(args.get("In msg nelems")).unwrap_or(0);
        let out_elems = integer(args.get("Out msg nelems")).unwrap_or(0);
        let dtype_name = args.get("dtype").and_then(|v| v.as_str()).unwrap_or("");
        let dtype = ops::dtype(dtype_name).ok_or_else(|| {
            Error::invalid(format!(
                "unknown kineto dtype '{dtype_name}'; cannot derive message bytes"
            ))
        })?;
        let (group, assumed) = self.record_group(group_name, args)?;
        let peer_key = if kind == Kind::Send {
            "Dst Rank"
        } else {
            "Src Rank"
        };
        let call = RawCall {
            origin: Origin::ParamComms,
            kind,
            name: self.intern_name(if kind == Kind::Other {
                &normalized
            } else {
                raw_name
            }),
            thread,
            ts,
            dur,
            in_elems,
            out_elems,
            out_tensors: 1,
            dtype: Some(dtype.0),
            peer: -1,
            peer_global: if kind.is_p2p() {
                integer(args.get(peer_key)).unwrap_or(-1)
            } else {
                -1
            },
            tag: -1,
            group,
            seq: integer(args.get("Seq")).unwrap_or(-1),
            external_id: integer(args.get("External id")).unwrap_or(-1),
            index: e.index as u64,
        };
        span.is = RecordIs::Call(self.calls.len());
        self.record_spans.push(span);
        self.calls.push(call);
        if let Some(single) = &mut self.single {
            let ranks = &self.groups[group as usize].ranks;
            let facts = RecordFacts::read(args, e.index as u64, ts, dur, ranks, assumed);
            single.records.push(facts);
        }
        Ok(())
    }

    /// The index of the group a `record_param_comms` record names, and
    /// whether its ranks were assumed (`0..size`).
    fn record_group(&mut self, name: &str, args: Value<'_>) -> Result<(i64, bool)> {
        let (ranks, assumed) = group_ranks(args)?;
        if let Some(i) = self.groups.iter().position(|g| g.name == name) {
            if self.groups[i].ranks != ranks {
                return Err(Error::invalid(format!(
                    "records process group '{name}' with ranks {:?} and with {:?}",
                    self.groups[i].ranks, ranks
                )));
            }
            return Ok((i as i64, assumed));
        }
        let desc = args
            .get("Process Group Description")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned();
        self.groups.push(GroupDecl {
            name: name.to_owned(),
            desc,
            ranks,
        });
        Ok((self.groups.len() as i64 - 1, assumed))
    }

    /// The header facts, from the document's other top-level members.
    pub(super) fn header(&self, members: &[(String, Vec<u8>)]) -> Result<Header> {
        super::header::read(members)
    }

    /// Turns what was kept into calls on `profile` (whose header is set).
    pub(super) fn finish_into(mut self, profile: &mut RankProfile) -> Result<()> {
        profile.counts.nested = self.drop_nested();
        profile.counts.control = self.control;
        let groups = intern_groups(&mut profile.groups, &self.groups);
        let links = self.link_gloo();
        let compute = self.compute();
        let steps = Ranges::steps(&self.steps);
        let phases = Ranges::outermost(&self.phase_ranges);
        let mut calls = Vec::with_capacity(self.calls.len());
        for (i, raw) in self.calls.iter().enumerate() {
            let Some(call) = self.make_call(raw, links[i], &groups, &mut profile.counts) else {
                continue;
            };
            calls.push(call);
        }
        calls.sort_by(call_order);
        let mut previous_end = f64::NEG_INFINITY;
        for c in &mut calls {
            let since = previous_end.min(c.arrival);
            c.compute_before = compute.within(since, c.arrival);
            c.compute_overlap = compute.within(c.arrival, c.end);
            previous_end = previous_end.max(c.end);
            c.step = steps.step_at(c.arrival);
            c.phase = phases.phase_at(c.caller, c.arrival);
        }
        profile.calls = calls;
        profile.names = std::mem::take(&mut self.names);
        profile.phases = std::mem::take(&mut self.phases);
        self.steps.sort_by(|a, b| a.1.total_cmp(&b.1));
        profile.steps = std::mem::take(&mut self.steps);
        self.barriers.sort_by(f64::total_cmp);
        profile.barriers = std::mem::take(&mut self.barriers);
        Ok(())
    }

    /// The [`Call`] of one record, or `None` when it is skipped (counted).
    fn make_call(
        &self,
        raw: &RawCall,
        link: Option<usize>,
        groups: &[i64],
        counts: &mut ProfileCounts,
    ) -> Option<Call> {
        let range = link.map(|i| &self.gloo[i]);
        let Some(dtype) = raw.dtype.or(range.and_then(|r| r.dtype)) else {
            counts.undtyped += 1;
            return None;
        };
        let element = ops::dtype(dtype).map_or(1, |d| d.1);
        let (mut in_elems, mut out_elems) = (raw.in_elems, raw.out_elems);
        if in_elems <= 0 && out_elems <= 0 {
            let fallback = range.map_or(0, |r| r.elems);
            (in_elems, out_elems) = (fallback, fallback);
        }
        let nelems = in_elems.max(out_elems);
        if nelems <= 0 {
            counts.empty += 1;
            return None;
        }
        let mut call = Call {
            name: raw.name,
            bytes: nelems.saturating_mul(element),
            in_elems,
            out_elems,
            out_tensors: raw.out_tensors,
            dtype,
            peer: raw.peer,
            peer_global: raw.peer_global,
            tag: raw.tag,
            group: if raw.group >= 0 {
                groups[raw.group as usize]
            } else {
                -1
            },
            seq: raw.seq,
            caller: raw.thread,
            index: raw.index,
            ..Call::bare(raw.kind, raw.ts, raw.ts + raw.dur)
        };
        match (raw.origin, range) {
            (Origin::C10d, Some(r)) => {
                call.end = call.end.max(r.end);
                call.end_measured = true;
                call.thread = self.thread_keys[r.thread as usize];
            }
            (Origin::C10d, None) => counts.unlinked += u64::from(!raw.kind.is_p2p()),
            (Origin::ParamComms, _) => {
                if let Some(&(dur, count, end, algorithm)) = self.kernels.get(&raw.external_id) {
                    call.device_us = dur;
                    call.kernels = count;
                    call.algorithm = algorithm;
                    call.end = call.end.max(end);
                    call.end_measured = true;
                }
            }
        }
        Some(call)
    }

    fn push_cpu_span(&mut self, thread: usize, start: f64, end: f64) {
        const FIRST_MERGE: usize = 1 << 16;
        if self.cpu_spans.len() <= thread {
            self.cpu_spans.resize_with(thread + 1, Vec::new);
            self.cpu_merged.resize(thread + 1, 0);
        }
        let spans = &mut self.cpu_spans[thread];
        spans.push((start, end));
        if spans.len() >= FIRST_MERGE.max(2 * self.cpu_merged[thread]) {
            let merged = Intervals::union(std::mem::take(spans)).into_spans();
            self.cpu_merged[thread] = merged.len();
            *spans = merged;
        }
    }

    /// Compute time: compute kernels when the file has any, else CPU ops on
    /// the threads that issue communication, minus the communication ops.
    fn compute(&self) -> Intervals {
        if !self.gpu_compute.is_empty() {
            return Intervals::union(self.gpu_compute.clone());
        }
        let callers: rustc_hash::FxHashSet<u32> = self.calls.iter().map(|c| c.thread).collect();
        let spans = self
            .cpu_spans
            .iter()
            .enumerate()
            .filter(|(t, _)| callers.contains(&(*t as u32)))
            .flat_map(|(_, spans)| spans.iter().copied())
            .collect();
        let comm = self.calls.iter().map(|c| (c.ts, c.ts + c.dur)).collect();
        Intervals::union(spans).subtract(&Intervals::union(comm))
    }
}

/// A key of a thread that is the same in every file of a rank.
fn stable_key(bytes: &[u8]) -> i64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(bytes);
    (h.finish() >> 1) as i64
}

impl FileScan {
    /// Removes `record_param_comms` records nested in another on the same
    /// thread (frontend/backend pairs: torch >= 2.4 records a collective,
    /// control ops included, twice); returns how many. The control ops and
    /// barriers of records that are not nested are counted here.
    fn drop_nested(&mut self) -> u64 {
        let spans = &self.record_spans;
        let mut order: Vec<usize> = (0..spans.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&spans[a], &spans[b]);
            x.thread
                .cmp(&y.thread)
                .then(x.ts.total_cmp(&y.ts))
                .then(y.end.total_cmp(&x.end))
                .then(a.cmp(&b))
        });
        let mut nested_calls = vec![false; self.calls.len()];
        let mut nested = 0_u64;
        let mut open: Option<(u32, f64, f64)> = None;
        for &i in &order {
            let RecordSpan {
                thread,
                ts,
                end,
                is,
            } = spans[i];
            match open {
                Some((t, start, stop)) if t == thread && ts >= start && end <= stop => {
                    nested += 1;
                    if let RecordIs::Call(c) = is {
                        nested_calls[c] = true;
                    }
                }
                _ => {
                    open = Some((thread, ts, end));
                    if let RecordIs::Control(barrier) = is {
                        self.control += 1;
                        if barrier {
                            self.barriers.push(ts);
                        }
                    }
                }
            }
        }
        let mut i = 0;
        self.calls.retain(|_| {
            i += 1;
            !nested_calls[i - 1]
        });
        nested
    }

    /// For each call, the index of its `gloo:` range, if one is found.
    fn link_gloo(&mut self) -> Vec<Option<usize>> {
        let mut by_algorithm: Vec<Vec<usize>> = vec![Vec::new(); GLOO_ALGORITHMS.len()];
        let mut order: Vec<usize> = (0..self.gloo.len()).collect();
        order.sort_by(|&a, &b| self.gloo[a].ts.total_cmp(&self.gloo[b].ts).then(a.cmp(&b)));
        for i in order {
            by_algorithm[self.gloo[i].algorithm as usize].push(i);
        }
        let mut used = vec![false; self.gloo.len()];
        let mut cursor = vec![0_usize; GLOO_ALGORITHMS.len()];
        let mut calls: Vec<usize> = (0..self.calls.len())
            .filter(|&i| self.calls[i].origin == Origin::C10d)
            .collect();
        calls.sort_by(|&a, &b| {
            self.calls[a]
                .ts
                .total_cmp(&self.calls[b].ts)
                .then(a.cmp(&b))
        });
        let mut links = vec![None; self.calls.len()];
        for ci in calls {
            let call = &self.calls[ci];
            for name in call.kind.gloo_names() {
                let code = GLOO_ALGORITHMS.iter().position(|a| a == name).unwrap_or(0);
                let list = &by_algorithm[code];
                let found = find_range(list, &mut cursor[code], &used, &self.gloo, call);
                if let Some(k) = found {
                    used[list[k]] = true;
                    links[ci] = Some(list[k]);
                    break;
                }
            }
        }
        links
    }
}

/// The first unused range of `list` that can execute `call`.
fn find_range(
    list: &[usize],
    cursor: &mut usize,
    used: &[bool],
    ranges: &[GlooRange],
    call: &RawCall,
) -> Option<usize> {
    const EARLY_US: f64 = 1.0;
    while *cursor < list.len()
        && (used[list[*cursor]] || ranges[list[*cursor]].ts < call.ts - EARLY_US)
    {
        *cursor += 1;
    }
    let same_thread = call.kind.is_p2p();
    list[*cursor..]
        .iter()
        .position(|&r| !used[r] && (ranges[r].thread == call.thread) == same_thread)
        .map(|k| k + *cursor)
}
