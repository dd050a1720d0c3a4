//! One ring entry of a dump read into an [`FrEntry`], with the entry's
//! repeated strings interned.
//!
//! Field errors come back as `field: reason` so the caller can prefix the
//! entry index: `entries[12].collective_seq_id: expected an integer, got str`.
//!
//! Speed: a dump has thousands of entries. Each is walked once
//! ([`Fields::of`]); strings are compared as bytes; and where the encoding
//! shares values (a pickle's memo, [`Tree::ident`]) the profiling name, the
//! group and the stack are looked up by identity before any text is built.
//! Identity only shortcuts: every text is still interned by its content, so
//! equal texts always get one index.

use rustc_hash::FxHashMap;

use super::tree::Tree;
use super::{EntryState, FrDump, FrEntry};
use crate::error::{Error, Result};
use crate::import::stacks::Frame;
use crate::json::canon::write_i64;

/// An absent or non-string part in an identity key.
const NO_IDENT: u32 = u32::MAX;

/// Interning tables for one dump, keyed by content so that a value seen
/// before costs a lookup and no allocation, with identity shortcuts.
#[derive(Default)]
pub(super) struct Interner {
    texts: FxHashMap<Box<[u8]>, u32>,
    /// `name \0 desc`.
    groups: FxHashMap<Box<[u8]>, u32>,
    /// Each frame as `file \x1f line \x1f func \x1e`.
    stacks: FxHashMap<Box<[u8]>, u32>,
    /// Profiling-name identity → (text, canonical op, peer).
    names: FxHashMap<u32, (u32, &'static str, i64)>,
    /// (name, desc) identities → group.
    group_ids: FxHashMap<u64, u32>,
    /// Each frame's (file, line, func) identities → stack.
    stack_ids: FxHashMap<Box<[u32]>, u32>,
    /// The last entry's member key identities and their [`FIELDS`] index
    /// ([`NOT_A_FIELD`] for the others): entries repeat their keys.
    key_fields: Vec<(u32, u8)>,
    buf: Vec<u8>,
    ids: Vec<u32>,
}

impl Interner {
    fn text(&mut self, dump: &mut FrDump, s: &[u8]) -> u32 {
        if let Some(&i) = self.texts.get(s) {
            return i;
        }
        let i = dump.texts.len() as u32;
        dump.texts.push(String::from_utf8_lossy(s).into_owned());
        self.texts.insert(s.into(), i);
        i
    }

    /// Interns what `fill` writes into the scratch buffer.
    fn text_with(
        &mut self,
        dump: &mut FrDump,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<u32> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let done = fill(&mut buf).map(|()| self.text(dump, &buf));
        self.buf = buf;
        done
    }

    /// The profiling name's text, canonical op and p2p peer.
    fn name<'a, T: Tree<'a>>(
        &mut self,
        dump: &mut FrDump,
        v: Option<T>,
    ) -> Result<(u32, &'static str, i64)> {
        let Some(v) = v else {
            let (op, peer) = canonical_op("");
            return Ok((self.text(dump, b""), op, peer));
        };
        let id = v.ident();
        if let Some(hit) = id.and_then(|id| self.names.get(&id)) {
            return Ok(*hit);
        }
        let s = v
            .as_str()
            .ok_or_else(|| bad(FIELDS[PROFILING_NAME], "a string", v.type_name()))?;
        let (op, peer) = canonical_op(s);
        let named = (self.text(dump, s.as_bytes()), op, peer);
        if let Some(id) = id {
            self.names.insert(id, named);
        }
        Ok(named)
    }

    /// The group of a `process_group` (name, desc) pair.
    fn group<'a, T: Tree<'a>>(&mut self, dump: &mut FrDump, v: Option<T>) -> Result<u32> {
        let field = FIELDS[PROCESS_GROUP];
        let Some(v) = v else {
            return Err(Error::invalid(format!("{field}: missing")));
        };
        let name = v.element(0).filter(|x| x.str_bytes().is_some());
        let (Some(name), Some(1..)) = (name, v.seq_len()) else {
            return Err(bad(field, "a (name, desc) pair", v.type_name()));
        };
        let desc = v.element(1).filter(|x| x.str_bytes().is_some());
        let key = match (name.ident(), desc.map_or(Some(NO_IDENT), |d| d.ident())) {
            (Some(n), Some(d)) => Some(u64::from(n) << 32 | u64::from(d)),
            _ => None,
        };
        if let Some(&i) = key.and_then(|k| self.group_ids.get(&k)) {
            return Ok(i);
        }
        let name = name.str_bytes().unwrap_or_default();
        let desc = desc.and_then(|d| d.str_bytes()).unwrap_or_default();
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(name);
        buf.push(0);
        buf.extend_from_slice(desc);
        let i = match self.groups.get(buf.as_slice()) {
            Some(&i) => i,
            None => {
                let i = dump.groups.len() as u32;
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                dump.groups.push((text(name), text(desc)));
                self.groups.insert(buf.as_slice().into(), i);
                i
            }
        };
        self.buf = buf;
        if let Some(k) = key {
            self.group_ids.insert(k, i);
        }
        Ok(i)
    }

    fn stack<'a, T: Tree<'a>>(&mut self, dump: &mut FrDump, frames: Option<T>) -> Result<i64> {
        let Some(v) = frames else {
            return Ok(-1);
        };
        let n = v
            .seq_len()
            .ok_or_else(|| bad("frames", "a list", v.type_name()))?;
        if n == 0 {
            return Ok(-1);
        }
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        let mut by_ident = true;
        for i in 0..n {
            let (file, line, func) = frame_parts(v.element(i).unwrap_or(v));
            match (text_ident(file), text_ident(func)) {
                (Some(a), Some(b)) => ids.extend([a, line, b]),
                _ => {
                    by_ident = false;
                    break;
                }
            }
        }
        let hit = by_ident
            .then(|| self.stack_ids.get(ids.as_slice()).copied())
            .flatten();
        let i = match hit {
            Some(i) => i,
            None => {
                let i = self.stack_by_text(dump, v, n);
                if by_ident {
                    self.stack_ids.insert(ids.as_slice().into(), i);
                }
                i
            }
        };
        self.ids = ids;
        Ok(i64::from(i))
    }

    fn stack_by_text<'a, T: Tree<'a>>(&mut self, dump: &mut FrDump, v: T, n: usize) -> u32 {
        let text = |x: Option<T>| x.and_then(|x| x.str_bytes()).unwrap_or_default();
        let mut key = std::mem::take(&mut self.buf);
        key.clear();
        for i in 0..n {
            let (file, line, func) = frame_parts(v.element(i).unwrap_or(v));
            key.extend_from_slice(text(file));
            key.push(0x1f);
            write_i64(&mut key, i64::from(line));
            key.push(0x1f);
            key.extend_from_slice(text(func));
            key.push(0x1e);
        }
        let i = match self.stacks.get(key.as_slice()) {
            Some(&i) => i,
            None => {
                let owned = |x: Option<T>| String::from_utf8_lossy(text(x)).into_owned();
                let frames = (0..n)
                    .map(|i| {
                        let (file, line, func) = frame_parts(v.element(i).unwrap_or(v));
                        Frame {
                            file: owned(file),
                            line,
                            func: owned(func),
                        }
                    })
                    .collect();
                let i = dump.stacks.len() as u32;
                dump.stacks.push(frames);
                self.stacks.insert(key.as_slice().into(), i);
                i
            }
        };
        self.buf = key;
        i
    }
}

/// A frame part's identity for a stack key: [`NO_IDENT`] when absent or
/// not a string (both read as ""), `None` when the encoding has none.
fn text_ident<'a, T: Tree<'a>>(x: Option<T>) -> Option<u32> {
    match x {
        Some(x) if x.str_bytes().is_some() => x.ident(),
        _ => Some(NO_IDENT),
    }
}

/// A frame's `filename` and `name` values and its line (0 when absent).
fn frame_parts<'a, T: Tree<'a>>(f: T) -> (Option<T>, u32, Option<T>) {
    let (mut file, mut line, mut func) = (None, 0, None);
    f.members(|k, _, v| match k {
        b"filename" => file = Some(v),
        b"name" => func = Some(v),
        b"line" => line = v.as_i64().and_then(|l| u32::try_from(l).ok()).unwrap_or(0),
        _ => {}
    });
    (file, line, func)
}

/// The fields of an entry this reader uses; the constants below index it.
const FIELDS: [&str; 20] = [
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
    "frames",
];
const PROFILING_NAME: usize = 0;
const INPUT_SIZES: usize = 1;
const OUTPUT_SIZES: usize = 2;
const PROCESS_GROUP: usize = 3;
const DURATION_MS: usize = 4;
const COLLECTIVE_SEQ_ID: usize = 5;
const PG_ID: usize = 6;
const RECORD_ID: usize = 7;
const OP_ID: usize = 8;
const P2P_SEQ_ID: usize = 9;
const IS_P2P: usize = 10;
const INPUT_DTYPES: usize = 11;
const OUTPUT_DTYPES: usize = 12;
const STATE: usize = 13;
const RETIRED: usize = 14;
const TIME_CREATED_NS: usize = 15;
const TIME_STARTED_NS: usize = 16;
const TIME_COMPLETED_NS: usize = 17;
const TIMEOUT_MS: usize = 18;
const FRAMES: usize = 19;

/// The index in [`FIELDS`] of a member name.
fn field_index(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"profiling_name" => PROFILING_NAME,
        b"input_sizes" => INPUT_SIZES,
        b"output_sizes" => OUTPUT_SIZES,
        b"process_group" => PROCESS_GROUP,
        b"duration_ms" => DURATION_MS,
        b"collective_seq_id" => COLLECTIVE_SEQ_ID,
        b"pg_id" => PG_ID,
        b"record_id" => RECORD_ID,
        b"op_id" => OP_ID,
        b"p2p_seq_id" => P2P_SEQ_ID,
        b"is_p2p" => IS_P2P,
        b"input_dtypes" => INPUT_DTYPES,
        b"output_dtypes" => OUTPUT_DTYPES,
        b"state" => STATE,
        b"retired" => RETIRED,
        b"time_created_ns" => TIME_CREATED_NS,
        b"time_discovered_started_ns" => TIME_STARTED_NS,
        b"time_discovered_completed_ns" => TIME_COMPLETED_NS,
        b"timeout_ms" => TIMEOUT_MS,
        b"frames" => FRAMES,
        _ => return None,
    })
}

/// An entry's members, collected in one walk.
pub(super) struct Fields<T> {
    values: [Option<T>; FIELDS.len()],
}

/// A member that is not one of [`FIELDS`].
const NOT_A_FIELD: u8 = u8::MAX;
/// Most member keys remembered by identity.
const MAX_KEY_FIELDS: usize = 64;

impl<'a, T: Tree<'a>> Fields<T> {
    /// The members of `e`, when it is a dict; `known` maps the previous
    /// entry's key identities, position by position, to field indices.
    fn of(e: T, known: &mut Vec<(u32, u8)>) -> Option<Self> {
        let mut values = [None; FIELDS.len()];
        let mut at = 0;
        let is_dict = e.members(|k, id, v| {
            let field = match (id, known.get(at)) {
                (Some(id), Some(&(seen, field))) if seen == id => field,
                _ => {
                    let field = field_index(k).map_or(NOT_A_FIELD, |f| f as u8);
                    match (id, known.get_mut(at)) {
                        (Some(id), Some(slot)) => *slot = (id, field),
                        (Some(id), None) if at < MAX_KEY_FIELDS => known.push((id, field)),
                        _ => {}
                    }
                    field
                }
            };
            if let Some(slot) = values.get_mut(usize::from(field)) {
                *slot = Some(v);
            }
            at += 1;
        });
        is_dict.then_some(Self { values })
    }

    /// Field `i`, `None` when absent or null.
    fn get(&self, i: usize) -> Option<T> {
        self.values[i].filter(|v| !v.is_null())
    }

    fn int(&self, i: usize, absent: i64) -> Result<i64> {
        match self.get(i) {
            None => Ok(absent),
            Some(v) => v
                .int_like()
                .ok_or_else(|| bad(FIELDS[i], "an integer", v.type_name())),
        }
    }

    fn text(&self, i: usize) -> Result<&'a [u8]> {
        match self.get(i) {
            None => Ok(b""),
            Some(v) => v
                .str_bytes()
                .ok_or_else(|| bad(FIELDS[i], "a string", v.type_name())),
        }
    }

    fn flag(&self, i: usize) -> Result<bool> {
        match self.get(i) {
            None => Ok(false),
            Some(v) => v
                .as_bool()
                .or_else(|| v.as_i64().map(|i| i != 0))
                .ok_or_else(|| bad(FIELDS[i], "a boolean", v.type_name())),
        }
    }

    /// Writes sizes field `i` as canonical JSON text into `out`; returns
    /// the total element count.
    fn sizes(&self, i: usize, out: &mut Vec<u8>) -> Result<i64> {
        let field = FIELDS[i];
        let Some(v) = self.get(i) else { return Ok(0) };
        let n = v
            .seq_len()
            .ok_or_else(|| bad(field, "a list of shapes", v.type_name()))?;
        out.push(b'[');
        let mut total: i64 = 0;
        for i in 0..n {
            let shape = v.element(i).unwrap_or(v);
            let dims = shape
                .seq_len()
                .ok_or_else(|| bad(field, "a list of shapes", shape.type_name()))?;
            out.extend_from_slice(if i > 0 { b",[" } else { b"[" });
            let mut numel: i64 = 1;
            for d in 0..dims {
                let x = shape
                    .element(d)
                    .and_then(|x| x.as_i64())
                    .ok_or_else(|| bad(field, "integer dimensions", "another type"))?;
                if d > 0 {
                    out.push(b',');
                }
                write_i64(out, x);
                numel = numel.saturating_mul(x.max(0));
            }
            out.push(b']');
            total = total.saturating_add(numel);
        }
        out.push(b']');
        Ok(total)
    }

    /// Writes dtype names of field `i`, comma-joined, into `out`.
    fn dtypes(&self, i: usize, out: &mut Vec<u8>) -> Result<()> {
        let field = FIELDS[i];
        let Some(v) = self.get(i) else { return Ok(()) };
        let n = v
            .seq_len()
            .ok_or_else(|| bad(field, "a list of dtype names", v.type_name()))?;
        for i in 0..n {
            let d = v.element(i).and_then(|d| d.str_bytes());
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(d.ok_or_else(|| bad(field, "dtype names", "another type"))?);
        }
        Ok(())
    }
}

fn bad(field: &str, expected: &str, got: &str) -> Error {
    Error::invalid(format!("{field}: expected {expected}, got {got}"))
}

fn state(s: &[u8]) -> Result<EntryState> {
    match s {
        b"" | b"scheduled" => Ok(EntryState::Scheduled),
        b"started" => Ok(EntryState::Started),
        b"completed" => Ok(EntryState::Completed),
        other => Err(Error::invalid(format!(
            "state: expected scheduled, started or completed, got '{}'",
            String::from_utf8_lossy(other)
        ))),
    }
}

/// Reads one entry.
pub(super) fn read_entry<'a, T: Tree<'a>>(
    e: T,
    interner: &mut Interner,
    dump: &mut FrDump,
) -> Result<FrEntry> {
    let Some(fields) = Fields::of(e, &mut interner.key_fields) else {
        return Err(Error::invalid(format!(
            "expected a dict, got {}",
            e.type_name()
        )));
    };
    let e = &fields;
    let (name, op, peer) = interner.name(dump, e.get(PROFILING_NAME))?;
    let (mut in_numel, mut out_numel) = (0, 0);
    let in_sizes = interner.text_with(dump, |b| {
        in_numel = e.sizes(INPUT_SIZES, b)?;
        Ok(())
    })?;
    let out_sizes = interner.text_with(dump, |b| {
        out_numel = e.sizes(OUTPUT_SIZES, b)?;
        Ok(())
    })?;
    let group = interner.group(dump, e.get(PROCESS_GROUP))?;
    let duration_ms = match e.get(DURATION_MS) {
        Some(v) => v
            .as_f64()
            .ok_or_else(|| bad(FIELDS[DURATION_MS], "a number", v.type_name()))?,
        None => f64::NAN,
    };
    let collective_seq = e.values[COLLECTIVE_SEQ_ID].ok_or_else(|| {
        Error::invalid("collective_seq_id: missing (not a Flight Recorder entry)")
    })?;
    let seq = collective_seq.int_like().ok_or_else(|| {
        bad(
            FIELDS[COLLECTIVE_SEQ_ID],
            "an integer",
            collective_seq.type_name(),
        )
    })?;
    Ok(FrEntry {
        group,
        pg_id: e.int(PG_ID, -1)?,
        record_id: e.int(RECORD_ID, -1)?,
        op_id: e.int(OP_ID, -1)?,
        seq,
        p2p_seq: e.int(P2P_SEQ_ID, 0)?,
        is_p2p: e.flag(IS_P2P)? || matches!(op, "send" | "recv"),
        name,
        op,
        peer,
        in_sizes,
        out_sizes,
        in_dtypes: interner.text_with(dump, |b| e.dtypes(INPUT_DTYPES, b))?,
        out_dtypes: interner.text_with(dump, |b| e.dtypes(OUTPUT_DTYPES, b))?,
        in_numel,
        out_numel,
        state: state(e.text(STATE)?)?,
        retired: e.flag(RETIRED)?,
        created_ns: e.int(TIME_CREATED_NS, 0)?,
        started_ns: e.int(TIME_STARTED_NS, 0)?,
        completed_ns: e.int(TIME_COMPLETED_NS, 0)?,
        duration_ms,
        timeout_ms: e.int(TIMEOUT_MS, -1)?,
        stack: interner.stack(dump, e.get(FRAMES))?,
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
    use super::{FIELDS, canonical_op, field_index};

    #[test]
    fn every_field_name_maps_to_its_index() {
        for (i, name) in FIELDS.iter().enumerate() {
            assert_eq!(field_index(name.as_bytes()), Some(i), "{name}");
        }
        assert_eq!(field_index(b"thread_id"), None);
    }

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
