//! PyTorch Flight Recorder dumps (`_dump_fr_trace`, `_dump_nccl_trace`,
//! `_dump_fr_trace_json`, and the files written on a NCCL timeout) read into
//! an [`FrDump`]: the dump's groups, `pg_status` and one [`FrEntry`] per ring
//! entry, gloo and NCCL flavours, pickle and JSON encodings.
//!
//! The pickle is untrusted: it is decoded by [`crate::import::pickle`], which
//! builds only plain containers, strings and numbers and refuses every
//! global, so nothing in a dump can run. Both encodings go through one
//! reader ([`tree::Tree`]).
//!
//! Invariants: entries keep the ring's order (`record_id`); strings that
//! repeat (profiling names, shapes, dtypes, stacks) are interned once per
//! dump; `pg_config` is kept as the hint it is (the diagnosis cross-checks
//! it); a field of the wrong type is an error naming the entry and the field,
//! an absent optional field takes its "unknown" value (−1, 0, `NaN`).

pub mod codec;
mod entry;
#[cfg(test)]
mod tests;
pub mod tree;

use self::tree::Tree;
use crate::error::{Error, Result};
use crate::import::pickle::{self, PickleLimits};
use crate::import::stacks::Frame;
use crate::json::{JsonLimits, OPEN_BRACE, parse};

/// Pickle's `EMPTY_DICT` opcode (the closing-brace byte).
const EMPTY_DICT: u8 = crate::json::CLOSE_BRACE;

/// Where an entry is in its lifecycle, as the dump says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Enqueued (gloo entries stay here even when finished).
    Scheduled,
    /// Started on the device (NCCL with timing).
    Started,
    /// Completed.
    Completed,
}

/// One ring entry.
#[derive(Debug, Clone, PartialEq)]
pub struct FrEntry {
    /// Index into [`FrDump::groups`].
    pub group: u32,
    /// The per-process group id.
    pub pg_id: i64,
    /// Position in the ring.
    pub record_id: i64,
    /// Op counter of the group (counts p2p too).
    pub op_id: i64,
    /// Collective sequence number in the group (0 for p2p).
    pub seq: i64,
    /// p2p sequence number in the group.
    pub p2p_seq: i64,
    /// Point-to-point.
    pub is_p2p: bool,
    /// Index into [`FrDump::texts`]: `profiling_name`.
    pub name: u32,
    /// Canonical op: `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`,
    /// `reduce`, `all_to_all`, `gather`, `scatter`, `barrier`, `send`,
    /// `recv`, `coalesced`, or `other`.
    pub op: &'static str,
    /// p2p peer as a group rank (`nccl:send 0->1`), −1 when absent.
    pub peer: i64,
    /// Index into [`FrDump::texts`]: input sizes, canonical JSON.
    pub in_sizes: u32,
    /// Index into [`FrDump::texts`]: output sizes, canonical JSON.
    pub out_sizes: u32,
    /// Index into [`FrDump::texts`]: input dtypes, comma-joined.
    pub in_dtypes: u32,
    /// Index into [`FrDump::texts`]: output dtypes, comma-joined.
    pub out_dtypes: u32,
    /// Total input elements.
    pub in_numel: i64,
    /// Total output elements.
    pub out_numel: i64,
    /// Lifecycle state.
    pub state: EntryState,
    /// The recorder has let go of it (finished, or failed and cleaned up).
    pub retired: bool,
    /// `time_created_ns` (CLOCK_REALTIME), 0 when absent.
    pub created_ns: i64,
    /// `time_discovered_started_ns`, 0 when absent.
    pub started_ns: i64,
    /// `time_discovered_completed_ns`, 0 when absent.
    pub completed_ns: i64,
    /// `duration_ms`, `NaN` when absent.
    pub duration_ms: f64,
    /// `timeout_ms`, −1 when absent.
    pub timeout_ms: i64,
    /// Index into [`FrDump::stacks`], −1 when the entry has no frames.
    pub stack: i64,
}

/// One `pg_config` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// Global name.
    pub name: String,
    /// Description.
    pub desc: String,
    /// Member global ranks, when the row lists them.
    pub ranks: Option<Vec<i64>>,
}

/// One `pg_status` row (op counters, not sequence numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgStatus {
    /// The per-process group id it is keyed by.
    pub pg_id: i64,
    /// `last_enqueued_collective`.
    pub enqueued: i64,
    /// `last_started_collective` (−1 without timing).
    pub started: i64,
    /// `last_completed_collective`.
    pub completed: i64,
}

/// One rank's dump.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrDump {
    /// `version`.
    pub version: String,
    /// `comm_lib_version`.
    pub comm_lib_version: String,
    /// Rows of `pg_config` that name a group.
    pub pg_config: Vec<PgConfig>,
    /// The ranks of `pg_config` rows that name no group (gloo writes one,
    /// for the last group it configured, not always the world): ranks the
    /// job has, whatever their group.
    pub unnamed_ranks: Vec<i64>,
    /// `pg_status`, sorted by `pg_id`.
    pub pg_status: Vec<PgStatus>,
    /// `(global name, description)` of the groups entries name.
    pub groups: Vec<(String, String)>,
    /// Interned strings.
    pub texts: Vec<String>,
    /// Interned Python stacks, innermost frame first.
    pub stacks: Vec<Vec<Frame>>,
    /// Entries in ring order.
    pub entries: Vec<FrEntry>,
    /// Whether any entry carries start/completion timestamps or a duration.
    pub timing: bool,
    /// `pickle` or `json`.
    pub encoding: &'static str,
}

impl FrDump {
    /// An interned string.
    #[must_use]
    pub fn text(&self, i: u32) -> &str {
        self.texts.get(i as usize).map_or("", String::as_str)
    }
}

/// Whether the start of a file looks like a pickle: protocol 2+ (`PROTO`
/// first), or a protocol 0/1 stream opening a dict or list (`(dp0`, `}q`,
/// `]q`) or naming a global (`cmodule\nname\n`).
#[must_use]
pub fn looks_like_pickle(head: &[u8]) -> bool {
    let ident = |s: &[u8]| {
        !s.is_empty()
            && s.iter()
                .all(|b| b.is_ascii_alphanumeric() || b"_.".contains(b))
    };
    match head {
        [0x80, ..] => true,
        [b'(', b'd' | b'l', b'p' | b'\n', ..] | [EMPTY_DICT | b']', b'q' | b'(' | b'.', ..] => true,
        [b'c', rest @ ..] => {
            let mut lines = rest.splitn(3, |&b| b == b'\n');
            matches!((lines.next(), lines.next(), lines.next()), (Some(m), Some(n), Some(_)) if ident(m) && ident(n))
        }
        _ => false,
    }
}

/// Whether `bytes` look like a dump encoding this reader takes (a pickle, or
/// JSON whose first 64 KiB mention `entries` or `pg_config`).
#[must_use]
pub fn sniff(bytes: &[u8]) -> bool {
    if looks_like_pickle(bytes) {
        return true;
    }
    let head = &bytes[..bytes.len().min(65536)];
    let start = head.iter().position(|b| !b.is_ascii_whitespace());
    start.is_some_and(|s| head[s] == OPEN_BRACE)
        && [
            b"\"entries\"".as_slice(),
            b"\"pg_config\"",
            b"\"pg_status\"",
        ]
        .iter()
        .any(|k| head.windows(k.len()).any(|w| w == *k))
}

/// Reads one dump from its bytes (pickle or JSON, told apart by content).
///
/// # Errors
/// Not a dump, a refused or malformed pickle, malformed JSON, no `entries`,
/// or a field of the wrong type (the message names the field).
pub fn read_dump(bytes: &[u8]) -> Result<FrDump> {
    let first = bytes.iter().position(|b| !b.is_ascii_whitespace());
    match first.map(|i| bytes[i]) {
        Some(OPEN_BRACE) => {
            let limits = JsonLimits {
                max_depth: 32,
                ..JsonLimits::default()
            };
            let doc = parse(bytes, limits)?;
            let root = doc
                .root()
                .ok_or_else(|| Error::invalid("empty JSON document"))?;
            read_tree(root, "json")
        }
        None => Err(Error::invalid("empty file: not a Flight Recorder dump")),
        Some(_) if looks_like_pickle(bytes) => {
            let doc = pickle::load(bytes, PickleLimits::default())?;
            read_tree(doc.root(), "pickle")
        }
        Some(_) => Err(Error::invalid(
            "not a Flight Recorder dump (neither a pickle nor a JSON object)",
        )),
    }
}

fn read_tree<'a, T: Tree<'a>>(root: T, encoding: &'static str) -> Result<FrDump> {
    if root.get("version").is_none() && root.get("entries").is_none() {
        return Err(Error::invalid(format!(
            "not a Flight Recorder dump: a dict with 'version' and 'entries' is expected, got {}",
            root.type_name()
        )));
    }
    let entries = root.get("entries").ok_or_else(|| {
        Error::invalid(
            "Flight Recorder dump has no 'entries' (was it dumped with collectives excluded?)",
        )
    })?;
    let count = entries.seq_len().ok_or_else(|| {
        Error::invalid(format!(
            "'entries' must be a list, got {}",
            entries.type_name()
        ))
    })?;
    let (pg_config, unnamed_ranks) = read_pg_config(root)?;
    let mut dump = FrDump {
        version: text_field(root, "version")?,
        comm_lib_version: text_field(root, "comm_lib_version")?,
        pg_config,
        unnamed_ranks,
        pg_status: read_pg_status(root)?,
        encoding,
        ..FrDump::default()
    };
    let mut interner = entry::Interner::default();
    dump.entries.reserve(count.min(1 << 20));
    for i in 0..count {
        let e = entries.element(i).unwrap_or(entries);
        let parsed = entry::read_entry(e, &mut interner, &mut dump)
            .map_err(|err| Error::invalid(format!("entries[{i}].{}", err.message())))?;
        dump.timing |=
            parsed.started_ns > 0 || parsed.completed_ns > 0 || parsed.duration_ms.is_finite();
        dump.entries.push(parsed);
    }
    Ok(dump)
}

fn text_field<'a, T: Tree<'a>>(root: T, key: &str) -> Result<String> {
    match root.get(key) {
        None => Ok(String::new()),
        Some(v) if v.is_null() => Ok(String::new()),
        Some(v) => v.as_str().map(str::to_owned).ok_or_else(|| {
            Error::invalid(format!("'{key}' must be a string, got {}", v.type_name()))
        }),
    }
}

/// The named rows, and the ranks the unnamed rows list.
fn read_pg_config<'a, T: Tree<'a>>(root: T) -> Result<(Vec<PgConfig>, Vec<i64>)> {
    let Some(config) = root.get("pg_config") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut out = Vec::new();
    let mut unnamed = Vec::new();
    let mut failure: Option<Error> = None;
    let is_dict = config.members(|key, _, row| {
        if failure.is_some() {
            return;
        }
        match pg_config_row(&String::from_utf8_lossy(key), row) {
            Ok(r) if r.name.is_empty() => unnamed.extend(r.ranks.unwrap_or_default()),
            Ok(r) => out.push(r),
            Err(e) => failure = Some(e),
        }
    });
    if !is_dict && !config.is_null() {
        return Err(Error::invalid(format!(
            "'pg_config' must be a dict, got {}",
            config.type_name()
        )));
    }
    unnamed.sort_unstable();
    unnamed.dedup();
    match failure {
        Some(e) => Err(e),
        None => Ok((out, unnamed)),
    }
}

/// One row; its `name` is empty when the row names no group.
fn pg_config_row<'a, T: Tree<'a>>(key: &str, row: T) -> Result<PgConfig> {
    let field = |k: &str| row.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
    let name = match field("name") {
        n if n.is_empty() => key.to_owned(),
        n => n,
    };
    let ranks = match row.get("ranks") {
        None => None,
        Some(v) => Some(rank_list(v).ok_or_else(|| {
            Error::invalid(format!(
                "pg_config['{key}'].ranks: expected a list of ranks"
            ))
        })?),
    };
    let ranks = ranks.filter(|r| !r.is_empty());
    Ok(PgConfig {
        name,
        desc: field("desc"),
        ranks,
    })
}

/// A rank list: a list of integers or its text (`"[0, 1, 2]"`).
fn rank_list<'a, T: Tree<'a>>(v: T) -> Option<Vec<i64>> {
    if let Some(n) = v.seq_len() {
        return (0..n)
            .map(|i| v.element(i).and_then(|x| x.int_like()))
            .collect();
    }
    let text = v.as_str()?.trim();
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|p| p.trim().parse().ok()).collect()
}

fn read_pg_status<'a, T: Tree<'a>>(root: T) -> Result<Vec<PgStatus>> {
    let Some(status) = root.get("pg_status") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut failure: Option<Error> = None;
    status.members(|key, _, row| {
        let counter = |k: &str| row.get(k).and_then(|v| v.int_like()).unwrap_or(-1);
        let key = String::from_utf8_lossy(key);
        match key.trim().parse::<i64>() {
            Ok(pg_id) => out.push(PgStatus {
                pg_id,
                enqueued: counter("last_enqueued_collective"),
                started: counter("last_started_collective"),
                completed: counter("last_completed_collective"),
            }),
            Err(_) if failure.is_none() => {
                failure = Some(Error::invalid(format!(
                    "pg_status: key '{key}' is not a process-group id"
                )));
            }
            Err(_) => {}
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    out.sort_by_key(|s| s.pg_id);
    Ok(out)
}
