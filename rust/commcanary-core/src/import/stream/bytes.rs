//! Byte-level helpers of the scan: whitespace, digit and plain-string runs
//! (eight bytes at a time), checked number tokens to `f64`, and string
//! content decoded to WTF-8.
//!
//! Invariants:
//! * No helper panics: an index out of range reads as the end of the input
//!   (an empty [`span`]).
//! * The run helpers return exactly the index a byte-at-a-time loop would.
//! * [`number_value`] is correctly rounded (Rust's parse, exact on the fast
//!   path) and reads an integer zero as `0.0`, as the tree reader does.
//! * [`unescape`] expects content the lexer has checked; a `\u` surrogate
//!   pair is one code point, a lone surrogate keeps its WTF-8 form.

use crate::json::CLOSE_BRACE;

#[inline]
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The index of the first byte from `i` that is not a space.
#[inline]
pub(super) fn skip_spaces(bytes: &[u8], mut i: usize) -> usize {
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

pub(super) fn closer(object: bool) -> u8 {
    if object { CLOSE_BRACE } else { b']' }
}

/// `bytes[a..b]`, empty when out of range.
#[inline]
pub(super) fn span(bytes: &[u8], a: usize, b: usize) -> &[u8] {
    bytes.get(a..b).unwrap_or_default()
}

/// The index after the digits at `i` (eight bytes at a time).
#[inline]
pub(super) fn digits(bytes: &[u8], mut i: usize) -> usize {
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
pub(super) fn plain_run(bytes: &[u8], mut i: usize) -> usize {
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
pub(super) fn number_value(token: &[u8], float: bool) -> Option<f64> {
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
pub(super) fn parse_f64(token: &[u8]) -> Option<f64> {
    let value: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
    value.is_finite().then_some(value)
}

/// Decodes a checked string's content (escapes included) into WTF-8: a
/// `\u` high surrogate followed by a low one is one code point, a lone
/// surrogate is kept as its three-byte WTF-8 form.
pub(super) fn unescape(raw: &[u8]) -> Vec<u8> {
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
