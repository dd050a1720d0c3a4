//! Chrome-trace (`traceEvents`) reading, one event at a time.
//!
//! [`scan_file`] / [`scan_bytes`] hand every element of `traceEvents` to a
//! callback as a [`RawEvent`]: the handful of top-level fields importers
//! select on, plus the raw JSON text of `args`, parsed only for the events
//! an importer keeps. The other top-level members of the document (the
//! header: `distributedInfo`, `baseTimeNanoseconds`, …) come back as raw
//! JSON text. Elements that are not objects are skipped and counted.
//!
//! Messages carry no path; the caller adds it.

use std::borrow::Cow;
use std::path::Path;

use crate::error::{Error, Result};
use crate::input::{MAX_INPUT_BYTES, read_input};
use crate::json::{JsonLimits, Value, canon, parse};

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
            max_total_bytes: 64 << 30,
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

/// Scans a plain or gzip Chrome-trace file.
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
    let bytes = read_input(path, limits.max_total_bytes.min(MAX_INPUT_BYTES))?;
    scan_bytes(&bytes, limits, on_event)
}

/// Scans an in-memory (decompressed) Chrome-trace document.
///
/// # Errors
/// As [`scan_file`], without the I/O.
pub fn scan_bytes(
    bytes: &[u8],
    _limits: &ScanLimits,
    on_event: &mut OnEvent<'_>,
) -> Result<ScannedTrace> {
    let doc = parse(bytes, JsonLimits::default())?;
    let root = doc
        .root()
        .ok_or_else(|| Error::invalid("is not a Kineto trace"))?;
    let mut scanned = ScannedTrace {
        bytes: bytes.len() as u64,
        ..ScannedTrace::default()
    };
    let events = if root.is_array() {
        root
    } else if root.is_object() {
        let mut events = None;
        for (key, value) in root.members() {
            if key == b"traceEvents" {
                events = Some(value);
            } else {
                let key = String::from_utf8_lossy(key).into_owned();
                scanned.header.push((key, canon::to_vec(value)));
            }
        }
        events.filter(Value::is_array).ok_or_else(|| {
            Error::invalid("is not a PyTorch profiler trace: field 'traceEvents' must be a list")
        })?
    } else {
        return Err(Error::invalid("is not a Kineto trace"));
    };
    for (index, event) in events.elements().enumerate() {
        if !event.is_object() {
            scanned.non_objects += 1;
            continue;
        }
        let text = |k: &str| event.get(k).and_then(|v| v.as_str()).map(Cow::Borrowed);
        let raw = |k: &str| event.get(k).map(|v| Cow::Owned(canon::to_vec(v)));
        let number = |k: &str| event.get(k).and_then(|v| v.as_number());
        on_event(&RawEvent {
            index,
            ph: text("ph"),
            cat: text("cat"),
            name: text("name"),
            pid: raw("pid"),
            tid: raw("tid"),
            ts: number("ts"),
            dur: number("dur"),
            args: raw("args"),
        })?;
        scanned.events += 1;
    }
    Ok(scanned)
}
