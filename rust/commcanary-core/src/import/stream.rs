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
//! Messages carry no path; the caller adds it.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::{Error, ErrorKind, Result};
use crate::json::{CLOSE_BRACE, OPEN_BRACE};

/// Bytes read from a file at a time.
const CHUNK_BYTES: usize = 4 << 20;
/// Deepest nesting inside an event or a header member.
const MAX_DEPTH: u32 = 64;
/// Longest numeric token (as [`crate::json::JsonLimits`]' default).
const MAX_NUMBER_CHARS: usize = 1024;

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
    mut reader: R,
    limits: &ScanLimits,
    chunk: usize,
    on_event: &mut OnEvent<'_>,
) -> Result<(ScannedTrace, usize)> {
    let mut head = [0u8; 2];
    let mut got = 0;
    while got < head.len() {
        match reader.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::new(ErrorKind::Io, format!("cannot be read: {e}"))),
        }
    }
    let joined = head.get(..got).unwrap_or_default().chain(reader);
    let source = if got == 2 && head == [0x1f, 0x8b] {
        Source::Gzip(MultiGzDecoder::new(joined))
    } else {
        Source::Plain(joined)
    };
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

// ---------------------------------------------------------------------------
// Input: a window of bytes that can be refilled.

/// Where the scanner's bytes come from: a window over the input, with the
/// absolute offset of its first byte, refilled on demand.
trait Feed {
    /// The bytes available now.
    fn window(&self) -> &[u8];
    /// Absolute offset of `window()[0]`.
    fn base(&self) -> u64;
    /// Decompressed bytes read so far.
    fn total(&self) -> u64;
    /// Whether the input has no more bytes than the window's.
    fn at_end(&self) -> bool;
    /// Drops the window's bytes before `keep` (the window then starts at
    /// the old `keep`) and appends more; `false` at the end of the input.
    fn refill(&mut self, keep: usize) -> Result<bool>;
}

/// A whole document in memory: the window is its unread part, never
/// refilled.
struct SliceFeed<'a> {
    bytes: &'a [u8],
    start: usize,
}

impl Feed for SliceFeed<'_> {
    fn window(&self) -> &[u8] {
        self.bytes.get(self.start..).unwrap_or_default()
    }
    fn base(&self) -> u64 {
        self.start as u64
    }
    fn total(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn at_end(&self) -> bool {
        true
    }
    fn refill(&mut self, keep: usize) -> Result<bool> {
        self.start = (self.start + keep).min(self.bytes.len());
        Ok(false)
    }
}

/// Plain or gzip bytes.
enum Source<R: Read> {
    Plain(R),
    Gzip(MultiGzDecoder<R>),
}

impl<R: Read> Source<R> {
    /// Reads some bytes, mapping errors onto [`ErrorKind::Io`] messages (a
    /// gzip stream that ends early is truncated).
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            let (got, gzip) = match self {
                Source::Plain(r) => (r.read(buf), false),
                Source::Gzip(d) => (d.read(buf), true),
            };
            let message = match got {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if gzip && e.kind() == io::ErrorKind::UnexpectedEof => {
                    "is a truncated gzip file".to_owned()
                }
                Err(e) if gzip => format!("is not a valid gzip file: {e}"),
                Err(e) => format!("cannot be read: {e}"),
            };
            return Err(Error::new(ErrorKind::Io, message));
        }
    }
}

/// A [`Source`] read `chunk` bytes at a time into a buffer holding the
/// unread tail of the previous chunk plus the new one.
struct ReadFeed<R: Read> {
    source: Source<R>,
    buf: Vec<u8>,
    end: usize,
    base: u64,
    chunk: usize,
    total: u64,
    max_total: u64,
    /// The source returned its end.
    exhausted: bool,
    peak: usize,
}

impl<R: Read> ReadFeed<R> {
    fn new(source: Source<R>, chunk: usize, max_total: u64) -> Self {
        Self {
            source,
            buf: Vec::new(),
            end: 0,
            base: 0,
            chunk: chunk.max(1),
            total: 0,
            max_total,
            exhausted: false,
            peak: 0,
        }
    }
}

impl<R: Read> Feed for ReadFeed<R> {
    fn window(&self) -> &[u8] {
        self.buf.get(..self.end).unwrap_or_default()
    }
    fn base(&self) -> u64 {
        self.base
    }
    fn total(&self) -> u64 {
        self.total
    }
    fn at_end(&self) -> bool {
        self.exhausted
    }
    fn refill(&mut self, keep: usize) -> Result<bool> {
        let keep = keep.min(self.end);
        self.buf.copy_within(keep..self.end, 0);
        self.end -= keep;
        self.base += keep as u64;
        let want = self.end + self.chunk;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        self.peak = self.peak.max(self.buf.len());
        let mut got = 0;
        while self.end < want {
            let n = self.source.read(&mut self.buf[self.end..want])?;
            if n == 0 {
                self.exhausted = true;
                break;
            }
            self.end += n;
            got += n;
        }
        self.total += got as u64;
        if self.total > self.max_total {
            return Err(total_limit(self.max_total));
        }
        Ok(got > 0)
    }
}

// ---------------------------------------------------------------------------
// The document: top-level members, the events list, its elements.

/// What a unit being read is, for its limit and its message.
#[derive(Clone, Copy)]
enum Unit<'k> {
    /// Element `index` of `traceEvents`.
    Event(usize),
    /// A header member (its key when known).
    Header(Option<&'k str>),
}

impl Unit<'_> {
    fn bound(self, limits: &ScanLimits) -> usize {
        match self {
            Unit::Event(_) => limits.max_event_bytes,
            Unit::Header(_) => limits.max_header_bytes,
        }
    }

    fn too_long(self, limits: &ScanLimits) -> Error {
        let max = self.bound(limits);
        Error::limit(match self {
            Unit::Event(index) => format!("event {index} exceeds max_event_bytes={max}"),
            Unit::Header(Some(key)) => {
                format!("header member {key:?} exceeds max_header_bytes={max}")
            }
            Unit::Header(None) => format!("a header member key exceeds max_header_bytes={max}"),
        })
    }
}

/// The top-level reader: walks the document through a [`Feed`], reading
/// each unit (key, header member, element) whole from the window.
struct Scanner<'l, F: Feed> {
    feed: F,
    /// Cursor in `feed.window()`.
    pos: usize,
    limits: &'l ScanLimits,
    /// Index of the next element of `traceEvents`.
    index: usize,
    out: ScannedTrace,
}

impl<'l, F: Feed> Scanner<'l, F> {
    fn new(feed: F, limits: &'l ScanLimits) -> Self {
        Self {
            feed,
            pos: 0,
            limits,
            index: 0,
            out: ScannedTrace::default(),
        }
    }

    fn run(mut self, on_event: &mut OnEvent<'_>) -> Result<ScannedTrace> {
        self.run_mut(on_event)
    }

    /// The whole document: its root, then nothing but whitespace.
    fn run_mut(&mut self, on_event: &mut OnEvent<'_>) -> Result<ScannedTrace> {
        match self.skip_ws()? {
            None => return Err(self.syntax("Expecting value")),
            Some(b'[') => {
                self.pos += 1;
                self.events(on_event)?;
            }
            Some(OPEN_BRACE) => {
                self.pos += 1;
                self.members(on_event)?;
            }
            Some(0xEF) if self.feed.base() + self.pos as u64 == 0 => {
                return Err(Error::new(
                    ErrorKind::Json,
                    "is not valid JSON: unexpected UTF-8 byte-order mark",
                ));
            }
            Some(_) => {
                self.unit(Unit::Header(None), |cur| cur.skip_value(0))?;
                self.end()?;
                return Err(Error::invalid("is not a Kineto trace"));
            }
        }
        self.end()?;
        self.out.bytes = self.feed.total();
        Ok(std::mem::take(&mut self.out))
    }

    /// Members of the top-level object, after its `{`.
    fn members(&mut self, on_event: &mut OnEvent<'_>) -> Result<()> {
        let mut events = false;
        if self.next_byte()? == CLOSE_BRACE {
            self.pos += 1;
            return Err(not_a_list());
        }
        loop {
            let (key, _) = self.unit(Unit::Header(None), |cur| {
                let key = cur.key_colon()?;
                Ok(cur.decoded(key))
            })?;
            if key == b"traceEvents" {
                if events {
                    return Err(self.syntax("duplicate object key \"traceEvents\""));
                }
                events = true;
                if self.next_byte()? != b'[' {
                    return Err(not_a_list());
                }
                self.pos += 1;
                self.events(on_event)?;
            } else {
                self.header_member(&key)?;
            }
            match self.next_byte()? {
                b',' => self.pos += 1,
                CLOSE_BRACE => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.syntax("Expecting ',' delimiter")),
            }
            self.next_byte()?;
        }
        if events { Ok(()) } else { Err(not_a_list()) }
    }

    /// One header member's value (the cursor is on it), kept as written.
    fn header_member(&mut self, key: &[u8]) -> Result<()> {
        let key = String::from_utf8_lossy(key).into_owned();
        if self.out.header.iter().any(|(k, _)| *k == key) {
            return Err(self.syntax(&format!("duplicate object key {key:?}")));
        }
        let (_, start) = self.unit(Unit::Header(Some(&key)), |cur| cur.skip_value(1))?;
        let text = span(self.feed.window(), start, self.pos).to_vec();
        self.out.header.push((key, text));
        Ok(())
    }

    /// Elements of `traceEvents`, after its `[`.
    fn events(&mut self, on_event: &mut OnEvent<'_>) -> Result<()> {
        if self.next_byte()? == b']' {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.element(on_event)?;
            self.index += 1;
            match self.next_byte()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.syntax("Expecting ',' delimiter")),
            }
        }
    }

    /// One element: an object goes to the callback, anything else is
    /// checked, skipped and counted.
    fn element(&mut self, on_event: &mut OnEvent<'_>) -> Result<()> {
        let index = self.index;
        if self.next_byte()? != OPEN_BRACE {
            self.unit(Unit::Event(index), |cur| cur.skip_value(0))?;
            self.out.non_objects += 1;
            return Ok(());
        }
        let (fields, _) = self.unit(Unit::Event(index), |cur| cur.event())?;
        on_event(&fields.raw(index, self.feed.window()))?;
        self.out.events += 1;
        Ok(())
    }

    /// Reads one unit whole with `read`, refilling (and rereading it from
    /// its start) while the window ends inside it; returns what `read`
    /// returned and where the unit starts in the window.
    fn unit<T>(
        &mut self,
        unit: Unit<'_>,
        mut read: impl FnMut(&mut Cur<'_>) -> Step<T>,
    ) -> Result<(T, usize)> {
        let bound = unit.bound(self.limits);
        loop {
            let window = self.feed.window();
            let mut cur = Cur {
                buf: window,
                pos: self.pos,
                base: self.feed.base(),
                eof: self.feed.at_end(),
            };
            let step = read(&mut cur);
            let (start, reached, len) = (self.pos, cur.pos, window.len());
            let (taken, partial) = (reached.saturating_sub(start), len.saturating_sub(start));
            match step {
                Ok(value) if taken <= bound => {
                    self.pos = reached;
                    return Ok((value, start));
                }
                Ok(_) => return Err(unit.too_long(self.limits)),
                Err(Stop::Fail(e)) => return Err(*e),
                Err(Stop::More) if partial > bound => {
                    return Err(unit.too_long(self.limits));
                }
                Err(Stop::More) => self.more()?,
            }
        }
    }

    /// Refills the window keeping the bytes from the cursor on; at the end
    /// of the input the unit being read is truncated.
    fn more(&mut self) -> Result<()> {
        if self.feed.at_end() {
            return Err(self.truncated());
        }
        self.feed.refill(self.pos)?;
        self.pos = 0;
        Ok(())
    }

    /// Skips whitespace between units; `None` at the end of the input.
    fn skip_ws(&mut self) -> Result<Option<u8>> {
        loop {
            let window = self.feed.window();
            while let Some(&b) = window.get(self.pos) {
                if !is_ws(b) {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if self.feed.at_end() {
                return Ok(None);
            }
            self.feed.refill(self.pos)?;
            self.pos = 0;
        }
    }

    /// The next byte after whitespace; truncation if there is none.
    fn next_byte(&mut self) -> Result<u8> {
        self.skip_ws()?.ok_or_else(|| self.truncated())
    }

    /// Only whitespace may follow the root.
    fn end(&mut self) -> Result<()> {
        match self.skip_ws()? {
            None => Ok(()),
            Some(_) => Err(self.syntax("Extra data")),
        }
    }

    fn truncated(&self) -> Error {
        let end = self.feed.base() + self.feed.window().len() as u64;
        syntax("truncated", end)
    }

    fn syntax(&self, what: &str) -> Error {
        syntax(what, self.feed.base() + self.pos as u64)
    }
}

// ---------------------------------------------------------------------------
// Tokens: a cursor over the window that either completes a unit, fails, or
// asks for more bytes.

/// Why a cursor stopped short of a complete unit.
enum Stop {
    /// The window ends inside the unit: refill and read it again.
    More,
    /// The input is invalid (or a limit is exceeded); boxed, so that the
    /// results of the token readers stay small.
    Fail(Box<Error>),
}

type Step<T> = std::result::Result<T, Stop>;

/// A string token: its content `buf[start..end]` (quotes excluded).
#[derive(Debug, Clone, Copy)]
struct StrTok {
    start: usize,
    end: usize,
    escaped: bool,
}

/// A cursor over a window whose first byte is at absolute offset `base`;
/// `eof` when the input ends with the window.
struct Cur<'b> {
    buf: &'b [u8],
    pos: usize,
    base: u64,
    eof: bool,
}

impl<'b> Cur<'b> {
    fn fail_at(&self, what: &str, at: usize) -> Stop {
        Stop::Fail(Box::new(syntax(what, self.base + at as u64)))
    }

    fn fail(&self, what: &str) -> Stop {
        self.fail_at(what, self.pos)
    }

    #[inline]
    fn peek(&self) -> Step<u8> {
        self.buf.get(self.pos).copied().ok_or(Stop::More)
    }

    /// Skips whitespace; returns the next byte without consuming it. Runs
    /// of spaces (indentation) go eight bytes at a time.
    #[inline]
    fn ws(&mut self) -> Step<u8> {
        loop {
            let b = self.peek()?;
            if !is_ws(b) {
                return Ok(b);
            }
            self.pos += 1;
            if b == b'\n' {
                self.pos = skip_spaces(self.buf, self.pos);
            }
        }
    }

    /// A key, its `:` and the whitespace after it (the value is next).
    #[inline]
    fn key_colon(&mut self) -> Step<StrTok> {
        if self.peek()? != b'"' {
            return Err(self.fail("Expecting property name enclosed in double quotes"));
        }
        let key = self.string()?;
        if self.ws()? != b':' {
            return Err(self.fail("Expecting ':' delimiter"));
        }
        self.pos += 1;
        self.ws()?;
        Ok(key)
    }

    /// A string token (the cursor is on its opening quote), checked:
    /// escapes, control characters, UTF-8.
    #[inline(always)]
    fn string(&mut self) -> Step<StrTok> {
        let start = self.pos + 1;
        let (mut i, mut escaped, mut ascii) = (start, false, true);
        loop {
            i = plain_run(self.buf, i);
            match self.buf.get(i) {
                None => return Err(Stop::More),
                Some(b'"') => break,
                Some(b'\\') => {
                    i = self.escape(i)?;
                    escaped = true;
                }
                Some(0..=0x1f) => return Err(self.fail_at("Invalid control character", i)),
                Some(_) => {
                    ascii = false;
                    i += 1;
                }
            }
        }
        if !ascii {
            if let Err(e) = std::str::from_utf8(span(self.buf, start, i)) {
                let at = self.base + (start + e.valid_up_to()) as u64;
                return Err(Stop::Fail(Box::new(Error::new(
                    ErrorKind::Json,
                    format!("is not UTF-8 JSON: invalid byte at offset {at}"),
                ))));
            }
        }
        self.pos = i + 1;
        Ok(StrTok {
            start,
            end: i,
            escaped,
        })
    }

    /// Checks the escape at `i` (its backslash); returns the index after it.
    fn escape(&self, i: usize) -> Step<usize> {
        match self.buf.get(i + 1) {
            None => Err(Stop::More),
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
            Some(b'u') => {
                for k in i + 2..i + 6 {
                    match self.buf.get(k) {
                        None => return Err(Stop::More),
                        Some(d) if d.is_ascii_hexdigit() => {}
                        Some(_) => return Err(self.fail_at("Invalid \\uXXXX escape", i + 1)),
                    }
                }
                Ok(i + 6)
            }
            Some(_) => Err(self.fail_at("Invalid \\escape", i)),
        }
    }

    /// A number token, checked (grammar, length, finite floats); returns
    /// whether it is a float (has a fraction or an exponent).
    fn number(&mut self) -> Step<bool> {
        let start = self.pos;
        let mut i = start + usize::from(self.buf.get(start) == Some(&b'-'));
        match self.buf.get(i) {
            None => return Err(Stop::More),
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(self.buf, i),
            Some(b'I') => return Err(self.fail("NaN and Infinity are not allowed")),
            Some(_) => return Err(self.fail("Expecting value")),
        }
        let int_end = i;
        if self.buf.get(i) == Some(&b'.') {
            i = self.required_digits(i + 1)?;
        }
        let exponent = matches!(self.buf.get(i), Some(b'e' | b'E'));
        if exponent {
            i += 1;
            i += usize::from(matches!(self.buf.get(i), Some(b'+' | b'-')));
            i = self.required_digits(i)?;
        }
        if i >= self.buf.len() && !self.eof {
            return Err(Stop::More); // the number may go on
        }
        if i - start > MAX_NUMBER_CHARS {
            return Err(Stop::Fail(Box::new(Error::limit(format!(
                "violates JSON resource constraints: number exceeds max_json_number_chars={MAX_NUMBER_CHARS}"
            )))));
        }
        let float = i != int_end;
        if float && (exponent || i - start > 300) && parse_f64(span(self.buf, start, i)).is_none() {
            return Err(self.fail("number out of range (floats must be finite)"));
        }
        self.pos = i;
        Ok(float)
    }

    /// One or more digits from `i`; returns the index after them.
    fn required_digits(&self, i: usize) -> Step<usize> {
        match self.buf.get(i) {
            None => Err(Stop::More),
            Some(b'0'..=b'9') => Ok(digits(self.buf, i)),
            Some(_) => Err(self.fail_at("Expecting digits in number", i)),
        }
    }

    /// `true`, `false` or `null`.
    fn literal(&mut self) -> Step<()> {
        let word: &[u8] = match self.peek()? {
            b't' => b"true",
            b'f' => b"false",
            b'n' => b"null",
            b'N' | b'I' => return Err(self.fail("NaN and Infinity are not allowed")),
            _ => return Err(self.fail("Expecting value")),
        };
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        if rest.len() < word.len() && word.starts_with(rest) {
            return Err(Stop::More);
        }
        if !rest.starts_with(word) {
            return Err(self.fail("Expecting value"));
        }
        self.pos += word.len();
        Ok(())
    }

    /// A string, number or literal.
    fn scalar(&mut self) -> Step<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => self.literal(),
        }
    }

    /// Checks and skips one value (the cursor is on it) inside `outer`
    /// levels of nesting.
    fn skip_value(&mut self, outer: u32) -> Step<()> {
        // Bit k of `objects`: the container k levels out is an object.
        let (mut objects, mut open) = (0u64, 0u32);
        loop {
            let b = self.peek()?;
            if b == OPEN_BRACE || b == b'[' {
                if outer + open >= MAX_DEPTH {
                    return Err(Stop::Fail(Box::new(Error::limit(format!(
                        "violates JSON resource constraints: nesting depth exceeds {MAX_DEPTH} at byte {}",
                        self.base + self.pos as u64
                    )))));
                }
                let object = b == OPEN_BRACE;
                objects = (objects << 1) | u64::from(object);
                open += 1;
                self.pos += 1;
                if self.ws()? != closer(object) {
                    if object {
                        self.key_colon()?;
                    }
                    continue;
                }
                self.pos += 1;
                open -= 1;
                objects >>= 1;
            } else {
                self.scalar()?;
            }
            if !self.close_or_next(&mut open, &mut objects)? {
                return Ok(());
            }
        }
    }

    /// After a value inside `open` containers: closes those that end here;
    /// `true` when another value follows (the cursor is on it), `false`
    /// when no container is left open.
    fn close_or_next(&mut self, open: &mut u32, objects: &mut u64) -> Step<bool> {
        while *open > 0 {
            let object = *objects & 1 == 1;
            let b = self.ws()?;
            if b == b',' {
                self.pos += 1;
                self.ws()?;
                if object {
                    self.key_colon()?;
                }
                return Ok(true);
            }
            if b != closer(object) {
                return Err(self.fail("Expecting ',' delimiter"));
            }
            self.pos += 1;
            *open -= 1;
            *objects >>= 1;
        }
        Ok(false)
    }

    /// A key's decoded (WTF-8) bytes.
    fn decoded(&self, key: StrTok) -> Vec<u8> {
        let raw = span(self.buf, key.start, key.end);
        if key.escaped {
            unescape(raw)
        } else {
            raw.to_vec()
        }
    }
}

// ---------------------------------------------------------------------------
// Events: the fields a RawEvent carries.

/// The fields of [`RawEvent`], in the order of their duplicate-check bits.
#[derive(Clone, Copy)]
enum Field {
    Ph,
    Cat,
    Name,
    Pid,
    Tid,
    Ts,
    Dur,
    Args,
}

impl Field {
    fn of(key: &[u8]) -> Option<Self> {
        Some(match key {
            b"ph" => Field::Ph,
            b"cat" => Field::Cat,
            b"name" => Field::Name,
            b"pid" => Field::Pid,
            b"tid" => Field::Tid,
            b"ts" => Field::Ts,
            b"dur" => Field::Dur,
            b"args" => Field::Args,
            _ => return None,
        })
    }

    fn key(self) -> &'static str {
        ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"][self as usize]
    }
}

/// What an event's fields are, as positions in the window.
#[derive(Default)]
struct Fields {
    text: [Option<StrTok>; 3],
    raw: [Option<(usize, usize)>; 3],
    ts: Option<f64>,
    dur: Option<f64>,
    seen: u8,
}

impl Fields {
    /// The event, borrowing from `window`.
    fn raw<'w>(&self, index: usize, window: &'w [u8]) -> RawEvent<'w> {
        let text = |i: usize| self.text[i].and_then(|t| text_value(window, t));
        let raw = |i: usize| self.raw[i].map(|(a, b)| Cow::Borrowed(span(window, a, b)));
        RawEvent {
            index,
            ph: text(0),
            cat: text(1),
            name: text(2),
            pid: raw(0),
            tid: raw(1),
            ts: self.ts,
            dur: self.dur,
            args: raw(2),
        }
    }
}

impl Cur<'_> {
    /// An event object (the cursor is on its `{`).
    fn event(&mut self) -> Step<Fields> {
        let mut fields = Fields::default();
        self.pos += 1;
        if self.ws()? == CLOSE_BRACE {
            self.pos += 1;
            return Ok(fields);
        }
        loop {
            let key_at = self.pos;
            let field = self.event_key()?;
            self.field(field, key_at, &mut fields)?;
            match self.ws()? {
                b',' => {
                    self.pos += 1;
                    self.ws()?;
                }
                CLOSE_BRACE => {
                    self.pos += 1;
                    return Ok(fields);
                }
                _ => return Err(self.fail("Expecting ',' delimiter")),
            }
        }
    }

    /// An event's key and its `:` (the value is next): the [`Field`] it
    /// names, if any. The common spellings are matched without scanning.
    #[inline]
    fn event_key(&mut self) -> Step<Option<Field>> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let known = match rest.get(..6) {
            Some([b'"', b'p', b'h', b'"', ..]) => Some((Field::Ph, 4)),
            Some([b'"', b't', b's', b'"', ..]) => Some((Field::Ts, 4)),
            Some([b'"', b'c', b'a', b't', b'"', _]) => Some((Field::Cat, 5)),
            Some([b'"', b'p', b'i', b'd', b'"', _]) => Some((Field::Pid, 5)),
            Some([b'"', b't', b'i', b'd', b'"', _]) => Some((Field::Tid, 5)),
            Some([b'"', b'd', b'u', b'r', b'"', _]) => Some((Field::Dur, 5)),
            Some(b"\"name\"") => Some((Field::Name, 6)),
            Some(b"\"args\"") => Some((Field::Args, 6)),
            _ => None,
        };
        let Some((field, len)) = known else {
            let key = self.key_colon()?;
            return Ok(if key.escaped {
                Field::of(&self.decoded(key))
            } else {
                Field::of(span(self.buf, key.start, key.end))
            });
        };
        self.pos += len;
        if self.ws()? != b':' {
            return Err(self.fail("Expecting ':' delimiter"));
        }
        self.pos += 1;
        self.ws()?;
        Ok(Some(field))
    }

    /// One member's value (the cursor is on it): kept when its key (at
    /// `key_at`) names a field of [`RawEvent`] and the value has the right
    /// type, else checked and skipped.
    fn field(&mut self, field: Option<Field>, key_at: usize, fields: &mut Fields) -> Step<()> {
        let Some(field) = field else {
            return self.skip_value(1);
        };
        let bit = 1u8 << (field as u8);
        if fields.seen & bit != 0 {
            let what = format!("duplicate object key {:?}", field.key());
            return Err(self.fail_at(&what, key_at));
        }
        fields.seen |= bit;
        let (start, first) = (self.pos, self.peek()?);
        match field {
            Field::Ph | Field::Cat | Field::Name if first == b'"' => {
                fields.text[field as usize] = Some(self.string()?);
            }
            Field::Ts | Field::Dur if first == b'-' || first.is_ascii_digit() => {
                let float = self.number()?;
                let value = number_value(span(self.buf, start, self.pos), float);
                *(if matches!(field, Field::Ts) {
                    &mut fields.ts
                } else {
                    &mut fields.dur
                }) = value;
            }
            Field::Pid | Field::Tid | Field::Args => {
                self.skip_value(1)?;
                let slot = match field {
                    Field::Pid => 0,
                    Field::Tid => 1,
                    _ => 2,
                };
                fields.raw[slot] = Some((start, self.pos));
            }
            _ => self.skip_value(1)?,
        }
        Ok(())
    }
}

/// A string field's value: borrowed without escapes, decoded with them;
/// `None` when it decodes to a lone surrogate (not a Rust string).
fn text_value(window: &[u8], tok: StrTok) -> Option<Cow<'_, str>> {
    let raw = span(window, tok.start, tok.end);
    if tok.escaped {
        String::from_utf8(unescape(raw)).ok().map(Cow::Owned)
    } else {
        std::str::from_utf8(raw).ok().map(Cow::Borrowed)
    }
}

// ---------------------------------------------------------------------------
// Byte-level helpers.

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The index of the first byte from `i` that is not a space.
#[inline]
fn skip_spaces(bytes: &[u8], mut i: usize) -> usize {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    while let Some(word) = bytes.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let other = u64::from_le_bytes(w) ^ SPACES;
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while bytes.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

fn closer(object: bool) -> u8 {
    if object { CLOSE_BRACE } else { b']' }
}

/// `bytes[a..b]`, empty when out of range.
#[inline]
fn span(bytes: &[u8], a: usize, b: usize) -> &[u8] {
    bytes.get(a..b).unwrap_or_default()
}

/// The index after the digits at `i` (eight bytes at a time).
#[inline]
fn digits(bytes: &[u8], mut i: usize) -> usize {
    while let Some(word) = bytes.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let v = u64::from_le_bytes(w);
        // A byte is a digit when its high nibble is 3 and adding 6 keeps it.
        let other = ((v & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030)
            | ((v.wrapping_add(0x0606_0606_0606_0606) & 0xF0F0_F0F0_F0F0_F0F0)
                ^ 0x3030_3030_3030_3030);
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while matches!(bytes.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

/// The index of the first byte from `i` that ends a plain string run: a
/// quote, a backslash, a control character or a non-ASCII byte (eight
/// bytes at a time).
#[inline]
fn plain_run(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    while let Some(word) = bytes.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let v = u64::from_le_bytes(w);
        // Each term flags its bytes exactly up to the first one flagged, so
        // the lowest flag is the first special byte.
        let special = has_zero(v ^ (ONES * u64::from(b'"')))
            | has_zero(v ^ (ONES * u64::from(b'\\')))
            | (v.wrapping_sub(ONES * 0x20) & !v & HIGHS)
            | (v & HIGHS);
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b) {
            break;
        }
        i += 1;
    }
    i
}

/// A checked number token's value (`None` when an integer overflows
/// `f64`): exact on the common fast path (at most 19 digits, no exponent,
/// a mantissa of at most 2^53), else Rust's correctly rounded parse. An
/// integer zero is `0.0`, as the tree reader reads `-0`.
fn number_value(token: &[u8], float: bool) -> Option<f64> {
    const POW10: [f64; 20] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19,
    ];
    let (negative, body) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    let int_end = digits(body, 0);
    let (fraction, end) = match body.get(int_end) {
        Some(b'.') => {
            let end = digits(body, int_end + 1);
            (span(body, int_end + 1, end), end)
        }
        _ => (&[][..], int_end),
    };
    let integer = span(body, 0, int_end);
    if end == body.len() && integer.len() + fraction.len() <= 19 {
        let mantissa = integer.iter().chain(fraction).fold(0u64, |m, &d| {
            m.wrapping_mul(10)
                .wrapping_add(u64::from(d.wrapping_sub(b'0')))
        });
        if let (true, Some(p)) = (mantissa <= 1 << 53, POW10.get(fraction.len())) {
            let exact = mantissa as f64 / p;
            let value = if negative { -exact } else { exact };
            return Some(if !float && value == 0.0 { 0.0 } else { value });
        }
    }
    let value = parse_f64(token)?;
    Some(if !float && value == 0.0 { 0.0 } else { value })
}

/// A checked number token parsed as `f64`; `None` when not finite.
fn parse_f64(token: &[u8]) -> Option<f64> {
    let value: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
    value.is_finite().then_some(value)
}

/// Decodes a checked string's content (escapes included) into WTF-8: a
/// `\u` high surrogate followed by a low one is one code point, a lone
/// surrogate is kept as its three-byte WTF-8 form.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let simple = match raw.get(i + 1) {
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                i = unicode_escape(raw, i, &mut out);
                continue;
            }
            Some(&c) => c,
            None => break,
        };
        out.push(simple);
        i += 2;
    }
    out
}

/// Decodes the `\uXXXX` escape at `i` (pairing surrogates) onto `out`;
/// returns the index after it.
fn unicode_escape(raw: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    let hex = |at: usize| -> Option<u32> {
        let digits = std::str::from_utf8(raw.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    let unit = hex(i + 2).unwrap_or(0xFFFD);
    let mut next = i + 6;
    let mut cp = unit;
    if (0xD800..0xDC00).contains(&unit) && raw.get(next..next + 2) == Some(b"\\u") {
        if let Some(low @ 0xDC00..0xE000) = hex(next + 2) {
            cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            next += 6;
        }
    }
    push_wtf8(out, cp);
    next
}

/// Appends code point `cp` (surrogates allowed) in generalized UTF-8.
fn push_wtf8(out: &mut Vec<u8>, cp: u32) {
    let b = |v: u32| v as u8;
    match cp {
        0..0x80 => out.push(b(cp)),
        0x80..0x800 => out.extend_from_slice(&[b(0xC0 | (cp >> 6)), b(0x80 | (cp & 0x3F))]),
        0x800..0x10000 => out.extend_from_slice(&[
            b(0xE0 | (cp >> 12)),
            b(0x80 | ((cp >> 6) & 0x3F)),
            b(0x80 | (cp & 0x3F)),
        ]),
        _ => out.extend_from_slice(&[
            b(0xF0 | (cp >> 18)),
            b(0x80 | ((cp >> 12) & 0x3F)),
            b(0x80 | ((cp >> 6) & 0x3F)),
            b(0x80 | (cp & 0x3F)),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{JsonLimits, Value, canon, parse};
    use std::io::Write as _;

    /// An event with owned fields; raw texts optionally canonicalised.
    #[derive(Debug, Clone, PartialEq)]
    struct Ev {
        index: usize,
        ph: Option<String>,
        cat: Option<String>,
        name: Option<String>,
        pid: Option<Vec<u8>>,
        tid: Option<Vec<u8>>,
        ts: Option<u64>,
        dur: Option<u64>,
        args: Option<Vec<u8>>,
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Summary {
        header: Vec<(String, Vec<u8>)>,
        events: Vec<Ev>,
        counted: u64,
        non_objects: u64,
        bytes: u64,
    }

    fn canonical(raw: &[u8]) -> Vec<u8> {
        let doc = parse(raw, JsonLimits::default()).expect("scanned text parses");
        canon::to_vec(doc.root().expect("a root"))
    }

    fn owned(e: &RawEvent<'_>, normalize: bool) -> Ev {
        let s = |v: &Option<Cow<'_, str>>| v.as_ref().map(|c| c.to_string());
        let r = |v: &Option<Cow<'_, [u8]>>| {
            v.as_ref()
                .map(|c| if normalize { canonical(c) } else { c.to_vec() })
        };
        Ev {
            index: e.index,
            ph: s(&e.ph),
            cat: s(&e.cat),
            name: s(&e.name),
            pid: r(&e.pid),
            tid: r(&e.tid),
            ts: e.ts.map(f64::to_bits),
            dur: e.dur.map(f64::to_bits),
            args: r(&e.args),
        }
    }

    fn summary(scanned: ScannedTrace, events: Vec<Ev>, normalize: bool) -> Summary {
        let header = scanned
            .header
            .into_iter()
            .map(|(k, v)| (k, if normalize { canonical(&v) } else { v }))
            .collect();
        Summary {
            header,
            events,
            counted: scanned.events,
            non_objects: scanned.non_objects,
            bytes: scanned.bytes,
        }
    }

    fn scan(bytes: &[u8], limits: &ScanLimits, normalize: bool) -> Result<Summary> {
        let mut events = Vec::new();
        let scanned = scan_bytes(bytes, limits, &mut |e| {
            events.push(owned(e, normalize));
            Ok(())
        })?;
        Ok(summary(scanned, events, normalize))
    }

    fn scan_chunked(bytes: &[u8], limits: &ScanLimits, chunk: usize) -> Result<Summary> {
        let mut events = Vec::new();
        let (scanned, _) = scan_reader(bytes, limits, chunk, &mut |e| {
            events.push(owned(e, false));
            Ok(())
        })?;
        Ok(summary(scanned, events, false))
    }

    /// The tree-parser walk the streaming reader replaced (the reference
    /// semantics), with canonical raw texts.
    fn reference(bytes: &[u8]) -> Result<Summary> {
        let doc = parse(bytes, JsonLimits::default())?;
        let root = doc
            .root()
            .ok_or_else(|| Error::invalid("is not a Kineto trace"))?;
        let mut header = Vec::new();
        let events = if root.is_array() {
            root
        } else if root.is_object() {
            let mut events = None;
            for (key, value) in root.members() {
                if key == b"traceEvents" {
                    events = Some(value);
                } else {
                    let key = String::from_utf8_lossy(key).into_owned();
                    header.push((key, canon::to_vec(value)));
                }
            }
            events.filter(Value::is_array).ok_or_else(not_a_list)?
        } else {
            return Err(Error::invalid("is not a Kineto trace"));
        };
        let mut out = Vec::new();
        let mut non_objects = 0;
        for (index, event) in events.elements().enumerate() {
            if !event.is_object() {
                non_objects += 1;
                continue;
            }
            let text = |k: &str| event.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            let raw = |k: &str| event.get(k).map(|v| canon::to_vec(v));
            let number = |k: &str| event.get(k).and_then(|v| v.as_number()).map(f64::to_bits);
            out.push(Ev {
                index,
                ph: text("ph"),
                cat: text("cat"),
                name: text("name"),
                pid: raw("pid"),
                tid: raw("tid"),
                ts: number("ts"),
                dur: number("dur"),
                args: raw("args"),
            });
        }
        Ok(Summary {
            header,
            counted: out.len() as u64,
            events: out,
            non_objects,
            bytes: bytes.len() as u64,
        })
    }

    /// A small trace with what the reader must get right: header members
    /// before and after `traceEvents`, escapes, non-object elements,
    /// nested args, numbers of every spelling, string pids.
    fn sample() -> Vec<u8> {
        let text = r#"{
  "schemaVersion": 1,
  "deviceProperties": [ {"id": 0, "name": "H\u00e9 \"GPU\"", "totalGlobalMem": 1e10} ],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 12, "tid": 34,
     "ts": 5223593015455.128, "dur": 3.5, "args": {"External id": 7, "Input Dims": [[2, 3], []]}},
    7, "text", null, [1, {"a": [true, false]}],
    {"ph": "M", "name": "na\u006de \u00e9\ud83d\ude00 \\ \/", "pid": "Spans", "tid": "PyTorch Profiler",
     "ts": -0, "dur": -1.5E+2, "args": {"labels": "CPU", "deep": {"x": {"y": [0.5, -0.0, 1e-7]}}}},
    {},
    {"ph": 1, "c\u0061t": null, "name": ["x"], "ts": "12", "dur": 18446744073709551617,
     "extr\u0061": 1, "extra": {"skip": "me"}},
    {"name": "\ud800 lone", "ts": 12345678901234567890.5, "args": []},
    {"ph": "i", "s": "g", "pid": -3, "tid": 0.25, "ts": 1.7976931348623157e308}
  ],
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1790857026000000000,
  "traceName": "/tmp/x.json"
}"#;
        text.as_bytes().to_vec()
    }

    /// `sample()` with the duplicate `extra` (escaped spelling) removed: the
    /// tree parser refuses duplicate keys everywhere.
    fn sample_without_duplicates() -> Vec<u8> {
        let text = String::from_utf8(sample()).unwrap();
        text.replace(r#""extr\u0061": 1, "#, "").into_bytes()
    }

    #[test]
    fn stream_matches_the_tree_walk() {
        let bytes = sample_without_duplicates();
        let ours = scan(&bytes, &ScanLimits::default(), true).unwrap();
        assert_eq!(ours, reference(&bytes).unwrap());
        assert_eq!(ours.counted, 6);
        assert_eq!(ours.non_objects, 4);
        let keys: Vec<&str> = ours.header.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "schemaVersion",
                "deviceProperties",
                "distributedInfo",
                "displayTimeUnit",
                "baseTimeNanoseconds",
                "traceName"
            ]
        );
    }

    #[test]
    fn stream_fields_as_written() {
        let bytes = sample_without_duplicates();
        let ours = scan(&bytes, &ScanLimits::default(), false).unwrap();
        let first = &ours.events[0];
        assert_eq!(first.pid.as_deref(), Some(&b"12"[..]));
        assert_eq!(first.ts, Some(5223593015455.128f64.to_bits()));
        assert_eq!(
            first.args.as_deref(),
            Some(&br#"{"External id": 7, "Input Dims": [[2, 3], []]}"#[..])
        );
        let meta = &ours.events[1];
        assert_eq!(meta.index, 5);
        assert_eq!(meta.name.as_deref(), Some("name \u{e9}\u{1F600} \\ /"));
        assert_eq!(meta.pid.as_deref(), Some(&br#""Spans""#[..]));
        assert_eq!(meta.ts, Some(0f64.to_bits()));
        assert_eq!(meta.dur, Some((-150f64).to_bits()));
        let odd = &ours.events[3];
        assert_eq!(
            (odd.ph.as_ref(), odd.cat.as_ref(), odd.name.as_ref()),
            (None, None, None)
        );
        assert_eq!(odd.ts, None);
        assert_eq!(odd.dur, Some(18446744073709551617f64.to_bits()));
        assert_eq!(ours.events[4].name, None, "a lone surrogate is no str");
        assert_eq!(ours.events[5].tid.as_deref(), Some(&b"0.25"[..]));
        let header = &ours.header[1].1;
        assert!(
            header.starts_with(b"[ {\"id\": 0"),
            "header kept as written"
        );
    }

    #[test]
    fn stream_borrows_without_escapes() {
        let bytes = sample_without_duplicates();
        let mut borrowed = Vec::new();
        scan_bytes(&bytes, &ScanLimits::default(), &mut |e| {
            borrowed.push(matches!(e.name, Some(Cow::Borrowed(_))));
            Ok(())
        })
        .unwrap();
        assert_eq!(borrowed, [true, false, false, false, false, false]);
    }

    #[test]
    fn stream_bare_list_and_other_roots() {
        let ours = scan(br#" [ {"ph": "X"}, 1 ] "#, &ScanLimits::default(), true).unwrap();
        assert_eq!(ours, reference(br#" [ {"ph": "X"}, 1 ] "#).unwrap());
        assert_eq!(
            (ours.counted, ours.non_objects, ours.header.len()),
            (1, 1, 0)
        );
        let message = |b: &[u8]| scan(b, &ScanLimits::default(), false).unwrap_err();
        for root in [&b"3"[..], b"\"x\"", b"null"] {
            assert_eq!(message(root).message(), "is not a Kineto trace");
        }
        for doc in [&br#"{"a": 1}"#[..], b"{}", br#"{"traceEvents": {}}"#] {
            let e = message(doc);
            assert_eq!(e.kind(), ErrorKind::Invalid);
            assert!(e.message().contains("field 'traceEvents' must be a list"));
        }
        let dup = message(br#"{"traceEvents": [], "traceEvents": []}"#);
        assert_eq!(dup.kind(), ErrorKind::Json);
        assert!(
            dup.message()
                .contains("duplicate object key \"traceEvents\"")
        );
        let dup = message(br#"{"a": 1, "traceEvents": [], "a": 2}"#);
        assert!(dup.message().contains("duplicate object key \"a\""));
        let dup = message(br#"[{"ts": 1, "ts": 2}]"#);
        assert!(dup.message().contains("duplicate object key \"ts\""));
        let dup = message(br#"[{"name": "a", "n\u0061me": "b"}]"#);
        assert!(dup.message().contains("duplicate object key \"name\""));
        assert!(message(b"").message().starts_with("is not valid JSON"));
        assert!(
            message(b"\xEF\xBB\xBF[]")
                .message()
                .contains("byte-order mark")
        );
        assert!(message(b"[] x").message().contains("Extra data"));
    }

    #[test]
    fn stream_chunk_boundaries_do_not_matter() {
        let bytes = sample();
        let whole = scan(&bytes, &ScanLimits::default(), false).unwrap();
        for chunk in [1, 2, 3, 7, 8, 64, 1 << 20] {
            let chunked = scan_chunked(&bytes, &ScanLimits::default(), chunk).unwrap();
            assert_eq!(chunked, whole, "chunk {chunk}");
        }
    }

    fn gzip(parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for part in parts {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(part).unwrap();
            out.extend(enc.finish().unwrap());
        }
        out
    }

    #[test]
    fn stream_gzip_single_and_multi_member() {
        let bytes = sample();
        let whole = scan(&bytes, &ScanLimits::default(), false).unwrap();
        let (a, b) = bytes.split_at(bytes.len() / 3);
        for packed in [gzip(&[&bytes]), gzip(&[a, b])] {
            for chunk in [7, 4096] {
                let ours = scan_chunked(&packed, &ScanLimits::default(), chunk).unwrap();
                assert_eq!(ours, whole);
            }
        }
    }

    #[test]
    fn stream_truncated_gzip_is_an_error() {
        let packed = gzip(&[&sample()]);
        for cut in 2..packed.len() {
            let e = scan_chunked(&packed[..cut], &ScanLimits::default(), 7).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Io, "cut {cut}: {e}");
            assert_eq!(e.message(), "is a truncated gzip file", "cut {cut}");
        }
        let mut trailing = packed.clone();
        trailing.extend_from_slice(b"garbage, not a gzip member at all");
        let e = scan_chunked(&trailing, &ScanLimits::default(), 4096).unwrap_err();
        assert!(e.message().starts_with("is not a valid gzip file"), "{e}");
    }

    #[test]
    fn stream_truncated_json_is_an_error() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            for result in [
                scan(&bytes[..cut], &ScanLimits::default(), false),
                scan_chunked(&bytes[..cut], &ScanLimits::default(), 7),
            ] {
                let e = result.unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Json, "cut {cut}: {e}");
                assert!(
                    e.message().starts_with("is not valid JSON"),
                    "cut {cut}: {e}"
                );
            }
        }
        let e = scan(&bytes[..bytes.len() - 1], &ScanLimits::default(), false).unwrap_err();
        assert_eq!(
            e.message(),
            format!("is not valid JSON: truncated at byte {}", bytes.len() - 1)
        );
    }

    #[test]
    fn stream_malformed_anywhere_is_an_error() {
        let bad_values = [
            "[1, 2,]",
            "\"\\x\"",
            "tru",
            "truex",
            "01",
            "NaN",
            "-Infinity",
            "Infinity",
            "1e999",
            "-1.5e400",
            "1.",
            ".5",
            "-",
            "1e",
            "1e+",
            "\"\\u12G4\"",
            "\"a\u{1}b\"",
            "[}",
            r#"{"a" 1}"#,
            r#"{"a": 1,}"#,
            r#"{,}"#,
            r#"{1: 2}"#,
            "[1 2]",
            "\"\\ud800\\u00\"",
        ];
        for bad in bad_values {
            for doc in [
                format!(r#"{{"traceEvents": [{{"ph": "X", "args": {{"k": {bad}}}}}]}}"#),
                format!(r#"{{"traceEvents": [{{"ph": "X", "skipped": {bad}}}]}}"#),
                format!(r#"{{"traceEvents": [{bad}]}}"#),
                format!(r#"{{"header": {bad}, "traceEvents": []}}"#),
                format!(r#"{{"traceEvents": [{{"ts": {bad}}}]}}"#),
            ] {
                for result in [
                    scan(doc.as_bytes(), &ScanLimits::default(), false),
                    scan_chunked(doc.as_bytes(), &ScanLimits::default(), 3),
                ] {
                    let e = result.expect_err(&doc);
                    assert_eq!(e.kind(), ErrorKind::Json, "{doc}: {e}");
                }
            }
        }
        let invalid_utf8 = b"[{\"name\": \"a\xff\"}]";
        let e = scan(invalid_utf8, &ScanLimits::default(), false).unwrap_err();
        assert!(e.message().contains("UTF-8"), "{e}");
        let e = scan(b"[{\"a\": 1} \xc3\xa9]", &ScanLimits::default(), false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Json);
    }

    #[test]
    fn stream_limits() {
        let doc =
            br#"{"h": [1, 2, 3], "traceEvents": [{"ph": "X"}, {"ph": "X", "name": "0123456789"}]}"#;
        for chunk in [3, 4096] {
            let limits = ScanLimits {
                max_event_bytes: 20,
                ..ScanLimits::default()
            };
            let e = scan_chunked(doc, &limits, chunk).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Limit);
            assert_eq!(e.message(), "event 1 exceeds max_event_bytes=20");
            assert_eq!(scan(doc, &limits, false).unwrap_err(), e);
            let limits = ScanLimits {
                max_header_bytes: 8,
                ..ScanLimits::default()
            };
            let e = scan_chunked(doc, &limits, chunk).unwrap_err();
            assert_eq!(
                e.message(),
                "header member \"h\" exceeds max_header_bytes=8"
            );
            assert_eq!(scan(doc, &limits, false).unwrap_err(), e);
            let limits = ScanLimits {
                max_total_bytes: doc.len() as u64 - 1,
                ..ScanLimits::default()
            };
            let e = scan_chunked(doc, &limits, chunk).unwrap_err();
            assert_eq!(
                e.message(),
                format!("exceeds max_total_bytes={}", doc.len() - 1)
            );
            assert_eq!(scan(doc, &limits, false).unwrap_err(), e);
            let limits = ScanLimits {
                max_total_bytes: doc.len() as u64,
                ..ScanLimits::default()
            };
            assert!(scan_chunked(doc, &limits, chunk).is_ok());
        }
    }

    #[test]
    fn stream_depth_limit() {
        let nested = |levels: usize| {
            let doc = format!(
                r#"[{{"args": {}{}}}]"#,
                "[".repeat(levels),
                "]".repeat(levels)
            );
            scan(doc.as_bytes(), &ScanLimits::default(), false)
        };
        assert!(nested(63).is_ok(), "the event and 63 levels inside it");
        let e = nested(64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit);
        assert!(e.message().contains("nesting depth exceeds 64"), "{e}");
        let e = scan(&vec![b'['; 100_000], &ScanLimits::default(), false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit);
    }

    #[test]
    fn stream_memory_stays_bounded() {
        let mut doc = String::from(r#"{"traceEvents": ["#);
        for i in 0..20_000 {
            if i > 0 {
                doc.push(',');
            }
            doc.push_str(&format!(
                r#"{{"ph": "X", "name": "op{i}", "pid": 1, "tid": 2, "ts": {i}.5, "dur": 1.25, "args": {{"External id": {i}}}}}"#
            ));
        }
        doc.push_str("]}");
        let mut seen = 0u64;
        let (scanned, peak) = scan_reader(doc.as_bytes(), &ScanLimits::default(), 4096, &mut |e| {
            seen += u64::from(e.ts.is_some());
            Ok(())
        })
        .unwrap();
        assert_eq!(
            (scanned.events, seen, scanned.bytes),
            (20_000, 20_000, doc.len() as u64)
        );
        assert!(
            peak <= 4096 + 256,
            "peak buffer {peak} for a {} byte document",
            doc.len()
        );
    }

    #[test]
    fn stream_callback_errors_stop_the_scan() {
        let bytes = sample();
        let mut calls = 0;
        let e = scan_bytes(&bytes, &ScanLimits::default(), &mut |_| {
            calls += 1;
            Err(Error::invalid("stop"))
        })
        .unwrap_err();
        assert_eq!((e.message(), calls), ("stop", 1));
    }

    #[test]
    fn stream_files() {
        let dir = std::env::temp_dir().join(format!("commcanary-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("t.json");
        let packed = dir.join("t.json.gz");
        std::fs::write(&plain, sample()).unwrap();
        std::fs::write(&packed, gzip(&[&sample()])).unwrap();
        let limits = ScanLimits::default();
        let count = |p: &Path| scan_file(p, &limits, &mut |_| Ok(())).map(|s| (s.events, s.bytes));
        let expected = (6, sample().len() as u64);
        assert_eq!(count(&plain).unwrap(), expected);
        assert_eq!(count(&packed).unwrap(), expected);
        assert_eq!(
            count(&dir.join("missing")).unwrap_err().message(),
            "does not exist"
        );
        assert_eq!(
            count(&dir).unwrap_err().message(),
            "is a directory, not a file"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// SplitMix64: the tests' seeded randomness.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const ALPHABET: &[u8] = b"{}[]:,\"\\ \n0123456789.eE+-tfnrulsaNIu\x01\x7f\x80\xc3\xa9\xff";

    /// The properties every input must have: no panic, the same outcome
    /// whole and in small chunks, and the tree walk's outcome wherever that
    /// reader and this one agree on what JSON is (this one does not detect
    /// duplicate keys everywhere, nor count depth from the root).
    fn check_against_reference(bytes: &[u8], chunk: usize) {
        let whole = scan(bytes, &ScanLimits::default(), false);
        let chunked = scan_chunked(bytes, &ScanLimits::default(), chunk);
        assert_eq!(
            whole,
            chunked,
            "chunk {chunk}: {:?}",
            String::from_utf8_lossy(bytes)
        );
        let ours = scan(bytes, &ScanLimits::default(), true);
        match reference(bytes) {
            Ok(expected) => assert_eq!(ours, Ok(expected), "{:?}", String::from_utf8_lossy(bytes)),
            Err(e) if e.message().contains("duplicate") || e.kind() == ErrorKind::Limit => {}
            Err(e) => assert!(
                ours.is_err(),
                "accepted, the tree walk says {e}: {:?}",
                String::from_utf8_lossy(bytes)
            ),
        }
    }

    #[test]
    fn stream_random_bytes_never_panic() {
        let mut rng = Rng(7);
        for round in 0..4000 {
            let len = rng.below(48);
            let mut bytes: Vec<u8> = match round % 3 {
                0 => Vec::new(),
                1 => b"[".to_vec(),
                _ => br#"{"traceEvents": [{"#.to_vec(),
            };
            for _ in 0..len {
                let b = if rng.below(8) == 0 {
                    rng.next() as u8
                } else {
                    ALPHABET[rng.below(ALPHABET.len())]
                };
                bytes.push(b);
            }
            check_against_reference(&bytes, 1 + rng.below(9));
        }
    }

    #[test]
    fn stream_single_byte_mutations_agree_with_the_tree_walk() {
        let bytes = sample_without_duplicates();
        let mut rng = Rng(11);
        for _ in 0..3000 {
            let mut mutated = bytes.clone();
            let at = rng.below(mutated.len());
            mutated[at] = if rng.below(4) == 0 {
                rng.next() as u8
            } else {
                ALPHABET[rng.below(ALPHABET.len())]
            };
            check_against_reference(&mutated, 1 + rng.below(16));
        }
    }

    #[test]
    fn stream_random_truncations_of_gzip_never_panic() {
        let packed = gzip(&[&sample()]);
        let mut rng = Rng(13);
        for _ in 0..300 {
            let mut mutated = packed.clone();
            let at = 2 + rng.below(mutated.len() - 2);
            mutated[at] = rng.next() as u8;
            let cut = 2 + rng.below(mutated.len() - 1);
            let _ = scan_chunked(
                &mutated[..cut.min(mutated.len())],
                &ScanLimits::default(),
                1 + rng.below(64),
            );
        }
    }

    /// Compares two summaries, reporting the first difference only.
    fn assert_same(ours: &Summary, expected: &Summary, what: &str) {
        assert_eq!(ours.header, expected.header, "{what} header");
        for (a, b) in ours.events.iter().zip(&expected.events) {
            assert_eq!(a, b, "{what} event {}", a.index);
        }
        assert_eq!(ours, expected, "{what}");
    }

    fn fixture(rel: &str) -> Option<std::path::PathBuf> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures")
            .join(rel);
        path.exists().then_some(path)
    }

    /// Real Kineto traces: the streaming scan of the file agrees with the
    /// tree walk over `read_input`.
    #[test]
    fn stream_real_fixtures_match_the_tree_walk() {
        let cases = [
            ("kineto/gloo_tp4_decode/rank0.json.gz", Some(6201)),
            (
                "hang/gloo_tp4_rank3_skips_allreduce/rank0.window1.json",
                None,
            ),
        ];
        for (rel, count) in cases {
            let Some(path) = fixture(rel) else {
                continue;
            };
            let (mut events, mut raw) = (Vec::new(), Vec::new());
            let scanned = scan_file(&path, &ScanLimits::default(), &mut |e| {
                events.push(owned(e, true));
                raw.push(owned(e, false));
                Ok(())
            })
            .unwrap();
            let text = crate::input::read_input(&path, crate::input::MAX_INPUT_BYTES).unwrap();
            let expected = reference(&text).unwrap();
            let ours = summary(scanned.clone(), events, true);
            assert_same(&ours, &expected, rel);
            for (raw, canon) in raw.iter().zip(&expected.events) {
                assert_eq!(
                    (&raw.pid, &raw.tid),
                    (&canon.pid, &canon.tid),
                    "{rel} pid/tid as written"
                );
            }
            if let Some(count) = count {
                assert_eq!(scanned.events, count);
            }
            let small = scan_reader(
                std::fs::File::open(&path).unwrap(),
                &ScanLimits::default(),
                1000,
                &mut |_| Ok(()),
            );
            assert_eq!(small.unwrap().0.events, scanned.events);
        }
    }

    fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
        items[rng.below(items.len())]
    }

    fn gen_ws(rng: &mut Rng, out: &mut String) {
        out.push_str(pick(rng, &["", "", " ", "\n  ", "\t", "\r\n"]));
    }

    fn gen_string(rng: &mut Rng, out: &mut String) {
        const PIECES: &[&str] = &[
            "abc",
            "X",
            " ",
            "\\n",
            "\\u00e9",
            "\u{e9}",
            "\\ud83d\\ude00",
            "\\\"",
            "\\\\",
            "\\/",
            "\\ud800",
            "aten::mm",
            "\u{1F600}",
            "\\t",
        ];
        out.push('"');
        for _ in 0..rng.below(4) {
            out.push_str(pick(rng, PIECES));
        }
        out.push('"');
    }

    fn gen_number(rng: &mut Rng, out: &mut String) {
        let n = rng.next();
        match rng.below(7) {
            0 => out.push_str(&format!("{}", n % 1000)),
            1 => out.push_str(&format!("-{}", n % 100_000)),
            2 => out.push_str(&format!("{}.{:03}", n % 10_000_000_000_000, n % 1000)),
            3 => out.push_str(pick(rng, &["-0", "-0.0", "0.0", "1.5e-7", "3E+2", "2e0"])),
            4 => out.push_str("123456789012345678901234567890"),
            5 => out.push_str(&format!("{}", n as i64)),
            _ => out.push_str(&format!("{:?}", f64::from_bits(n >> 2) % 1e6)),
        }
    }

    fn gen_value(rng: &mut Rng, depth: u32, out: &mut String) {
        match rng.below(if depth == 0 { 3 } else { 5 }) {
            0 => out.push_str(pick(rng, &["null", "true", "false"])),
            1 => gen_number(rng, out),
            2 => gen_string(rng, out),
            3 => {
                out.push('[');
                for i in 0..rng.below(4) {
                    if i > 0 {
                        out.push(',');
                    }
                    gen_ws(rng, out);
                    gen_value(rng, depth - 1, out);
                    gen_ws(rng, out);
                }
                out.push(']');
            }
            _ => {
                let keys = ["a", "b", "External id", "x\\u0079", "n"];
                gen_object(rng, &keys, depth - 1, out, gen_value);
            }
        }
    }

    /// An object with some of `keys` (each at most once, in random order).
    fn gen_object(
        rng: &mut Rng,
        keys: &[&str],
        depth: u32,
        out: &mut String,
        value: fn(&mut Rng, u32, &mut String),
    ) {
        let mut keys = keys.to_vec();
        out.push('{');
        for i in 0..rng.below(keys.len() + 1) {
            let key = keys.swap_remove(rng.below(keys.len()));
            if i > 0 {
                out.push(',');
            }
            gen_ws(rng, out);
            out.push_str(&format!("\"{key}\""));
            gen_ws(rng, out);
            out.push(':');
            gen_ws(rng, out);
            value(rng, depth, out);
            gen_ws(rng, out);
        }
        out.push('}');
    }

    /// An event: mostly well-typed selected fields, sometimes anything.
    fn gen_field(rng: &mut Rng, depth: u32, out: &mut String) {
        match rng.below(4) {
            0 => gen_value(rng, depth, out),
            1 => gen_string(rng, out),
            2 => gen_number(rng, out),
            _ => gen_object(rng, &["External id", "a", "b"], depth, out, gen_value),
        }
    }

    fn gen_trace(rng: &mut Rng) -> String {
        let mut events = String::from("[");
        for i in 0..rng.below(6) {
            if i > 0 {
                events.push(',');
            }
            gen_ws(rng, &mut events);
            if rng.below(5) == 0 {
                gen_value(rng, 2, &mut events);
            } else {
                let cat = pick(rng, &["cat", "c\\u0061t"]);
                let keys = ["ph", cat, "name", "pid", "tid", "ts", "dur", "args", "s"];
                gen_object(rng, &keys, 3, &mut events, gen_field);
            }
        }
        events.push(']');
        if rng.below(3) == 0 {
            return events;
        }
        let mut doc = String::from("{");
        let mut members = Vec::new();
        for key in ["schemaVersion", "deviceProperties", "distributedInfo"] {
            if rng.below(2) == 0 {
                let mut m = format!("\"{key}\": ");
                gen_value(rng, 3, &mut m);
                members.push(m);
            }
        }
        let at = rng.below(members.len() + 1);
        members.insert(at, format!("\"traceEvents\": {events}"));
        doc.push_str(&members.join(",\n"));
        doc.push('}');
        doc
    }

    #[test]
    fn stream_random_traces_agree_with_the_tree_walk() {
        let mut rng = Rng(17);
        for _ in 0..1500 {
            let doc = gen_trace(&mut rng);
            let bytes = doc.as_bytes();
            assert!(reference(bytes).is_ok(), "generated {doc}");
            check_against_reference(bytes, 1 + rng.below(12));
            let cut = rng.below(bytes.len());
            let chunk = 1 + rng.below(12);
            assert!(
                scan(&bytes[..cut], &ScanLimits::default(), false).is_err(),
                "{doc} cut {cut}"
            );
            assert!(scan_chunked(&bytes[..cut], &ScanLimits::default(), chunk).is_err());
        }
    }

    #[test]
    fn stream_number_values_are_correctly_rounded() {
        let mut rng = Rng(19);
        let mut tokens: Vec<String> = [
            "0",
            "-0",
            "-0.0",
            "9007199254740993",
            "9007199254740992.5",
            "0.1",
            "-12.5e+3",
            "1e22",
            "1e23",
            "123456789012345678901",
            "5223593015455.128",
            "0.0000001",
            "1234567890123456789",
            "12345678901234567890",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for _ in 0..5000 {
            let (a, b) = (
                rng.next() >> rng.below(64),
                rng.next() % 10u64.pow(rng.below(8) as u32),
            );
            tokens.push(format!(
                "{}{a}.{b}",
                if rng.below(2) == 0 { "-" } else { "" }
            ));
            tokens.push(format!("{a}"));
        }
        for token in tokens {
            let float = token.contains(['.', 'e', 'E']);
            let expected: f64 = token.parse().unwrap();
            let expected = if !float && expected == 0.0 {
                0.0
            } else {
                expected
            };
            let got = number_value(token.as_bytes(), float).unwrap();
            assert_eq!(got.to_bits(), expected.to_bits(), "{token}");
        }
    }
}
