//! The fields a [`RawEvent`] carries, read by the cursor: `ph`, `cat`,
//! `name` (strings), `pid`, `tid`, `args` (raw text as written), `ts`,
//! `dur` (numbers). [`Cur::event`] reads one event object into [`Fields`]
//! (positions in the window); [`Fields::raw`] borrows the event from it.
//!
//! Invariants:
//! * A string or number field whose value has another type (a numeric
//!   `ph`, a quoted `ts`) is checked, skipped and absent from the event;
//!   `pid`, `tid` and `args` keep any value as written; every other member
//!   is checked and skipped.
//! * Duplicate keys among these fields are refused, whatever their
//!   spelling (`"n\u0061me"` is `name`); among other members they are not
//!   detected.
//! * Strings without escapes are borrowed from the window; a string that
//!   decodes to a lone surrogate is absent (it is no Rust string).

use std::borrow::Cow;

use super::RawEvent;
use super::bytes::{number_value, span, unescape};
use super::lexer::{Cur, Step, StrTok};
use crate::json::CLOSE_BRACE;

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
pub(super) struct Fields {
    text: [Option<StrTok>; 3],
    raw: [Option<(usize, usize)>; 3],
    ts: Option<f64>,
    dur: Option<f64>,
    seen: u8,
}

impl Fields {
    /// The event, borrowing from `window`.
    pub(super) fn raw<'w>(&self, index: usize, window: &'w [u8]) -> RawEvent<'w> {
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
    pub(super) fn event(&mut self) -> Step<Fields> {
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
