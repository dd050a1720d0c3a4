//! One rank's NCCL profile (`record_param_comms`) → `commcanary.trace.v1`,
//! the reference behaviour of a single-file import.
//!
//! A candidate collective is a `record_param_comms` event (`cat` absent or
//! `cpu_op`) whose `args` carry `Collective name`. In order:
//! 1. nested duplicates (a record fully inside an enclosing record on the
//!    same `(pid, tid)`; torch ≥ 2.4 emits frontend/backend pairs) are skipped
//!    and counted;
//! 2. control ops (`wait`, `barrier`, `init`, `broadcastuniquencclid`) are
//!    skipped and counted;
//! 3. with a process-group filter, other groups are left out;
//! 4. `nelems = max(In msg nelems, Out msg nelems)`; `≤ 0` is skipped as
//!    empty and counted;
//! 5. the collective name (lowercased, letters only) maps onto an op; an
//!    unmapped name is kept as a `custom_op`;
//! 6. `bytes = nelems × element size of dtype` (an unknown dtype is refused);
//! 7. group ranks come from `Process Group Ranks`, else `Global rank start`
//!    and `stride` with `Group size`, else `0..size` (marked assumed) when no
//!    rank list is given; a truncated or non-uniform list is refused rather
//!    than guessed;
//! 8. events are sorted by `(ts, index)` and `start_us` rebased to the first.
//!
//! Device time: GPU kernels (`cat: "kernel"`) whose `args["External id"]`
//! equals the collective's are its NCCL kernels; their summed duration is the
//! event's `device_us`, and it and their count go into the event's metadata
//! (`kineto_kernel_dur_us`, `kineto_kernel_count`). A collective without a linked kernel (a CPU trace,
//! a profile without CUDA activity) has neither field: absent, never zero.
//!
//! A single rank's trace claims no cross-rank arrival skew, compute overlap
//! or measured exposed latency; the workload notes say so, and none of those
//! fields is written.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::json::{CLOSE_BRACE, JsonLimits, OPEN_BRACE, Value, canon, parse};
use crate::pyfloat::round;
use crate::trace::{EventExtras, EventTiming, Signature, Trace, TraceBuilder};

/// Options of a single-rank import.
#[derive(Debug, Clone)]
pub struct KinetoOptions {
    /// `workload.name` of the imported trace.
    pub workload_name: String,
    /// The rank of a profile whose `distributedInfo` has none.
    pub rank: Option<i64>,
    /// Phase given to every event, if any.
    pub phase: Option<String>,
    /// Keep only this `Process Group Name` (empty name = `default`).
    pub process_group: Option<String>,
    /// JSON reader limits for the profile.
    pub json: JsonLimits,
}

impl Default for KinetoOptions {
    fn default() -> Self {
        Self {
            workload_name: "kineto-import".to_owned(),
            rank: None,
            phase: None,
            process_group: None,
            json: JsonLimits::default(),
        }
    }
}

/// What an import kept and skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KinetoCounts {
    /// Collective events imported.
    pub imported: u64,
    /// Control ops skipped.
    pub control: u64,
    /// Zero-sized messages skipped.
    pub empty: u64,
    /// Nested duplicate records skipped.
    pub nested: u64,
}

/// An imported trace and its counts.
#[derive(Debug, Clone)]
pub struct KinetoImport {
    /// The trace, ready to compile or write.
    pub trace: Trace,
    /// What was kept and skipped.
    pub counts: KinetoCounts,
}

const CONTROL_OPS: [&str; 4] = ["wait", "barrier", "init", "broadcastuniquencclid"];

/// A selected collective before it becomes an event.
struct Collective {
    index: usize,
    ts: f64,
    signature: Signature,
    metadata: Vec<u8>,
    /// Summed duration of its linked GPU kernels, `NaN` when none.
    device_us: f64,
}

/// Imports one rank's Kineto profile from its (decompressed) bytes.
///
/// # Errors
/// Not JSON, not a Chrome trace, an unknown dtype, unusable or truncated
/// group information, or no importable collective.
pub fn import_kineto(bytes: &[u8], options: &KinetoOptions) -> Result<KinetoImport> {
    // The events this import reads, picked by a streaming scan, so a huge
    // profile of other events never becomes a document in memory. A
    // document the scan refuses is parsed whole, for the reader's message.
    match relevant_events(bytes) {
        Ok((reduced, original)) => import_document(&reduced, Some(&original), options),
        Err(_) => import_document(bytes, None, options),
    }
}

/// A document of the header and the `traceEvents` an import reads
/// (`record_param_comms`, kernels, `c10d::` calls), with each kept event's
/// index in the original list.
fn relevant_events(bytes: &[u8]) -> Result<(Vec<u8>, Vec<usize>)> {
    use crate::import::stream::{RawEvent, ScanLimits, scan_bytes};
    let mut out = vec![OPEN_BRACE];
    out.extend_from_slice(b"\"traceEvents\":[");
    let mut original = Vec::new();
    let mut keep = |e: &RawEvent<'_>| -> Result<()> {
        let name = e.name.as_deref().unwrap_or("");
        let wanted = name == "record_param_comms"
            || name.starts_with("c10d::")
            || e.cat.as_deref() == Some("kernel");
        if !wanted {
            return Ok(());
        }
        if !original.is_empty() {
            out.push(b',');
        }
        original.push(e.index);
        out.push(OPEN_BRACE);
        let mut first = true;
        let mut key = |out: &mut Vec<u8>, k: &str| {
            if !first {
                out.push(b',');
            }
            first = false;
            canon::write_str(out, k);
            out.push(b':');
        };
        for (k, v) in [("name", &e.name), ("cat", &e.cat), ("ph", &e.ph)] {
            if let Some(v) = v {
                key(&mut out, k);
                canon::write_str(&mut out, v);
            }
        }
        for (k, v) in [("pid", &e.pid), ("tid", &e.tid), ("args", &e.args)] {
            if let Some(v) = v {
                key(&mut out, k);
                out.extend_from_slice(v);
            }
        }
        for (k, v) in [("ts", e.ts), ("dur", e.dur)] {
            if let Some(v) = v {
                key(&mut out, k);
                canon::write_f64(&mut out, v);
            }
        }
        out.push(CLOSE_BRACE);
        Ok(())
    };
    let scanned = scan_bytes(bytes, &ScanLimits::default(), &mut keep)?;
    out.push(b']');
    for (k, v) in &scanned.header {
        out.push(b',');
        canon::write_str(&mut out, k);
        out.push(b':');
        out.extend_from_slice(v);
    }
    out.push(CLOSE_BRACE);
    Ok((out, original))
}

/// The import of a parsed profile; `original` maps a position in its
/// `traceEvents` to the event's index in the profile as written.
fn import_document(
    bytes: &[u8],
    original: Option<&[usize]>,
    options: &KinetoOptions,
) -> Result<KinetoImport> {
    let doc = parse(bytes, options.json)?;
    let root = doc
        .root()
        .ok_or_else(|| Error::invalid("is not a Kineto trace"))?;
    let events = if root.is_array() {
        root
    } else {
        root.get("traceEvents")
            .filter(Value::is_array)
            .ok_or_else(|| {
                Error::invalid(
                    "is not a PyTorch profiler trace: field 'traceEvents' must be a list",
                )
            })?
    };
    let mut counts = KinetoCounts::default();
    let nested = nested_duplicates(events, &mut counts);
    let kernels = kernel_time(events);
    let mut selected = Vec::new();
    for (index, event) in events.elements().enumerate() {
        if nested.contains(&index) {
            continue;
        }
        let at = original.map_or(index, |o| o[index]);
        if let Some(c) = collective(at, event, options, &kernels, &mut counts)? {
            selected.push(c);
        }
    }
    if selected.is_empty() {
        let c10d = events
            .elements()
            .filter(|e| {
                e.get("name")
                    .and_then(|n| n.as_str())
                    .is_some_and(|n| n.starts_with("c10d::"))
            })
            .count();
        let hint = if c10d > 0 {
            format!(
                "; its {c10d} c10d:: (gloo) calls do not name their process group, so give every rank's trace to import them"
            )
        } else {
            "; traces from torch < 2.2 do not carry collective metadata".to_owned()
        };
        return Err(Error::invalid(format!(
            "no importable record_param_comms collective events found{hint}"
        )));
    }
    selected.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(a.index.cmp(&b.index)));
    counts.imported = selected.len() as u64;
    let header_rank = root
        .get("distributedInfo")
        .and_then(|i| integer(i.get("rank")));
    if let (Some(given), Some(found)) = (options.rank, header_rank)
        && given != found
    {
        return Err(Error::invalid(format!(
            "says distributedInfo.rank {found}, but rank {given} was given"
        )));
    }
    Ok(KinetoImport {
        trace: build(root, &selected, &counts, options),
        counts,
    })
}

/// `args` of a `record_param_comms` candidate, if `event` is one.
fn candidate_args<'a>(event: Value<'a>) -> Option<Value<'a>> {
    if event.get("name").and_then(|n| n.as_str()) != Some("record_param_comms") {
        return None;
    }
    match event.get("cat").map(|c| c.as_str()) {
        None | Some(Some("cpu_op")) => {}
        _ => return None,
    }
    event
        .get("args")
        .filter(|a| a.is_object() && a.get("Collective name").is_some())
}

/// Indices of records nested inside another record on the same thread.
fn nested_duplicates(events: Value<'_>, counts: &mut KinetoCounts) -> Vec<usize> {
    // (pid, tid, ts, -end, index) of every candidate, then one sweep per thread.
    let mut spans: Vec<(String, String, f64, f64, usize)> = Vec::new();
    for (index, event) in events.elements().enumerate() {
        if candidate_args(event).is_none() {
            continue;
        }
        let ts = event.get("ts").and_then(|v| v.as_number()).unwrap_or(0.0);
        let dur = event.get("dur").and_then(|v| v.as_number()).unwrap_or(0.0);
        let key = |k: &str| event.get(k).map(|v| canon::to_vec(v)).unwrap_or_default();
        let pid = String::from_utf8_lossy(&key("pid")).into_owned();
        let tid = String::from_utf8_lossy(&key("tid")).into_owned();
        spans.push((pid, tid, ts, -(ts + dur), index));
    }
    spans.sort_by(|a, b| {
        (&a.0, &a.1)
            .cmp(&(&b.0, &b.1))
            .then(a.2.total_cmp(&b.2))
            .then(a.3.total_cmp(&b.3))
            .then(a.4.cmp(&b.4))
    });
    let mut nested = Vec::new();
    let mut open: Option<(&str, &str, f64, f64)> = None;
    for (pid, tid, ts, neg_end, index) in &spans {
        let end = -neg_end;
        match open {
            Some((p, t, start, stop)) if p == pid && t == tid && *ts >= start && end <= stop => {
                nested.push(*index);
            }
            _ => open = Some((pid, tid, *ts, end)),
        }
    }
    counts.nested = nested.len() as u64;
    nested.sort_unstable();
    nested
}

/// Summed duration and count of the GPU kernels of each `External id`.
fn kernel_time(events: Value<'_>) -> FxHashMap<i64, (f64, u64)> {
    let mut time: FxHashMap<i64, (f64, u64)> = FxHashMap::default();
    for event in events.elements() {
        if event.get("cat").and_then(|c| c.as_str()) != Some("kernel") {
            continue;
        }
        let Some(id) = integer(event.get("args").and_then(|a| a.get("External id"))) else {
            continue;
        };
        let dur = event.get("dur").and_then(|v| v.as_number()).unwrap_or(0.0);
        let slot = time.entry(id).or_insert((0.0, 0));
        slot.0 += dur;
        slot.1 += 1;
    }
    time
}

/// The selected collective at `index`, or `None` when it is skipped.
fn collective(
    index: usize,
    event: Value<'_>,
    options: &KinetoOptions,
    kernels: &FxHashMap<i64, (f64, u64)>,
    counts: &mut KinetoCounts,
) -> Result<Option<Collective>> {
    let Some(args) = candidate_args(event) else {
        return Ok(None);
    };
    let raw_name = args
        .get("Collective name")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let normalized: String = raw_name
        .chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if CONTROL_OPS.contains(&normalized.as_str()) {
        counts.control += 1;
        return Ok(None);
    }
    let group = match args.get("Process Group Name").and_then(|v| v.as_str()) {
        None | Some("") => "default".to_owned(),
        Some(g) => g.to_owned(),
    };
    if options
        .process_group
        .as_ref()
        .is_some_and(|want| *want != group)
    {
        return Ok(None);
    }
    let nelems_in = integer(args.get("In msg nelems"));
    let nelems_out = integer(args.get("Out msg nelems"));
    let nelems = nelems_in.unwrap_or(0).max(nelems_out.unwrap_or(0));
    if nelems <= 0 {
        counts.empty += 1;
        return Ok(None);
    }
    let dtype = args.get("dtype").and_then(|v| v.as_str()).unwrap_or("");
    let element = element_bytes(dtype).ok_or_else(|| {
        Error::invalid(format!(
            "unknown kineto dtype '{dtype}'; cannot derive message bytes"
        ))
    })?;
    let (ranks, assumed) = group_ranks(args)?;
    let (op, custom_op) = map_op(&normalized);
    let ts = event.get("ts").and_then(|v| v.as_number()).unwrap_or(0.0);
    let dur = event.get("dur").and_then(|v| v.as_number()).unwrap_or(0.0);
    let mut signature = Signature {
        phase: options
            .phase
            .clone()
            .unwrap_or_else(|| "unknown".to_owned())
            .into_bytes(),
        op: op.into_bytes(),
        bytes: nelems.saturating_mul(element),
        ranks,
        group: group.into_bytes(),
        concurrent_groups: 1,
        custom_op,
        dtype: super::ops::dtype(dtype).map(|d| {
            let mut v = Vec::new();
            canon::write_str(&mut v, d.0);
            v
        }),
        ..Signature::default()
    };
    let endpoints = point_to_point(args, &mut signature);
    let device = integer(args.get("External id")).and_then(|id| kernels.get(&id).copied());
    let facts = Facts {
        name: raw_name,
        dtype,
        nelems: (nelems_in, nelems_out),
        dur,
        assumed,
        endpoints,
        device,
    };
    let metadata = metadata(args, &facts);
    Ok(Some(Collective {
        index,
        ts: ts.max(0.0),
        signature,
        metadata,
        device_us: device.map_or(f64::NAN, |d| round(d.0, 3)),
    }))
}

/// An integer field (integral floats and numeric strings count).
pub(super) fn integer(v: Option<Value<'_>>) -> Option<i64> {
    let v = v?;
    v.as_i64()
        .or_else(|| v.as_float().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// The op for a normalized collective name, and whether it is custom.
pub(super) fn map_op(normalized: &str) -> (String, bool) {
    let op = match normalized {
        "allreduce" | "allreducecoalesced" => "all_reduce",
        "allgather" | "allgatherbase" | "allgatherintotensorcoalesced" => "all_gather",
        "reducescatter" | "reducescatterbase" | "reducescattertensorcoalesced" => "reduce_scatter",
        "alltoall" | "alltoallv" | "alltoallbase" => "all_to_all",
        "broadcast" => "broadcast",
        "send" => "send",
        "recv" | "recvanysource" => "recv",
        other => return (other.to_owned(), true),
    };
    (op.to_owned(), false)
}

/// Bytes per element of a Kineto dtype name (case-insensitive).
pub(super) fn element_bytes(dtype: &str) -> Option<i64> {
    let d = dtype.to_ascii_lowercase();
    Some(match d.as_str() {
        "float" | "float32" | "int" | "int32" | "complexhalf" => 4,
        "double" | "float64" | "long" | "int64" | "complexfloat" => 8,
        "half" | "float16" | "bfloat16" | "short" | "int16" => 2,
        "byte" | "uint8" | "char" | "int8" | "bool" => 1,
        "complexdouble" => 16,
        _ if d.starts_with("float8") => 1,
        _ => return None,
    })
}

/// The group's ranks and whether they were assumed (`0..size`).
pub(super) fn group_ranks(args: Value<'_>) -> Result<(Vec<i64>, bool)> {
    let listed = args.get("Process Group Ranks");
    if let Some(ranks) = listed.and_then(|v| v.as_str()).and_then(parse_rank_list)
        && !ranks.is_empty()
    {
        return Ok((ranks, false));
    }
    let size = integer(args.get("Group size"))
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Error::invalid("kineto collective event carries no usable group information")
        })?;
    if size > 65_536 {
        return Err(Error::limit(format!(
            "violates resource constraints: kineto group size {size} is above 65536"
        )));
    }
    let start = integer(args.get("Global rank start"));
    let stride = integer(args.get("Global rank stride"));
    if let (Some(start), Some(stride)) = (start, stride)
        && start >= 0
        && stride > 0
    {
        return Ok(((0..size).map(|i| start + stride * i).collect(), false));
    }
    let absent = match listed {
        None => true,
        Some(v) => {
            v.is_null()
                || v.as_str()
                    .is_some_and(|s| s.trim().is_empty() || s.trim() == "[]")
        }
    };
    if absent {
        return Ok(((0..size).collect(), true));
    }
    Err(Error::invalid(
        "kineto process-group ranks are truncated or non-uniform and cannot be reconstructed from a global rank start/stride; refusing to fabricate group membership",
    ))
}

/// `"[0, 1, 2]"` → ranks; `None` for anything else (`...`, non-integers).
pub(super) fn parse_rank_list(text: &str) -> Option<Vec<i64>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.contains("...") {
        return None;
    }
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|r| r.trim().parse().ok()).collect()
}

/// Sender and receiver of a send/recv with both ends among the ranks.
fn point_to_point(args: Value<'_>, sig: &mut Signature) -> Option<(i64, i64)> {
    let src = integer(args.get("Src Rank"))?;
    let dst = integer(args.get("Dst Rank"))?;
    if (sig.op == b"send" || sig.op == b"recv")
        && src != dst
        && sig.ranks.contains(&src)
        && sig.ranks.contains(&dst)
    {
        sig.sender_rank = Some(src);
        sig.receiver_rank = Some(dst);
    }
    Some((src, dst))
}

/// What one collective's record says, for its metadata.
struct Facts<'a> {
    name: &'a str,
    dtype: &'a str,
    nelems: (Option<i64>, Option<i64>),
    dur: f64,
    assumed: bool,
    endpoints: Option<(i64, i64)>,
    /// Summed duration and count of its linked GPU kernels.
    device: Option<(f64, u64)>,
}

/// The event's `metadata` object, canonical JSON.
fn metadata(args: Value<'_>, f: &Facts<'_>) -> Vec<u8> {
    let mut members: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut put = |key: &'static str, write: &dyn Fn(&mut Vec<u8>)| {
        let mut v = Vec::new();
        write(&mut v);
        members.push((key, v));
    };
    put("kineto_collective_name", &|v| canon::write_str(v, f.name));
    put("kineto_dtype", &|v| canon::write_str(v, f.dtype));
    put("kineto_dur_us", &|v| canon::write_f64(v, f.dur));
    put("kineto_in_msg_nelems", &|v| {
        canon::write_i64(v, f.nelems.0.unwrap_or(0))
    });
    put("kineto_out_msg_nelems", &|v| {
        canon::write_i64(v, f.nelems.1.unwrap_or(0))
    });
    if let Some((src, dst)) = f.endpoints {
        put("kineto_src_rank", &|v| canon::write_i64(v, src));
        put("kineto_dst_rank", &|v| canon::write_i64(v, dst));
    }
    if let Some((dur, count)) = f.device {
        put("kineto_kernel_count", &|v| {
            canon::write_i64(v, count as i64)
        });
        put("kineto_kernel_dur_us", &|v| canon::write_f64(v, dur));
    }
    if f.assumed {
        put("kineto_ranks_assumed", &|v| v.extend_from_slice(b"true"));
    }
    for (arg, key) in RECORD_ARGS {
        let Some(value) = args.get(arg) else { continue };
        let empty = value.is_null()
            || value
                .as_str()
                .is_some_and(|t| t.trim().is_empty() || t.trim() == "[]");
        if !empty {
            put(key, &|v| canon::write_value(v, value));
        }
    }
    members.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::new();
    let mut o = canon::ObjectWriter::new(&mut out);
    for (key, value) in &members {
        o.raw(key, value);
    }
    o.end();
    out
}

/// Record arguments kept in an event's metadata as written (when present and
/// not empty): the group's identity and description, the caller's rank in
/// it, the cross-rank match key, all-to-all-v splits and asynchrony.
const RECORD_ARGS: [(&str, &str); 8] = [
    ("Seq", "kineto_seq"),
    ("Process Group Description", "kineto_pg_desc"),
    ("Process Group Ranks", "kineto_pg_ranks"),
    ("Rank", "kineto_group_rank"),
    ("Comms Id", "kineto_comms_id"),
    ("In split size", "kineto_in_split_size"),
    ("Out split size", "kineto_out_split_size"),
    ("Is asynchronized op", "kineto_async_op"),
];

/// The trace: rebased events plus the `system` and `workload` members.
fn build(
    root: Value<'_>,
    selected: &[Collective],
    counts: &KinetoCounts,
    options: &KinetoOptions,
) -> Trace {
    let first_ts = selected.iter().map(|c| c.ts).fold(f64::INFINITY, f64::min);
    let mut b = TraceBuilder::new();
    for c in selected {
        let id = format!("kineto-{:06}", c.index);
        let timing = EventTiming {
            start_us: round(c.ts - first_ts, 3),
            device_us: c.device_us,
            ..EventTiming::default()
        };
        let extras = EventExtras {
            id: Some(&id),
            metadata: Some(&c.metadata),
        };
        b.push_event(&c.signature, &timing, None, &extras);
    }
    b.set_member(b"system", system_json(root, options.rank));
    b.set_member(b"workload", workload_json(first_ts, counts, options));
    b.finish(Vec::new())
}

/// `system`: the source format and what `distributedInfo` says.
fn system_json(root: Value<'_>, given_rank: Option<i64>) -> Vec<u8> {
    let info = root.get("distributedInfo").filter(Value::is_object);
    let field = |k: &str| info.and_then(|i| i.get(k)).map(|v| canon::to_vec(v));
    let mut out = Vec::new();
    let mut o = canon::ObjectWriter::new(&mut out);
    if let Some(v) = field("backend") {
        o.raw("kineto_backend", &v);
    }
    if let Some(v) = root.get("baseTimeNanoseconds") {
        o.raw("kineto_base_time_ns", &canon::to_vec(v));
    }
    if let Some(v) = field("nccl_version") {
        o.raw("kineto_nccl_version", &v);
    }
    match (field("rank"), given_rank) {
        (Some(v), _) => o.raw("kineto_rank", &v),
        (None, Some(r)) => o.i64("kineto_rank", r),
        (None, None) => {}
    }
    if let Some(v) = field("world_size") {
        o.raw("kineto_world_size", &v);
    }
    o.str("source_format", "pytorch-kineto");
    o.end();
    out
}

/// `workload`: name, counts, the raw first timestamp and what is not claimed.
fn workload_json(first_ts: f64, c: &KinetoCounts, options: &KinetoOptions) -> Vec<u8> {
    let notes = format!(
        "Imported from a single rank's PyTorch Kineto profiler trace. Single-rank observational import: no cross-rank arrival skew, compute overlap, or measured exposed latency is claimed. Skipped {} control op(s), {} zero-sized message(s), and {} nested duplicate record(s).",
        c.control, c.empty, c.nested
    );
    let mut out = Vec::new();
    let mut o = canon::ObjectWriter::new(&mut out);
    o.str("import_source", "pytorch-kineto");
    o.i64("imported_events", c.imported as i64);
    o.f64("kineto_trace_start_us", first_ts);
    o.str("name", &options.workload_name);
    o.str("notes", &notes);
    o.i64("skipped_control_events", c.control as i64);
    o.i64("skipped_empty_events", c.empty as i64);
    o.i64("skipped_nested_events", c.nested as i64);
    o.end();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{LoadOptions, load_bytes};

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../tests/conformance/inputs/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(path).unwrap()
    }

    #[test]
    fn imports_the_clean_profile() {
        let options = KinetoOptions {
            phase: Some("decode".into()),
            ..KinetoOptions::default()
        };
        let imported = import_kineto(&fixture("kineto_clean.json"), &options).unwrap();
        assert_eq!(imported.counts.imported, 4);
        assert_eq!(imported.counts.control, 1);
        let t = &imported.trace;
        let ops: Vec<(String, bool, i64)> = t
            .events
            .signature
            .iter()
            .map(|&s| {
                let sig = &t.signatures[s as usize];
                (
                    String::from_utf8_lossy(&sig.op).into_owned(),
                    sig.custom_op,
                    sig.bytes,
                )
            })
            .collect();
        assert_eq!(
            ops,
            [
                ("all_reduce".to_owned(), false, 16_777_216),
                ("all_gather".to_owned(), false, 4_194_304),
                ("reduce".to_owned(), true, 8_388_608),
                ("all_reduce".to_owned(), false, 16_777_216),
            ]
        );
        assert_eq!(t.events.start_us[0], 0.0);
        // What the builder wrote reads back as a v1 trace with the same columns.
        let order: Vec<u32> = (0..t.events.len() as u32).collect();
        let mut text = Vec::new();
        t.write_projection(&order, &mut |p| text.extend_from_slice(p));
        let reread = load_bytes(&text, &LoadOptions::default()).unwrap();
        assert_eq!(reread.signatures, t.signatures);
        assert_eq!(
            reread.projection_digest(&order),
            t.projection_digest(&order)
        );
    }

    #[test]
    fn refuses_truncated_rank_lists_and_bad_input() {
        let e = import_kineto(&fixture("kineto_truncated.json"), &KinetoOptions::default())
            .unwrap_err();
        assert!(
            e.message()
                .contains("refusing to fabricate group membership")
        );
        let e = import_kineto(
            br#"{"format":"commcanary.trace.v1","events":[]}"#,
            &KinetoOptions::default(),
        )
        .unwrap_err();
        assert!(e.message().contains("'traceEvents'"));
        let e = import_kineto(br#"{"traceEvents":[]}"#, &KinetoOptions::default()).unwrap_err();
        assert!(e.message().starts_with("no importable record_param_comms"));
    }

    #[test]
    fn rank_lists_and_dtypes() {
        assert_eq!(parse_rank_list("[0, 2, 4]"), Some(vec![0, 2, 4]));
        assert_eq!(parse_rank_list("[0, 1, ...]"), None);
        assert_eq!(element_bytes("BFloat16"), Some(2));
        assert_eq!(element_bytes("Float8_e4m3fn"), Some(1));
        assert_eq!(element_bytes("quaternion"), None);
        assert_eq!(map_op("allgatherbase"), ("all_gather".to_owned(), false));
        assert_eq!(map_op("gather"), ("gather".to_owned(), true));
    }
}
