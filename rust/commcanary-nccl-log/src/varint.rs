//! LEB128 unsigned integers and zigzag signed ones: the file's numbers.

/// Appends `v` as LEB128.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a signed `v` zigzag-encoded.
pub fn put_signed(out: &mut Vec<u8>, v: i64) {
    put(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Reads a LEB128 number at `*at`, advancing it; `None` past the end or
/// beyond 64 bits.
pub fn get(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Reads a zigzag-encoded signed number.
pub fn get_signed(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let u = get(bytes, at)?;
    Some(((u >> 1) as i64) ^ -((u & 1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_at_every_width() {
        let mut out = Vec::new();
        let values = [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        for &v in &values {
            put(&mut out, v);
        }
        for &s in &[0i64, -1, 1, i64::MIN, i64::MAX] {
            put_signed(&mut out, s);
        }
        let mut at = 0;
        for &v in &values {
            assert_eq!(get(&out, &mut at), Some(v));
        }
        for &s in &[0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(get_signed(&out, &mut at), Some(s));
        }
        assert_eq!(get(&out, &mut at), None);
        assert_eq!(get(&[0xff; 11], &mut 0), None);
    }
}
