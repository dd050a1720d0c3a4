//! The document's state machine: the root (an object or a bare list), the
//! top-level members, the `traceEvents` list and its elements.
//!
//! [`Scanner`] walks the document through a [`Feed`], one unit at a time
//! (a key, a header member, an element), each read whole by a [`Cur`] over
//! the window: when the window ends inside a unit, the window is refilled
//! keeping the unit's bytes and the unit is read again from its start.
//!
//! Invariants:
//! * A unit longer than its limit (`max_event_bytes`, `max_header_bytes`)
//!   is refused before the window holds more than that limit plus a chunk.
//! * Duplicate top-level keys are refused (`traceEvents` included); a
//!   document without a `traceEvents` list, or whose root is neither an
//!   object nor a list, is refused.
//! * Only whitespace may follow the root; a byte-order mark is refused.
//! * Every object element goes to the callback as soon as it is read; other
//!   elements are checked, skipped and counted.

use super::bytes::{is_ws, span};
use super::feed::Feed;
use super::lexer::{Cur, Step, Stop};
use super::{OnEvent, ScanLimits, ScannedTrace, not_a_list, syntax};
use crate::error::{Error, ErrorKind, Result};
use crate::json::{CLOSE_BRACE, OPEN_BRACE};

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
pub(super) struct Scanner<'l, F: Feed> {
    pub(super) feed: F,
    /// Cursor in `feed.window()`.
    pos: usize,
    limits: &'l ScanLimits,
    /// Index of the next element of `traceEvents`.
    index: usize,
    out: ScannedTrace,
}

impl<'l, F: Feed> Scanner<'l, F> {
    pub(super) fn new(feed: F, limits: &'l ScanLimits) -> Self {
        Self {
            feed,
            pos: 0,
            limits,
            index: 0,
            out: ScannedTrace::default(),
        }
    }

    pub(super) fn run(mut self, on_event: &mut OnEvent<'_>) -> Result<ScannedTrace> {
        self.run_mut(on_event)
    }

    /// The whole document: its root, then nothing but whitespace.
    pub(super) fn run_mut(&mut self, on_event: &mut OnEvent<'_>) -> Result<ScannedTrace> {
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
