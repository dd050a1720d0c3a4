//! `commcanary.trace.v1`, read from bytes into columnar storage.
//!
//! [`load`] parses a trace (plain or gzip) in one pass. Each event is read into
//! a reusable scratch document, validated, reduced to typed columns in
//! [`Events`], and re-serialized as canonical JSON into one contiguous buffer
//! (the source commitment `source_trace_sha256` is defined over those bytes).
//! No per-event heap objects survive the pass: operation identities are
//! interned into a [`Signature`] table and each event keeps a `u32` into it.
//!
//! Validation follows the reference reader (lenient numeric spellings such as
//! `"8"` or `8.0` for integers are accepted, booleans never count as numbers)
//! and reports the first problem as `trace event N field 'F' ...`, where `N` is
//! the event's position in the input.

mod builder;
mod load;
mod part;

pub use builder::{EventExtras, EventTiming, TraceBuilder};

pub use load::{LoadOptions, load, load_bytes, load_owned};
pub use part::{decode_part, encode_part};

use sha2::{Digest, Sha256};

/// The trace format string.
pub const TRACE_FORMAT: &str = crate::document::TRACE;

/// Operations that need no `custom_op` flag.
pub const KNOWN_OPS: [&str; 8] = [
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "all_to_all",
    "broadcast",
    "send",
    "recv",
    "point_to_point",
];

/// The identity of an operation: every field the compiler groups by.
///
/// Two adjacent events merge into one canary group only when their signatures
/// are equal. Defaults are resolved (`phase` "unknown", `group` "default",
/// `concurrent_groups` 1); strings are WTF-8 bytes; opaque fields (`dtype`,
/// `reduction_op`, `root_rank`) keep their canonical JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Signature {
    /// Phase name.
    pub phase: Vec<u8>,
    /// Operation name.
    pub op: Vec<u8>,
    /// Message size in bytes.
    pub bytes: i64,
    /// Participating ranks, in trace order.
    pub ranks: Vec<i64>,
    /// Communicator name.
    pub group: Vec<u8>,
    /// Number of communicators sharing the links.
    pub concurrent_groups: i64,
    /// `custom_op: true` in the source.
    pub custom_op: bool,
    /// Canonical JSON of `dtype`, when present.
    pub dtype: Option<Vec<u8>>,
    /// Canonical JSON of `reduction_op`, when present.
    pub reduction_op: Option<Vec<u8>>,
    /// Canonical JSON of `root_rank`, when present.
    pub root_rank: Option<Vec<u8>>,
    /// Sending rank of a point-to-point transfer.
    pub sender_rank: Option<i64>,
    /// Receiving rank of a point-to-point transfer.
    pub receiver_rank: Option<i64>,
    /// Point-to-point message sequence number.
    pub message_sequence: Option<i64>,
    /// Point-to-point tag.
    pub tag: Option<Vec<u8>>,
    /// Point-to-point channel.
    pub channel: Option<Vec<u8>>,
}

impl Default for Signature {
    /// An empty identity with the format's defaults (`concurrent_groups` 1).
    fn default() -> Self {
        Self {
            phase: Vec::new(),
            op: Vec::new(),
            bytes: 0,
            ranks: Vec::new(),
            group: Vec::new(),
            concurrent_groups: 1,
            custom_op: false,
            dtype: None,
            reduction_op: None,
            root_rank: None,
            sender_rank: None,
            receiver_rank: None,
            message_sequence: None,
            tag: None,
            channel: None,
        }
    }
}

impl Signature {
    /// Writes the members `receiver_rank`, `reduction_op`, `root_rank` and
    /// `sender_rank` (those present) into a canonical object whose previous
    /// key sorts before `receiver_rank` and whose next after `sender_rank`.
    pub fn write_roles(&self, o: &mut crate::json::canon::ObjectWriter<'_>) {
        if let Some(r) = self.receiver_rank {
            o.i64("receiver_rank", r);
        }
        if let Some(r) = &self.reduction_op {
            o.raw("reduction_op", r);
        }
        if let Some(r) = &self.root_rank {
            o.raw("root_rank", r);
        }
        if let Some(s) = self.sender_rank {
            o.i64("sender_rank", s);
        }
    }

    /// Number of ranks.
    #[must_use]
    pub fn rank_count(&self) -> usize {
        self.ranks.len()
    }
}

/// Per-event flag bits stored in [`Events::flags`].
pub mod flag {
    /// `arrival_skew_unknown: true`
    pub const SKEW_UNKNOWN: u8 = 1;
    /// `partial_rank_arrival: true`
    pub const PARTIAL_ARRIVAL: u8 = 2;
    /// `compute_fields_uncertain: true`
    pub const FIELDS_UNCERTAIN: u8 = 4;
    /// `compute_overlap_unknown: true`
    pub const OVERLAP_UNKNOWN: u8 = 8;
    /// The event carries a `rank_arrival_us` map or list.
    pub const HAS_ARRIVAL_MAP: u8 = 16;
}

/// Columnar event storage, in input order. Optional numbers are `NaN` when
/// absent (a valid trace never contains NaN).
#[derive(Debug, Default, Clone)]
pub struct Events {
    /// Signature index of each event.
    pub signature: Vec<u32>,
    /// `start_us`
    pub start_us: Vec<f64>,
    /// `gap_us`
    pub gap_us: Vec<f64>,
    /// `arrival_skew_us`
    pub arrival_skew_us: Vec<f64>,
    /// `compute_before_us`
    pub compute_before_us: Vec<f64>,
    /// `compute_overlap_us`
    pub compute_overlap_us: Vec<f64>,
    /// `compute_pressure`
    pub compute_pressure: Vec<f64>,
    /// `observed_exposed_us`
    pub observed_exposed_us: Vec<f64>,
    /// `device_us`: measured device (GPU kernel) time of the collective.
    pub device_us: Vec<f64>,
    /// `step`: the training or serving step (an integer, as `f64`).
    pub step: Vec<f64>,
    /// Flag bits, see [`flag`].
    pub flags: Vec<u8>,
    /// Start of each event's raw arrival values in [`Events::arrivals`] (rank
    /// order, `rank_count` values) when [`flag::HAS_ARRIVAL_MAP`] is set.
    pub arrival_at: Vec<u32>,
    /// Raw per-rank arrival values.
    pub arrivals: Vec<f64>,
    /// Where each event's canonical JSON lives: bytes of the input when the
    /// input already spelled the event canonically (the common case for
    /// machine-written traces), else [`Events::canonical`].
    pub spans: Vec<Span>,
    /// Canonical JSON of the events whose input spelling was not canonical.
    pub canonical: Vec<u8>,
}

impl Events {
    /// Number of events.
    #[must_use]
    pub fn len(&self) -> usize {
        self.signature.len()
    }

    /// `true` when there are no events.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.signature.is_empty()
    }

    /// The timing column called `name` (one of [`TIMING_COLUMNS`]), in
    /// input order, `NaN` where an event lacks the field.
    #[must_use]
    pub fn column(&self, name: &str) -> Option<&[f64]> {
        Some(match name {
            "start_us" => &self.start_us,
            "gap_us" => &self.gap_us,
            "arrival_skew_us" => &self.arrival_skew_us,
            "compute_before_us" => &self.compute_before_us,
            "compute_overlap_us" => &self.compute_overlap_us,
            "compute_pressure" => &self.compute_pressure,
            "observed_exposed_us" => &self.observed_exposed_us,
            "device_us" => &self.device_us,
            "step" => &self.step,
            _ => return None,
        })
    }
}

/// The timing columns of [`Events`], by field name.
pub const TIMING_COLUMNS: [&str; 9] = [
    "start_us",
    "gap_us",
    "arrival_skew_us",
    "compute_before_us",
    "compute_overlap_us",
    "compute_pressure",
    "observed_exposed_us",
    "device_us",
    "step",
];

/// Location of one event's canonical JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset.
    pub start: u64,
    /// Byte length.
    pub len: u32,
    /// `true`: in [`Trace::raw`]; `false`: in [`Events::canonical`].
    pub in_raw: bool,
}

/// A parsed trace.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    /// Top-level members other than `events`, as (key, canonical value),
    /// sorted by key.
    pub members: Vec<(Vec<u8>, Vec<u8>)>,
    /// Interned operation signatures.
    pub signatures: Vec<Signature>,
    /// The events.
    pub events: Events,
    /// Whether the trace carries a research-reduction or baseline marker in
    /// its workload (`workload.reduction`, `workload.reduction_method`,
    /// `workload.baseline_method`): it is then a subset or stand-in of a
    /// larger workload.
    pub derived_from: Option<String>,
    /// The input bytes, kept while events refer to them (see [`Span`]).
    pub raw: Vec<u8>,
}

impl Trace {
    /// Canonical JSON of event `i`.
    #[must_use]
    pub fn canonical_json(&self, i: usize) -> &[u8] {
        let span = self.events.spans[i];
        let buffer = if span.in_raw {
            &self.raw
        } else {
            &self.events.canonical
        };
        &buffer[span.start as usize..span.start as usize + span.len as usize]
    }

    /// Canonical JSON of top-level member `key`, if present.
    #[must_use]
    pub fn member(&self, key: &str) -> Option<&[u8]> {
        self.members
            .iter()
            .find(|(k, _)| k.as_slice() == key.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// Canonical JSON of the trace with its `events` replaced by the events at
    /// `order` (in that order), fed to `sink` piece by piece. This is the
    /// projection `source_trace_sha256` and `source_bytes` are defined over.
    pub fn write_projection(&self, order: &[u32], sink: &mut dyn FnMut(&[u8])) {
        self.source_view().write_projection(order, sink);
    }

    /// `(sha256 hex, canonical byte length)` of [`Trace::write_projection`].
    #[must_use]
    pub fn projection_digest(&self, order: &[u32]) -> (String, u64) {
        self.source_view().projection_digest(order)
    }

    fn source_view(&self) -> SourceView<'_> {
        SourceView {
            members: &self.members,
            raw: &self.raw,
            canonical: &self.events.canonical,
            spans: &self.events.spans,
        }
    }

    /// Moves the bytes behind the source commitment out of the trace (the
    /// trace keeps its columns); used to hash them on another thread and free
    /// them as soon as the commitment is taken.
    #[must_use]
    pub fn take_source(&mut self) -> SourceBytes {
        SourceBytes {
            members: self.members.clone(),
            raw: std::mem::take(&mut self.raw),
            canonical: std::mem::take(&mut self.events.canonical),
            spans: std::mem::take(&mut self.events.spans),
        }
    }
}

/// The bytes the source commitment covers, detached from a [`Trace`].
#[derive(Debug, Default, Clone)]
pub struct SourceBytes {
    members: Vec<(Vec<u8>, Vec<u8>)>,
    raw: Vec<u8>,
    canonical: Vec<u8>,
    spans: Vec<Span>,
}

impl SourceBytes {
    /// `(sha256 hex, canonical byte length)` of the source projection.
    #[must_use]
    pub fn projection_digest(&self, order: &[u32]) -> (String, u64) {
        SourceView {
            members: &self.members,
            raw: &self.raw,
            canonical: &self.canonical,
            spans: &self.spans,
        }
        .projection_digest(order)
    }
}

struct SourceView<'a> {
    members: &'a [(Vec<u8>, Vec<u8>)],
    raw: &'a [u8],
    canonical: &'a [u8],
    spans: &'a [Span],
}

impl SourceView<'_> {
    fn event(&self, i: usize) -> &[u8] {
        let span = self.spans[i];
        let buffer = if span.in_raw {
            self.raw
        } else {
            self.canonical
        };
        &buffer[span.start as usize..span.start as usize + span.len as usize]
    }

    fn write_projection(&self, order: &[u32], sink: &mut dyn FnMut(&[u8])) {
        sink(b"{");
        let mut first = true;
        let mut events_written = false;
        let write_events = |sink: &mut dyn FnMut(&[u8]), first: &mut bool| {
            if !*first {
                sink(b",");
            }
            *first = false;
            sink(b"\"events\":[");
            for (n, &i) in order.iter().enumerate() {
                if n > 0 {
                    sink(b",");
                }
                sink(self.event(i as usize));
            }
            sink(b"]");
        };
        for (key, value) in self.members {
            if !events_written && key.as_slice() > b"events".as_slice() {
                write_events(sink, &mut first);
                events_written = true;
            }
            if !first {
                sink(b",");
            }
            first = false;
            let mut k = Vec::with_capacity(key.len() + 2);
            crate::json::canon::write_wtf8(&mut k, key);
            sink(&k);
            sink(b":");
            sink(value);
        }
        if !events_written {
            write_events(sink, &mut first);
        }
        sink(b"}");
    }

    fn projection_digest(&self, order: &[u32]) -> (String, u64) {
        // Coalesce small pieces before hashing: fewer, larger updates.
        let mut hasher = Sha256::new();
        let mut bytes = 0u64;
        let mut pending: Vec<u8> = Vec::with_capacity(1 << 16);
        self.write_projection(order, &mut |piece| {
            bytes += piece.len() as u64;
            if pending.len() + piece.len() > pending.capacity() {
                hasher.update(&pending);
                pending.clear();
            }
            if piece.len() >= pending.capacity() {
                hasher.update(piece);
            } else {
                pending.extend_from_slice(piece);
            }
        });
        hasher.update(&pending);
        (hex(&hasher.finalize()), bytes)
    }
}

/// Lowercase hex of a byte string.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}
