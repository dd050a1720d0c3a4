//! CPython-exact float arithmetic helpers.
//!
//! Every number commcanary prints or hashes follows CPython's rules, so that a
//! third party holding only the Python standard library can recompute it:
//!
//! * [`repr`] is `repr(float)`: the shortest digit string that round-trips,
//!   positional when the decimal exponent lies in `[-4, 16)`, otherwise
//!   scientific with an explicit sign and at least two exponent digits
//!   (`1e-05`, `1.5e+16`); integral values keep `.0`.
//! * [`round`] is `round(x, n)`: the exact binary value of `x` rounded to `n`
//!   decimals (ties to even on exact ties only), then the nearest double.
//! * [`py_sum`] is the builtin `sum()` over floats, which since CPython 3.12
//!   uses Neumaier's compensated summation.
//! * [`fsum`] is `math.fsum`: the correctly rounded sum.
//!
//! Invariant: none of these functions allocate on their common fast paths
//! except [`repr`], which returns an owned `String` (use [`write_repr_bytes`]
//! to append into an existing buffer).

use std::fmt::Write as _;

/// Appends CPython's `repr(x)` of a double to `out` (`inf`, `-inf`, `nan`
/// for non-finite input, although canonical JSON never contains them).
pub fn write_repr_bytes(out: &mut Vec<u8>, x: f64) {
    if !x.is_finite() {
        out.extend_from_slice(if x.is_nan() {
            b"nan"
        } else if x > 0.0 {
            b"inf"
        } else {
            b"-inf"
        });
        return;
    }
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    // Fast path: integral values below 10^16 print as "<int>.0".
    if x.fract() == 0.0 && x.abs() < 1e16 {
        let v = x as i64;
        let mut buf = [0u8; 20];
        let mut n = v.unsigned_abs();
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            out.push(b'-');
        }
        out.extend_from_slice(&buf[i..]);
        out.extend_from_slice(b".0");
        return;
    }
    // Traces repeat values a lot (exact timing variants, pressures, offsets),
    // so a small per-thread direct-mapped cache of recent spellings pays off.
    let bits = x.to_bits();
    let slot = (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CACHE_BITS)) as usize;
    let hit = REPR_CACHE.with(|cache| {
        let cache = cache.borrow();
        let entry = &cache[slot];
        if entry.0 == bits && entry.2 > 0 {
            out.extend_from_slice(&entry.1[..entry.2 as usize]);
            true
        } else {
            false
        }
    });
    if hit {
        return;
    }
    let start = out.len();
    write_repr_uncached(out, x);
    let len = out.len() - start;
    if len <= 31 {
        REPR_CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            let entry = &mut cache[slot];
            entry.0 = bits;
            entry.1[..len].copy_from_slice(&out[start..]);
            entry.2 = len as u8;
        });
    }
}

const CACHE_BITS: u32 = 14;

thread_local! {
    static REPR_CACHE: std::cell::RefCell<Vec<(u64, [u8; 31], u8)>> =
        std::cell::RefCell::new(vec![(0, [0; 31], 0); 1 << CACHE_BITS]);
}

/// [`write_repr_bytes`] for finite, non-integral, non-zero `x`, uncached.
fn write_repr_uncached(out: &mut Vec<u8>, x: f64) {
    // Ryu prints the shortest round-tripping digits (the nearest such string),
    // which is what CPython's `repr` (David Gay's mode 0) prints; only the
    // layout differs, so take its digits and exponent and lay them out again.
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(x).as_bytes();
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exponent) = match text.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => {
            let exp = std::str::from_utf8(&text[e + 1..])
                .ok()
                .and_then(|t| t.parse::<i32>().ok())
                .unwrap_or(0);
            (&text[..e], exp)
        }
        None => (text, 0),
    };
    // Significant digits and the position of the decimal point.
    let mut digits = [0u8; 32];
    let mut count = 0usize;
    let mut point: i32 = 0;
    let mut seen_point = false;
    let mut leading = true;
    for &b in mantissa {
        match b {
            b'.' => seen_point = true,
            b'0'..=b'9' => {
                if leading && b == b'0' {
                    if seen_point {
                        point -= 1;
                    }
                    continue;
                }
                leading = false;
                if count < digits.len() {
                    digits[count] = b;
                    count += 1;
                }
                if !seen_point {
                    point += 1;
                }
            }
            _ => {}
        }
    }
    while count > 1 && digits[count - 1] == b'0' {
        count -= 1;
    }
    layout(out, negative, &digits[..count], point + exponent);
}

/// Formats `digits` (no leading zeros) with decimal point position `decpt`
/// (value = 0.d1d2... x 10^decpt) the way CPython's `float_repr_style='short'`
/// does.
fn layout(out: &mut Vec<u8>, negative: bool, digits: &[u8], decpt: i32) {
    if negative {
        out.push(b'-');
    }
    let n = digits.len() as i32;
    if decpt <= -4 || decpt > 16 {
        out.push(digits[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let e = decpt - 1;
        out.push(b'e');
        out.push(if e < 0 { b'-' } else { b'+' });
        let e = e.unsigned_abs();
        if e >= 100 {
            out.push(b'0' + (e / 100) as u8);
        }
        out.push(b'0' + ((e / 10) % 10) as u8);
        out.push(b'0' + (e % 10) as u8);
    } else if decpt <= 0 {
        out.extend_from_slice(b"0.");
        for _ in 0..(-decpt) {
            out.push(b'0');
        }
        out.extend_from_slice(digits);
    } else if decpt >= n {
        out.extend_from_slice(digits);
        for _ in 0..(decpt - n) {
            out.push(b'0');
        }
        out.extend_from_slice(b".0");
    } else {
        let split = decpt as usize;
        out.extend_from_slice(&digits[..split]);
        out.push(b'.');
        out.extend_from_slice(&digits[split..]);
    }
}

/// CPython's `repr(x)` for a double.
#[must_use]
pub fn repr(x: f64) -> String {
    let mut v = Vec::with_capacity(24);
    write_repr_bytes(&mut v, x);
    String::from_utf8(v).unwrap_or_default()
}

/// CPython's `round(x, ndigits)` for a double and a non-negative digit count.
///
/// The exact binary value is rounded to `ndigits` decimals with ties to even
/// (ties only happen when the double is exactly halfway), and the decimal
/// result is converted back to the nearest double. The sign of zero is kept.
///
/// Fast path: with `p = |x| · 10^n` below 2^52, the product's error is at most
/// one ulp of `p`; unless `p` lies within that distance of a half-integer, the
/// decimal result is `k · 10^-n` with `k = round(p)`, and `k / 10^n` (an exact
/// integer over an exact power of ten) is its nearest double. Everything
/// else goes through exact decimal formatting.
#[must_use]
pub fn round(x: f64, ndigits: u32) -> f64 {
    if !x.is_finite() || x == 0.0 || x.fract() == 0.0 || ndigits >= 330 {
        return x;
    }
    if ndigits <= 15 {
        let scale = POW10[ndigits as usize];
        let p = x.abs() * scale;
        if p < 4_503_599_627_370_496.0 {
            let floor = p.floor();
            let frac = p - floor;
            let ulp = f64::from_bits(p.to_bits() + 1) - p;
            if (frac - 0.5).abs() > 2.0 * ulp {
                let k = if frac > 0.5 { floor + 1.0 } else { floor };
                return (k / scale).copysign(x);
            }
        }
    }
    if ndigits <= 15
        && let Some(v) = round_near_tie(x, ndigits)
    {
        return v;
    }
    round_exact(x, ndigits)
}

/// `round` when `|x| · 10^n` lies within a few ulps of a half-integer: decides
/// the side of the tie with exact integer arithmetic on the double's binary
/// value (`x = m · 2^e`), ties to even. `None` when the operands would not
/// fit in 128 bits.
fn round_near_tie(x: f64, ndigits: u32) -> Option<f64> {
    let a = x.abs();
    let scale = POW10[ndigits as usize];
    let p = a * scale;
    if p >= 4_503_599_627_370_496.0 {
        return None;
    }
    let bits = a.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i32;
    if biased == 0 {
        return None;
    }
    let m = u128::from((bits & ((1u64 << 52) - 1)) | (1u64 << 52));
    let e = biased - 1075;
    // Only reached for non-integral x, so e < 0; keep the shift in range.
    if e >= 0 || -e > 74 {
        return None;
    }
    let k = p.floor();
    // Compare m·10^n·2^e with k + 1/2, i.e. m·10^n·2 with (2k + 1)·2^-e.
    let lhs = m * u128::from(10u64.pow(ndigits)) * 2;
    let rhs = (2 * (k as u128) + 1) << (-e) as u32;
    let rounded = match lhs.cmp(&rhs) {
        std::cmp::Ordering::Greater => k + 1.0,
        std::cmp::Ordering::Less => k,
        std::cmp::Ordering::Equal => {
            if (k as u64) % 2 == 0 {
                k
            } else {
                k + 1.0
            }
        }
    };
    Some((rounded / scale).copysign(x))
}

const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// `round` through exact decimal formatting (Rust's fixed-precision
/// formatting is exact and rounds ties to even, like CPython's dtoa mode 3).
#[must_use]
pub fn round_exact(x: f64, ndigits: u32) -> f64 {
    let mut buf = String::with_capacity(48);
    let _ = write!(buf, "{:.*}", ndigits as usize, x);
    buf.parse::<f64>().unwrap_or(x)
}

/// CPython's builtin `sum()` over floats (Neumaier compensated summation,
/// CPython 3.12 and later), starting from `0.0`.
#[must_use]
pub fn py_sum<I: IntoIterator<Item = f64>>(values: I) -> f64 {
    let mut total = 0.0f64;
    let mut compensation = 0.0f64;
    for x in values {
        let t = total + x;
        if total.abs() >= x.abs() {
            compensation += (total - t) + x;
        } else {
            compensation += (x - t) + total;
        }
        total = t;
    }
    if compensation != 0.0 && compensation.is_finite() {
        total += compensation;
    }
    total
}

/// `math.fsum`: the correctly rounded sum of finite doubles (Shewchuk's
/// exact partials with the half-way correction CPython applies).
#[must_use]
pub fn fsum<I: IntoIterator<Item = f64>>(values: I) -> f64 {
    let mut partials: Vec<f64> = Vec::new();
    for mut x in values {
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        if x != 0.0 {
            partials.push(x);
        }
    }
    let mut n = partials.len();
    if n == 0 {
        return 0.0;
    }
    n -= 1;
    let mut hi = partials[n];
    let mut lo = 0.0;
    while n > 0 {
        let x = hi;
        n -= 1;
        let y = partials[n];
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    // Round-half-even correction: if the remaining partials push the result
    // across a half-way point, adjust.
    if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
        let y = lo * 2.0;
        let x = hi + y;
        let yr = x - hi;
        if y == yr {
            hi = x;
        }
    }
    hi
}

/// The `linear-interpolated-sorted` quantile (NumPy's "linear" method) of an
/// already sorted slice, `q` in percent.
///
/// `pos = (n - 1) * q / 100`; empty input gives `0.0`.
#[must_use]
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let pos = (n - 1) as f64 * q / 100.0;
            let lo = pos.floor();
            let hi = pos.ceil();
            let (lo_i, hi_i) = (lo as usize, hi as usize);
            if lo_i == hi_i {
                sorted[lo_i]
            } else {
                let frac = pos - lo;
                sorted[lo_i] * (1.0 - frac) + sorted[hi_i] * frac
            }
        }
    }
}

/// Sorts a copy of `values` (total order on finite doubles) and returns the
/// quantile `q` (percent).
#[must_use]
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile_sorted(&sorted, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_cpython_layout() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (2.0, "2.0"),
            (100.0, "100.0"),
            (0.474, "0.474"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (0.1 + 0.2, "0.30000000000000004"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-2.5e-7, "-2.5e-07"),
            (77.72500000000001, "77.72500000000001"),
            (9007199254740993.0, "9007199254740992.0"),
            (1e22, "1e+22"),
        ];
        for &(x, want) in cases {
            assert_eq!(repr(x), want, "repr({x:?})");
        }
    }

    #[test]
    fn round_matches_cpython() {
        assert_eq!(round(0.125, 2), 0.12);
        assert_eq!(round(0.375, 2), 0.38);
        assert_eq!(round(2.675, 2), 2.67);
        assert_eq!(round(77.72500000000001, 9), 77.725);
        assert_eq!(round(-0.0001, 2).to_bits(), (-0.0f64).to_bits());
        assert_eq!(round(3608.0 / 7617.0, 3), 0.474);
        assert_eq!(round(0.5, 0), 0.0);
        assert_eq!(round(1.5, 0), 2.0);
        assert_eq!(round(2.5, 0), 2.0);
    }

    #[test]
    fn fast_round_agrees_with_exact_round() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mantissa = (state >> 11) as f64 / (1u64 << 53) as f64;
            let scale = [1e-3, 1.0, 77.0, 1e4, 1e7, 1e9][(state % 6) as usize];
            let x = mantissa * scale;
            for n in [2, 3, 6, 9] {
                if let Some(v) = round_near_tie(x, n) {
                    assert_eq!(
                        v.to_bits(),
                        round_exact(x, n).to_bits(),
                        "near-tie round({x:?}, {n})"
                    );
                }
                assert_eq!(
                    round(x, n).to_bits(),
                    round_exact(x, n).to_bits(),
                    "round({x:?}, {n})"
                );
            }
            // Values with few decimals, the common case in traces.
            let y = ((state >> 20) % 10_000_000) as f64 / 1000.0;
            let z = y - 0.001 * ((state >> 40) % 1000) as f64;
            for n in [3, 9] {
                assert_eq!(
                    round(z, n).to_bits(),
                    round_exact(z, n).to_bits(),
                    "round({z:?}, {n})"
                );
            }
        }
    }

    #[test]
    fn sums_follow_cpython() {
        let v = [0.1, 0.2, 0.3];
        assert_eq!(py_sum(v), 0.6);
        assert_eq!(fsum(v), 0.6);
        let w = [1e100, 1.0, -1e100, 1.0];
        assert_eq!(fsum(w), 2.0);
        assert_eq!(py_sum(w), 2.0);
        assert_eq!(fsum([]), 0.0);
    }

    #[test]
    fn quantiles_interpolate_linearly() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 50.0), 2.5);
        assert_eq!(quantile_sorted(&v, 100.0), 4.0);
        assert_eq!(quantile_sorted(&[], 50.0), 0.0);
        assert_eq!(quantile_sorted(&[7.0], 95.0), 7.0);
    }
}
