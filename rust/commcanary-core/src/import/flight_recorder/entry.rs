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

/// Interning tables for one dump.
#[derive(Default)]
pub(super) struct Interner {
    texts: FxHashMap<String, u32>,
    groups: FxHashMap<(String, String), u32>,
    stacks: FxHashMap<Vec<Frame>, u32>,
}

impl Interner {
    fn text(&mut self, dump: &mut FrDump, s: String) -> u32 {
        if let Some(&i) = self.texts.get(&s) {
            return i;
        }
        let i = dump.texts.len() as u32;
        dump.texts.push(s.clone());
        self.texts.insert(s, i);
        i
    }

    fn group(&mut self, dump: &mut FrDump, key: (String, String)) -> u32 {
        if let Some(&i) = self.groups.get(&key) {
            return i;
        }
        let i = dump.groups.len() as u32;
        dump.groups.push(key.clone());
        self.groups.insert(key, i);
        i
    }

    fn stack(&mut self, dump: &mut FrDump, frames: Vec<Frame>) -> i64 {
        if frames.is_empty() {
            return -1;
        }
        if let Some(&i) = self.stacks.get(&frames) {
            return i64::from(i);
        }
        let i = dump.stacks.len() as u32;
        dump.stacks.push(frames.clone());
        self.stacks.insert(frames, i);
        i64::from(i)
    }

    /// Drops the tables (the dump already holds every interned value).
    pub(super) fn finish(self, _dump: &mut FrDump) {}
}

fn bad(field: &str, expected: &str, got: &str) -> Error {
    Error::invalid(format!("{field}: expected {expected}, got {got}"))
}

fn int<'a, T: Tree<'a>>(e: T, field: &str, absent: i64) -> Result<i64> {
    match e.get(field) {
        None => Ok(absent),
        Some(v) if v.is_null() => Ok(absent),
        Some(v) => v
            .int_like()
            .ok_or_else(|| bad(field, "an integer", v.type_name())),
    }
}

fn text<'a, T: Tree<'a>>(e: T, field: &str) -> Result<String> {
    match e.get(field) {
        None => Ok(String::new()),
        Some(v) if v.is_null() => Ok(String::new()),
        Some(v) => v
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| bad(field, "a string", v.type_name())),
    }
}

fn flag<'a, T: Tree<'a>>(e: T, field: &str) -> Result<bool> {
    match e.get(field) {
        None => Ok(false),
        Some(v) if v.is_null() => Ok(false),
        Some(v) => v
            .as_bool()
            .or_else(|| v.as_i64().map(|i| i != 0))
            .ok_or_else(|| bad(field, "a boolean", v.type_name())),
    }
}

/// Sizes as canonical JSON text and their total element count.
fn sizes<'a, T: Tree<'a>>(e: T, field: &str) -> Result<(String, i64)> {
    let Some(v) = e.get(field).filter(|v| !v.is_null()) else {
        return Ok((String::new(), 0));
    };
    let n = v
        .seq_len()
        .ok_or_else(|| bad(field, "a list of shapes", v.type_name()))?;
    let mut out = String::from("[");
    let mut total: i64 = 0;
    for i in 0..n {
        let shape = v.element(i).unwrap_or(v);
        let dims = shape
            .seq_len()
            .ok_or_else(|| bad(field, "a list of shapes", shape.type_name()))?;
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        let mut numel: i64 = 1;
        for d in 0..dims {
            let x = shape
                .element(d)
                .and_then(|x| x.as_i64())
                .ok_or_else(|| bad(field, "integer dimensions", "another type"))?;
            if d > 0 {
                out.push(',');
            }
            out.push_str(&x.to_string());
            numel = numel.saturating_mul(x.max(0));
        }
        out.push(']');
        total = total.saturating_add(numel);
    }
    out.push(']');
    Ok((out, total))
}

fn dtypes<'a, T: Tree<'a>>(e: T, field: &str) -> Result<String> {
    let Some(v) = e.get(field).filter(|v| !v.is_null()) else {
        return Ok(String::new());
    };
    let n = v
        .seq_len()
        .ok_or_else(|| bad(field, "a list of dtype names", v.type_name()))?;
    let mut parts = Vec::with_capacity(n.min(64));
    for i in 0..n {
        let d = v.element(i).and_then(|d| d.as_str());
        parts.push(d.ok_or_else(|| bad(field, "dtype names", "another type"))?);
    }
    Ok(parts.join(","))
}

fn frames<'a, T: Tree<'a>>(e: T) -> Result<Vec<Frame>> {
    let Some(v) = e.get("frames").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let n = v
        .seq_len()
        .ok_or_else(|| bad("frames", "a list", v.type_name()))?;
    let mut out = Vec::with_capacity(n.min(256));
    for i in 0..n {
        let f = v.element(i).unwrap_or(v);
        let field = |k: &str| f.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
        let line = f.get("line").and_then(|x| x.as_i64()).unwrap_or(0);
        out.push(Frame {
            file: field("filename"),
            line: u32::try_from(line).unwrap_or(0),
            func: field("name"),
        });
    }
    Ok(out)
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

fn process_group<'a, T: Tree<'a>>(e: T) -> Result<(String, String)> {
    let Some(v) = e.get("process_group") else {
        return Err(Error::invalid("process_group: missing"));
    };
    let part = |i: usize| v.element(i).and_then(|x| x.as_str()).map(str::to_owned);
    match (part(0), part(1)) {
        (Some(name), desc) if v.seq_len() >= Some(1) => Ok((name, desc.unwrap_or_default())),
        _ => Err(bad("process_group", "a (name, desc) pair", v.type_name())),
    }
}

/// Reads one entry.
pub(super) fn read_entry<'a, T: Tree<'a>>(
    e: T,
    interner: &mut Interner,
    dump: &mut FrDump,
) -> Result<FrEntry> {
    if !e.members(&mut |_, _| {}) {
        return Err(Error::invalid(format!(
            "expected a dict, got {}",
            e.type_name()
        )));
    }
    let name = text(e, "profiling_name")?;
    let (op, peer) = canonical_op(&name);
    let (in_sizes, in_numel) = sizes(e, "input_sizes")?;
    let (out_sizes, out_numel) = sizes(e, "output_sizes")?;
    let group = process_group(e)?;
    let duration_ms = match e.get("duration_ms") {
        Some(v) if !v.is_null() => v
            .as_f64()
            .ok_or_else(|| bad("duration_ms", "a number", v.type_name()))?,
        _ => f64::NAN,
    };
    let collective_seq = e.get("collective_seq_id").ok_or_else(|| {
        Error::invalid("collective_seq_id: missing (not a Flight Recorder entry)")
    })?;
    let seq = collective_seq.int_like().ok_or_else(|| {
        bad(
            "collective_seq_id",
            "an integer",
            collective_seq.type_name(),
        )
    })?;
    let frame_list = frames(e)?;
    Ok(FrEntry {
        group: interner.group(dump, group),
        pg_id: int(e, "pg_id", -1)?,
        record_id: int(e, "record_id", -1)?,
        op_id: int(e, "op_id", -1)?,
        seq,
        p2p_seq: int(e, "p2p_seq_id", 0)?,
        is_p2p: flag(e, "is_p2p")? || matches!(op, "send" | "recv"),
        name: interner.text(dump, name),
        op,
        peer,
        in_sizes: interner.text(dump, in_sizes),
        out_sizes: interner.text(dump, out_sizes),
        in_dtypes: {
            let d = dtypes(e, "input_dtypes")?;
            interner.text(dump, d)
        },
        out_dtypes: {
            let d = dtypes(e, "output_dtypes")?;
            interner.text(dump, d)
        },
        in_numel,
        out_numel,
        state: state(&text(e, "state")?)?,
        retired: flag(e, "retired")?,
        created_ns: int(e, "time_created_ns", 0)?,
        started_ns: int(e, "time_discovered_started_ns", 0)?,
        completed_ns: int(e, "time_discovered_completed_ns", 0)?,
        duration_ms,
        timeout_ms: int(e, "timeout_ms", -1)?,
        stack: interner.stack(dump, frame_list),
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
