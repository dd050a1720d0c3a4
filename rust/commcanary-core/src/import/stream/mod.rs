//! Chrome-trace (`traceEvents`) reading, one event at a time, streaming.
//!
//! [`scan_file`] / [`scan_bytes`] hand every element of `traceEvents` to a
//! callback as a [`RawEvent`]: the handful of top-level fields importers
//! select on, plus the raw JSON text of `args`, parsed only for the events
//! an importer keeps. The other top-level members of the document (the
//! header: `distributedInfo`, `baseTimeNanoseconds`, …) come back as raw
//! JSON text. Raw texts (`pid`, `tid`, `args`, header values) are the bytes
//! as written, whitespace included, not canonical JSON. Elements that are
//! not objects are skipped and counted. The document is an object with a
//! `traceEvents` list (members in any order) or a bare list of events.
//!
//! Invariants:
//! * **Bounded memory.** A file is read in chunks of 4 MiB (gzip detected
//!   by its magic bytes and decompressed as it is read) into a
//!   buffer that holds the unit being read (an event, a header member or
//!   key) plus one chunk, never the document. A unit longer than its limit
//!   (`max_event_bytes`, `max_header_bytes`) is refused before the buffer
//!   grows past that limit plus one chunk; more than `max_total_bytes`
//!   decompressed bytes are refused.
//! * **Strict JSON.** Every byte is checked, skipped values included:
//!   brackets, commas and colons, strings (escapes, control characters,
//!   UTF-8), numbers (grammar, at most 1024 characters, floats finite),
//!   literals; `NaN`/`Infinity`, a byte-order mark and trailing data are
//!   refused; nesting is at most 64 levels inside an event (the event is
//!   level 1) or a header member (the document is level 1). Duplicate keys
//!   are refused among the top-level members and among the fields a
//!   [`RawEvent`] carries; elsewhere (inside `args`, among skipped fields)
//!   they are not detected: parse `args` with [`crate::json::parse`].
//!   Malformed JSON is [`ErrorKind::Json`] `is not valid JSON: <what> at
//!   byte N` (N counts decompressed bytes), as [`crate::json::parse`] reports
//!   it, so [`Error::with_path`] reads `<path> is not valid JSON: …`.
//! * **Truncation is an error** ([`ErrorKind::Json`] `is not valid JSON:
//!   truncated at byte N`, or [`ErrorKind::Io`] `is a truncated gzip file`).
//! * **Events are handed over as they are read.** The callback may see
//!   events of a document that later turns out malformed; the scan then
//!   fails and the caller discards what it collected.
//! * No panics on any input; no allocation per event on the common path
//!   (strings without escapes are borrowed from the buffer).
//!
//! Layout (each file's header states what it owns):
//! * `mod.rs` — the public types, [`scan_file`], [`scan_bytes`], the
//!   reader entry point and the error constructors the others share;
//! * `feed` — the input side: a refillable window over a slice or a
//!   reader, gzip detected by its magic bytes;
//! * `scanner` — the document's state machine: top-level members, the
//!   `traceEvents` list, each unit read whole from the window;
//! * `lexer` — the token-level cursor over the window: strings, numbers,
//!   literals, skipped values;
//! * `event` — the fields a [`RawEvent`] carries, read by the cursor;
//! * `bytes` — byte-level helpers: whitespace, digit and string runs eight
//!   bytes at a time, number values, unescaping.
//!
//! Messages carry no path; the caller adds it.

mod bytes;
mod event;
mod feed;
mod lexer;
mod scanner;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_props;

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

use feed::{ReadFeed, SliceFeed};
use scanner::Scanner;

/// Bytes read from a file at a time.
const CHUNK_BYTES: usize = 4 << 20;

/// One element of `traceEvents`, borrowed from the reader's buffer.
#[derive(Debug, Clone, Default)]
pub struct RawEvent<'a> {
    /// Position of the element in `traceEvents`.
    pub index: usize,
    /// `ph`, when it is a string.
    pub ph: Option<Cow<'a, str>>,
    /// `cat`, when it is a string.
    pub cat: Option<Cow<'a, str>>,
    /// `name`, when it is a string.
    pub name: Option<Cow<'a, str>>,
    /// `pid` as written (a number or a quoted string).
    pub pid: Option<Cow<'a, [u8]>>,
    /// `tid` as written (a number or a quoted string).
    pub tid: Option<Cow<'a, [u8]>>,
    /// `ts`, when it is a number.
    pub ts: Option<f64>,
    /// `dur`, when it is a number.
    pub dur: Option<f64>,
    /// The JSON text of `args`, when present.
    pub args: Option<Cow<'a, [u8]>>,
}

/// Bounds of one scan.
#[derive(Debug, Clone, Copy)]
pub struct ScanLimits {
    /// Largest (decompressed) document.
    pub max_total_bytes: u64,
    /// Largest single event.
    pub max_event_bytes: usize,
    /// Largest header member.
    pub max_header_bytes: usize,
}

impl Default for ScanLimits {
    fn default() -> Self {
        Self {
            max_total_bytes: crate::limits::current().max_input_bytes,
            max_event_bytes: 16 << 20,
            max_header_bytes: 64 << 20,
        }
    }
}

/// What a scan saw besides the events.
#[derive(Debug, Clone, Default)]
pub struct ScannedTrace {
    /// Top-level members other than `traceEvents`, as `(key, JSON text)`.
    pub header: Vec<(String, Vec<u8>)>,
    /// Elements of `traceEvents` handed to the callback.
    pub events: u64,
    /// Elements skipped because they are not objects.
    pub non_objects: u64,
    /// Decompressed bytes read.
    pub bytes: u64,
}

/// The callback a scan feeds.
pub type OnEvent<'f> = dyn FnMut(&RawEvent<'_>) -> Result<()> + 'f;

/// Scans a plain or gzip Chrome-trace file, reading it in chunks.
///
/// # Errors
/// I/O and gzip errors, invalid JSON, a document that is neither an object
/// with a `traceEvents` list nor a list, exceeded limits, and whatever the
/// callback returns.
pub fn scan_file(
    path: &Path,
    limits: &ScanLimits,
    on_event: &mut OnEvent<'_>,
) -> Result<ScannedTrace> {
    let file = open_input(path)?;
    scan_reader(file, limits, CHUNK_BYTES, on_event).map(|(scanned, _)| scanned)
}

/// Scans an in-memory (decompressed) Chrome-trace document.
///
/// # Errors
/// As [`scan_file`], without the I/O.
pub fn scan_bytes(
    bytes: &[u8],
    limits: &ScanLimits,
    on_event: &mut OnEvent<'_>,
) -> Result<ScannedTrace> {
    if bytes.len() as u64 > limits.max_total_bytes {
        return Err(total_limit(limits.max_total_bytes));
    }
    Scanner::new(SliceFeed { bytes, start: 0 }, limits).run(on_event)
}

/// Opens `path` for reading, with [`crate::input::read_input`]'s messages.
fn open_input(path: &Path) -> Result<File> {
    let cannot = |e: io::Error| Error::new(ErrorKind::Io, format!("cannot be read: {e}"));
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::new(ErrorKind::Io, "does not exist"),
        _ => cannot(e),
    })?;
    if meta.is_dir() {
        return Err(Error::new(ErrorKind::Io, "is a directory, not a file"));
    }
    File::open(path).map_err(cannot)
}

/// Scans what `reader` yields (gzip when it starts with the gzip magic
/// bytes), `chunk` bytes at a time; also returns the largest buffer used.
fn scan_reader<R: Read>(
    reader: R,
    limits: &ScanLimits,
    chunk: usize,
    on_event: &mut OnEvent<'_>,
) -> Result<(ScannedTrace, usize)> {
    let source = feed::sniff(reader)?;
    let feed = ReadFeed::new(source, chunk, limits.max_total_bytes);
    let mut scanner = Scanner::new(feed, limits);
    let scanned = scanner.run_mut(on_event)?;
    Ok((scanned, scanner.feed.peak))
}

fn total_limit(max: u64) -> Error {
    Error::limit(format!("exceeds max_total_bytes={max}"))
}

/// A syntax error at absolute byte offset `at`.
fn syntax(what: &str, at: u64) -> Error {
    Error::new(
        ErrorKind::Json,
        format!("is not valid JSON: {what} at byte {at}"),
    )
}

fn not_a_list() -> Error {
    Error::invalid("is not a PyTorch profiler trace: field 'traceEvents' must be a list")
}
