//! One ring entry of a dump read into an [`FrEntry`], with the entry's
//! repeated strings interned.
//!
//! Field errors come back as `field: reason` so the caller can prefix the
//! entry index: `entries[12].collective_seq_id: expected an integer, got str`.

use rustc_hash::FxHashMap;

use super::tree::Tree;
use super::{EntryState, FrDump, FrEntry};
use crate::error::{Error, Result};
use crate::import::stacks::Frame;

/// Interning tables for one dump, keyed by text so that a value seen before
/// costs a lookup and no allocation.
#[derive(Default)]
pub(super) struct Interner {
    texts: FxHashMap<String, u32>,
    /// `name \0 desc`.
    groups: FxHashMap<String, u32>,
    /// Each frame as `file \x1f line \x1f func \x1e`.
    stacks: FxHashMap<String, u32>,
    buf: String,
}

impl Interner {
    fn text(&mut self, dump: &mut FrDump, s: &str) -> u32 {
        if let Some(&i) = self.texts.get(s) {
            return i;
        }
        let i = dump.texts.len() as u32;
        dump.texts.push(s.to_owned());
        self.texts.insert(s.to_owned(), i);
        i
    }

    /// Interns what `fill` writes into the scratch buffer.
    fn text_with(
        &mut self,
        dump: &mut FrDump,
        fill: impl FnOnce(&mut String) -> Result<()>,
    ) -> Result<u32> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let done = fill(&mut buf).map(|()| self.text(dump, &buf));
        self.buf = buf;
        done
    }

    fn group(&mut self, dump: &mut FrDump, name: &str, desc: &str) -> u32 {
        let mut key = std::mem::take(&mut self.buf);
        key.clear();
        key.push_str(name);
        key.push('\0');
        key.push_str(desc);
        let i = match self.groups.get(key.as_str()) {
            Some(&i) => i,
            None => {
                let i = dump.groups.len() as u32;
                dump.groups.push((name.to_owned(), desc.to_owned()));
                self.groups.insert(key.clone(), i);
                i
            }
        };
        self.buf = key;
        i
    }

    fn stack<'a, T: Tree<'a>>(&mut self, dump: &mut FrDump, frames: Option<T>) -> Result<i64> {
        let Some(v) = frames.filter(|v| !v.is_null()) else {
            return Ok(-1);
        };
        let n = v
            .seq_len()
            .ok_or_else(|| bad("frames", "a list", v.type_name()))?;
        if n == 0 {
            return Ok(-1);
        }
        let mut key = std::mem::take(&mut self.buf);
        key.clear();
        for i in 0..n {
            let (file, line, func) = frame_parts(v.element(i).unwrap_or(v));
            key.push_str(file);
            key.push('\x1f');
            push_decimal(&mut key, u64::from(line));
            key.push('\x1f');
            key.push_str(func);
            key.push('\x1e');
        }
        let i = match self.stacks.get(key.as_str()) {
            Some(&i) => i,
            None => {
                let frames = (0..n)
                    .map(|i| {
                        let (file, line, func) = frame_parts(v.element(i).unwrap_or(v));
                        Frame {
                            file: file.to_owned(),
                            line,
                            func: func.to_owned(),
                        }
                    })
                    .collect();
                let i = dump.stacks.len() as u32;
                dump.stacks.push(frames);
                self.stacks.insert(key.clone(), i);
                i
            }
        };
        self.buf = key;
        Ok(i64::from(i))
    }
}

/// Appends the decimal digits of `x` (no formatting machinery: this runs
/// for every frame of every entry).
fn push_decimal(out: &mut String, mut x: u64) {
    let mut digits = [0_u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

fn frame_parts<'a, T: Tree<'a>>(f: T) -> (&'a str, u32, &'a str) {
    let text = |k: &str| f.get(k).and_then(|x| x.as_str()).unwrap_or("");
    let line = f.get("line").and_then(|x| x.as_i64()).unwrap_or(0);
    (
        text("filename"),
        u32::try_from(line).unwrap_or(0),
        text("name"),
    )
}

/// The fields of an entry this reader uses, in [`FIELDS`] order.
const FIELDS: [&str; 19] = [
    "profiling_name",
    "input_sizes",
    "output_sizes",
    "process_group",
    "duration_ms",
    "collective_seq_id",
    "pg_id",
    "record_id",
    "op_id",
    "p2p_seq_id",
    "is_p2p",
    "input_dtypes",
    "output_dtypes",
    "state",
    "retired",
    "time_created_ns",
    "time_discovered_started_ns",
    "time_discovered_completed_ns",
    "timeout_ms",
];
/// Index of `frames`, kept after [`FIELDS`].
const FRAMES: usize = FIELDS.len();

/// An entry's members, collected in one walk (a dump has thousands of
/// entries, each read by some twenty keys).
pub(super) struct Fields<T> {
    values: [Option<T>; FIELDS.len() + 1],
}

impl<'a, T: Tree<'a>> Fields<T> {
    /// The members of `e`, when it is a dict.
    fn of(e: T) -> Option<Self> {
        let mut values = [None; FIELDS.len() + 1];
        e.members(&mut |k, v| {
            if k == b"frames" {
                values[FRAMES] = Some(v);
            } else if let Some(i) = FIELDS.iter().position(|f| f.as_bytes() == k) {
                values[i] = Some(v);
            }
        })
        .then_some(Self { values })
    }

    fn get(&self, key: &str) -> Option<T> {
        FIELDS
            .iter()
            .position(|f| *f == key)
            .and_then(|i| self.values[i])
            .filter(|v| !v.is_null())
    }
}

fn bad(field: &str, expected: &str, got: &str) -> Error {
    Error::invalid(format!("{field}: expected {expected}, got {got}"))
}

fn int<'a, T: Tree<'a>>(e: &Fields<T>, field: &str, absent: i64) -> Result<i64> {
    match e.get(field) {
        None => Ok(absent),
        Some(v) => v
            .int_like()
            .ok_or_else(|| bad(field, "an integer", v.type_name())),
    }
}

fn text<'a, T: Tree<'a>>(e: &Fields<T>, field: &str) -> Result<&'a str> {
    match e.get(field) {
        None => Ok(""),
        Some(v) => v
            .as_str()
            .ok_or_else(|| bad(field, "a string", v.type_name())),
    }
}

fn flag<'a, T: Tree<'a>>(e: &Fields<T>, field: &str) -> Result<bool> {
    match e.get(field) {
        None => Ok(false),
        Some(v) => v
            .as_bool()
            .or_else(|| v.as_i64().map(|i| i != 0))
            .ok_or_else(|| bad(field, "a boolean", v.type_name())),
    }
}

/// Writes sizes as canonical JSON text into `out`; returns the total
/// element count.
fn sizes<'a, T: Tree<'a>>(v: Option<T>, field: &str, out: &mut String) -> Result<i64> {
    let Some(v) = v else { return Ok(0) };
    let n = v
        .seq_len()
        .ok_or_else(|| bad(field, "a list of shapes", v.type_name()))?;
    out.push('[');
    let mut total: i64 = 0;
    for i in 0..n {
        let shape = v.element(i).unwrap_or(v);
        let dims = shape
            .seq_len()
            .ok_or_else(|| bad(field, "a list of shapes", shape.type_name()))?;
        out.push_str(if i > 0 { ",[" } else { "[" });
        let mut numel: i64 = 1;
        for d in 0..dims {
            let x = shape
                .element(d)
                .and_then(|x| x.as_i64())
                .ok_or_else(|| bad(field, "integer dimensions", "another type"))?;
            if d > 0 {
                out.push(',');
            }
            if x < 0 {
                out.push('-');
            }
            push_decimal(out, x.unsigned_abs());
            numel = numel.saturating_mul(x.max(0));
        }
        out.push(']');
        total = total.saturating_add(numel);
    }
    out.push(']');
    Ok(total)
}

/// Writes dtype names, comma-joined, into `out`.
fn dtypes<'a, T: Tree<'a>>(v: Option<T>, field: &str, out: &mut String) -> Result<()> {
    let Some(v) = v else { return Ok(()) };
    let n = v
        .seq_len()
        .ok_or_else(|| bad(field, "a list of dtype names", v.type_name()))?;
    for i in 0..n {
        let d = v.element(i).and_then(|d| d.as_str());
        if i > 0 {
            out.push(',');
        }
        out.push_str(d.ok_or_else(|| bad(field, "dtype names", "another type"))?);
    }
    Ok(())
}

fn state(s: &str) -> Result<EntryState> {
    match s {
        "" | "scheduled" => Ok(EntryState::Scheduled),
        "started" => Ok(EntryState::Started),
        "completed" => Ok(EntryState::Completed),
        other => Err(Error::invalid(format!(
            "state: expected scheduled, started or completed, got '{other}'"
        ))),
    }
}

fn process_group<'a, T: Tree<'a>>(e: &Fields<T>) -> Result<(&'a str, &'a str)> {
    let Some(v) = e.get("process_group") else {
        return Err(Error::invalid("process_group: missing"));
    };
    let part = |i: usize| v.element(i).and_then(|x| x.as_str());
    match (part(0), part(1)) {
        (Some(name), desc) if v.seq_len() >= Some(1) => Ok((name, desc.unwrap_or(""))),
        _ => Err(bad("process_group", "a (name, desc) pair", v.type_name())),
    }
}

/// Reads one entry.
pub(super) fn read_entry<'a, T: Tree<'a>>(
    e: T,
    interner: &mut Interner,
    dump: &mut FrDump,
) -> Result<FrEntry> {
    let Some(fields) = Fields::of(e) else {
        return Err(Error::invalid(format!(
            "expected a dict, got {}",
            e.type_name()
        )));
    };
    let e = &fields;
    let name = text(e, "profiling_name")?;
    let (op, peer) = canonical_op(name);
    let (mut in_numel, mut out_numel) = (0, 0);
    let in_sizes = interner.text_with(dump, |b| {
        in_numel = sizes(e.get("input_sizes"), "input_sizes", b)?;
        Ok(())
    })?;
    let out_sizes = interner.text_with(dump, |b| {
        out_numel = sizes(e.get("output_sizes"), "output_sizes", b)?;
        Ok(())
    })?;
    let (group_name, group_desc) = process_group(e)?;
    let duration_ms = match e.get("duration_ms") {
        Some(v) => v
            .as_f64()
            .ok_or_else(|| bad("duration_ms", "a number", v.type_name()))?,
        None => f64::NAN,
    };
    let collective_seq = e.values[5].ok_or_else(|| {
        Error::invalid("collective_seq_id: missing (not a Flight Recorder entry)")
    })?;
    let seq = collective_seq.int_like().ok_or_else(|| {
        bad(
            "collective_seq_id",
            "an integer",
            collective_seq.type_name(),
        )
    })?;
    Ok(FrEntry {
        group: interner.group(dump, group_name, group_desc),
        pg_id: int(e, "pg_id", -1)?,
        record_id: int(e, "record_id", -1)?,
        op_id: int(e, "op_id", -1)?,
        seq,
        p2p_seq: int(e, "p2p_seq_id", 0)?,
        is_p2p: flag(e, "is_p2p")? || matches!(op, "send" | "recv"),
        name: interner.text(dump, name),
        op,
        peer,
        in_sizes,
        out_sizes,
        in_dtypes: interner
            .text_with(dump, |b| dtypes(e.get("input_dtypes"), "input_dtypes", b))?,
        out_dtypes: interner
            .text_with(dump, |b| dtypes(e.get("output_dtypes"), "output_dtypes", b))?,
        in_numel,
        out_numel,
        state: state(text(e, "state")?)?,
        retired: flag(e, "retired")?,
        created_ns: int(e, "time_created_ns", 0)?,
        started_ns: int(e, "time_discovered_started_ns", 0)?,
        completed_ns: int(e, "time_discovered_completed_ns", 0)?,
        duration_ms,
        timeout_ms: int(e, "timeout_ms", -1)?,
        stack: interner.stack(dump, e.values[FRAMES])?,
    })
}

/// The canonical op of a `profiling_name` (`gloo:all_reduce`,
/// `nccl:_allgather_base`, `nccl:send 0->1`, …) and the p2p peer it names.
#[must_use]
pub fn canonical_op(profiling_name: &str) -> (&'static str, i64) {
    let body = profiling_name
        .split_once(':')
        .map_or(profiling_name, |(_, b)| b);
    let mut words = body.split_whitespace();
    let head = words
        .next()
        .unwrap_or("")
        .trim_start_matches('_')
        .to_ascii_lowercase();
    let peer = words
        .next()
        .and_then(|w| w.rsplit(['>', '-', '<']).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(-1);
    let squeezed: String = head.chars().filter(|c| *c != '_').collect();
    let op = match squeezed.as_str() {
        s if s.starts_with("allreduce") => "all_reduce",
        s if s.starts_with("allgather") => "all_gather",
        s if s.starts_with("reducescatter") => "reduce_scatter",
        s if s.starts_with("alltoall") => "all_to_all",
        s if s.starts_with("broadcast") => "broadcast",
        s if s.starts_with("reduce") => "reduce",
        s if s.starts_with("gather") => "gather",
        s if s.starts_with("scatter") => "scatter",
        s if s.starts_with("barrier") => "barrier",
        "send" | "isend" => "send",
        "recv" | "irecv" | "recvanysource" => "recv",
        s if s.starts_with("coalesced") => "coalesced",
        _ => "other",
    };
    (
        op,
        if matches!(op, "send" | "recv") {
            peer
        } else {
            -1
        },
    )
}

#[cfg(test)]
mod tests {
    use super::canonical_op;

    #[test]
    fn profiling_names_map_to_canonical_ops() {
        assert_eq!(canonical_op("gloo:all_reduce"), ("all_reduce", -1));
        assert_eq!(canonical_op("nccl:_allgather_base"), ("all_gather", -1));
        assert_eq!(
            canonical_op("nccl:all_gather_into_tensor_coalesced"),
            ("all_gather", -1)
        );
        assert_eq!(
            canonical_op("nccl:_reduce_scatter_base"),
            ("reduce_scatter", -1)
        );
        assert_eq!(canonical_op("nccl:reduce"), ("reduce", -1));
        assert_eq!(canonical_op("nccl:all_to_all"), ("all_to_all", -1));
        assert_eq!(canonical_op("nccl:send 0->1"), ("send", 1));
        assert_eq!(canonical_op("nccl:recv 3<-0"), ("recv", 0));
        assert_eq!(canonical_op("nccl:coalesced"), ("coalesced", -1));
        assert_eq!(canonical_op("gloo:barrier"), ("barrier", -1));
        assert_eq!(canonical_op("weird"), ("other", -1));
    }
}
