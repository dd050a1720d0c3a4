//! Byte-level helpers of the pickle reader: little-endian big integers,
//! the text escapes of protocol 0, printable global names, opcode names.

/// `module.name` when both are short printable ASCII (for messages).
pub(super) fn printable_global(module: &[u8], name: &[u8]) -> Option<String> {
    let ok = |s: &[u8]| s.len() <= 200 && s.iter().all(|b| (0x21..0x7f).contains(b) && *b != b'\'');
    if !ok(module) || !ok(name) {
        return None;
    }
    Some(format!(
        "{}.{}",
        String::from_utf8_lossy(module),
        String::from_utf8_lossy(name)
    ))
}

/// Drops redundant sign bytes of a two's-complement little-endian int.
pub(super) fn trim_le(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., prev, last] = b {
        let redundant = (*last == 0 && *prev & 0x80 == 0) || (*last == 0xff && *prev & 0x80 != 0);
        if !redundant {
            break;
        }
        b = &b[..rest.len() + 1];
    }
    if b == [0] { &[] } else { b }
}

/// Sign-extends at most 8 two's-complement little-endian bytes.
pub(super) fn le_to_i64(b: &[u8]) -> i64 {
    let negative = b.last().is_some_and(|&x| x & 0x80 != 0);
    let mut buf = if negative { [0xff; 8] } else { [0; 8] };
    for (dst, src) in buf.iter_mut().zip(b) {
        *dst = *src;
    }
    i64::from_le_bytes(buf)
}

/// Decimal digits to two's-complement little-endian bytes (9 digits per
/// step, so 4300 digits cost about 200k limb operations).
pub(super) fn decimal_to_le(negative: bool, digits: &[u8]) -> Vec<u8> {
    let mut limbs: Vec<u32> = Vec::with_capacity(digits.len() / 9 + 1);
    let head = match digits.len() % 9 {
        0 => 9,
        n => n,
    };
    let (first, rest) = digits.split_at(head.min(digits.len()));
    for chunk in std::iter::once(first).chain(rest.chunks(9)) {
        let mul = 10u64.pow(chunk.len() as u32);
        let mut carry = chunk
            .iter()
            .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
        for limb in &mut limbs {
            let t = u64::from(*limb) * mul + carry;
            *limb = t as u32;
            carry = t >> 32;
        }
        if carry != 0 {
            limbs.push(carry as u32);
        }
    }
    let mut bytes: Vec<u8> = limbs.iter().flat_map(|l| l.to_le_bytes()).collect();
    bytes.push(0);
    if negative {
        negate_le(&mut bytes);
    }
    let len = trim_le(&bytes).len();
    bytes.truncate(len);
    bytes
}

/// Two's-complement negation in place.
pub(super) fn negate_le(bytes: &mut [u8]) {
    let mut carry = true;
    for b in bytes {
        let (v, c) = (!*b).overflowing_add(u8::from(carry));
        *b = v;
        carry = c;
    }
}

/// A big int as the nearest `f64` (`None` when it overflows).
pub(super) fn bigint_to_f64(le: &[u8]) -> Option<f64> {
    let negative = le.last().is_some_and(|&x| x & 0x80 != 0);
    let mut mag = le.to_vec();
    if negative {
        negate_le(&mut mag);
    }
    while mag.last() == Some(&0) {
        mag.pop();
    }
    if mag.len() > 200 {
        return None;
    }
    let n = mag.len();
    let low = n.saturating_sub(16);
    let mut top = [0u8; 16];
    for (dst, src) in top.iter_mut().zip(&mag[low..]) {
        *dst = *src;
    }
    let mut m = u128::from_le_bytes(top);
    if mag[..low].iter().any(|&b| b != 0) {
        m |= 1; // sticky bit: rounds like the exact value
    }
    let f = m as f64 * 2f64.powi(8 * low as i32);
    let f = if negative { -f } else { f };
    f.is_finite().then_some(f)
}

/// Python's bytes-literal escapes (protocol 0/1 STRING), appended to `out`.
pub(super) fn escape_decode(
    src: &[u8],
    out: &mut Vec<u8>,
) -> std::result::Result<(), &'static str> {
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        let Some(bs) = rest.iter().position(|&b| b == b'\\') else {
            out.extend_from_slice(rest);
            break;
        };
        out.extend_from_slice(&rest[..bs]);
        i += bs + 1;
        let Some(&e) = src.get(i) else {
            return Err("STRING argument ends in a lone backslash");
        };
        i += 1;
        match e {
            b'\n' => {}
            b'\\' | b'\'' | b'"' => out.push(e),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b't' => out.push(9),
            b'n' => out.push(10),
            b'v' => out.push(11),
            b'f' => out.push(12),
            b'r' => out.push(13),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match src.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8);
            }
            b'x' => {
                let v = src.get(i..i + 2).and_then(hex_value);
                out.push(v.ok_or("STRING argument has a bad \\x escape")? as u8);
                i += 2;
            }
            _ => out.extend_from_slice(&[b'\\', e]),
        }
    }
    Ok(())
}

/// Python's `raw_unicode_escape` (protocol 0 UNICODE) as UTF-8, appended to
/// `out`: bytes are Latin-1 except `\uXXXX` and `\UXXXXXXXX` after an odd
/// run of backslashes. Surrogate code points are refused.
pub(super) fn raw_unicode_escape(
    src: &[u8],
    out: &mut Vec<u8>,
) -> std::result::Result<(), &'static str> {
    let mut i = 0;
    while let Some(&b) = src.get(i) {
        if b >= 0x80 {
            out.extend_from_slice(&[0xc0 | (b >> 6), 0x80 | (b & 0x3f)]);
            i += 1;
            continue;
        }
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let run = src[i..].iter().take_while(|&&c| c == b'\\').count();
        let after = i + run;
        let width = match src.get(after) {
            Some(b'u') if run % 2 == 1 => 4,
            Some(b'U') if run % 2 == 1 => 8,
            _ => {
                out.extend_from_slice(&src[i..after]);
                i = after;
                continue;
            }
        };
        out.extend_from_slice(&src[i..after - 1]);
        let digits = src.get(after + 1..after + 1 + width);
        let cp = digits
            .and_then(hex_value)
            .ok_or("UNICODE argument has a truncated \\u escape")?;
        let ch = char::from_u32(cp)
            .ok_or("UNICODE argument has a surrogate or out-of-range code point")?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        i = after + 1 + width;
    }
    Ok(())
}

/// The value of ASCII hex digits (at most 8).
pub(super) fn hex_value(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc.checked_mul(16)? + v)
    })
}

/// Every opcode of protocols 0–5, for messages.
pub(super) const OPCODES: &[(u8, &str)] = &[
    (b'(', "MARK"),
    (b'.', "STOP"),
    (b'0', "POP"),
    (b'1', "POP_MARK"),
    (b'2', "DUP"),
    (b'F', "FLOAT"),
    (b'I', "INT"),
    (b'J', "BININT"),
    (b'K', "BININT1"),
    (b'L', "LONG"),
    (b'M', "BININT2"),
    (b'N', "NONE"),
    (b'P', "PERSID"),
    (b'Q', "BINPERSID"),
    (b'R', "REDUCE"),
    (b'S', "STRING"),
    (b'T', "BINSTRING"),
    (b'U', "SHORT_BINSTRING"),
    (b'V', "UNICODE"),
    (b'X', "BINUNICODE"),
    (b'a', "APPEND"),
    (b'b', "BUILD"),
    (b'c', "GLOBAL"),
    (b'd', "DICT"),
    (b'}', "EMPTY_DICT"),
    (b'e', "APPENDS"),
    (b'g', "GET"),
    (b'h', "BINGET"),
    (b'i', "INST"),
    (b'j', "LONG_BINGET"),
    (b'l', "LIST"),
    (b']', "EMPTY_LIST"),
    (b'o', "OBJ"),
    (b'p', "PUT"),
    (b'q', "BINPUT"),
    (b'r', "LONG_BINPUT"),
    (b's', "SETITEM"),
    (b't', "TUPLE"),
    (b')', "EMPTY_TUPLE"),
    (b'u', "SETITEMS"),
    (b'G', "BINFLOAT"),
    (0x80, "PROTO"),
    (0x81, "NEWOBJ"),
    (0x82, "EXT1"),
    (0x83, "EXT2"),
    (0x84, "EXT4"),
    (0x85, "TUPLE1"),
    (0x86, "TUPLE2"),
    (0x87, "TUPLE3"),
    (0x88, "NEWTRUE"),
    (0x89, "NEWFALSE"),
    (0x8a, "LONG1"),
    (0x8b, "LONG4"),
    (b'B', "BINBYTES"),
    (b'C', "SHORT_BINBYTES"),
    (0x8c, "SHORT_BINUNICODE"),
    (0x8d, "BINUNICODE8"),
    (0x8e, "BINBYTES8"),
    (0x8f, "EMPTY_SET"),
    (0x90, "ADDITEMS"),
    (0x91, "FROZENSET"),
    (0x92, "NEWOBJ_EX"),
    (0x93, "STACK_GLOBAL"),
    (0x94, "MEMOIZE"),
    (0x95, "FRAME"),
    (0x96, "BYTEARRAY8"),
    (0x97, "NEXT_BUFFER"),
    (0x98, "READONLY_BUFFER"),
];

pub(super) fn op_name(op: u8) -> Option<&'static str> {
    OPCODES.iter().find(|(b, _)| *b == op).map(|(_, n)| *n)
}
