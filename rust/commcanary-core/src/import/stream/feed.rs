//! The input side of a scan: a window of bytes, with the absolute offset
//! of its first byte, refilled on demand ([`Feed`]) from a whole document in
//! memory ([`SliceFeed`]) or from a reader ([`ReadFeed`], plain or gzip,
//! told apart by the gzip magic bytes in [`sniff`]).
//!
//! Invariants:
//! * A refill keeps the bytes from the caller's cursor on and appends at
//!   most one chunk: the buffer holds the unit being read plus one chunk.
//! * More than the limit of decompressed bytes is refused
//!   (`exceeds max_total_bytes=N`) as soon as it is read, and so is a gzip
//!   stream inflating past the policy's `max_decompression_ratio`
//!   ([`crate::limits::check_ratio`]), counted as it streams.
//! * Read errors are [`ErrorKind::Io`] messages; a gzip stream that ends
//!   early is `is a truncated gzip file`.

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;

use flate2::read::MultiGzDecoder;

use super::total_limit;
use crate::error::{Error, ErrorKind, Result};
use crate::input::Counting;

/// A reader with the bytes [`sniff`] read ahead of it put back in front,
/// counting what it yields.
pub(super) type Sniffed<R> = Counting<io::Chain<io::Take<io::Cursor<[u8; 2]>>, R>>;

/// What `reader` yields, decompressed when it starts with the gzip magic
/// bytes; the (at most two) bytes read to tell are read again first.
pub(super) fn sniff<R: Read>(mut reader: R) -> Result<Source<Sniffed<R>>> {
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
    let gzip = got == 2 && head == [0x1f, 0x8b];
    let count = Rc::new(Cell::new(0));
    let joined = Counting::new(io::Cursor::new(head).take(got as u64).chain(reader), &count);
    Ok(if gzip {
        Source::Gzip(MultiGzDecoder::new(joined), count)
    } else {
        Source::Plain(joined)
    })
}

/// Where the scanner's bytes come from: a window over the input, with the
/// absolute offset of its first byte, refilled on demand.
pub(super) trait Feed {
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
pub(super) struct SliceFeed<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) start: usize,
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

/// Plain or gzip bytes (with the compressed bytes consumed so far).
pub(super) enum Source<R: Read> {
    Plain(R),
    Gzip(MultiGzDecoder<R>, Rc<Cell<u64>>),
}

impl<R: Read> Source<R> {
    /// Reads some bytes, mapping errors onto [`ErrorKind::Io`] messages (a
    /// gzip stream that ends early is truncated).
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            let (got, gzip) = match self {
                Source::Plain(r) => (r.read(buf), false),
                Source::Gzip(d, _) => (d.read(buf), true),
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
pub(super) struct ReadFeed<R: Read> {
    source: Source<R>,
    buf: Vec<u8>,
    end: usize,
    base: u64,
    chunk: usize,
    total: u64,
    max_total: u64,
    policy: crate::limits::Limits,
    /// The source returned its end.
    exhausted: bool,
    /// The largest the buffer has been.
    pub(super) peak: usize,
}

impl<R: Read> ReadFeed<R> {
    pub(super) fn new(source: Source<R>, chunk: usize, max_total: u64) -> Self {
        Self {
            source,
            buf: Vec::new(),
            end: 0,
            base: 0,
            chunk: chunk.max(1),
            total: 0,
            max_total,
            policy: crate::limits::current(),
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
        if let Source::Gzip(_, compressed) = &self.source {
            crate::limits::check_ratio(compressed.get(), self.total, &self.policy)?;
        }
        Ok(got > 0)
    }
}
