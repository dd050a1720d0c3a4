//! One rank's NCCL profile (`record_param_comms`) → `commcanary.trace.v1`,
//! the reference behaviour of a single-file import.
//!
//! The file is read by the job importer's streaming pass
//! ([`super::scan::FileScan`], in its single-rank mode) as a one-rank
//! profile, so a record is classified by the same rules as in a job: which
//! names are control ops, which records are nested duplicates, how a size,
//! an element type and a group are read, and which GPU kernels a record
//! launched. What the single-file import adds is what it writes:
//! 1. only `record_param_comms` records (`cat` absent or `cpu_op`) whose
//!    `args` carry `Collective name` become events; `c10d::` calls are
//!    counted only, to say why a gloo trace needs every rank's file;
//! 2. nested duplicates (a record fully inside an enclosing record on the
//!    same `(pid, tid)`; torch ≥ 2.4 emits frontend/backend pairs) and
//!    control ops (`wait`, `barrier`, `init`, …) are skipped and counted;
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
//! Device time: the NCCL kernels (`cat: "kernel"`) whose `args["External id"]`
//! equals the record's are its kernels; their summed duration is the
//! event's `device_us`, and it and their count go into the event's metadata
//! (`kineto_kernel_dur_us`, `kineto_kernel_count`). A collective without a linked kernel (a CPU trace,
//! a profile without CUDA activity) has neither field: absent, never zero.
//!
//! A single rank's trace claims no cross-rank arrival skew, compute overlap
//! or measured exposed latency; the workload notes say so, and none of those
//! fields is written.

use rustc_hash::FxHashMap;

use super::ops::Kind;
use super::profile::{Call, RankProfile};
use super::scan::FileScan;
use crate::error::{Error, Result};
use crate::import::stream::{ScanLimits, scan_bytes};
use crate::json::{JsonLimits, Value, canon, parse};
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

/// What a single-rank scan keeps besides the profile: the process-group
/// filter, what is written of each record, and how many `c10d::` calls it
/// passed over.
#[derive(Debug, Default)]
pub(super) struct SingleScan {
    /// Keep only this `Process Group Name`.
    pub process_group: Option<String>,
    /// One per `record_param_comms` call kept by the scan.
    pub records: Vec<RecordFacts>,
    /// `c10d::` calls seen (and not read).
    pub c10d_calls: u64,
}

impl SingleScan {
    /// Whether the filter leaves out a record of group `name`.
    pub(super) fn leaves_out(&self, name: &str) -> bool {
        self.process_group
            .as_deref()
            .is_some_and(|want| want != name)
    }
}

/// What a single-rank import writes of one record besides its call: the
/// record's own group ranks, its endpoints and its metadata members (all but
/// the kernel ones, known once the file is read).
#[derive(Debug, Clone)]
pub(super) struct RecordFacts {
    index: u64,
    ts: f64,
    ranks: Vec<i64>,
    endpoints: Option<(i64, i64)>,
    metadata: Vec<(&'static str, Vec<u8>)>,
}

impl RecordFacts {
    /// The facts of the record at `index` with `args`, whose group's ranks
    /// are `ranks` (`assumed`: taken as `0..size`).
    pub(super) fn read(
        args: Value<'_>,
        index: u64,
        ts: f64,
        dur: f64,
        ranks: &[i64],
        assumed: bool,
    ) -> RecordFacts {
        let src = integer(args.get("Src Rank"));
        let dst = integer(args.get("Dst Rank"));
        let endpoints = src.zip(dst);
        let mut members: Vec<(&'static str, Vec<u8>)> = Vec::new();
        let mut put = |key: &'static str, write: &dyn Fn(&mut Vec<u8>)| {
            let mut v = Vec::new();
            write(&mut v);
            members.push((key, v));
        };
        let text = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or("");
        put("kineto_collective_name", &|v| {
            canon::write_str(v, text("Collective name"));
        });
        put("kineto_dtype", &|v| canon::write_str(v, text("dtype")));
        put("kineto_dur_us", &|v| canon::write_f64(v, dur));
        for (arg, key) in [
            ("In msg nelems", "kineto_in_msg_nelems"),
            ("Out msg nelems", "kineto_out_msg_nelems"),
        ] {
            let n = integer(args.get(arg)).unwrap_or(0);
            put(key, &|v| canon::write_i64(v, n));
        }
        if let Some((src, dst)) = endpoints {
            put("kineto_src_rank", &|v| canon::write_i64(v, src));
            put("kineto_dst_rank", &|v| canon::write_i64(v, dst));
        }
        if assumed {
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
        RecordFacts {
            index,
            ts,
            ranks: ranks.to_vec(),
            endpoints,
            metadata: members,
        }
    }
}

/// Imports one rank's Kineto profile from its (decompressed) bytes.
///
/// # Errors
/// Not JSON, not a Chrome trace, an unknown dtype, unusable or truncated
/// group information, or no importable collective.
pub fn import_kineto(bytes: &[u8], options: &KinetoOptions) -> Result<KinetoImport> {
    let mut scan = FileScan::single_rank(
        options.json,
        SingleScan {
            process_group: options.process_group.clone(),
            ..SingleScan::default()
        },
    );
    let limits = ScanLimits {
        max_total_bytes: bytes.len() as u64,
        ..ScanLimits::default()
    };
    let scanned = scan_bytes(bytes, &limits, &mut |e| scan.event(e))?;
    let header = scan.header(&scanned.header)?;
    let header_rank = header.rank;
    let single = scan.single.take().unwrap_or_default();
    let mut profile = RankProfile {
        groups: header.groups,
        ..RankProfile::default()
    };
    scan.finish_into(&mut profile)?;
    let facts: FxHashMap<u64, &RecordFacts> = single.records.iter().map(|r| (r.index, r)).collect();
    let mut selected: Vec<Collective> = profile
        .calls
        .iter()
        .filter_map(|call| {
            let record = facts.get(&call.index)?;
            Some(collective(call, record, &profile, options))
        })
        .collect();
    if selected.is_empty() {
        let hint = if single.c10d_calls > 0 {
            format!(
                "; its {} c10d:: (gloo) calls do not name their process group, so give every rank's trace to import them",
                single.c10d_calls
            )
        } else {
            "; traces from torch < 2.2 do not carry collective metadata".to_owned()
        };
        return Err(Error::invalid(format!(
            "no importable record_param_comms collective events found{hint}"
        )));
    }
    if let (Some(given), Some(found)) = (options.rank, header_rank)
        && given != found
    {
        return Err(Error::invalid(format!(
            "says distributedInfo.rank {found}, but rank {given} was given"
        )));
    }
    selected.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(a.index.cmp(&b.index)));
    let counts = KinetoCounts {
        imported: selected.len() as u64,
        control: profile.counts.control,
        empty: profile.counts.empty,
        nested: profile.counts.nested,
    };
    Ok(KinetoImport {
        trace: build(&scanned.header, &selected, &counts, options)?,
        counts,
    })
}

/// A selected collective before it becomes an event.
struct Collective {
    index: u64,
    ts: f64,
    signature: Signature,
    metadata: Vec<u8>,
    /// Summed duration of its linked GPU kernels, `NaN` when none.
    device_us: f64,
}

/// The event of one call and its record's facts.
fn collective(
    call: &Call,
    record: &RecordFacts,
    profile: &RankProfile,
    options: &KinetoOptions,
) -> Collective {
    let (names, groups) = (&profile.names, &profile.groups);
    let (op, custom_op) = match call.kind {
        Kind::Other => (names[call.name as usize].as_str(), true),
        kind => kind.trace_op(),
    };
    let mut signature = Signature {
        phase: options
            .phase
            .clone()
            .unwrap_or_else(|| "unknown".to_owned())
            .into_bytes(),
        op: op.as_bytes().to_vec(),
        bytes: call.bytes,
        ranks: record.ranks.clone(),
        group: groups
            .get(usize::try_from(call.group).unwrap_or(usize::MAX))
            .map(|g| g.name.clone().into_bytes())
            .unwrap_or_else(|| b"default".to_vec()),
        concurrent_groups: 1,
        custom_op,
        dtype: {
            let mut v = Vec::new();
            canon::write_str(&mut v, call.dtype);
            Some(v)
        },
        ..Signature::default()
    };
    if let Some((src, dst)) = record.endpoints
        && call.kind.is_p2p()
        && src != dst
        && record.ranks.contains(&src)
        && record.ranks.contains(&dst)
    {
        signature.sender_rank = Some(src);
        signature.receiver_rank = Some(dst);
    }
    let mut members = record.metadata.clone();
    if call.kernels > 0 {
        let count = i64::from(call.kernels);
        let dur = call.device_us;
        let mut v = Vec::new();
        canon::write_i64(&mut v, count);
        members.push(("kineto_kernel_count", v));
        let mut v = Vec::new();
        canon::write_f64(&mut v, dur);
        members.push(("kineto_kernel_dur_us", v));
    }
    members.sort_by(|a, b| a.0.cmp(b.0));
    let mut metadata = Vec::new();
    let mut o = canon::ObjectWriter::new(&mut metadata);
    for (key, value) in &members {
        o.raw(key, value);
    }
    o.end();
    Collective {
        index: record.index,
        ts: record.ts.max(0.0),
        signature,
        metadata,
        device_us: if call.kernels > 0 {
            round(call.device_us, 3)
        } else {
            f64::NAN
        },
    }
}

/// An integer field (integral floats and numeric strings count).
pub(super) fn integer(v: Option<Value<'_>>) -> Option<i64> {
    let v = v?;
    v.as_i64()
        .or_else(|| v.as_float().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
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
    header: &[(String, Vec<u8>)],
    selected: &[Collective],
    counts: &KinetoCounts,
    options: &KinetoOptions,
) -> Result<Trace> {
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
    b.set_member(b"system", system_json(header, options.rank)?);
    b.set_member(b"workload", workload_json(first_ts, counts, options));
    Ok(b.finish(Vec::new()))
}

/// `system`: the source format and what `distributedInfo` says, from the
/// header members `(key, JSON text)`.
fn system_json(header: &[(String, Vec<u8>)], given_rank: Option<i64>) -> Result<Vec<u8>> {
    let member = |key: &str| -> Result<Option<crate::json::Doc>> {
        header
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, text)| parse(text, JsonLimits::default()))
            .transpose()
    };
    let info_doc = member("distributedInfo")?;
    let info = info_doc
        .as_ref()
        .and_then(|d| d.root())
        .filter(Value::is_object);
    let field = |k: &str| info.and_then(|i| i.get(k)).map(|v| canon::to_vec(v));
    let base_doc = member("baseTimeNanoseconds")?;
    let mut out = Vec::new();
    let mut o = canon::ObjectWriter::new(&mut out);
    if let Some(v) = field("backend") {
        o.raw("kineto_backend", &v);
    }
    if let Some(v) = base_doc.as_ref().and_then(|d| d.root()) {
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
    Ok(out)
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

    /// A profile of NCCL records: a barrier and an all_reduce, each
    /// recorded twice (frontend around backend), a monitored barrier, an
    /// all_gather of another group and an empty all_reduce.
    fn paired_records() -> Vec<u8> {
        let record = |ts: f64, dur: f64, name: &str, group: &str, nelems: i64, id: i64| {
            format!(
                r#"{{"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":2,"ts":{ts},"dur":{dur},"args":{{"Collective name":"{name}","dtype":"Float","In msg nelems":{nelems},"Out msg nelems":{nelems},"Group size":2,"Process Group Name":"{group}","Process Group Ranks":"[0, 1]","External id":{id}}}}}"#
            )
        };
        let events = [
            record(10.0, 20.0, "barrier", "0", 1, 1),
            record(11.0, 18.0, "barrier", "0", 1, 2),
            record(40.0, 20.0, "allreduce", "0", 256, 3),
            record(41.0, 18.0, "allreduce", "0", 256, 4),
            r#"{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_RING_LL_Sum_float","pid":0,"tid":7,"ts":45.0,"dur":12.5,"args":{"External id":3}}"#.to_owned(),
            record(70.0, 5.0, "monitoredBarrier", "0", 1, 5),
            record(80.0, 5.0, "allgather", "1", 64, 6),
            record(90.0, 5.0, "allreduce", "0", 0, 7),
        ];
        format!(
            r#"{{"distributedInfo":{{"rank":0,"world_size":2,"backend":"nccl"}},"traceEvents":[{}]}}"#,
            events.join(",")
        )
        .into_bytes()
    }

    #[test]
    fn records_are_classified_as_the_job_reader_classifies_them() {
        use crate::import::kineto::profile::{Source, read_file};
        use crate::import::stream::ScanLimits;
        let bytes = paired_records();
        let single = import_kineto(&bytes, &KinetoOptions::default()).unwrap();
        // One barrier, not two; the monitored barrier is a control op too.
        assert_eq!(
            single.counts,
            KinetoCounts {
                imported: 2,
                control: 2,
                empty: 1,
                nested: 2,
            }
        );
        let profile = read_file(Source::Bytes(&bytes), &ScanLimits::default(), None).unwrap();
        assert_eq!(profile.counts.control, single.counts.control);
        assert_eq!(profile.counts.nested, single.counts.nested);
        assert_eq!(profile.counts.empty, single.counts.empty);
        assert_eq!(profile.barriers, [10.0]);
        assert_eq!(profile.calls.len() as u64, single.counts.imported);
        // The outer all_reduce record owns the kernel.
        assert_eq!(single.trace.events.device_us[0], 12.5);
        // A filter leaves the other group out before sizes are read.
        let filtered = import_kineto(
            &bytes,
            &KinetoOptions {
                process_group: Some("1".into()),
                ..KinetoOptions::default()
            },
        )
        .unwrap();
        assert_eq!((filtered.counts.imported, filtered.counts.empty), (1, 0));
        assert_eq!(filtered.counts.nested, 2);
    }

    #[test]
    fn rank_lists() {
        assert_eq!(parse_rank_list("[0, 2, 4]"), Some(vec![0, 2, 4]));
        assert_eq!(parse_rank_list("[0, 1, ...]"), None);
    }
}
