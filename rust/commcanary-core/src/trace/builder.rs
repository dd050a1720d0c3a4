//! [`TraceBuilder`]: the one way events enter a [`Trace`].
//!
//! The `commcanary.trace.v1` reader and every importer feed a builder:
//! signatures are interned (each distinct [`Signature`] stored once, events
//! keep a `u32`), timing goes into the columns, and each event's canonical
//! JSON, over which the source commitment is defined, is either a span of
//! input the caller already holds ([`TraceBuilder::push_spanned`], the v1
//! reader's zero-copy path) or written by the builder from the typed fields
//! ([`TraceBuilder::push_event`]), so an importer never builds v1 JSON text.
//! A trace built by `push_event` and its canonical JSON read back by the v1
//! reader give the same columns, signatures and commitment.

use rustc_hash::FxHashMap;

use super::{Events, Signature, Span, TRACE_FORMAT, Trace, flag};
use crate::json::canon::{self, ObjectWriter};

/// The timing of one event; `NaN` marks an absent optional number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventTiming {
    /// `start_us`
    pub start_us: f64,
    /// `gap_us`
    pub gap_us: f64,
    /// `arrival_skew_us`
    pub arrival_skew_us: f64,
    /// `compute_before_us`
    pub compute_before_us: f64,
    /// `compute_overlap_us`
    pub compute_overlap_us: f64,
    /// `compute_pressure`
    pub compute_pressure: f64,
    /// `observed_exposed_us`
    pub observed_exposed_us: f64,
    /// `device_us`
    pub device_us: f64,
    /// `step` (−1 when absent)
    pub step: i64,
    /// Flag bits ([`flag`]); [`flag::HAS_ARRIVAL_MAP`] is set by the builder.
    pub flags: u8,
}

impl Default for EventTiming {
    fn default() -> Self {
        Self {
            start_us: f64::NAN,
            gap_us: f64::NAN,
            arrival_skew_us: f64::NAN,
            compute_before_us: f64::NAN,
            compute_overlap_us: f64::NAN,
            compute_pressure: f64::NAN,
            observed_exposed_us: f64::NAN,
            device_us: f64::NAN,
            step: -1,
            flags: 0,
        }
    }
}

/// Descriptive members of one event: they are part of its canonical JSON
/// (and so of the source commitment) but not of its signature or timing.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventExtras<'a> {
    /// `id`, a string.
    pub id: Option<&'a str>,
    /// `metadata`, the canonical JSON of an object.
    pub metadata: Option<&'a [u8]>,
}

/// Accumulates a [`Trace`].
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
    index: FxHashMap<Signature, u32>,
}

impl TraceBuilder {
    /// An empty builder.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of events so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.trace.events.len()
    }

    /// `true` before the first event.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.trace.events.is_empty()
    }

    /// The id of `sig`, storing it on first sight.
    pub fn intern(&mut self, sig: &Signature) -> u32 {
        if let Some(&id) = self.index.get(sig) {
            return id;
        }
        let id = self.trace.signatures.len() as u32;
        self.trace.signatures.push(sig.clone());
        self.index.insert(sig.clone(), id);
        id
    }

    /// Sets top-level member `key` to `canonical` (canonical JSON); members
    /// are written in key order whatever the order they are set in.
    pub fn set_member(&mut self, key: &[u8], canonical: Vec<u8>) {
        match self.trace.members.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = canonical,
            None => self.trace.members.push((key.to_vec(), canonical)),
        }
    }

    /// Marks the trace as a subset or stand-in of a larger workload.
    pub fn set_derived_from(&mut self, marker: String) {
        self.trace.derived_from = Some(marker);
    }

    /// Appends canonical event JSON written by `write` to the builder's own
    /// buffer and returns where it lives (for [`TraceBuilder::push_spanned`]).
    pub fn write_canonical(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Span {
        let out = &mut self.trace.events.canonical;
        let start = out.len() as u64;
        write(out);
        Span {
            start,
            len: (out.len() as u64 - start) as u32,
            in_raw: false,
        }
    }

    /// Appends an event whose canonical JSON is already at `span` (in the
    /// input the caller will hand to [`TraceBuilder::finish`], or written by
    /// [`TraceBuilder::write_canonical`]). `arrivals` are the per-rank
    /// arrival times in rank order, when complete.
    pub fn push_spanned(
        &mut self,
        signature: u32,
        timing: &EventTiming,
        arrivals: Option<&[f64]>,
        span: Span,
    ) {
        let ev: &mut Events = &mut self.trace.events;
        let mut flags = timing.flags & !flag::HAS_ARRIVAL_MAP;
        ev.arrival_at.push(ev.arrivals.len() as u32);
        if let Some(values) = arrivals {
            ev.arrivals.extend_from_slice(values);
            flags |= flag::HAS_ARRIVAL_MAP;
        }
        ev.signature.push(signature);
        ev.start_us.push(timing.start_us);
        ev.gap_us.push(timing.gap_us);
        ev.arrival_skew_us.push(timing.arrival_skew_us);
        ev.compute_before_us.push(timing.compute_before_us);
        ev.compute_overlap_us.push(timing.compute_overlap_us);
        ev.compute_pressure.push(timing.compute_pressure);
        ev.observed_exposed_us.push(timing.observed_exposed_us);
        ev.device_us.push(timing.device_us);
        ev.step.push(if timing.step >= 0 {
            timing.step as f64
        } else {
            f64::NAN
        });
        ev.flags.push(flags);
        ev.spans.push(span);
    }

    /// Appends an event from its typed fields, writing its canonical v1 JSON.
    /// `extras` carries the event's `id` and `metadata` (canonical JSON of an
    /// object), when it has them.
    pub fn push_event(
        &mut self,
        sig: &Signature,
        timing: &EventTiming,
        arrivals: Option<&[f64]>,
        extras: &EventExtras<'_>,
    ) {
        let id = self.intern(sig);
        let span = self.write_canonical(|out| write_event(out, sig, timing, arrivals, extras));
        self.push_spanned(id, timing, arrivals, span);
    }

    /// Appends the events of `other` (built from input after this one's):
    /// signatures are re-interned, offsets into shared buffers shifted.
    pub fn absorb(&mut self, other: TraceBuilder) {
        let remap: Vec<u32> = other
            .trace
            .signatures
            .iter()
            .map(|sig| self.intern(sig))
            .collect();
        let mine = &mut self.trace.events;
        let theirs = other.trace.events;
        let arrival_shift = mine.arrivals.len() as u32;
        let canonical_shift = mine.canonical.len() as u64;
        mine.signature
            .extend(theirs.signature.iter().map(|&s| remap[s as usize]));
        mine.start_us.extend_from_slice(&theirs.start_us);
        mine.gap_us.extend_from_slice(&theirs.gap_us);
        mine.arrival_skew_us
            .extend_from_slice(&theirs.arrival_skew_us);
        mine.compute_before_us
            .extend_from_slice(&theirs.compute_before_us);
        mine.compute_overlap_us
            .extend_from_slice(&theirs.compute_overlap_us);
        mine.compute_pressure
            .extend_from_slice(&theirs.compute_pressure);
        mine.observed_exposed_us
            .extend_from_slice(&theirs.observed_exposed_us);
        mine.device_us.extend_from_slice(&theirs.device_us);
        mine.step.extend_from_slice(&theirs.step);
        mine.flags.extend_from_slice(&theirs.flags);
        mine.arrival_at
            .extend(theirs.arrival_at.iter().map(|&a| a + arrival_shift));
        mine.arrivals.extend_from_slice(&theirs.arrivals);
        mine.spans.extend(theirs.spans.iter().map(|s| Span {
            start: if s.in_raw {
                s.start
            } else {
                s.start + canonical_shift
            },
            ..*s
        }));
        mine.canonical.extend_from_slice(&theirs.canonical);
    }

    /// The finished trace. `raw` is the input that spanned events refer to
    /// (kept only when some event does); a missing `format` member is set to
    /// `commcanary.trace.v1`.
    #[must_use]
    pub fn finish(mut self, raw: Vec<u8>) -> Trace {
        if self.trace.member("format").is_none() {
            let mut f = Vec::new();
            canon::write_str(&mut f, TRACE_FORMAT);
            self.set_member(b"format", f);
        }
        let mut trace = self.trace;
        trace.members.sort_by(|a, b| a.0.cmp(&b.0));
        if trace.events.spans.iter().any(|s| s.in_raw) {
            trace.raw = raw;
        }
        trace
    }

    /// The trace so far (members unsorted, no raw input).
    #[must_use]
    pub fn peek(&self) -> &Trace {
        &self.trace
    }
}

/// Canonical v1 JSON of one event from its typed fields (keys in order).
fn write_event(
    out: &mut Vec<u8>,
    sig: &Signature,
    t: &EventTiming,
    arrivals: Option<&[f64]>,
    extras: &EventExtras<'_>,
) {
    let mut o = ObjectWriter::new(out);
    let number = |o: &mut ObjectWriter<'_>, key: &str, v: f64| {
        if !v.is_nan() {
            o.f64(key, v);
        }
    };
    let flag_on = |bit: u8| t.flags & bit != 0;
    let wtf8 = |o: &mut ObjectWriter<'_>, key: &str, v: &[u8]| canon::write_wtf8(o.key(key), v);
    if flag_on(flag::SKEW_UNKNOWN) {
        o.bool("arrival_skew_unknown", true);
    }
    number(&mut o, "arrival_skew_us", t.arrival_skew_us);
    o.i64("bytes", sig.bytes);
    if let Some(c) = &sig.channel {
        wtf8(&mut o, "channel", c);
    }
    number(&mut o, "compute_before_us", t.compute_before_us);
    if flag_on(flag::FIELDS_UNCERTAIN) {
        o.bool("compute_fields_uncertain", true);
    }
    if flag_on(flag::OVERLAP_UNKNOWN) {
        o.bool("compute_overlap_unknown", true);
    }
    number(&mut o, "compute_overlap_us", t.compute_overlap_us);
    number(&mut o, "compute_pressure", t.compute_pressure);
    if sig.concurrent_groups != 1 {
        o.i64("concurrent_groups", sig.concurrent_groups);
    }
    if sig.custom_op {
        o.bool("custom_op", true);
    }
    number(&mut o, "device_us", t.device_us);
    if let Some(d) = &sig.dtype {
        o.raw("dtype", d);
    }
    number(&mut o, "gap_us", t.gap_us);
    wtf8(&mut o, "group", &sig.group);
    if let Some(id) = extras.id {
        o.str("id", id);
    }
    if let Some(m) = sig.message_sequence {
        o.i64("message_sequence", m);
    }
    if let Some(m) = extras.metadata {
        o.raw("metadata", m);
    }
    number(&mut o, "observed_exposed_us", t.observed_exposed_us);
    wtf8(&mut o, "op", &sig.op);
    if flag_on(flag::PARTIAL_ARRIVAL) {
        o.bool("partial_rank_arrival", true);
    }
    wtf8(&mut o, "phase", &sig.phase);
    if let Some(values) = arrivals {
        canon::write_f64_array(o.key("rank_arrival_us"), values);
    }
    canon::write_i64_array(o.key("ranks"), &sig.ranks);
    sig.write_roles(&mut o);
    number(&mut o, "start_us", t.start_us);
    if t.step >= 0 {
        o.i64("step", t.step);
    }
    if let Some(tag) = &sig.tag {
        wtf8(&mut o, "tag", tag);
    }
    o.end();
}
