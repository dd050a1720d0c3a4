//! Canonical JSON v1 writer.
//!
//! Byte-identical to CPython's
//! `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)`:
//! keys sorted by code point, no whitespace, `\"` `\\` `\n` `\r` `\t` `\b` `\f`
//! short escapes, other control characters and every non-ASCII code point as
//! lowercase `\uXXXX` (astral characters as surrogate pairs; DEL is escaped
//! too, as CPython's `ensure_ascii` does), `/` unescaped, integers in plain decimal, floats as CPython's `repr`.
//!
//! Besides [`write_value`] for parsed documents, the module offers the
//! primitive writers the canary and report emitters use directly, and
//! [`ObjectWriter`], which checks in debug builds that keys arrive sorted.

use super::{CLOSE_BRACE, Doc, Node, OPEN_BRACE, Value};
use crate::pyfloat;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends a canonical string literal for WTF-8 `bytes`.
pub fn write_wtf8(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if (0x20..0x7F).contains(&b) && b != b'"' && b != b'\\' {
            // Copy a run of plain ASCII at once.
            let start = i;
            while i < bytes.len() {
                let c = bytes[i];
                if !(0x20..0x7F).contains(&c) || c == b'"' || c == b'\\' {
                    break;
                }
                i += 1;
            }
            out.extend_from_slice(&bytes[start..i]);
            continue;
        }
        if b < 0x80 {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                _ => write_u_escape(out, u16::from(b)),
            }
            i += 1;
            continue;
        }
        // Decode one WTF-8 sequence.
        let (cp, width) = if b >= 0xF0 {
            let cp = (u32::from(b & 0x07) << 18)
                | (u32::from(bytes.get(i + 1).copied().unwrap_or(0) & 0x3F) << 12)
                | (u32::from(bytes.get(i + 2).copied().unwrap_or(0) & 0x3F) << 6)
                | u32::from(bytes.get(i + 3).copied().unwrap_or(0) & 0x3F);
            (cp, 4)
        } else if b >= 0xE0 {
            let cp = (u32::from(b & 0x0F) << 12)
                | (u32::from(bytes.get(i + 1).copied().unwrap_or(0) & 0x3F) << 6)
                | u32::from(bytes.get(i + 2).copied().unwrap_or(0) & 0x3F);
            (cp, 3)
        } else {
            let cp = (u32::from(b & 0x1F) << 6)
                | u32::from(bytes.get(i + 1).copied().unwrap_or(0) & 0x3F);
            (cp, 2)
        };
        i += width;
        if cp >= 0x10000 {
            let v = cp - 0x10000;
            write_u_escape(out, 0xD800 | (v >> 10) as u16);
            write_u_escape(out, 0xDC00 | (v & 0x3FF) as u16);
        } else {
            write_u_escape(out, cp as u16);
        }
    }
    out.push(b'"');
}

fn write_u_escape(out: &mut Vec<u8>, unit: u16) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xF) as usize]);
    }
}

/// Appends a canonical string literal for `s`.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    write_wtf8(out, s.as_bytes());
}

/// Appends CPython's `repr` of a finite float.
pub fn write_f64(out: &mut Vec<u8>, x: f64) {
    debug_assert!(x.is_finite(), "canonical JSON forbids NaN and infinities");
    pyfloat::write_repr_bytes(out, x);
}

/// Appends CPython's `repr` of `x`, which is known to be `round(·, decimals)`
/// of something. Fast path: when `x` is exactly the double nearest to
/// `k / 10^decimals` for an integer `|k| < 10^15`, its repr is the minimal
/// decimal spelling of `k / 10^decimals` (two decimals with at most 15
/// significant digits never share a double), written with integer
/// arithmetic; otherwise the general formatter runs.
pub fn write_f64_rounded(out: &mut Vec<u8>, x: f64, decimals: u32) {
    const LIMIT: f64 = 1e15;
    let scale = 10f64.powi(decimals as i32);
    let k = (x * scale).round();
    let positional = x == 0.0 || x.abs() >= 1e-4;
    if decimals <= 15
        && positional
        && k.abs() < LIMIT
        && k / scale == x
        && !(x == 0.0 && x.is_sign_negative())
    {
        let k = k as i64;
        if k < 0 {
            out.push(b'-');
        }
        let k = k.unsigned_abs();
        let unit = 10u64.pow(decimals);
        write_i64(out, (k / unit) as i64);
        out.push(b'.');
        let mut frac = k % unit;
        if frac == 0 {
            out.push(b'0');
            return;
        }
        let mut width = decimals;
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        let mut digits = [b'0'; 16];
        let mut f = frac;
        for d in (0..width as usize).rev() {
            digits[d] = b'0' + (f % 10) as u8;
            f /= 10;
        }
        out.extend_from_slice(&digits[..width as usize]);
        return;
    }
    write_f64(out, x);
}

/// Appends a JSON array of values rounded to `decimals` (see
/// [`write_f64_rounded`]).
pub fn write_rounded_array(out: &mut Vec<u8>, values: &[f64], decimals: u32) {
    out.push(b'[');
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_f64_rounded(out, v, decimals);
    }
    out.push(b']');
}

/// Appends an integer in plain decimal.
pub fn write_i64(out: &mut Vec<u8>, x: i64) {
    let mut buf = [0u8; 20];
    let mut n = x.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if x < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends a JSON array of integers.
pub fn write_i64_array(out: &mut Vec<u8>, values: &[i64]) {
    out.push(b'[');
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_i64(out, v);
    }
    out.push(b']');
}

/// Appends a JSON array of floats.
pub fn write_f64_array(out: &mut Vec<u8>, values: &[f64]) {
    out.push(b'[');
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_f64(out, v);
    }
    out.push(b']');
}

/// Appends the canonical form of a parsed value.
pub fn write_value(out: &mut Vec<u8>, value: Value<'_>) {
    write_node(out, value.doc(), value.id());
}

fn write_node(out: &mut Vec<u8>, doc: &Doc, id: u32) {
    match doc.nodes[id as usize] {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Bool(true) => out.extend_from_slice(b"true"),
        Node::Bool(false) => out.extend_from_slice(b"false"),
        Node::Int(i) => write_i64(out, i),
        Node::BigInt { start, len } => out.extend_from_slice(doc.bytes(start, len)),
        Node::Float { value, text, len } => {
            if len > 0 {
                out.extend_from_slice(doc.bytes(text, u32::from(len)));
            } else {
                write_f64(out, value);
            }
        }
        Node::Str { start, len } => write_wtf8(out, doc.bytes(start, len)),
        Node::Array { first, len } => {
            out.push(b'[');
            for i in 0..len {
                if i > 0 {
                    out.push(b',');
                }
                write_node(out, doc, first + i);
            }
            out.push(b']');
        }
        Node::Object { first, len } => {
            let key = |i: u32| match doc.nodes[(first + 2 * i) as usize] {
                Node::Str { start, len } => doc.bytes(start, len),
                _ => &[][..],
            };
            let sorted = (1..len).all(|i| key(i - 1) < key(i));
            out.push(OPEN_BRACE);
            if sorted {
                for i in 0..len {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_wtf8(out, key(i));
                    out.push(b':');
                    write_node(out, doc, first + 2 * i + 1);
                }
            } else {
                let mut order: Vec<u32> = (0..len).collect();
                order.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
                for (n, &i) in order.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    write_wtf8(out, key(i));
                    out.push(b':');
                    write_node(out, doc, first + 2 * i + 1);
                }
            }
            out.push(CLOSE_BRACE);
        }
    }
}

/// The canonical bytes of a parsed value.
#[must_use]
pub fn to_vec(value: Value<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, value);
    out
}

/// Writes one JSON object member by member. Keys must be given in sorted
/// order (checked in debug builds); values are written by the caller through
/// the returned buffer.
pub struct ObjectWriter<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
    #[cfg(debug_assertions)]
    last_key: Vec<u8>,
}

impl<'o> ObjectWriter<'o> {
    /// Opens an object.
    pub fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(OPEN_BRACE);
        Self {
            out,
            first: true,
            #[cfg(debug_assertions)]
            last_key: Vec::new(),
        }
    }

    /// Writes `"key":` and returns the buffer for the value.
    pub fn key(&mut self, key: &str) -> &mut Vec<u8> {
        #[cfg(debug_assertions)]
        {
            assert!(
                self.first || self.last_key.as_slice() < key.as_bytes(),
                "canonical object keys out of order: {:?} after {:?}",
                key,
                String::from_utf8_lossy(&self.last_key)
            );
            self.last_key = key.as_bytes().to_vec();
        }
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(self.out, key);
        self.out.push(b':');
        self.out
    }

    /// Member with a float value.
    pub fn f64(&mut self, key: &str, v: f64) {
        write_f64(self.key(key), v);
    }

    /// Member with an integer value.
    pub fn i64(&mut self, key: &str, v: i64) {
        write_i64(self.key(key), v);
    }

    /// Member with a string value.
    pub fn str(&mut self, key: &str, v: &str) {
        write_str(self.key(key), v);
    }

    /// Member whose value is a list of strings, in the order given.
    pub fn str_list<S: AsRef<str>>(&mut self, key: &str, items: &[S]) {
        let out = self.key(key);
        out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, item.as_ref());
        }
        out.push(b']');
    }

    /// Member with a boolean value.
    pub fn bool(&mut self, key: &str, v: bool) {
        self.key(key)
            .extend_from_slice(if v { b"true" } else { b"false" });
    }

    /// Member whose value is already canonical JSON.
    pub fn raw(&mut self, key: &str, canonical: &[u8]) {
        self.key(key).extend_from_slice(canonical);
    }

    /// Closes the object.
    pub fn end(self) {
        self.out.push(CLOSE_BRACE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{JsonLimits, parse};

    fn canon(s: &str) -> String {
        let doc = parse(s.as_bytes(), JsonLimits::default()).unwrap();
        String::from_utf8(to_vec(doc.root().unwrap())).unwrap()
    }

    #[test]
    fn matches_cpython_dumps() {
        assert_eq!(
            canon(r#"{"z": -0.0, "a": [true, null, 1.25], "é": "☃"}"#),
            r#"{"a":[true,null,1.25],"z":-0.0,"\u00e9":"\u2603"}"#
        );
        assert_eq!(
            canon(r#""\u0001/\u007f\ud800\ud83d\ude00""#),
            r#""\u0001/\u007f\ud800\ud83d\ude00""#
        );
        assert_eq!(canon("[1E5, 1e-7, 100, -0]"), "[100000.0,1e-07,100,0]");
        assert_eq!(canon(r#""\b\f\n\r\t\"\\""#), r#""\b\f\n\r\t\"\\""#);
    }

    #[test]
    fn rounded_spelling_matches_repr() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let raw = (state >> 11) as f64 / (1u64 << 53) as f64
                * [1.0, 100.0, 1e5, 2e8][(state % 4) as usize];
            for n in [3u32, 6, 9] {
                let x = crate::pyfloat::round(raw, n);
                let mut fast = Vec::new();
                write_f64_rounded(&mut fast, x, n);
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    crate::pyfloat::repr(x),
                    "{x:?} at {n}"
                );
            }
        }
        for x in [0.0, 1.0, 100.0, 0.001, 0.0001, 12.5, 1e-9] {
            let mut fast = Vec::new();
            write_f64_rounded(&mut fast, x, 9);
            assert_eq!(String::from_utf8(fast).unwrap(), crate::pyfloat::repr(x));
        }
    }

    #[test]
    fn sorts_keys_by_code_point() {
        // U+10000 sorts after U+FFFF by code point even though its UTF-16
        // form starts with a lower unit.
        assert_eq!(
            canon("{\"\u{10000}\":1,\"\u{ffff}\":2}"),
            "{\"\\uffff\":2,\"\\ud800\\udc00\":1}"
        );
    }
}
