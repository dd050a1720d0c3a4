//! One-pass trace reader: bytes in, [`Trace`] out.

use std::path::Path;

use rustc_hash::FxHashMap;

use super::builder::{EventTiming, TraceBuilder};
use super::{KNOWN_OPS, Signature, Span, TRACE_FORMAT, Trace, flag};
use crate::error::{Error, ErrorKind, Result};
use crate::json::{Doc, JsonLimits, Node, NodeId, Parser, Value, canon};

/// Largest magnitude accepted for any `_us` time field.
const MAX_TIME_US: f64 = 1e12;
/// Largest accepted `compute_pressure`.
const MAX_PRESSURE: f64 = 1e6;
/// Largest `step` a trace may carry.
const MAX_STEP: i64 = 1 << 53;
/// Largest accepted `concurrent_groups`.
const MAX_CONCURRENT_GROUPS: i64 = 1_000_000;

/// Bounds applied while reading a trace.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Largest input accepted, after gzip decompression.
    pub max_input_bytes: u64,
    /// JSON reader limits.
    pub json: JsonLimits,
    /// Largest number of events.
    pub max_events: u64,
    /// Largest number of ranks per event.
    pub max_ranks: usize,
    /// Largest number of JSON items inside one event field.
    pub max_field_items: u64,
    /// Event arrays with at least this many bytes are read by two threads.
    pub parallel_min_bytes: usize,
}

impl Default for LoadOptions {
    /// The resource policy's bounds ([`crate::limits::current`]).
    fn default() -> Self {
        let l = crate::limits::current();
        Self {
            max_input_bytes: crate::input::MAX_INPUT_BYTES,
            json: JsonLimits::default(),
            max_events: l.max_trace_events,
            max_ranks: usize::try_from(l.max_ranks).unwrap_or(usize::MAX),
            max_field_items: l.max_field_items,
            parallel_min_bytes: 1 << 20,
        }
    }
}

/// Reads and parses the trace at `path` (gzip detected by its magic bytes).
///
/// # Errors
/// [`ErrorKind::Io`] when the file cannot be read, otherwise as [`load_bytes`].
pub fn load(path: &Path, options: &LoadOptions) -> Result<Trace> {
    let bytes = crate::input::read_input(path, options.max_input_bytes)?;
    // A mapped file is copied only once it has parsed.
    let reader = read_checked(&bytes, options)?;
    Ok(reader.builder.finish(bytes.into_vec()))
}

/// Parses trace `bytes` (copied; see [`load_owned`]).
///
/// # Errors
/// As [`load_owned`].
pub fn load_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Trace> {
    load_owned(bytes.to_vec(), options)
}

/// Parses trace `bytes`, keeping them as [`Trace::raw`] when events are
/// already spelled canonically there (no second copy is made).
///
/// # Errors
/// JSON syntax and limit errors first (as CPython would report them before
/// validating), then the first validation error in input order.
pub fn load_owned(bytes: Vec<u8>, options: &LoadOptions) -> Result<Trace> {
    let reader = read_checked(&bytes, options)?;
    Ok(reader.builder.finish(bytes))
}

/// Parses and validates trace `bytes`; the reader holds the built columns.
fn read_checked(bytes: &[u8], options: &LoadOptions) -> Result<Reader> {
    let mut reader = Reader::new(*options);
    let mut parser = Parser::new(bytes, options.json)?;
    reader.top_level(&mut parser)?;
    parser.finish()?;
    let format = reader
        .builder
        .peek()
        .member("format")
        .and_then(plain_json_string);
    crate::document::expect_format(format, TRACE_FORMAT)?;
    if let Some(err) = reader.first_invalid {
        return Err(err);
    }
    if !reader.saw_events {
        if reader.builder.peek().member("traceEvents").is_some() {
            return Err(Error::invalid(format!(
                "is a PyTorch profiler (Kineto) trace, not a {TRACE_FORMAT} trace: import it first \
                 (commcanary import-kineto FILE... -o TRACE, one file per rank or their directory)"
            )));
        }
        return Err(Error::invalid("trace field 'events' is required"));
    }
    match reader.builder.peek().member("format") {
        None => return Err(Error::invalid("trace field 'format' is required")),
        Some(f) if f != format!("\"{TRACE_FORMAT}\"").as_bytes() => {
            return Err(Error::invalid(format!(
                "trace field 'format' must be '{TRACE_FORMAT}', got {}",
                String::from_utf8_lossy(f)
            )));
        }
        Some(_) => {}
    }
    Ok(reader)
}

/// The text of a canonical JSON string without escapes (`"abc"` → `abc`).
fn plain_json_string(json: &[u8]) -> Option<&str> {
    let inner = json.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if inner.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(inner).ok()
}

fn empty_signature() -> Signature {
    Signature::default()
}

struct Reader {
    options: LoadOptions,
    builder: TraceBuilder,
    scratch_sig: Signature,
    event_doc: Doc,
    event_keys: Vec<u8>,
    /// (key start, key len, value node) of the event being read.
    members: Vec<(u32, u32, NodeId)>,
    first_invalid: Option<Error>,
    saw_events: bool,
    rank_pos: FxHashMap<i64, u32>,
    values: Vec<f64>,
}

/// Integer with the reference reader's leniency: integral floats and numeric
/// strings count; booleans never do.
fn lenient_int(v: Value<'_>) -> Option<i64> {
    match v.node() {
        Node::Int(i) => Some(i),
        Node::Float { value: f, .. } if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(f as i64),
        Node::Str { .. } => v.as_str().and_then(|s| s.trim().parse::<i64>().ok()),
        _ => None,
    }
}

/// Finite number with the reference reader's leniency (numeric strings count).
fn lenient_num(v: Value<'_>) -> Option<f64> {
    match v.node() {
        Node::Int(_) | Node::Float { .. } | Node::BigInt { .. } => v.as_number(),
        Node::Str { .. } => v
            .as_str()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|f| f.is_finite()),
        _ => None,
    }
}

/// A rank written as an object key: canonical decimal digits (no sign, no
/// leading zeros), at most 18 of them.
fn decimal_key(key: &[u8]) -> Option<i64> {
    if key.is_empty() || key.len() > 18 || (key.len() > 1 && key[0] == b'0') {
        return None;
    }
    key.iter().try_fold(0i64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
    })
}

/// Adds "where" context to a JSON or limit error raised inside a known field.
fn with_context(err: &Error, context: &str) -> Error {
    for prefix in [
        "is not valid JSON: ",
        "violates JSON resource constraints: ",
    ] {
        if let Some(rest) = err.message().strip_prefix(prefix) {
            return Error::new(err.kind(), format!("{prefix}{context}: {rest}"));
        }
    }
    err.clone()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// How an event-array pass ended.
enum Pass {
    /// The closing `]` was consumed.
    Closed,
    /// The pass stopped at the requested element boundary, having read this
    /// many events.
    Split(u64),
}

/// A likely element boundary of the events array near `from`: the `{` of
/// `}` ws* `,` ws* `{`. Only a guess (the pattern may sit inside a string or
/// a nested array); the reader verifies it before trusting the second pass.
fn guess_boundary(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        let close = i + bytes[i..].iter().position(|&b| b == b'}')?;
        let mut j = close + 1;
        while j < bytes.len() && matches!(bytes[j], b' ' | b'\t' | b'\n' | b'\r') {
            j += 1;
        }
        if bytes.get(j) == Some(&b',') {
            j += 1;
            while j < bytes.len() && matches!(bytes[j], b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            if bytes.get(j) == Some(&b'{') {
                return Some(j);
            }
        }
        i = close + 1;
    }
    None
}

impl Reader {
    fn new(options: LoadOptions) -> Self {
        Self {
            options,
            builder: TraceBuilder::new(),
            scratch_sig: empty_signature(),
            event_doc: Doc::new(),
            event_keys: Vec::new(),
            members: Vec::new(),
            first_invalid: None,
            saw_events: false,
            rank_pos: FxHashMap::default(),
            values: Vec::new(),
        }
    }

    /// Appends the events another reader read after this one's.
    fn absorb(&mut self, other: Reader) {
        self.builder.absorb(other.builder);
    }

    fn top_level(&mut self, p: &mut Parser<'_>) -> Result<()> {
        p.skip_ws();
        if p.peek() != Some(b'{') {
            let mut doc = Doc::new();
            p.parse_value(&mut doc, 1)?;
            p.finish()?;
            return Err(Error::new(ErrorKind::Json, "must contain a JSON object"));
        }
        p.check_depth(1)?;
        p.expect(b'{', "Expecting value")?;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut top_doc = Doc::new();
        p.skip_ws();
        if p.peek() == Some(b'}') {
            p.expect(b'}', "Expecting '}'")?;
            return Ok(());
        }
        loop {
            p.skip_ws();
            if p.peek() != Some(b'"') {
                return Err(p.error("Expecting property name enclosed in double quotes"));
            }
            p.count_item()?;
            let mut key = Vec::new();
            p.read_string_into(&mut key)?;
            if keys.contains(&key) {
                return Err(p.error(&format!("duplicate object key {:?} at", lossy(&key))));
            }
            keys.push(key.clone());
            p.expect(b':', "Expecting ':' delimiter")?;
            p.skip_ws();
            if key == b"events" {
                self.saw_events = true;
                if p.peek() == Some(b'[') {
                    self.events(p)?;
                } else {
                    let mut doc = Doc::new();
                    p.parse_value(&mut doc, 2)?;
                    self.invalid(Error::invalid("trace field 'events' must be a list"));
                }
            } else {
                top_doc.clear();
                let id = p
                    .parse_value(&mut top_doc, 2)
                    .map_err(|e| with_context(&e, &format!("trace field '{}'", lossy(&key))))?;
                let value = top_doc.value(id);
                self.check_top_member(&key, value);
                let canonical = canon::to_vec(value);
                self.builder.set_member(&key, canonical);
            }
            p.skip_ws();
            match p.peek() {
                Some(b',') => p.expect(b',', "")?,
                Some(b'}') => {
                    p.expect(b'}', "")?;
                    return Ok(());
                }
                _ => return Err(p.error("Expecting ',' delimiter")),
            }
        }
    }

    fn invalid(&mut self, err: Error) {
        if self.first_invalid.is_none() {
            self.first_invalid = Some(err);
        }
    }

    fn check_top_member(&mut self, key: &[u8], value: Value<'_>) {
        if (key == b"workload" || key == b"system") && !value.is_object() {
            self.invalid(Error::invalid(format!(
                "trace field '{}' must be an object",
                lossy(key)
            )));
        }
        if key == b"workload" && value.is_object() {
            let marker = ["reduction", "reduction_method", "baseline_method"]
                .into_iter()
                .find(|k| value.get(k).is_some());
            if let Some(k) = marker {
                self.builder.set_derived_from(format!("workload.{k}"));
            }
        }
    }

    fn events(&mut self, p: &mut Parser<'_>) -> Result<()> {
        p.check_depth(2)?;
        p.expect(b'[', "Expecting value")?;
        p.skip_ws();
        if p.peek() == Some(b']') {
            return p.expect(b']', "");
        }
        let bytes = p.input();
        let remaining = bytes.len() - p.pos();
        let split = if remaining >= self.options.parallel_min_bytes && self.first_invalid.is_none()
        {
            guess_boundary(bytes, p.pos() + remaining / 2)
        } else {
            None
        };
        let Some(split) = split else {
            return self.event_pass(p, 0, None).map(|_| ());
        };
        // Two passes: this thread reads up to the guessed boundary while a
        // second reads from it to the end of the array. The second pass is
        // used only if this one lands exactly on the boundary between two
        // events and the second pass saw no error; otherwise this thread
        // simply carries on (errors are then reported with exact indices).
        let options = self.options;
        let limits = p.limits();
        let second_pass = move || -> Result<(Reader, usize, u64)> {
            crate::fault::check("trace-second-pass");
            let mut reader = Reader::new(options);
            let mut q = Parser::new(bytes, limits)?;
            q.seek(split);
            match reader.event_pass(&mut q, 0, None)? {
                Pass::Closed if reader.first_invalid.is_none() => Ok((reader, q.pos(), q.items())),
                _ => Err(Error::invalid("second pass did not finish cleanly")),
            }
        };
        let (first, second) = rayon::join(|| self.event_pass(p, 0, Some(split)), second_pass);
        match first? {
            Pass::Closed => Ok(()),
            Pass::Split(count) => match second {
                Ok((reader, end, items))
                    if count + reader.builder.len() as u64 <= self.options.max_events =>
                {
                    self.absorb(reader);
                    p.seek(end);
                    p.add_items(items)
                }
                _ => self.event_pass(p, count, None).map(|_| ()),
            },
        }
    }

    /// Reads events from the current position; `start` is the index of the
    /// first one. Stops after the closing `]`, or, when `stop_at` is given,
    /// when an event would start exactly at that offset.
    fn event_pass(
        &mut self,
        p: &mut Parser<'_>,
        start: u64,
        mut stop_at: Option<usize>,
    ) -> Result<Pass> {
        let mut index = start;
        loop {
            p.skip_ws();
            if let Some(stop) = stop_at {
                if p.pos() == stop {
                    return Ok(Pass::Split(index));
                }
                if p.pos() > stop {
                    stop_at = None;
                }
            }
            p.count_item()?;
            if index >= self.options.max_events {
                return Err(Error::limit(format!(
                    "violates JSON resource constraints: trace has more than max_trace_events={} events {}",
                    self.options.max_events,
                    crate::limits::hint("max_trace_events")
                )));
            }
            if p.peek() == Some(b'{') {
                self.event(p, index as usize)?;
            } else {
                self.event_doc.clear();
                p.parse_value(&mut self.event_doc, 3)?;
                self.invalid(Error::invalid(format!(
                    "trace event {index} must be an object"
                )));
            }
            index += 1;
            p.skip_ws();
            match p.peek() {
                Some(b',') => p.expect(b',', "")?,
                Some(b']') => {
                    p.expect(b']', "")?;
                    return Ok(Pass::Closed);
                }
                _ => return Err(p.error("Expecting ',' delimiter")),
            }
        }
    }

    fn event(&mut self, p: &mut Parser<'_>, index: usize) -> Result<()> {
        p.check_depth(3)?;
        let open = p.pos();
        p.expect(b'{', "")?;
        p.reset_canonical();
        self.event_doc.clear();
        self.event_keys.clear();
        self.members.clear();
        p.skip_ws();
        if p.peek() == Some(b'}') {
            p.expect(b'}', "")?;
        } else {
            loop {
                p.skip_ws();
                if p.peek() != Some(b'"') {
                    return Err(p.error("Expecting property name enclosed in double quotes"));
                }
                p.count_item()?;
                let key_start = self.event_keys.len() as u32;
                p.read_string_into(&mut self.event_keys)?;
                let key_len = self.event_keys.len() as u32 - key_start;
                p.expect(b':', "Expecting ':' delimiter")?;
                p.skip_ws();
                p.set_item_ceiling(p.items().saturating_add(self.options.max_field_items));
                let parsed = p.parse_value(&mut self.event_doc, 4);
                p.set_item_ceiling(u64::MAX);
                let id = parsed.map_err(|e| {
                    let key =
                        lossy(&self.event_keys[key_start as usize..(key_start + key_len) as usize]);
                    with_context(&e, &format!("trace event {index} field '{key}'"))
                })?;
                self.members.push((key_start, key_len, id));
                p.skip_ws();
                match p.peek() {
                    Some(b',') => p.expect(b',', "")?,
                    Some(b'}') => {
                        p.expect(b'}', "")?;
                        break;
                    }
                    _ => return Err(p.error("Expecting ',' delimiter")),
                }
            }
        }
        // Sort members by key (canonical order) and reject duplicates.
        let keys = &self.event_keys;
        let key_of = |m: &(u32, u32, NodeId)| &keys[m.0 as usize..(m.0 + m.1) as usize];
        let sorted = self
            .members
            .windows(2)
            .all(|w| key_of(&w[0]) < key_of(&w[1]));
        if !sorted {
            self.members.sort_by(|a, b| key_of(a).cmp(key_of(b)));
            if let Some(w) = self
                .members
                .windows(2)
                .find(|w| key_of(&w[0]) == key_of(&w[1]))
            {
                let name = lossy(key_of(&w[0]));
                return Err(Error::new(
                    ErrorKind::Json,
                    format!(
                        "is not valid JSON: duplicate object key {name:?} in trace event {index}"
                    ),
                ));
            }
        }
        if self.first_invalid.is_some() {
            return Ok(());
        }
        // Canonical bytes of the event: refer to the input when it already
        // spells the event canonically, else keep a canonical copy.
        let span = if p.was_canonical() && sorted {
            Span {
                start: open as u64,
                len: (p.pos() - open) as u32,
                in_raw: true,
            }
        } else {
            let (members, doc) = (&self.members, &self.event_doc);
            self.builder.write_canonical(|out| {
                out.push(b'{');
                for (n, m) in members.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    canon::write_wtf8(out, &keys[m.0 as usize..(m.0 + m.1) as usize]);
                    out.push(b':');
                    canon::write_value(out, doc.value(m.2));
                }
                out.push(b'}');
            })
        };
        if let Err(e) = self.extract(index, span) {
            self.invalid(e);
        }
        Ok(())
    }

    /// Which recognised field each member of the event just read is.
    fn recognised_fields(&self) -> EventFields {
        let mut f = EventFields::default();
        for &(ks, kl, id) in &self.members {
            let key = &self.event_keys[ks as usize..(ks + kl) as usize];
            if let Some(slot) = f.slot(key) {
                *slot = Some(id);
            }
        }
        f
    }

    /// Validates the event just read and appends it to the builder.
    fn extract(&mut self, i: usize, span: Span) -> Result<()> {
        let f = self.recognised_fields();
        let r = FieldReader {
            doc: &self.event_doc,
            index: i,
        };
        let switches = r.switches(&f)?;
        let sig = &mut self.scratch_sig;
        r.operation(&f, switches.custom_op, sig)?;
        r.ranks(&f, self.options.max_ranks, sig)?;
        r.names(&f, sig)?;
        r.point_to_point(&f, sig)?;
        if let Some(v) = r.val(f.metadata)
            && !v.is_object()
        {
            return Err(r.err("metadata", "must be an object"));
        }
        let mut timing = r.times(&f, &switches)?;
        let complete = match r.val(f.rank_arrival_us) {
            None => false,
            Some(map) => {
                let scratch = ArrivalScratch {
                    values: &mut self.values,
                    rank_pos: &mut self.rank_pos,
                };
                r.arrivals(
                    map,
                    sig,
                    switches.partial_arrival,
                    timing.arrival_skew_us,
                    scratch,
                )?
            }
        };
        if f.rank_arrival_us.is_some() && !complete {
            timing.flags |= flag::PARTIAL_ARRIVAL;
        }
        if sig.rank_count() == 1
            && !timing.arrival_skew_us.is_nan()
            && timing.arrival_skew_us > 0.001
        {
            return Err(r.err("arrival_skew_us", "must be 0 for a single-rank event"));
        }
        let id = self.builder.intern(&self.scratch_sig);
        let arrivals = complete.then_some(self.values.as_slice());
        self.builder.push_spanned(id, &timing, arrivals, span);
        Ok(())
    }
}

/// The boolean switches of one event.
struct Switches {
    custom_op: bool,
    partial_arrival: bool,
    overlap_unknown_given: bool,
    /// Flag bits: skew unknown, partial arrival, uncertain, overlap unknown.
    flags: u8,
}

/// Scratch space for reading one event's per-rank arrivals.
struct ArrivalScratch<'a> {
    values: &'a mut Vec<f64>,
    rank_pos: &'a mut FxHashMap<i64, u32>,
}

/// Reads and validates the recognised fields of one event; every error names
/// the event (`trace event N field 'F' ...`).
struct FieldReader<'a> {
    doc: &'a Doc,
    index: usize,
}

impl<'a> FieldReader<'a> {
    fn err(&self, name: &str, what: &str) -> Error {
        Error::invalid(format!("trace event {} field '{name}' {what}", self.index))
    }

    fn val(&self, id: Option<NodeId>) -> Option<Value<'a>> {
        id.map(|id| self.doc.value(id))
    }

    fn boolean(&self, name: &str, id: Option<NodeId>) -> Result<bool> {
        match self.val(id) {
            None => Ok(false),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.err(name, "must be a boolean")),
        }
    }

    /// The five boolean fields.
    fn switches(&self, f: &EventFields) -> Result<Switches> {
        let custom_op = self.boolean("custom_op", f.custom_op)?;
        let skew_unknown = self.boolean("arrival_skew_unknown", f.arrival_skew_unknown)?;
        let partial_arrival = self.boolean("partial_rank_arrival", f.partial_rank_arrival)?;
        let uncertain = self.boolean("compute_fields_uncertain", f.compute_fields_uncertain)?;
        let overlap_unknown = self.boolean("compute_overlap_unknown", f.compute_overlap_unknown)?;
        let mut flags = 0u8;
        for (on, bit) in [
            (partial_arrival, flag::PARTIAL_ARRIVAL),
            (skew_unknown, flag::SKEW_UNKNOWN),
            (uncertain, flag::FIELDS_UNCERTAIN),
            (overlap_unknown, flag::OVERLAP_UNKNOWN),
        ] {
            if on {
                flags |= bit;
            }
        }
        Ok(Switches {
            custom_op,
            partial_arrival,
            overlap_unknown_given: f.compute_overlap_unknown.is_some(),
            flags,
        })
    }

    /// `op`, `custom_op` and `bytes`.
    fn operation(&self, f: &EventFields, custom_op: bool, sig: &mut Signature) -> Result<()> {
        let op = self
            .val(f.op)
            .ok_or_else(|| self.err("op", "is required"))?;
        let op_bytes = op
            .as_wtf8()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| self.err("op", "must be a non-empty string"))?;
        if !custom_op && !KNOWN_OPS.iter().any(|k| k.as_bytes() == op_bytes) {
            return Err(Error::invalid(format!(
                "trace event {} op '{}' is unsupported; set custom_op=true for custom operations",
                self.index,
                lossy(op_bytes)
            )));
        }
        sig.op.clear();
        sig.op.extend_from_slice(op_bytes);
        sig.custom_op = custom_op;
        let bytes_v = self
            .val(f.bytes)
            .ok_or_else(|| self.err("bytes", "is required"))?;
        sig.bytes = lenient_int(bytes_v)
            .filter(|&b| b > 0)
            .ok_or_else(|| self.err("bytes", "must be a positive integer"))?;
        Ok(())
    }

    /// `ranks` (a list of distinct ranks or a count) and `rank_count`.
    fn ranks(&self, f: &EventFields, max_ranks: usize, sig: &mut Signature) -> Result<()> {
        let ranks_v = self
            .val(f.ranks)
            .ok_or_else(|| self.err("ranks", "is required"))?;
        sig.ranks.clear();
        let too_many = || {
            self.err(
                "ranks",
                &format!(
                    "must list between 1 and max_ranks={max_ranks} ranks {}",
                    crate::limits::hint("max_ranks")
                ),
            )
        };
        if ranks_v.is_array() {
            let n = ranks_v.len().unwrap_or(0);
            if n == 0 || n > max_ranks {
                return Err(too_many());
            }
            for r in ranks_v.elements() {
                let rank = lenient_int(r)
                    .filter(|&r| r >= 0)
                    .ok_or_else(|| self.err("ranks", "must contain only non-negative integers"))?;
                sig.ranks.push(rank);
            }
            if let Some(dup) = first_duplicate(&sig.ranks) {
                return Err(self.err("ranks", &format!("contains duplicate rank {dup}")));
            }
        } else {
            let n = lenient_int(ranks_v).filter(|&n| n > 0).ok_or_else(|| {
                self.err(
                    "ranks",
                    "must be a list of distinct non-negative integers or a positive rank count",
                )
            })?;
            if n as u64 > max_ranks as u64 {
                return Err(too_many());
            }
            sig.ranks.extend(0..n);
        }
        let rank_count = sig.ranks.len();
        if let Some(v) = self.val(f.rank_count)
            && lenient_int(v) != Some(rank_count as i64)
        {
            return Err(self.err(
                "rank_count",
                &format!("must equal the number of ranks ({rank_count})"),
            ));
        }
        Ok(())
    }

    /// A non-empty string field into `out` (`default` when absent).
    fn name_into(
        &self,
        field: &str,
        id: Option<NodeId>,
        default: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        match self.val(id) {
            None => out.extend_from_slice(default),
            Some(v) => out.extend_from_slice(
                v.as_wtf8()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| self.err(field, "must be a non-empty string"))?,
            ),
        }
        Ok(())
    }

    /// An optional non-empty string field.
    fn optional_name(
        &self,
        field: &str,
        id: Option<NodeId>,
        slot: &mut Option<Vec<u8>>,
    ) -> Result<()> {
        match self.val(id) {
            None => *slot = None,
            Some(v) => {
                let b = v
                    .as_wtf8()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| self.err(field, "must be a non-empty string"))?;
                let s = slot.get_or_insert_with(Vec::new);
                s.clear();
                s.extend_from_slice(b);
            }
        }
        Ok(())
    }

    /// An opaque field kept as canonical JSON.
    fn opaque(&self, id: Option<NodeId>, slot: &mut Option<Vec<u8>>) {
        match self.val(id) {
            None => *slot = None,
            Some(v) => {
                let s = slot.get_or_insert_with(Vec::new);
                s.clear();
                canon::write_value(s, v);
            }
        }
    }

    /// `phase`, `group`, `tag`, `channel`, `dtype`, `reduction_op`,
    /// `root_rank` and `concurrent_groups`.
    fn names(&self, f: &EventFields, sig: &mut Signature) -> Result<()> {
        self.name_into("phase", f.phase, b"unknown", &mut sig.phase)?;
        self.name_into("group", f.group, b"default", &mut sig.group)?;
        self.optional_name("tag", f.tag, &mut sig.tag)?;
        self.optional_name("channel", f.channel, &mut sig.channel)?;
        self.opaque(f.dtype, &mut sig.dtype);
        self.opaque(f.reduction_op, &mut sig.reduction_op);
        self.opaque(f.root_rank, &mut sig.root_rank);
        sig.concurrent_groups = match self.val(f.concurrent_groups) {
            None => 1,
            Some(v) => lenient_int(v)
                .filter(|&g| (1..=MAX_CONCURRENT_GROUPS).contains(&g))
                .ok_or_else(|| self.err("concurrent_groups", "must be a positive integer"))?,
        };
        Ok(())
    }

    /// A rank field that must name one of the event's ranks.
    fn member_rank(&self, field: &str, id: Option<NodeId>, ranks: &[i64]) -> Result<Option<i64>> {
        match self.val(id) {
            None => Ok(None),
            Some(v) => {
                let r = lenient_int(v).ok_or_else(|| self.err(field, "must be an integer"))?;
                if !ranks.contains(&r) {
                    return Err(self.err(
                        field,
                        &format!("must be one of the event's ranks (got {r})"),
                    ));
                }
                Ok(Some(r))
            }
        }
    }

    /// `sender_rank`, `receiver_rank` and `message_sequence`.
    fn point_to_point(&self, f: &EventFields, sig: &mut Signature) -> Result<()> {
        sig.sender_rank = self.member_rank("sender_rank", f.sender_rank, &sig.ranks)?;
        sig.receiver_rank = self.member_rank("receiver_rank", f.receiver_rank, &sig.ranks)?;
        if let (Some(s), Some(r)) = (sig.sender_rank, sig.receiver_rank)
            && s == r
        {
            return Err(self.err("receiver_rank", "must differ from sender_rank"));
        }
        if sig.op == b"point_to_point" && (sig.sender_rank.is_none() || sig.receiver_rank.is_none())
        {
            return Err(self.err(
                "sender_rank",
                "and receiver_rank are required for point_to_point",
            ));
        }
        sig.message_sequence =
            match self.val(f.message_sequence) {
                None => None,
                Some(v) => Some(lenient_int(v).filter(|&s| s >= 0).ok_or_else(|| {
                    self.err("message_sequence", "must be a non-negative integer")
                })?),
            };
        Ok(())
    }

    fn time(&self, field: &str, id: Option<NodeId>) -> Result<f64> {
        match self.val(id) {
            None => Ok(f64::NAN),
            Some(v) => lenient_num(v)
                .filter(|&x| (0.0..=MAX_TIME_US).contains(&x))
                .ok_or_else(|| self.err(field, "must be a number between 0 and 1e12 microseconds")),
        }
    }

    /// The time fields, pressure and the overlap rules.
    fn times(&self, f: &EventFields, switches: &Switches) -> Result<EventTiming> {
        let timing = EventTiming {
            start_us: self.time("start_us", f.start_us)?,
            gap_us: self.time("gap_us", f.gap_us)?,
            arrival_skew_us: self.time("arrival_skew_us", f.arrival_skew_us)?,
            compute_before_us: self.time("compute_before_us", f.compute_before_us)?,
            compute_overlap_us: self.time("compute_overlap_us", f.compute_overlap_us)?,
            observed_exposed_us: self.time("observed_exposed_us", f.observed_exposed_us)?,
            device_us: self.time("device_us", f.device_us)?,
            step: match self.val(f.step) {
                None => -1,
                Some(v) => lenient_int(v)
                    .filter(|&s| (0..=MAX_STEP).contains(&s))
                    .ok_or_else(|| self.err("step", "must be a non-negative integer"))?,
            },
            compute_pressure: match self.val(f.compute_pressure) {
                None => f64::NAN,
                Some(v) => lenient_num(v)
                    .filter(|&x| (0.0..=MAX_PRESSURE).contains(&x))
                    .ok_or_else(|| self.err("compute_pressure", "must be a non-negative number"))?,
            },
            flags: switches.flags,
        };
        let overlap_unknown = switches.flags & flag::OVERLAP_UNKNOWN != 0;
        if overlap_unknown && !timing.compute_overlap_us.is_nan() {
            return Err(self.err(
                "compute_overlap_unknown",
                "cannot be true when compute_overlap_us is given",
            ));
        }
        if switches.overlap_unknown_given && !overlap_unknown && timing.compute_overlap_us.is_nan()
        {
            return Err(self.err(
                "compute_overlap_us",
                "is required when compute_overlap_unknown is false",
            ));
        }
        Ok(timing)
    }

    /// `rank_arrival_us` (an object keyed by rank or a list aligned with
    /// ranks) into `scratch.values`; `true` when every rank has a value, in
    /// which case the scalar skew must agree with it.
    fn arrivals(
        &self,
        map: Value<'_>,
        sig: &Signature,
        partial_arrival: bool,
        scalar_skew: f64,
        scratch: ArrivalScratch<'_>,
    ) -> Result<bool> {
        let rank_count = sig.rank_count();
        let values = scratch.values;
        values.clear();
        values.resize(rank_count, f64::NAN);
        let arrival = |v: Value<'_>| {
            lenient_num(v)
                .filter(|&x| (0.0..=MAX_TIME_US).contains(&x))
                .ok_or_else(|| {
                    self.err(
                        "rank_arrival_us",
                        "values must be numbers between 0 and 1e12 microseconds",
                    )
                })
        };
        if map.is_array() {
            if map.len() != Some(rank_count) {
                return Err(self.err(
                    "rank_arrival_us",
                    &format!("list must have one value per rank ({rank_count})"),
                ));
            }
            for (slot, v) in values.iter_mut().zip(map.elements()) {
                *slot = arrival(v)?;
            }
        } else if map.is_object() {
            let keys_err = || self.err("rank_arrival_us", "keys must be exactly the event's ranks");
            let members = map.len().unwrap_or(0);
            if members > rank_count || (members < rank_count && !partial_arrival) {
                return Err(keys_err());
            }
            if rank_count > 16 {
                scratch.rank_pos.clear();
                for (pos, &r) in sig.ranks.iter().enumerate() {
                    scratch.rank_pos.insert(r, pos as u32);
                }
            }
            for (key, v) in map.members() {
                let rank = decimal_key(key).ok_or_else(keys_err)?;
                let pos = if rank_count > 16 {
                    scratch.rank_pos.get(&rank).map(|&p| p as usize)
                } else {
                    sig.ranks.iter().position(|&r| r == rank)
                }
                .ok_or_else(keys_err)?;
                values[pos] = arrival(v)?;
            }
        } else {
            return Err(self.err(
                "rank_arrival_us",
                "must be an object keyed by rank or a list aligned with ranks",
            ));
        }
        if values.iter().any(|v| v.is_nan()) {
            return Ok(false);
        }
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !scalar_skew.is_nan() && ((hi - lo) - scalar_skew).abs() > 0.001 {
            return Err(self.err(
                "arrival_skew_us",
                &format!(
                    "must equal max-min of rank_arrival_us ({}) within 0.001",
                    crate::pyfloat::repr(hi - lo)
                ),
            ));
        }
        Ok(true)
    }
}

/// The first rank listed twice (by value order for long lists).
fn first_duplicate(ranks: &[i64]) -> Option<i64> {
    if ranks.len() <= 32 {
        (1..ranks.len())
            .find(|&a| ranks[..a].contains(&ranks[a]))
            .map(|a| ranks[a])
    } else {
        let mut sorted = ranks.to_vec();
        sorted.sort_unstable();
        sorted.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
    }
}

/// Node ids of the recognised fields of one event.
#[derive(Default)]
struct EventFields {
    op: Option<NodeId>,
    custom_op: Option<NodeId>,
    bytes: Option<NodeId>,
    ranks: Option<NodeId>,
    rank_count: Option<NodeId>,
    phase: Option<NodeId>,
    group: Option<NodeId>,
    start_us: Option<NodeId>,
    gap_us: Option<NodeId>,
    rank_arrival_us: Option<NodeId>,
    arrival_skew_us: Option<NodeId>,
    arrival_skew_unknown: Option<NodeId>,
    partial_rank_arrival: Option<NodeId>,
    compute_before_us: Option<NodeId>,
    compute_overlap_us: Option<NodeId>,
    compute_overlap_unknown: Option<NodeId>,
    compute_pressure: Option<NodeId>,
    observed_exposed_us: Option<NodeId>,
    device_us: Option<NodeId>,
    step: Option<NodeId>,
    concurrent_groups: Option<NodeId>,
    compute_fields_uncertain: Option<NodeId>,
    dtype: Option<NodeId>,
    root_rank: Option<NodeId>,
    reduction_op: Option<NodeId>,
    sender_rank: Option<NodeId>,
    receiver_rank: Option<NodeId>,
    message_sequence: Option<NodeId>,
    tag: Option<NodeId>,
    channel: Option<NodeId>,
    metadata: Option<NodeId>,
}

impl EventFields {
    /// The slot of recognised field `key`, if it is one.
    fn slot(&mut self, key: &[u8]) -> Option<&mut Option<NodeId>> {
        Some(match key {
            b"op" => &mut self.op,
            b"custom_op" => &mut self.custom_op,
            b"bytes" => &mut self.bytes,
            b"ranks" => &mut self.ranks,
            b"rank_count" => &mut self.rank_count,
            b"phase" => &mut self.phase,
            b"group" => &mut self.group,
            b"start_us" => &mut self.start_us,
            b"gap_us" => &mut self.gap_us,
            b"rank_arrival_us" => &mut self.rank_arrival_us,
            b"arrival_skew_us" => &mut self.arrival_skew_us,
            b"arrival_skew_unknown" => &mut self.arrival_skew_unknown,
            b"partial_rank_arrival" => &mut self.partial_rank_arrival,
            b"compute_before_us" => &mut self.compute_before_us,
            b"compute_overlap_us" => &mut self.compute_overlap_us,
            b"compute_overlap_unknown" => &mut self.compute_overlap_unknown,
            b"compute_pressure" => &mut self.compute_pressure,
            b"observed_exposed_us" => &mut self.observed_exposed_us,
            b"device_us" => &mut self.device_us,
            b"step" => &mut self.step,
            b"concurrent_groups" => &mut self.concurrent_groups,
            b"compute_fields_uncertain" => &mut self.compute_fields_uncertain,
            b"dtype" => &mut self.dtype,
            b"root_rank" => &mut self.root_rank,
            b"reduction_op" => &mut self.reduction_op,
            b"sender_rank" => &mut self.sender_rank,
            b"receiver_rank" => &mut self.receiver_rank,
            b"message_sequence" => &mut self.message_sequence,
            b"tag" => &mut self.tag,
            b"channel" => &mut self.channel,
            b"metadata" => &mut self.metadata,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<Trace> {
        load_bytes(s.as_bytes(), &LoadOptions::default())
    }

    #[test]
    fn a_profiler_trace_is_sent_to_the_importer() {
        let e = load_str(r#"{"schemaVersion":1,"traceEvents":[{"ph":"X","name":"aten::mm"}]}"#)
            .unwrap_err();
        assert!(
            e.message().contains("PyTorch profiler (Kineto) trace"),
            "{}",
            e.message()
        );
        assert!(e.message().contains("import-kineto"));
    }

    #[test]
    fn reads_events_into_columns() {
        let t = load_str(
            r#"{"format":"commcanary.trace.v1","workload":{"name":"w"},"events":[
            {"op":"all_reduce","bytes":"1024","ranks":4,"start_us":0,"rank_arrival_us":{"0":1,"1":2,"2":3,"3":4}},
            {"op":"all_reduce","bytes":1024.0,"ranks":[0,1,2,3],"start_us":5.5}]}"#,
        )
        .unwrap();
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.signatures.len(), 1);
        assert_eq!(t.events.start_us[1], 5.5);
        assert_eq!(&t.events.arrivals[..4], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            t.canonical_json(1),
            br#"{"bytes":1024.0,"op":"all_reduce","ranks":[0,1,2,3],"start_us":5.5}"#
        );
    }

    #[test]
    fn names_event_and_field() {
        let cases = [
            (
                r#"{"op":"all_reduce","bytes":-1,"ranks":2}"#,
                "trace event 1 field 'bytes' must be a positive integer",
            ),
            (
                r#"{"op":"reduce","bytes":1,"ranks":2}"#,
                "trace event 1 op 'reduce' is unsupported",
            ),
            (
                r#"{"op":"all_reduce","bytes":1,"ranks":[0,0]}"#,
                "field 'ranks' contains duplicate rank 0",
            ),
            (
                r#"{"op":"all_reduce","bytes":1,"ranks":[0,1],"rank_arrival_us":{"0":1,"2":1}}"#,
                "keys must be exactly",
            ),
            (
                r#"{"op":"all_reduce","bytes":true,"ranks":2}"#,
                "field 'bytes' must be a positive integer",
            ),
        ];
        for (event, want) in cases {
            let text = format!(
                r#"{{"format":"commcanary.trace.v1","events":[{{"op":"all_reduce","bytes":1,"ranks":1}},{event}]}}"#
            );
            let e = load_str(&text).unwrap_err();
            assert!(
                e.message().contains(want),
                "{} does not contain {want}",
                e.message()
            );
        }
    }

    #[test]
    fn refuses_wrong_format_and_shapes() {
        assert!(
            load_str(r#"{"format":"x","events":[]}"#)
                .unwrap_err()
                .message()
                .contains("'format'")
        );
        assert!(
            load_str(r#"[]"#)
                .unwrap_err()
                .message()
                .contains("must contain a JSON object")
        );
        assert!(load_str(r#"{"format":"commcanary.trace.v1"}"#).is_err());
        let big = format!(
            r#"{{"format":"commcanary.trace.v1","events":[{{"op":"all_reduce","bytes":1,"ranks":[{}]}}]}}"#,
            (0..70_000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(load_str(&big).unwrap_err().message().contains("'ranks'"));
    }

    #[test]
    fn parallel_and_sequential_reads_agree() {
        // Events whose metadata contains the boundary pattern inside strings
        // and nested arrays of objects, so some split guesses are wrong.
        let mut events = Vec::new();
        for i in 0..4000 {
            let meta = match i % 3 {
                0 => r#"{"note":"x},{y"}"#.to_owned(),
                1 => r#"{"list":[{"a":1},{"b":2}]}"#.to_owned(),
                _ => "{}".to_owned(),
            };
            events.push(format!(
                r#"{{"op":"all_reduce","bytes":{},"ranks":[0,1],"start_us":{}.5,"metadata":{meta}}}"#,
                1024 * (1 + i % 4),
                i
            ));
        }
        let text = format!(
            r#"{{"format":"commcanary.trace.v1","events":[{}]}}"#,
            events.join(", ")
        );
        let sequential = LoadOptions {
            parallel_min_bytes: usize::MAX,
            ..LoadOptions::default()
        };
        let want = load_bytes(text.as_bytes(), &sequential).unwrap();
        let order: Vec<u32> = (0..4000).collect();
        for cut in [0, 1000, 50_000, 200_000] {
            let parallel = LoadOptions {
                parallel_min_bytes: cut,
                ..LoadOptions::default()
            };
            let got = load_bytes(text.as_bytes(), &parallel).unwrap();
            assert_eq!(got.events.len(), 4000);
            assert_eq!(got.events.signature, want.events.signature);
            assert_eq!(got.signatures, want.signatures);
            assert_eq!(got.events.start_us, want.events.start_us);
            assert_eq!(
                got.projection_digest(&order),
                want.projection_digest(&order)
            );
        }
        // An error in the second half is still reported with its exact index.
        let bad = text.replacen(
            r#""bytes":4096,"ranks":[0,1],"start_us":3999.5"#,
            r#""bytes":-1,"ranks":[0,1],"start_us":3999.5"#,
            1,
        );
        let parallel = LoadOptions {
            parallel_min_bytes: 0,
            ..LoadOptions::default()
        };
        let err = load_bytes(bad.as_bytes(), &parallel).unwrap_err();
        assert!(
            err.message().starts_with("trace event 3999 field 'bytes'"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn projection_sorts_top_level_keys_around_events() {
        let t = load_str(r#"{"workload":{},"format":"commcanary.trace.v1","created_at":"x","events":[{"op":"send","bytes":1,"ranks":[0,1]}]}"#).unwrap();
        let mut out = Vec::new();
        t.write_projection(&[0], &mut |p| out.extend_from_slice(p));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"created_at":"x","events":[{"bytes":1,"op":"send","ranks":[0,1]}],"format":"commcanary.trace.v1","workload":{}}"#
        );
    }
}
