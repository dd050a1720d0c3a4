//! The rank an evidence file's name gives, read conservatively.

/// The longest rank number read, in digits (so it always fits an `i64`).
const MAX_DIGITS: usize = 18;

/// File-name extensions removed before looking for a trailing rank.
const EXTENSIONS: [&str; 4] = [".txt", ".json", ".pkl", ".pickle"];

/// The rank in a file name (any directory part is ignored), or `None` when
/// the name gives none or is ambiguous.
///
/// First choice: a `rank` token (not preceded by a letter or digit,
/// any case) followed by an optional `_`, `-` or `.` and digits that are not
/// followed by a letter or digit: `rank3_stacks.txt`, `rank_3.txt`,
/// `rank-3`, `fr_trace_rank_3`. Tokens that disagree are ambiguous.
/// Otherwise, a number ending the stem (the name without `.gz` and one of
/// `.txt`, `.json`, `.pkl`, `.pickle`) right after `_` or `-`, when it is
/// the stem's only number: `stacks_3.txt`, `trace-3`. `stacks.3.txt`,
/// `job7_stacks_3.txt` and `stacks3.txt` give `None`.
#[must_use]
pub fn rank_from_file_name(name: &str) -> Option<i64> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let lower = base.to_ascii_lowercase();
    let tokens = rank_tokens(&lower);
    match tokens.split_first() {
        Some((first, rest)) => rest.iter().all(|r| r == first).then_some(*first),
        None => trailing_rank(&lower),
    }
}

/// The values of every `rank<sep><digits>` token of `name`.
fn rank_tokens(name: &str) -> Vec<i64> {
    let bytes = name.as_bytes();
    name.match_indices("rank")
        .filter(|&(at, _)| at == 0 || !bytes[at - 1].is_ascii_alphanumeric())
        .filter_map(|(at, _)| {
            let mut rest = &bytes[at + "rank".len()..];
            if let Some((b'_' | b'-' | b'.', after)) = rest.split_first() {
                rest = after;
            }
            number_at(rest)
        })
        .collect()
}

/// The number `bytes` starts with, when it is followed by neither a letter
/// nor a digit and is at most [`MAX_DIGITS`] long.
fn number_at(bytes: &[u8]) -> Option<i64> {
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > MAX_DIGITS {
        return None;
    }
    if bytes.get(digits).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    std::str::from_utf8(&bytes[..digits]).ok()?.parse().ok()
}

/// The stem's trailing `_<digits>` / `-<digits>`, when it is its only
/// number.
fn trailing_rank(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(".gz").unwrap_or(name);
    let stem = EXTENSIONS
        .iter()
        .find_map(|ext| stem.strip_suffix(ext))
        .unwrap_or(stem);
    let bytes = stem.as_bytes();
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let start = bytes.len() - digits;
    let head = &bytes[..start];
    let (sep, before) = head.split_last()?;
    if digits == 0 || !matches!(sep, b'_' | b'-') || before.is_empty() {
        return None;
    }
    if before.iter().any(u8::is_ascii_digit) {
        return None;
    }
    number_at(&bytes[start..])
}
