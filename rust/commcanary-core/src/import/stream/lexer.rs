//! The token-level cursor: [`Cur`] over the scanner's window reads one
//! token or one whole value and either completes it, fails, or asks for
//! more bytes ([`Stop::More`]: the scanner refills and reads the unit
//! again from its start).
//!
//! Invariants:
//! * Every byte is checked, skipped values included: brackets, commas and
//!   colons, strings (escapes, control characters, UTF-8), numbers (the
//!   JSON grammar, at most 1024 characters, floats finite), literals;
//!   `NaN` and `Infinity` are refused.
//! * Nesting is at most [`MAX_DEPTH`] levels, counted from the level the
//!   caller says the value is at.
//! * A token cut by the end of the window is [`Stop::More`], never read
//!   short; so is a number that reaches the window's end, unless the input
//!   ends there.
//! * Offsets in messages are absolute (decompressed) byte offsets; the
//!   cursor never panics on any window.

use super::bytes::{closer, digits, is_ws, parse_f64, plain_run, skip_spaces, span, unescape};
use super::syntax;
use crate::error::{Error, ErrorKind};
use crate::json::OPEN_BRACE;

/// Deepest nesting inside an event or a header member.
const MAX_DEPTH: u32 = 64;
/// Longest numeric token (as [`crate::json::JsonLimits`]' default).
const MAX_NUMBER_CHARS: usize = 1024;

/// Why a cursor stopped short of a complete unit.
pub(super) enum Stop {
    /// The window ends inside the unit: refill and read it again.
    More,
    /// The input is invalid (or a limit is exceeded); boxed, so that the
    /// results of the token readers stay small.
    Fail(Box<Error>),
}

pub(super) type Step<T> = std::result::Result<T, Stop>;

/// A string token: its content `buf[start..end]` (quotes excluded).
#[derive(Debug, Clone, Copy)]
pub(super) struct StrTok {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) escaped: bool,
}

/// A cursor over a window whose first byte is at absolute offset `base`;
/// `eof` when the input ends with the window.
pub(super) struct Cur<'b> {
    pub(super) buf: &'b [u8],
    pub(super) pos: usize,
    pub(super) base: u64,
    pub(super) eof: bool,
}

impl<'b> Cur<'b> {
    pub(super) fn fail_at(&self, what: &str, at: usize) -> Stop {
        Stop::Fail(Box::new(syntax(what, self.base + at as u64)))
    }

    pub(super) fn fail(&self, what: &str) -> Stop {
        self.fail_at(what, self.pos)
    }

    #[inline]
    pub(super) fn peek(&self) -> Step<u8> {
        self.buf.get(self.pos).copied().ok_or(Stop::More)
    }

    /// Skips whitespace; returns the next byte without consuming it. Runs
    /// of spaces (indentation) go eight bytes at a time.
    #[inline]
    pub(super) fn ws(&mut self) -> Step<u8> {
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
    pub(super) fn key_colon(&mut self) -> Step<StrTok> {
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
    pub(super) fn string(&mut self) -> Step<StrTok> {
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
    pub(super) fn number(&mut self) -> Step<bool> {
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
    pub(super) fn skip_value(&mut self, outer: u32) -> Step<()> {
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
    pub(super) fn decoded(&self, key: StrTok) -> Vec<u8> {
        let raw = span(self.buf, key.start, key.end);
        if key.escaped {
            unescape(raw)
        } else {
            raw.to_vec()
        }
    }
}
