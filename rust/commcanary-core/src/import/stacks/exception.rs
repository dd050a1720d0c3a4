//! The main exception of a text and the timeout behind it.
//!
//! The main exception is the last one that ends a traceback (so of chained
//! exceptions, the last); a text with no traceback falls back to its last
//! standalone exception line. Its message is the rest of that line.
//!
//! A [`Timeout`] is read from the main message first, then from the other
//! exception messages of the text, last first. Recognised, in this order:
//! the NCCL watchdog (`Watchdog caught collective operation timeout:
//! WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…)`),
//! gloo (`Timed out waiting <N>ms for send|recv operation to complete`), and
//! any other message saying `timed out` or `timeout`. A lost peer
//! (`Connection closed by peer`, `Connection reset by peer`) is not a
//! timeout: see [`ExceptionText::peer_lost`].

use super::traceback::{ExceptionLine, Item, scan};
use super::{Frame, text_lines};

/// The longest generic timeout [`Timeout::detail`], in bytes.
const MAX_DETAIL: usize = 240;

/// An exception read from a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptionText {
    /// The type as printed, without a `builtins.` prefix (`RuntimeError`,
    /// `torch.distributed.DistBackendError`).
    pub type_name: String,
    /// The message: the rest of the exception line (may be empty).
    pub message: String,
    /// The traceback's frames, innermost first; empty without a traceback.
    pub frames: Vec<Frame>,
    /// The timeout the text reports, if any.
    pub timeout: Option<Timeout>,
}

impl ExceptionText {
    /// Whether the message says a peer went away (gloo `Connection closed
    /// by peer` / `Connection reset by peer`).
    #[must_use]
    pub fn peer_lost(&self) -> bool {
        let message = self.message.to_ascii_lowercase();
        message.contains("connection closed by peer")
            || message.contains("connection reset by peer")
    }
}

/// A communication timeout, as an exception message reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    /// The timeout in milliseconds, when the message gives it.
    pub timeout_ms: Option<u64>,
    /// `gloo`, `nccl`, or `unknown`.
    pub backend: &'static str,
    /// What timed out: `send` or `recv` (gloo), `watchdog` (NCCL watchdog),
    /// else the message itself (at most 240 bytes).
    pub detail: String,
    /// The collective's sequence number (NCCL `SeqNum`).
    pub seq: Option<u64>,
    /// The canonical collective (NCCL `OpType`, e.g. `all_reduce`).
    pub op: Option<String>,
    /// Input element count (NCCL `NumelIn`).
    pub numel_in: Option<u64>,
    /// Output element count (NCCL `NumelOut`).
    pub numel_out: Option<u64>,
    /// The process group (`0(default_pg)` from `PG GUID 0(default_pg)`).
    pub pg: Option<String>,
}

/// The main exception of a text; `None` when the text has no exception
/// line.
#[must_use]
pub fn parse_exception(bytes: &[u8]) -> Option<ExceptionText> {
    let lines = text_lines(bytes);
    let items = scan(&lines);
    let main = items
        .iter()
        .rposition(|item| matches!(item, Item::Traceback(t) if t.exception.is_some()))
        .or_else(|| {
            items
                .iter()
                .rposition(|item| matches!(item, Item::Standalone(_)))
        })?;
    let (line, frames) = match &items[main] {
        Item::Traceback(t) => (t.exception.as_ref()?, t.frames.clone()),
        Item::Standalone(line) => (line, Vec::new()),
    };
    let others = items.iter().enumerate().rev().filter(|&(i, _)| i != main);
    let timeout = std::iter::once(line)
        .chain(others.filter_map(|(_, item)| exception_of(item)))
        .find_map(timeout_of);
    Some(ExceptionText {
        type_name: line.type_name.clone(),
        message: line.message.clone(),
        frames,
        timeout,
    })
}

/// The exception line of an item, if it has one.
fn exception_of(item: &Item) -> Option<&ExceptionLine> {
    match item {
        Item::Traceback(t) => t.exception.as_ref(),
        Item::Standalone(line) => Some(line),
    }
}

/// The timeout an exception line reports.
fn timeout_of(line: &ExceptionLine) -> Option<Timeout> {
    let message = line.message.as_str();
    nccl_watchdog(message)
        .or_else(|| gloo_timeout(message))
        .or_else(|| generic_timeout(&line.type_name, message))
}

/// A timeout with only its backend and detail known.
fn bare(backend: &'static str, detail: String) -> Timeout {
    Timeout {
        timeout_ms: None,
        backend,
        detail,
        seq: None,
        op: None,
        numel_in: None,
        numel_out: None,
        pg: None,
    }
}

/// `… Watchdog caught collective operation timeout: WorkNCCL(…) ran for …`.
fn nccl_watchdog(message: &str) -> Option<Timeout> {
    let start = message.find("WorkNCCL(")? + "WorkNCCL(".len();
    let said =
        message.contains("collective operation timeout") || message[start..].contains("timing out");
    if !said {
        return None;
    }
    let mut timeout = bare("nccl", "watchdog".to_owned());
    timeout.pg = pg_of(message);
    for field in balanced(&message[start..]).split(',') {
        let Some((key, value)) = field.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "SeqNum" => timeout.seq = leading_number(value),
            "OpType" => timeout.op = Some(nccl_op(value)),
            "NumelIn" => timeout.numel_in = leading_number(value),
            "NumelOut" => timeout.numel_out = leading_number(value),
            "Timeout(ms)" => timeout.timeout_ms = leading_number(value),
            _ => {}
        }
    }
    Some(timeout)
}

/// The text up to the `)` that closes an already opened `(`, or all of it.
fn balanced(text: &str) -> &str {
    let mut depth = 1_usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..i];
                }
            }
            _ => {}
        }
    }
    text
}

/// The process group of an NCCL message: `PG GUID 0(default_pg)`, else the
/// older `[PG 0 (default_pg) Rank 3]` form's `0 (default_pg)`.
fn pg_of(message: &str) -> Option<String> {
    let rest = match message.find("PG GUID ") {
        Some(at) => &message[at + "PG GUID ".len()..],
        None => &message[message.find("[PG ")? + "[PG ".len()..],
    };
    let end = [rest.find(" Rank"), rest.find(']')]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    let pg = rest[..end].trim();
    (!pg.is_empty()).then(|| pg.to_owned())
}

/// The canonical collective of an NCCL `OpType`.
fn nccl_op(op_type: &str) -> String {
    let canonical = match op_type {
        "ALLREDUCE" => "all_reduce",
        "ALLGATHER" | "_ALLGATHER_BASE" => "all_gather",
        "REDUCE_SCATTER" | "_REDUCE_SCATTER_BASE" => "reduce_scatter",
        "BROADCAST" => "broadcast",
        "REDUCE" => "reduce",
        "ALLTOALL" | "ALLTOALL_BASE" => "all_to_all",
        "BARRIER" => "barrier",
        "SEND" => "send",
        "RECV" => "recv",
        "COALESCED" => "coalesced",
        other => return other.to_ascii_lowercase(),
    };
    canonical.to_owned()
}

/// gloo's `Timed out waiting <N>ms for <send|recv> operation to complete`.
fn gloo_timeout(message: &str) -> Option<Timeout> {
    const LEAD: &str = "Timed out waiting ";
    let rest = &message[message.find(LEAD)? + LEAD.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let operation = rest[digits..].strip_prefix("ms for ")?;
    let detail = operation.split(' ').next().unwrap_or("");
    let mut timeout = bare("gloo", detail.to_owned());
    timeout.timeout_ms = rest_number(rest);
    Some(timeout)
}

/// Any other message saying `timed out` / `timeout` (or a `…Timeout…`
/// type). The backend is read from the message (`NCCL`, `gloo`) when named.
fn generic_timeout(type_name: &str, message: &str) -> Option<Timeout> {
    let lower = message.to_ascii_lowercase();
    let said = lower.contains("timed out")
        || lower.contains("timeout")
        || type_name
            .rsplit('.')
            .next()
            .unwrap_or("")
            .contains("Timeout");
    if !said {
        return None;
    }
    let backend = if message.contains("NCCL") {
        "nccl"
    } else if lower.contains("gloo") {
        "gloo"
    } else {
        "unknown"
    };
    let mut timeout = bare(backend, truncate(message.trim(), MAX_DETAIL).to_owned());
    timeout.timeout_ms = message
        .find("Timeout(ms)=")
        .and_then(|at| rest_number(&message[at + "Timeout(ms)=".len()..]))
        .or_else(|| ms_value(message));
    timeout.pg = pg_of(message);
    Some(timeout)
}

/// The first `<digits>ms` (not followed by a letter) of `message`.
fn ms_value(message: &str) -> Option<u64> {
    let bytes = message.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() || (i > 0 && bytes[i - 1].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        let after = &bytes[i + digits..];
        if after.starts_with(b"ms") && !after.get(2).is_some_and(u8::is_ascii_alphabetic) {
            return message[i..i + digits].parse().ok();
        }
        i += digits;
    }
    None
}

/// The number `text` starts with.
fn rest_number(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    text[..digits].parse().ok()
}

/// The number a field value starts with (`86`, `[262144]` reads 262144).
fn leading_number(value: &str) -> Option<u64> {
    rest_number(value.trim_start_matches('['))
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
