//! Recursive-descent JSON reader with limits enforced as it reads.
//!
//! Grammar and error positions follow CPython's `json` module in strict mode
//! (control characters in strings are errors, only space, tab, CR and LF are
//! whitespace). Deviations, all refusals: `NaN`/`Infinity` tokens, duplicate
//! object keys, numbers longer than the limit, floats that overflow to
//! infinity, and a leading byte-order mark.

use super::{CLOSE_BRACE, Doc, JsonLimits, Node, NodeId, OPEN_BRACE};
use crate::error::{Error, ErrorKind, Result};

/// A JSON reader over a byte slice. The trace loader drives it token by token
/// at the top level and hands each event to [`Parser::parse_value`].
pub struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    limits: JsonLimits,
    items: u64,
    item_ceiling: u64,
    /// Items one value may hold while a ceiling is set (for messages).
    item_allowance: u64,
    canonical: bool,
    stack: Vec<Node>,
    key_scratch: Vec<(u32, u32, u32)>,
}

/// Parses one complete JSON document.
///
/// # Errors
/// [`ErrorKind::Json`] for syntax errors, [`ErrorKind::Limit`] when a limit is
/// exceeded.
pub fn parse(bytes: &[u8], limits: JsonLimits) -> Result<Doc> {
    parse_tracking(bytes, limits).map(|(doc, _)| doc)
}

/// Like [`parse`], also telling whether `bytes` were already exactly the
/// canonical JSON of the document (so they can be hashed as they are).
///
/// # Errors
/// As [`parse`].
pub fn parse_tracking(bytes: &[u8], limits: JsonLimits) -> Result<(Doc, bool)> {
    parse_tracking_into(bytes, limits, Doc::new())
}

/// Like [`parse`], into `doc` (cleared first; its allocations are kept):
/// a caller that knows the size, or parses many small documents, sizes or
/// reuses it.
///
/// # Errors
/// As [`parse`].
pub fn parse_into(bytes: &[u8], limits: JsonLimits, doc: Doc) -> Result<Doc> {
    parse_tracking_into(bytes, limits, doc).map(|(doc, _)| doc)
}

fn parse_tracking_into(bytes: &[u8], limits: JsonLimits, mut doc: Doc) -> Result<(Doc, bool)> {
    doc.clear();
    let mut parser = Parser::new(bytes, limits)?;
    let leading_ws = bytes.first().is_some_and(|&b| is_ws(b));
    parser.skip_ws();
    parser.reset_canonical();
    let root = parser.parse_value(&mut doc, 1)?;
    doc.root = Some(root);
    let canonical = parser.was_canonical() && !leading_ws && parser.pos() == bytes.len();
    parser.finish()?;
    Ok((doc, canonical))
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl<'a> Parser<'a> {
    /// A reader positioned at the start of `bytes`.
    ///
    /// # Errors
    /// Refuses input that starts with a byte-order mark; UTF-8 is checked
    /// inside strings as they are read.
    pub fn new(bytes: &'a [u8], limits: JsonLimits) -> Result<Self> {
        if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
            return Err(Error::new(
                ErrorKind::Json,
                "is not valid JSON: unexpected UTF-8 byte-order mark",
            ));
        }
        Ok(Self {
            bytes,
            pos: 0,
            limits,
            items: 0,
            item_ceiling: u64::MAX,
            item_allowance: u64::MAX,
            canonical: true,
            stack: Vec::with_capacity(64),
            key_scratch: Vec::new(),
        })
    }

    /// The whole input.
    #[must_use]
    pub fn input(&self) -> &'a [u8] {
        self.bytes
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> JsonLimits {
        self.limits
    }

    /// Moves to byte offset `pos` (which must be a value boundary).
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.bytes.len());
    }

    /// Counts `n` items read elsewhere (by a parallel pass) against the limit.
    ///
    /// # Errors
    /// [`ErrorKind::Limit`] past `max_items`.
    pub fn add_items(&mut self, n: u64) -> Result<()> {
        self.items = self.items.saturating_add(n);
        if self.items > self.limits.max_items {
            return Err(self.limit(format!(
                "json items exceed max_json_items={} {}",
                self.limits.max_items,
                crate::limits::hint("max_json_items")
            )));
        }
        Ok(())
    }

    /// The input bytes `start..end`.
    #[must_use]
    pub fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        &self.bytes[start..end]
    }

    /// Current byte offset.
    #[must_use]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// A syntax error at the current position, with CPython-style location.
    #[must_use]
    pub fn error(&self, what: &str) -> Error {
        self.error_at(what, self.pos)
    }

    fn error_at(&self, what: &str, at: usize) -> Error {
        let at = at.min(self.bytes.len());
        let before = &self.bytes[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        let chars = String::from_utf8_lossy(before).chars().count();
        Error::new(
            ErrorKind::Json,
            format!("is not valid JSON: {what}: line {line} column {column} (char {chars})"),
        )
    }

    fn limit(&self, what: String) -> Error {
        Error::new(
            ErrorKind::Limit,
            format!("violates JSON resource constraints: {what}"),
        )
    }

    /// Skips JSON whitespace.
    pub fn skip_ws(&mut self) {
        if self.pos < self.bytes.len() && is_ws(self.bytes[self.pos]) {
            self.canonical = false;
            while self.pos < self.bytes.len() && is_ws(self.bytes[self.pos]) {
                self.pos += 1;
            }
        }
    }

    /// Starts tracking whether the text read from now on is canonical JSON.
    pub fn reset_canonical(&mut self) {
        self.canonical = true;
    }

    /// Whether everything read since [`Parser::reset_canonical`] was spelled
    /// exactly as canonical JSON v1 spells it: no whitespace, sorted keys,
    /// plain printable-ASCII strings, integers and floats in canonical form.
    /// (Conservative: strings with escapes count as not canonical.)
    #[must_use]
    pub fn was_canonical(&self) -> bool {
        self.canonical
    }

    /// The next byte without consuming it.
    #[must_use]
    pub fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Consumes `b` (after whitespace) or fails with `what`.
    ///
    /// # Errors
    /// A syntax error naming `what`.
    pub fn expect(&mut self, b: u8, what: &str) -> Result<()> {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// Counts one array element or object member against the item limit.
    ///
    /// # Errors
    /// [`ErrorKind::Limit`] past `max_items`.
    pub fn count_item(&mut self) -> Result<()> {
        self.items += 1;
        if self.items > self.limits.max_items {
            return Err(self.limit(format!(
                "json items exceed max_json_items={}",
                self.limits.max_items
            )));
        }
        if self.items > self.item_ceiling {
            return Err(self.limit(format!(
                "one value has more json items than max_field_items={} {}",
                self.item_allowance,
                crate::limits::hint("max_field_items")
            )));
        }
        Ok(())
    }

    /// Items counted so far.
    #[must_use]
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Caps the running item count at `ceiling` until it is lifted with
    /// `u64::MAX`; used to bound one value inside a large document.
    pub fn set_item_ceiling(&mut self, ceiling: u64) {
        self.item_allowance = ceiling.saturating_sub(self.items);
        self.item_ceiling = ceiling;
    }

    /// Checks that a container opened at `depth` is allowed.
    ///
    /// # Errors
    /// [`ErrorKind::Limit`] past `max_depth`.
    pub fn check_depth(&self, depth: u32) -> Result<()> {
        if depth > self.limits.max_depth {
            return Err(self.limit(format!(
                "json nesting depth exceeds max_json_depth={} {}",
                self.limits.max_depth,
                crate::limits::hint("max_json_depth")
            )));
        }
        Ok(())
    }

    /// After the root value: only whitespace may follow.
    ///
    /// # Errors
    /// `Extra data` when anything else follows.
    pub fn finish(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos != self.bytes.len() {
            return Err(self.error("Extra data"));
        }
        Ok(())
    }

    /// Reads a string token (the opening quote must be next) and appends its
    /// decoded WTF-8 bytes to `out`.
    ///
    /// # Errors
    /// Syntax errors and the string-length limit.
    pub fn read_string_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let begin = self.pos;
        if self.peek() != Some(b'"') {
            return Err(self.error("Expecting string"));
        }
        self.pos += 1;
        let out_start = out.len();
        loop {
            self.copy_plain_run(out, out_start)?;
            match self.bytes.get(self.pos) {
                None => return Err(self.error_at("Unterminated string starting at", begin)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => self.read_escape(out)?,
                Some(_) => {
                    return Err(self.error("Invalid control character at"));
                }
            }
        }
    }

    /// String stage 1: copies the run of plain bytes at the cursor (up to a
    /// quote, a backslash or a control character) onto `out`, checking its
    /// UTF-8 and the string-length limit (`out_start` is where the string
    /// began in `out`).
    #[inline]
    fn copy_plain_run(&mut self, out: &mut Vec<u8>, out_start: usize) -> Result<()> {
        let bytes = self.bytes;
        let run_start = self.pos;
        let mut plain = true;
        self.pos = skip_plain_words(bytes, self.pos);
        while self.pos < bytes.len() {
            let b = bytes[self.pos];
            if b == b'"' || b == b'\\' || b < 0x20 {
                break;
            }
            plain &= b < 0x7F;
            self.pos += 1;
        }
        self.canonical &= plain;
        let run = &bytes[run_start..self.pos];
        // Only strings can hold non-ASCII bytes in valid JSON; outside
        // them any such byte is a syntax error anyway.
        if !plain && !run.is_ascii() {
            if let Err(e) = std::str::from_utf8(run) {
                return Err(Error::new(
                    ErrorKind::Json,
                    format!(
                        "is not UTF-8 JSON: invalid byte at offset {}",
                        run_start + e.valid_up_to()
                    ),
                ));
            }
        }
        out.extend_from_slice(run);
        if out.len() - out_start > self.limits.max_string_bytes {
            return Err(self.limit(format!(
                "string exceeds max_json_string_bytes={} {}",
                self.limits.max_string_bytes,
                crate::limits::hint("max_json_string_bytes")
            )));
        }
        Ok(())
    }

    /// String stage 2: decodes the escape sequence at the cursor (its
    /// backslash) onto `out`, pairing a high surrogate with a following low
    /// one.
    fn read_escape(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let bytes = self.bytes;
        self.canonical = false;
        self.pos += 1;
        let esc = bytes.get(self.pos).copied();
        self.pos += 1;
        let simple = match esc {
            Some(b'"') => Some(b'"'),
            Some(b'\\') => Some(b'\\'),
            Some(b'/') => Some(b'/'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0c),
            Some(b'n') => Some(b'\n'),
            Some(b'r') => Some(b'\r'),
            Some(b't') => Some(b'\t'),
            Some(b'u') => None,
            _ => return Err(self.error_at("Invalid \\escape", self.pos - 2)),
        };
        if let Some(c) = simple {
            out.push(c);
            return Ok(());
        }
        let unit = self.hex4()?;
        let mut cp = u32::from(unit);
        if (0xD800..0xDC00).contains(&unit)
            && bytes.get(self.pos) == Some(&b'\\')
            && bytes.get(self.pos + 1) == Some(&b'u')
        {
            let save = self.pos;
            self.pos += 2;
            let low = self.hex4()?;
            if (0xDC00..0xE000).contains(&low) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (u32::from(low) - 0xDC00);
            } else {
                self.pos = save;
            }
        }
        push_wtf8(out, cp);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u16> {
        let start = self.pos;
        let digits = self
            .bytes
            .get(start..start + 4)
            .ok_or_else(|| self.error_at("Invalid \\uXXXX escape", start - 1))?;
        let mut v: u16 = 0;
        for &d in digits {
            let nibble = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error_at("Invalid \\uXXXX escape", start - 1)),
            };
            v = (v << 4) | u16::from(nibble);
        }
        self.pos += 4;
        Ok(v)
    }

    /// Parses one value at nesting `depth` into `doc`, returning its node id.
    /// Leading whitespace must already be skipped.
    ///
    /// # Errors
    /// Syntax and limit errors.
    pub fn parse_value(&mut self, doc: &mut Doc, depth: u32) -> Result<NodeId> {
        let base = self.stack.len();
        self.value_onto_stack(doc, depth)?;
        debug_assert_eq!(self.stack.len(), base + 1);
        let node = self.stack.pop().unwrap_or(Node::Null);
        let id = doc.nodes.len() as NodeId;
        doc.nodes.push(node);
        Ok(id)
    }

    fn value_onto_stack(&mut self, doc: &mut Doc, depth: u32) -> Result<()> {
        let Some(b) = self.peek() else {
            return Err(self.error("Expecting value"));
        };
        match b {
            OPEN_BRACE => self.object(doc, depth),
            b'[' => self.array(doc, depth),
            b'"' => {
                let start = doc.arena.len() as u32;
                let mut arena = std::mem::take(&mut doc.arena);
                let r = self.read_string_into(&mut arena);
                doc.arena = arena;
                r?;
                let len = doc.arena.len() as u32 - start;
                self.stack.push(Node::Str { start, len });
                Ok(())
            }
            b't' => self.literal(b"true", Node::Bool(true)),
            b'f' => self.literal(b"false", Node::Bool(false)),
            b'n' => self.literal(b"null", Node::Null),
            b'-' | b'0'..=b'9' => self.number(doc),
            b'N' | b'I' => Err(self.error("NaN and Infinity are not allowed")),
            _ => Err(self.error("Expecting value")),
        }
    }

    fn literal(&mut self, word: &[u8], node: Node) -> Result<()> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            self.stack.push(node);
            Ok(())
        } else {
            Err(self.error("Expecting value"))
        }
    }

    /// Scans one numeric token at the current position.
    fn scan_number(&mut self) -> Result<Scanned> {
        let start = self.pos;
        let token = self.lex_number(start)?;
        if token.end - start > self.limits.max_number_chars {
            return Err(self.limit(format!(
                "numeric token exceeds max_json_number_chars={} {}",
                self.limits.max_number_chars,
                crate::limits::hint("max_json_number_chars")
            )));
        }
        self.pos = token.end;
        if token.is_float {
            self.float_value(&token, start)
                .map(|v| Scanned::Float(v, start))
        } else {
            Ok(self.int_value(&token, start))
        }
    }

    /// Number stage 1: finds the extent of the numeric token starting at
    /// `start`, accumulating up to 19 significant digits for the exact fast
    /// paths of the later stages. Moves nothing.
    #[inline]
    fn lex_number(&self, start: usize) -> Result<NumberToken> {
        let bytes = self.bytes;
        let negative = bytes.get(start) == Some(&b'-');
        let mut t = NumberToken {
            end: start + usize::from(negative),
            negative,
            is_float: false,
            mantissa: 0,
            digits: 0,
            fraction_digits: 0,
            exponent: 0,
        };
        match bytes.get(t.end) {
            Some(b'0') => t.end += 1,
            Some(b'1'..=b'9') => {
                while let Some(&d @ b'0'..=b'9') = bytes.get(t.end) {
                    t.push_digit(d);
                    t.end += 1;
                }
            }
            Some(b'I') => return Err(self.error("NaN and Infinity are not allowed")),
            _ => return Err(self.error("Expecting value")),
        }
        if bytes.get(t.end) == Some(&b'.') && matches!(bytes.get(t.end + 1), Some(b'0'..=b'9')) {
            t.is_float = true;
            t.end += 1;
            while let Some(&d @ b'0'..=b'9') = bytes.get(t.end) {
                if t.digits > 0 || d != b'0' {
                    t.push_digit(d);
                }
                t.fraction_digits += 1;
                t.end += 1;
            }
        }
        t.lex_exponent(bytes);
        Ok(t)
    }

    /// Number stage 2 for integer tokens: the value, exact for up to 18
    /// digits, else parsed (out of `i64` range: a big integer).
    #[inline]
    fn int_value(&mut self, t: &NumberToken, start: usize) -> Scanned {
        if t.digits <= 18 {
            let v = t.mantissa as i64;
            if t.negative && v == 0 {
                self.canonical = false; // "-0" is spelled "0"
            }
            return Scanned::Int(if t.negative { -v } else { v });
        }
        // The token is ASCII by construction.
        let text = std::str::from_utf8(&self.bytes[start..t.end]).unwrap_or("0");
        match text.parse::<i64>() {
            Ok(i) => Scanned::Int(i),
            Err(_) => Scanned::BigInt(start),
        }
    }

    /// Number stage 2 for float tokens: the correctly rounded, finite value.
    #[inline]
    fn float_value(&self, t: &NumberToken, start: usize) -> Result<f64> {
        let fast = if t.digits <= 19 && t.mantissa <= (1u64 << 53) {
            // Clinger's fast path: an exact integer times or over an exact
            // power of ten rounds once, so the result is correctly rounded.
            let e10 = t.exponent.saturating_sub(t.fraction_digits);
            let m = t.mantissa as f64;
            match e10 {
                0..=22 => Some(m * POW10[e10 as usize]),
                -22..=-1 => Some(m / POW10[(-e10) as usize]),
                _ => None,
            }
            .map(|v| if t.negative { -v } else { v })
        } else {
            None
        };
        let value: f64 = match fast {
            Some(v) => v,
            None => std::str::from_utf8(&self.bytes[start..t.end])
                .unwrap_or("0")
                .parse()
                .map_err(|_| self.error_at("Invalid number", start))?,
        };
        if !value.is_finite() {
            return Err(self.error_at("number out of range (floats must be finite)", start));
        }
        Ok(value)
    }

    fn number(&mut self, doc: &mut Doc) -> Result<()> {
        match self.scan_number()? {
            Scanned::Int(i) => self.stack.push(Node::Int(i)),
            Scanned::BigInt(start) => {
                let digits = &self.bytes[start..self.pos];
                let Node::Str { start: s, len } = doc.push_str_bytes(digits) else {
                    unreachable!("push_str_bytes returns a string node")
                };
                self.stack.push(Node::BigInt { start: s, len });
            }
            Scanned::Float(value, start) => {
                let token = &self.bytes[start..self.pos];
                let spelled_as_repr = is_repr_spelling(token) || {
                    let mut repr = Vec::with_capacity(32);
                    crate::pyfloat::write_repr_bytes(&mut repr, value);
                    repr == token
                };
                let node = if spelled_as_repr {
                    let at = doc.arena.len() as u32;
                    doc.arena.extend_from_slice(token);
                    Node::Float {
                        value,
                        text: at,
                        len: token.len() as u16,
                    }
                } else {
                    self.canonical = false;
                    Node::Float {
                        value,
                        text: 0,
                        len: 0,
                    }
                };
                self.stack.push(node);
            }
        }
        Ok(())
    }

    /// Reads an array of numbers (integers or floats) at `depth` into `out`
    /// without building nodes; `as_int` rejects non-integer tokens.
    ///
    /// # Errors
    /// Syntax errors, limits, and elements that are not numbers (named `what`).
    pub fn read_number_array(&mut self, depth: u32, out: &mut Vec<f64>, what: &str) -> Result<()> {
        self.check_depth(depth)?;
        self.expect(b'[', "Expecting value")?;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            self.count_item()?;
            match self.peek() {
                Some(b'-' | b'0'..=b'9') => match self.scan_number()? {
                    Scanned::Int(i) => out.push(i as f64),
                    Scanned::Float(v, _) => out.push(v),
                    Scanned::BigInt(_) => {
                        return Err(Error::invalid(format!(
                            "{what} must contain only numbers in range"
                        )));
                    }
                },
                _ => {
                    // Report a syntax error as such, else a type error.
                    let mut scratch = Doc::new();
                    self.parse_value(&mut scratch, depth + 1)?;
                    return Err(Error::invalid(format!("{what} must contain only numbers")));
                }
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("Expecting ',' delimiter")),
            }
        }
    }

    /// Skims one array or object: checks that brackets balance, strings
    /// close and no `NaN`/`Infinity` token appears, without validating the
    /// tokens in between. For large sections a caller does not need (a
    /// report's samples, when comparing); full validation happens wherever
    /// they are read.
    ///
    /// # Errors
    /// Unbalanced or truncated input, forbidden tokens, the depth limit.
    pub fn skim_value(&mut self, depth: u32) -> Result<()> {
        if !matches!(self.peek(), Some(b'[' | OPEN_BRACE)) {
            return self.skip_value(depth);
        }
        let bytes = self.bytes;
        let start = self.pos;
        let mut p = self.pos;
        let mut nesting = 0u32;
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        let has = |w: u64, b: u8| {
            let x = w ^ (ONES * u64::from(b));
            x.wrapping_sub(ONES) & !x & HIGHS
        };
        while p < bytes.len() {
            // Skip eight plain bytes at a time (digits, commas, dots, ...).
            if let Some(chunk) = bytes.get(p..p + 8) {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                let w = u64::from_le_bytes(word);
                // '[' 0x5B and ']' 0x5D, '{' 0x7B and '}' 0x7D differ only in
                // bits 1 and 2: fold them away and look for 0x59 / 0x79 (a few
                // other bytes fold there too and just take the slow path).
                let folded = w & !(ONES * 0x06);
                if has(w, b'"')
                    | has(folded, b'Y')
                    | has(folded, b'y')
                    | has(w, b'N')
                    | has(w, b'I')
                    == 0
                {
                    p += 8;
                    continue;
                }
            }
            match bytes[p] {
                b'"' => {
                    p += 1;
                    while p < bytes.len() && bytes[p] != b'"' {
                        if bytes[p] == b'\\' {
                            p += 1;
                        }
                        p += 1;
                    }
                    if p >= bytes.len() {
                        return Err(self.error_at("Unterminated string", start));
                    }
                }
                b'[' | OPEN_BRACE => {
                    nesting += 1;
                    self.check_depth(depth + nesting - 1)?;
                }
                b']' | CLOSE_BRACE => {
                    nesting -= 1;
                    if nesting == 0 {
                        self.pos = p + 1;
                        return Ok(());
                    }
                }
                b'N' | b'I' => {
                    self.pos = p;
                    return Err(self.error("NaN and Infinity are not allowed"));
                }
                _ => {}
            }
            p += 1;
        }
        self.pos = bytes.len();
        Err(self.error_at("Unterminated value starting at", start))
    }

    /// Validates and skips one value at `depth` without building nodes
    /// (duplicate keys inside it are not detected).
    ///
    /// # Errors
    /// Syntax errors and limits.
    pub fn skip_value(&mut self, depth: u32) -> Result<()> {
        let mut scratch = Vec::new();
        self.skip_inner(depth, &mut scratch)
    }

    fn skip_inner(&mut self, depth: u32, scratch: &mut Vec<u8>) -> Result<()> {
        match self.peek() {
            Some(OPEN_BRACE) => {
                self.check_depth(depth)?;
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(CLOSE_BRACE) {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_ws();
                    self.count_item()?;
                    scratch.clear();
                    self.read_string_into(scratch)?;
                    self.expect(b':', "Expecting ':' delimiter")?;
                    self.skip_ws();
                    self.skip_inner(depth + 1, scratch)?;
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(CLOSE_BRACE) => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(self.error("Expecting ',' delimiter")),
                    }
                }
            }
            Some(b'[') => {
                self.check_depth(depth)?;
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_ws();
                    self.count_item()?;
                    self.skip_inner(depth + 1, scratch)?;
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(self.error("Expecting ',' delimiter")),
                    }
                }
            }
            Some(b'"') => {
                scratch.clear();
                self.read_string_into(scratch)
            }
            Some(b'-' | b'0'..=b'9') => self.scan_number().map(|_| ()),
            _ => {
                let mut doc = Doc::new();
                self.value_onto_stack(&mut doc, depth)?;
                self.stack.clear();
                Ok(())
            }
        }
    }

    fn array(&mut self, doc: &mut Doc, depth: u32) -> Result<()> {
        self.check_depth(depth)?;
        self.pos += 1; // '['
        let base = self.stack.len();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                self.count_item()?;
                self.value_onto_stack(doc, depth + 1)?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error("Expecting ',' delimiter")),
                }
            }
        }
        let first = doc.nodes.len() as u32;
        let len = (self.stack.len() - base) as u32;
        doc.nodes.extend_from_slice(&self.stack[base..]);
        self.stack.truncate(base);
        self.stack.push(Node::Array { first, len });
        Ok(())
    }

    fn object(&mut self, doc: &mut Doc, depth: u32) -> Result<()> {
        self.check_depth(depth)?;
        let open = self.pos;
        self.pos += 1; // '{'
        let base = self.stack.len();
        self.skip_ws();
        if self.peek() == Some(CLOSE_BRACE) {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                if self.peek() != Some(b'"') {
                    return Err(self.error("Expecting property name enclosed in double quotes"));
                }
                self.count_item()?;
                let start = doc.arena.len() as u32;
                let mut arena = std::mem::take(&mut doc.arena);
                let r = self.read_string_into(&mut arena);
                doc.arena = arena;
                r?;
                let len = doc.arena.len() as u32 - start;
                self.stack.push(Node::Str { start, len });
                self.expect(b':', "Expecting ':' delimiter")?;
                self.skip_ws();
                self.value_onto_stack(doc, depth + 1)?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(CLOSE_BRACE) => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error("Expecting ',' delimiter")),
                }
            }
        }
        let members = (self.stack.len() - base) / 2;
        if self.canonical {
            let key = |i: usize| match self.stack[base + 2 * i] {
                Node::Str { start, len } => doc.bytes(start, len),
                _ => &[],
            };
            self.canonical = (1..members).all(|i| key(i - 1) < key(i));
        }
        self.check_duplicates(doc, base, members, open)?;
        let first = doc.nodes.len() as u32;
        doc.nodes.extend_from_slice(&self.stack[base..]);
        self.stack.truncate(base);
        self.stack.push(Node::Object {
            first,
            len: members as u32,
        });
        Ok(())
    }

    fn check_duplicates(
        &mut self,
        doc: &Doc,
        base: usize,
        members: usize,
        open: usize,
    ) -> Result<()> {
        if members < 2 {
            return Ok(());
        }
        let key = |i: usize| -> &[u8] {
            match self.stack[base + 2 * i] {
                Node::Str { start, len } => doc.bytes(start, len),
                _ => &[],
            }
        };
        let duplicate = if members <= 12 {
            let mut found = None;
            'outer: for i in 1..members {
                for j in 0..i {
                    if key(i) == key(j) {
                        found = Some(i);
                        break 'outer;
                    }
                }
            }
            found
        } else {
            let mut keys = std::mem::take(&mut self.key_scratch);
            keys.clear();
            for i in 0..members {
                if let Node::Str { start, len } = self.stack[base + 2 * i] {
                    keys.push((start, len, i as u32));
                }
            }
            keys.sort_unstable_by(|a, b| doc.bytes(a.0, a.1).cmp(doc.bytes(b.0, b.1)));
            let found = keys
                .windows(2)
                .find(|w| doc.bytes(w[0].0, w[0].1) == doc.bytes(w[1].0, w[1].1))
                .map(|w| w[1].2 as usize);
            self.key_scratch = keys;
            found
        };
        if let Some(i) = duplicate {
            let name = String::from_utf8_lossy(key(i)).into_owned();
            return Err(self.error_at(
                &format!("duplicate object key {name:?} in object starting at"),
                open,
            ));
        }
        Ok(())
    }
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A numeric token as [`Parser::scan_number`] lexes it.
struct NumberToken {
    /// Offset just past the token.
    end: usize,
    /// A leading `-`.
    negative: bool,
    /// A fraction or an exponent is present.
    is_float: bool,
    /// The first 19 significant digits, as an integer.
    mantissa: u64,
    /// Significant digits seen (leading fractional zeros of `0.0…` excluded).
    digits: u32,
    /// Digits after the decimal point.
    fraction_digits: i32,
    /// The decimal exponent (saturating).
    exponent: i32,
}

impl NumberToken {
    /// Adds one significant digit (kept only among the first 19).
    #[inline]
    fn push_digit(&mut self, d: u8) {
        if self.digits < 19 {
            self.mantissa = self.mantissa * 10 + u64::from(d - b'0');
        }
        self.digits += 1;
    }

    /// Number stage 1, continued: an exponent at `end` (one with no digits
    /// is not part of the token).
    #[inline]
    fn lex_exponent(&mut self, bytes: &[u8]) {
        if !matches!(bytes.get(self.end), Some(b'e' | b'E')) {
            return;
        }
        let mut q = self.end + 1;
        let exp_negative = bytes.get(q) == Some(&b'-');
        if matches!(bytes.get(q), Some(b'+' | b'-')) {
            q += 1;
        }
        if matches!(bytes.get(q), Some(b'0'..=b'9')) {
            self.is_float = true;
            while let Some(&d @ b'0'..=b'9') = bytes.get(q) {
                self.exponent = self
                    .exponent
                    .saturating_mul(10)
                    .saturating_add(i32::from(d - b'0'));
                q += 1;
            }
            if exp_negative {
                self.exponent = -self.exponent;
            }
            self.end = q;
        }
    }
}

/// A scanned numeric token (with its start offset).
enum Scanned {
    Int(i64),
    BigInt(usize),
    Float(f64, usize),
}

/// Whether a float token is already CPython's `repr` of the double it
/// parses to, without formatting that double.
///
/// True for positional tokens `-?(0|[1-9]d*).d+` with at most 15 significant
/// digits, no trailing fractional zero (except `.0` itself), an integer part
/// of at most 16 digits, and fewer than four zeros between `0.` and the first
/// significant digit. Any two decimals with at most 15 significant digits are
/// more than one ulp apart, so such a token is the shortest round-tripping
/// spelling of its value, and the layout rules are CPython's.
fn is_repr_spelling(token: &[u8]) -> bool {
    let t = token.strip_prefix(b"-").unwrap_or(token);
    let Some(dot) = t.iter().position(|&b| b == b'.') else {
        return false;
    };
    let (int, frac) = (&t[..dot], &t[dot + 1..]);
    if int.is_empty() || frac.is_empty() || int.len() > 16 || !frac.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if frac.len() > 1 && frac[frac.len() - 1] == b'0' {
        return false;
    }
    if int == b"0" {
        if frac == b"0" {
            return true;
        }
        let zeros = frac.iter().take_while(|&&b| b == b'0').count();
        zeros < 4 && frac.len() - zeros <= 15 && zeros < frac.len()
    } else {
        int[0] != b'0' && int.len() + if frac == b"0" { 0 } else { frac.len() } <= 15
    }
}

/// The first offset at or after `pos`, in steps of eight bytes, where the
/// eight bytes from there are not all plain string bytes (printable ASCII
/// other than `"` and `\`): the fast scan of [`Parser::read_string_into`].
#[inline]
fn skip_plain_words(bytes: &[u8], mut pos: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let special = has_zero(w ^ (ONES * u64::from(b'"')))
            | has_zero(w ^ (ONES * u64::from(b'\\')))
            | has_zero(w ^ (ONES * 0x7F))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGHS)
            | (w & HIGHS);
        if special != 0 {
            break;
        }
        pos += 8;
    }
    pos
}

/// Appends code point `cp` (which may be a lone surrogate) as WTF-8.
pub(crate) fn push_wtf8(out: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.push(0xC0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x10000 {
        out.push(0xE0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else {
        out.push(0xF0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Doc> {
        parse(s.as_bytes(), JsonLimits::default())
    }

    #[test]
    fn parses_basic_values() {
        let doc = p(r#"{"a": [1, 2.5, "x", true, null, -0, 12345678901234567890123]}"#).unwrap();
        let root = doc.root().unwrap();
        let a = root.get("a").unwrap();
        let items: Vec<_> = a.elements().collect();
        assert_eq!(items[0].as_i64(), Some(1));
        assert_eq!(items[1].as_float(), Some(2.5));
        assert_eq!(items[2].as_str(), Some("x"));
        assert_eq!(items[3].as_bool(), Some(true));
        assert!(items[4].is_null());
        assert_eq!(items[5].as_i64(), Some(0));
        assert!(matches!(items[6].node(), Node::BigInt { .. }));
    }

    #[test]
    fn refuses_what_python_refuses_and_more() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "NaN",
            "[Infinity]",
            "[-Infinity]",
            "{\"a\":1,\"a\":2}",
            "\"\u{1}\"",
            "[1e400]",
            "01",
            "[1] x",
            "\u{feff}{}",
            "{'a':1}",
            "[.5]",
            "[1.]",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn keeps_lone_surrogates_and_pairs() {
        let doc = p(r#"["\ud800", "\ud83d\ude00", "\u00e9"]"#).unwrap();
        let items: Vec<_> = doc.root().unwrap().elements().collect();
        assert_eq!(items[0].as_wtf8().unwrap(), &[0xED, 0xA0, 0x80]);
        assert_eq!(items[1].as_str(), Some("\u{1F600}"));
        assert_eq!(items[2].as_str(), Some("é"));
    }

    #[test]
    fn repr_spelling_detection_agrees_with_repr() {
        for token in [
            "0.0",
            "-0.0",
            "1.5",
            "100.0",
            "0.001",
            "0.0001",
            "0.00001",
            "1.50",
            "12345678901234.5",
            "1234567890123456.0",
            "0.1234567890123456",
            "77.72500000000001",
            "00.5",
            "-12.25",
            "10000000000000000.0",
        ] {
            let value: f64 = token.parse().unwrap();
            let canonical = crate::pyfloat::repr(value) == token;
            if is_repr_spelling(token.as_bytes()) {
                assert!(
                    canonical,
                    "{token} claimed canonical but repr is {}",
                    crate::pyfloat::repr(value)
                );
            }
        }
        assert!(is_repr_spelling(b"75.629"));
        assert!(is_repr_spelling(b"0.0"));
        assert!(!is_repr_spelling(b"1.50"));
        assert!(!is_repr_spelling(b"0.00001"));
        assert_eq!(std::mem::size_of::<Node>(), 16);
    }

    #[test]
    fn skim_finds_the_same_end_as_a_full_parse() {
        let texts = [
            r#"[1,2,3,[4,5,[6]],{"a":[7,8]},"x]y",9]"#,
            r#"{"columns":{"a":[1.5,2.25,3.125,4,5,6,7,8,9,10,11,12],"b":[[],[[]],{}]},"n":"}{"}"#,
            r#"[[[[[[1234567890123,1234567890123,1234567890123]]]]]]"#,
            r#"["\"]\\",{"k":"v\\\""},[0.001,0.002,0.003,0.004,0.005,0.006,0.007]]"#,
        ];
        for text in texts {
            let doubled = format!("[{text},{text}] ");
            let mut skim = Parser::new(doubled.as_bytes(), JsonLimits::default()).unwrap();
            skim.skim_value(1).unwrap();
            let mut full = Parser::new(doubled.as_bytes(), JsonLimits::default()).unwrap();
            full.skip_value(1).unwrap();
            assert_eq!(skim.pos(), full.pos(), "{text}");
        }
        for bad in [
            "[1,2,[3,4]",
            r#"[1,"abc]"#,
            "[NaN,1]",
            "[1,2,3,4,5,6,7,8,9,Infinity]",
        ] {
            let mut skim = Parser::new(bad.as_bytes(), JsonLimits::default()).unwrap();
            assert!(skim.skim_value(1).is_err(), "{bad}");
        }
    }

    #[test]
    fn enforces_limits() {
        let deep = "[".repeat(65) + &"]".repeat(65);
        let err = p(&deep).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Limit);
        let ok = "[".repeat(64) + &"]".repeat(64);
        assert!(p(&ok).is_ok());
        let limits = JsonLimits {
            max_items: 3,
            ..JsonLimits::default()
        };
        assert!(parse(b"[1,2,3,4]", limits).is_err());
        assert!(parse(b"[1,2,3]", limits).is_ok());
    }

    #[test]
    fn reports_python_style_positions() {
        let err = p("{\n  \"a\": x}").unwrap_err();
        assert!(
            err.message().contains("line 2 column 8"),
            "{}",
            err.message()
        );
    }
}
