//! A canary as PARAM comms-replay ("basic") JSON.
//!
//! Two shapes, one walk over the canary's occurrences in execution order
//! ([`crate::canary::expand::for_each_occurrence`], so every record's gap
//! residual lands exactly where replay puts it; `startTime_ns` is the running
//! sum of `round(gap_us · 1000)`):
//!
//! * [`export_basic`] — the reference tool's single list: one `init` entry
//!   per group (in order of first use), then one entry per occurrence
//!   (`send`+`recv` for a transfer), with `req`, `startTime_ns`,
//!   `world_size`, `global_ranks`, `pg_id`, element counts, `dtype` and
//!   `markers`; a broadcast carries `root`, a reduction `reduce_op`.
//! * [`export_per_rank`] — what PARAM's replayer (one process per rank)
//!   runs: per rank, an `init` entry for every group, then the entries that
//!   rank takes part in, with PARAM's op and dtype names (`all_gather_base`,
//!   `reduce_scatter_base`, `all_to_allv` with equal splits, `float`,
//!   `long`, …) and `src_rank`/`dst_rank`/`use_batch` on send and recv.
//!
//! Sizes are element counts: `bytes` must be a whole number of elements of
//! the event's dtype (the `--dtype` override, else the event's own, else
//! float32); an all_gather's input and a reduce_scatter's output are
//! `n / W`. Ops with no PARAM equivalent are refused, or skipped and counted.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::canary::Program;
use crate::canary::expand::for_each_occurrence;
use crate::error::{Error, Result};
use crate::json::canon::{self, ObjectWriter};
use crate::trace::Signature;

/// Largest number of entries one export writes.
pub const MAX_ENTRIES: u64 = 20_000_000;

/// Options of an export.
#[derive(Debug, Clone, Default)]
pub struct ParamOptions {
    /// Element type for every event (canonical or PARAM spelling).
    pub dtype: Option<String>,
    /// Drop events with no PARAM equivalent instead of refusing them.
    pub skip_unsupported: bool,
    /// Single list: a GEMM fill entry before each collective, one GEMM per
    /// this many µs of its readiness gap.
    pub compute_fill_us_per_gemm: Option<f64>,
    /// Single list: the fill's GEMM dimension (1..=16384; default 1024).
    pub compute_fill_gemm_dim: Option<i64>,
    /// Single list (with a fill): issue each collective asynchronously and
    /// wait for it after the next fill, so compute overlaps it.
    pub overlap_structure: bool,
}

impl ParamOptions {
    /// The fill settings, checked: `(µs per GEMM, dimension)`.
    fn fill(&self) -> Result<Option<(f64, i64)>> {
        let dim = self.compute_fill_gemm_dim.unwrap_or(1024);
        if !(1..=16_384).contains(&dim) {
            return Err(Error::option(
                "compute_fill_gemm_dim",
                "must be between 1 and 16384",
            ));
        }
        match self.compute_fill_us_per_gemm {
            None if self.overlap_structure => Err(Error::option(
                "overlap_structure",
                "requires compute_fill_us_per_gemm",
            )),
            None if self.compute_fill_gemm_dim.is_some() => Err(Error::option(
                "compute_fill_gemm_dim",
                "requires compute_fill_us_per_gemm",
            )),
            None => Ok(None),
            Some(f) if f.is_finite() && f > 0.0 => Ok(Some((f, dim))),
            Some(_) => Err(Error::option(
                "compute_fill_us_per_gemm",
                "must be a positive number of microseconds",
            )),
        }
    }
}

/// An export's entries (JSON arrays) and counts.
#[derive(Debug, Clone, Default)]
pub struct ParamExport {
    /// `(rank, JSON array, entries)`; one item, rank −1, for the basic list.
    pub files: Vec<(i64, Vec<u8>, u64)>,
    /// Entries written, over all files.
    pub entries: u64,
    /// Occurrences skipped as unsupported.
    pub skipped: u64,
}

/// `(canonical name, element bytes, PARAM name)` of the dtypes PARAM reads.
const DTYPES: [(&str, i64, &str); 10] = [
    ("float32", 4, "float"),
    ("float64", 8, "double"),
    ("float16", 2, "half"),
    ("bfloat16", 2, "bfloat16"),
    ("int64", 8, "long"),
    ("int32", 4, "int"),
    ("int16", 2, "short"),
    ("int8", 1, "char"),
    ("uint8", 1, "byte"),
    ("bool", 1, "bool"),
];

fn dtype_of(name: &str) -> Option<(&'static str, i64, &'static str)> {
    let lower = name.trim().to_ascii_lowercase();
    let canonical = match lower.as_str() {
        "float" => "float32",
        "double" => "float64",
        "half" => "float16",
        "long" => "int64",
        "int" => "int32",
        "short" => "int16",
        "char" => "int8",
        "byte" => "uint8",
        other => other,
    };
    DTYPES.iter().copied().find(|d| d.0 == canonical)
}

/// What one signature exports as.
#[derive(Debug, Clone)]
struct Shape {
    kind: Option<&'static str>,
    param: &'static str,
    in_elems: i64,
    out_elems: i64,
    dtype: (&'static str, i64, &'static str),
    group: usize,
    root: Option<i64>,
    reduce_op: Option<Vec<u8>>,
    ends: Option<(i64, i64)>,
    marker: String,
    /// The marker of the wait that completes it (overlap structure).
    wait_marker: String,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A process group: name and global ranks.
type Group = (String, Vec<i64>);

/// The groups of a program (first-use order) and each signature's shape.
fn shapes(program: &Program, options: &ParamOptions) -> Result<(Vec<Group>, Vec<Shape>)> {
    let forced = match &options.dtype {
        None => None,
        Some(d) => Some(dtype_of(d).ok_or_else(|| unsupported_dtype(d))?),
    };
    let mut groups: Vec<Group> = Vec::new();
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    let mut out = Vec::with_capacity(program.signatures.len());
    let ranks = group_ranks(program)?;
    for sig in &program.signatures {
        let name = text(&sig.group);
        let g = *index.entry(name.clone()).or_insert_with(|| {
            groups.push((name.clone(), ranks[&name].clone()));
            groups.len() - 1
        });
        out.push(shape(sig, g, forced)?);
    }
    Ok((groups, out))
}

/// Each group's ranks: those of its collectives (which must agree), else
/// the union of its transfers' endpoints (a transfer's `ranks` are its two
/// ends, a subset of its group).
fn group_ranks(program: &Program) -> Result<FxHashMap<String, Vec<i64>>> {
    let mut ranks: FxHashMap<String, Vec<i64>> = FxHashMap::default();
    let is_p2p = |sig: &Signature| sig.sender_rank.is_some() && sig.receiver_rank.is_some();
    for sig in program.signatures.iter().filter(|s| !is_p2p(s)) {
        let name = text(&sig.group);
        match ranks.get(&name) {
            Some(known) if *known != sig.ranks => {
                return Err(Error::invalid(format!(
                    "group '{name}' appears with ranks {known:?} and {:?}",
                    sig.ranks
                )));
            }
            Some(_) => {}
            None => {
                ranks.insert(name, sig.ranks.clone());
            }
        }
    }
    let mut endpoints: FxHashMap<String, Vec<i64>> = FxHashMap::default();
    for sig in program.signatures.iter().filter(|s| is_p2p(s)) {
        let name = text(&sig.group);
        if let Some(known) = ranks.get(&name) {
            if sig.ranks.iter().any(|r| !known.contains(r)) {
                return Err(Error::invalid(format!(
                    "a transfer on group '{name}' has ranks {:?} outside the group's {known:?}",
                    sig.ranks
                )));
            }
            continue;
        }
        endpoints
            .entry(name)
            .or_default()
            .extend(sig.ranks.iter().copied());
    }
    for (name, mut list) in endpoints {
        list.sort_unstable();
        list.dedup();
        ranks.insert(name, list);
    }
    Ok(ranks)
}

fn unsupported_dtype(d: &str) -> Error {
    let names: Vec<&str> = DTYPES.iter().map(|d| d.0).collect();
    Error::invalid(format!(
        "unsupported PARAM export dtype '{d}'; supported: {}",
        names.join(", ")
    ))
}

fn shape(
    sig: &Signature,
    group: usize,
    forced: Option<(&'static str, i64, &'static str)>,
) -> Result<Shape> {
    let op = text(&sig.op);
    let event_dtype = sig
        .dtype
        .as_deref()
        .map(|d| text(d).trim_matches('"').to_owned());
    let dtype = match (forced, &event_dtype) {
        (Some(d), _) => d,
        (None, Some(d)) => dtype_of(d).ok_or_else(|| {
            Error::invalid(format!(
                "event dtype '{d}' of op '{op}' has no PARAM equivalent"
            ))
        })?,
        (None, None) => DTYPES[0],
    };
    let w = sig.ranks.len() as i64;
    if sig.bytes % dtype.1 != 0 {
        return Err(Error::invalid(format!(
            "{} bytes of op '{op}' on group '{}' are not a whole number of {} elements",
            sig.bytes,
            text(&sig.group),
            dtype.0
        )));
    }
    let n = sig.bytes / dtype.1;
    let divided = |what: &str| -> Result<i64> {
        if n % w == 0 {
            Ok(n / w)
        } else {
            Err(Error::invalid(format!(
                "{what} of {n} elements does not divide by its {w} ranks"
            )))
        }
    };
    let (kind, param, in_elems, out_elems) = match (op.as_str(), sig.custom_op) {
        ("all_reduce", false) => (Some("all_reduce"), "all_reduce", n, n),
        ("all_gather", false) => (
            Some("all_gather"),
            "all_gather_base",
            divided("all_gather")?,
            n,
        ),
        ("reduce_scatter", false) => (
            Some("reduce_scatter"),
            "reduce_scatter_base",
            n,
            divided("reduce_scatter")?,
        ),
        ("all_to_all", false) => (Some("all_to_all"), "all_to_allv", n, n),
        ("broadcast", false) => (Some("broadcast"), "broadcast", n, n),
        ("send" | "recv" | "point_to_point", false)
            if sig.sender_rank.is_some() && sig.receiver_rank.is_some() =>
        {
            (Some("p2p"), "send", n, n)
        }
        _ => (None, "", n, n),
    };
    let root = sig
        .root_rank
        .as_deref()
        .and_then(|r| text(r).trim().parse::<i64>().ok());
    // A reduce is a custom op of the trace format but a PARAM op: exported
    // when its root is known.
    let (kind, param) = match (kind, op.as_str(), root) {
        (None, "reduce", Some(_)) => (Some("reduce"), "reduce"),
        _ => (kind, param),
    };
    Ok(Shape {
        kind,
        param,
        in_elems,
        out_elems,
        dtype,
        group,
        root,
        reduce_op: sig.reduction_op.clone(),
        ends: sig.sender_rank.zip(sig.receiver_rank),
        marker: format!("commcanary:{}:{op}", text(&sig.group)),
        wait_marker: format!("commcanary:{}:{op}", text(&sig.group)),
    })
}

fn unsupported(op: &str) -> Error {
    Error::invalid(format!(
        "op '{op}' has no PARAM comms-replay equivalent; re-run with skip_unsupported to drop such events"
    ))
}

/// Common fields of one communication entry.
struct Entry<'a> {
    comms: &'a str,
    req: u64,
    start_ns: i64,
    shape: &'a Shape,
    group: &'a Group,
    pg_id: usize,
    dtype_name: &'a str,
    extra_marker: Option<&'a str>,
}

/// One entry as canonical JSON (keys in order); `per_rank` adds the
/// all-to-all-v splits, `ends` the p2p fields.
fn write_entry(out: &mut Vec<u8>, e: &Entry<'_>, per_rank: bool, ends: Option<(i64, i64)>) {
    let (w, ranks) = (e.group.1.len() as i64, &e.group.1);
    let splits = per_rank && e.shape.param == "all_to_allv";
    let mut o = ObjectWriter::new(out);
    o.str("comms", e.comms);
    if let Some((_, dst)) = ends {
        o.i64("dst_rank", dst);
    }
    o.str("dtype", e.dtype_name);
    canon::write_i64_array(o.key("global_ranks"), ranks);
    o.i64("in_msg_size", e.shape.in_elems);
    if splits {
        canon::write_i64_array(
            o.key("in_split"),
            &vec![e.shape.in_elems / w.max(1); w as usize],
        );
    }
    let marker = o.key("markers");
    marker.push(b'[');
    canon::write_str(marker, &e.shape.marker);
    if let Some(m) = e.extra_marker {
        marker.push(b',');
        canon::write_str(marker, m);
    }
    marker.push(b']');
    o.i64("out_msg_size", e.shape.out_elems);
    if splits {
        canon::write_i64_array(
            o.key("out_split"),
            &vec![e.shape.out_elems / w.max(1); w as usize],
        );
    }
    o.i64("pg_id", e.pg_id as i64);
    if let Some(r) = &e.shape.reduce_op {
        o.raw("reduce_op", r);
    }
    o.i64("req", e.req as i64);
    if matches!(e.shape.kind, Some("broadcast" | "reduce"))
        && let Some(root) = e.shape.root
    {
        o.i64("root", root);
    }
    if let Some((src, _)) = ends {
        o.i64("src_rank", src);
    }
    o.i64("startTime_ns", e.start_ns);
    if ends.is_some() {
        o.bool("use_batch", false);
    }
    o.i64("world_size", w);
    o.end();
}

fn write_init(out: &mut Vec<u8>, pg_id: usize, group: &Group, req: u64) {
    let mut o = ObjectWriter::new(out);
    o.str("comms", "init");
    canon::write_i64_array(o.key("global_ranks"), &group.1);
    let marker = o.key("markers");
    marker.push(b'[');
    canon::write_str(marker, &format!("commcanary:pg-init:{}", group.0));
    marker.push(b']');
    o.i64("pg_id", pg_id as i64);
    o.i64("req", req as i64);
    o.i64("startTime_ns", 0);
    o.i64("world_size", group.1.len() as i64);
    o.end();
}

/// A JSON array being filled.
struct List {
    text: Vec<u8>,
    entries: u64,
}

impl List {
    fn new() -> Self {
        Self {
            text: vec![b'['],
            entries: 0,
        }
    }
    fn next(&mut self) -> &mut Vec<u8> {
        if self.entries > 0 {
            self.text.push(b',');
        }
        self.entries += 1;
        &mut self.text
    }
    fn finish(mut self) -> Vec<u8> {
        self.text.push(b']');
        self.text
    }
}

/// Every occurrence in execution order: `(signature, startTime_ns, gap_us)`.
fn schedule(program: &Program) -> Vec<(u32, i64, f64)> {
    let mut clock: i64 = 0;
    let mut out = Vec::new();
    for_each_occurrence(program, |_, occ| {
        clock = clock.saturating_add((occ.gap_us * 1000.0).round().max(0.0) as i64);
        out.push((occ.signature, clock, occ.gap_us));
    });
    out
}

fn check_size(program: &Program) -> Result<()> {
    let (_, occurrences) = crate::canary::expand::expanded_counts(program);
    if occurrences.saturating_mul(2) > MAX_ENTRIES {
        return Err(Error::limit(format!(
            "expands to {occurrences} occurrences; a PARAM export writes at most {MAX_ENTRIES} entries"
        )));
    }
    Ok(())
}

/// An entry's text around its two varying numbers, `req` and
/// `startTime_ns`: every occurrence of a signature shares the rest, so it is
/// written once and copied.
struct Template {
    head: Vec<u8>,
    middle: Vec<u8>,
    tail: Vec<u8>,
}

const REQ_MARK: u64 = 987_654_321_987_654_321;
const START_MARK: i64 = 876_543_210_876_543_210;

impl Template {
    fn of(entry: &Entry<'_>, per_rank: bool, ends: Option<(i64, i64)>) -> Self {
        let marked = Entry {
            req: REQ_MARK,
            start_ns: START_MARK,
            ..*entry
        };
        let mut text = Vec::new();
        write_entry(&mut text, &marked, per_rank, ends);
        let find = |needle: &[u8]| {
            text.windows(needle.len())
                .position(|w| w == needle)
                .unwrap_or(0)
        };
        let (req, start) = (REQ_MARK.to_string(), START_MARK.to_string());
        let (r, t) = (find(req.as_bytes()), find(start.as_bytes()));
        Self {
            head: text[..r].to_vec(),
            middle: text[r + req.len()..t].to_vec(),
            tail: text[t + start.len()..].to_vec(),
        }
    }

    fn emit(&self, out: &mut Vec<u8>, req: u64, start_ns: i64) {
        out.extend_from_slice(&self.head);
        canon::write_i64(out, req as i64);
        out.extend_from_slice(&self.middle);
        canon::write_i64(out, start_ns);
        out.extend_from_slice(&self.tail);
    }
}

/// What one entry is: its `comms`, and the ends of a transfer.
type EntryKind = (&'static str, Option<(i64, i64)>);

/// The entries of one occurrence.
fn comms_of(shape: &Shape, per_rank: bool) -> [Option<EntryKind>; 2] {
    match (shape.kind, shape.ends) {
        (Some("p2p"), ends @ Some(_)) => [Some(("send", ends)), Some(("recv", ends))],
        (Some(kind), _) => [
            Some((if per_rank { shape.param } else { kind }, None)),
            None,
        ],
        (None, _) => [None, None],
    }
}

/// A GEMM fill entry.
fn write_fill(
    out: &mut Vec<u8>,
    count: i64,
    dim: i64,
    dtype: &str,
    req: u64,
    start_ns: i64,
    markers: &[&str],
) {
    let mut o = ObjectWriter::new(out);
    o.str("compute", "gemm");
    o.i64("count", count);
    o.str("dtype", dtype);
    write_markers(o.key("markers"), markers);
    o.i64("mm_dim", dim);
    o.i64("req", req as i64);
    o.i64("startTime_ns", start_ns);
    o.end();
}

/// The wait that completes an asynchronously issued collective.
fn write_wait(out: &mut Vec<u8>, req: u64, start_ns: i64, marker: &str) {
    let mut o = ObjectWriter::new(out);
    o.str("comms", "wait");
    write_markers(o.key("markers"), &[marker]);
    o.i64("req", req as i64);
    o.i64("startTime_ns", start_ns);
    o.end();
}

fn write_markers(out: &mut Vec<u8>, markers: &[&str]) {
    out.push(b'[');
    for (i, m) in markers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        canon::write_str(out, m);
    }
    out.push(b']');
}

/// The single list's shapes: with the overlap structure, collectives are
/// marked as issued (`commcanary:issue:{group}:{op}`); transfers stay
/// synchronous.
fn basic_shapes(mut shapes: Vec<Shape>, overlap: bool) -> Vec<Shape> {
    if overlap {
        for s in shapes
            .iter_mut()
            .filter(|s| s.kind.is_some_and(|k| k != "p2p"))
        {
            s.marker = s.marker.replacen("commcanary:", "commcanary:issue:", 1);
        }
    }
    shapes
}

/// The reference single list.
///
/// # Errors
/// An unknown dtype, sizes that are not whole elements, a group with two rank
/// sets, an unsupported op (unless skipped), bad fill options, or nothing
/// to export.
pub fn export_basic(program: &Program, options: &ParamOptions) -> Result<ParamExport> {
    check_size(program)?;
    let fill = options.fill()?;
    let (groups, shapes) = shapes(program, options)?;
    let shapes = basic_shapes(shapes, options.overlap_structure);
    let timeline = schedule(program);
    let (first_marker, skipped) = skipped_marker(&shapes, &timeline, options)?;
    let mut pg_of = vec![usize::MAX; groups.len()];
    let mut used: Vec<usize> = Vec::new();
    for &(sig, _, _) in &timeline {
        let g = shapes[sig as usize].group;
        if shapes[sig as usize].kind.is_some() && pg_of[g] == usize::MAX {
            pg_of[g] = used.len();
            used.push(g);
        }
    }
    if used.is_empty() {
        return Err(Error::invalid(
            "canary produced no PARAM-exportable entries",
        ));
    }
    let mut list = List::new();
    for (pg_id, &g) in used.iter().enumerate() {
        write_init(list.next(), pg_id, &groups[g], pg_id as u64);
    }
    let mut body = Body {
        list,
        req: used.len() as u64,
        first_marker: first_marker.as_deref(),
        templates: (0..shapes.len()).map(|_| None).collect(),
        pending: None,
    };
    for &(sig, start_ns, gap_us) in &timeline {
        let shape = &shapes[sig as usize];
        if shape.kind.is_none() {
            continue;
        }
        if let Some((per_gemm, dim)) = fill {
            body.fill(shape, &groups, gap_us / per_gemm, dim, start_ns);
        }
        if options.overlap_structure
            && let Some((req, at, marker)) = body.pending.take()
        {
            write_wait(body.list.next(), req, at, &marker);
        }
        body.occurrence(sig, shape, &groups, pg_of[shape.group], start_ns);
        if options.overlap_structure && shape.kind != Some("p2p") {
            body.pending = Some((body.req - 1, start_ns, shape.wait_marker.clone()));
        }
    }
    if let Some((req, at, marker)) = body.pending.take() {
        write_wait(body.list.next(), req, at, &marker);
    }
    let entries = body.list.entries;
    Ok(ParamExport {
        entries,
        skipped,
        files: vec![(-1, body.list.finish(), entries)],
    })
}

/// The single list being written after its inits.
struct Body<'m> {
    list: List,
    req: u64,
    first_marker: Option<&'m str>,
    templates: Vec<Option<[Option<Template>; 2]>>,
    pending: Option<(u64, i64, String)>,
}

impl Body<'_> {
    /// A fill of `round(gemms)` GEMMs, when there is any.
    fn fill(&mut self, shape: &Shape, groups: &[Group], gemms: f64, dim: i64, start_ns: i64) {
        let count = crate::pyfloat::round(gemms, 0) as i64;
        if count <= 0 {
            return;
        }
        let marker = format!("commcanary:compute-fill:{}", groups[shape.group].0);
        let mut markers = vec![marker.as_str()];
        markers.extend(self.first_marker.take());
        write_fill(
            self.list.next(),
            count,
            dim,
            shape.dtype.0,
            self.req,
            start_ns,
            &markers,
        );
        self.req += 1;
    }

    /// The entries of one occurrence (a transfer is a send and a recv).
    fn occurrence(
        &mut self,
        sig: u32,
        shape: &Shape,
        groups: &[Group],
        pg_id: usize,
        start_ns: i64,
    ) {
        let first = self.first_marker;
        let entry = |comms: &'static str, req: u64, extra: bool| Entry {
            comms,
            req,
            start_ns,
            shape,
            group: &groups[shape.group],
            pg_id,
            dtype_name: shape.dtype.0,
            extra_marker: if extra { first } else { None },
        };
        let slots = self.templates[sig as usize].get_or_insert_with(|| {
            comms_of(shape, false)
                .map(|c| c.map(|(k, e)| Template::of(&entry(k, 0, false), false, e)))
        });
        for (k, slot) in comms_of(shape, false).iter().zip(slots.iter()) {
            let (Some((comms, ends)), Some(template)) = (k, slot) else {
                continue;
            };
            if self.first_marker.take().is_some() {
                write_entry(
                    self.list.next(),
                    &entry(comms, self.req, true),
                    false,
                    *ends,
                );
            } else {
                template.emit(self.list.next(), self.req, start_ns);
            }
            self.req += 1;
        }
    }
}

/// The `commcanary:skipped_unsupported=K` marker, or the refusal.
fn skipped_marker(
    shapes: &[Shape],
    timeline: &[(u32, i64, f64)],
    options: &ParamOptions,
) -> Result<(Option<String>, u64)> {
    let unsupported_at = |t: &&(u32, i64, f64)| shapes[t.0 as usize].kind.is_none();
    let skipped = timeline.iter().filter(unsupported_at).count() as u64;
    let Some(first) = timeline.iter().find(unsupported_at) else {
        return Ok((None, 0));
    };
    if !options.skip_unsupported {
        let marker = &shapes[first.0 as usize].marker;
        return Err(unsupported(marker.rsplit(':').next().unwrap_or("")));
    }
    Ok((
        Some(format!("commcanary:skipped_unsupported={skipped}")),
        skipped,
    ))
}

/// Per-rank lists for PARAM's replayer, ranks `0..=max` (a dense domain),
/// written in parallel, one rank per task.
///
/// # Errors
/// As [`export_basic`], and a rank domain with holes.
pub fn export_per_rank(program: &Program, options: &ParamOptions) -> Result<ParamExport> {
    if options.compute_fill_us_per_gemm.is_some() || options.overlap_structure {
        return Err(Error::option(
            "compute_fill_us_per_gemm",
            "and overlap_structure apply to the single list only",
        ));
    }
    check_size(program)?;
    let (groups, shapes) = shapes(program, options)?;
    let timeline = schedule(program);
    let (first_marker, skipped) = skipped_marker(&shapes, &timeline, options)?;
    let max_rank = groups
        .iter()
        .flat_map(|g| g.1.iter().copied())
        .max()
        .unwrap_or(0);
    for r in 0..=max_rank {
        if !groups.iter().any(|g| g.1.contains(&r)) {
            return Err(Error::invalid(format!(
                "rank {r} takes part in no group: PARAM's replayer needs ranks 0..{max_rank} without holes"
            )));
        }
    }
    let templates: Vec<[Option<Template>; 2]> = shapes
        .iter()
        .map(|shape| {
            comms_of(shape, true).map(|c| {
                c.map(|(comms, ends)| {
                    let e = rank_entry(shape, &groups, comms, None);
                    Template::of(&e, true, ends)
                })
            })
        })
        .collect();
    let files: Vec<(i64, Vec<u8>, u64)> = (0..=max_rank)
        .into_par_iter()
        .map(|rank| {
            let list = rank_file(
                rank,
                &timeline,
                &shapes,
                &groups,
                &templates,
                first_marker.as_deref(),
            );
            let n = list.entries;
            (rank, list.finish(), n)
        })
        .collect();
    let entries = files.iter().map(|f| f.2).sum();
    Ok(ParamExport {
        files,
        entries,
        skipped,
    })
}

fn rank_entry<'a>(
    shape: &'a Shape,
    groups: &'a [Group],
    comms: &'a str,
    extra: Option<&'a str>,
) -> Entry<'a> {
    Entry {
        comms,
        req: 0,
        start_ns: 0,
        shape,
        group: &groups[shape.group],
        pg_id: shape.group,
        dtype_name: shape.dtype.2,
        extra_marker: extra,
    }
}

/// One rank's list: `init` for every group, then its part of every occurrence.
fn rank_file(
    rank: i64,
    timeline: &[(u32, i64, f64)],
    shapes: &[Shape],
    groups: &[Group],
    templates: &[[Option<Template>; 2]],
    first_marker: Option<&str>,
) -> List {
    let mut list = List::new();
    for (pg_id, g) in groups.iter().enumerate() {
        let req = list.entries;
        write_init(list.next(), pg_id, g, req);
    }
    let inits = list.entries;
    for &(sig, start_ns, _) in timeline {
        let shape = &shapes[sig as usize];
        let takes = match (shape.kind, shape.ends) {
            (None, _) => [false, false],
            (Some("p2p"), Some((src, dst))) => [src == rank, dst == rank],
            (Some(_), _) => [groups[shape.group].1.contains(&rank), false],
        };
        for (k, template) in templates[sig as usize].iter().enumerate() {
            let Some(template) = template.as_ref().filter(|_| takes[k]) else {
                continue;
            };
            let req = list.entries;
            if req == inits && first_marker.is_some() {
                let (comms, ends) = comms_of(shape, true)[k].unwrap_or(("", None));
                let e = Entry {
                    req,
                    start_ns,
                    ..rank_entry(shape, groups, comms, first_marker)
                };
                write_entry(list.next(), &e, true, ends);
            } else {
                template.emit(list.next(), req, start_ns);
            }
        }
    }
    list
}
