//! Combined launcher logs: every rank's output in one file, each line
//! tagged with its rank (`torchrun`'s `[rank3]:` and `[default3]:`,
//! `srun --label`'s `3: `), split back into one text per rank; and the
//! launcher's own failure summary (`torchrun`'s `ChildFailedError` block:
//! `rank : 0 (local_rank: 0)`, `exitcode : -9 (pid: 13108)  (SIGKILL)`),
//! read as how each failed rank's process ended.
//!
//! Invariants: the input is untrusted bytes, read line by line under the
//! same bounds as every other text ([`super::MAX_LINES`],
//! [`super::MAX_LINE_BYTES`]); a split is made only when tagged lines are
//! there, so a plain single-rank text is never split.

use std::collections::BTreeMap;

use super::{MAX_LINE_BYTES, MAX_LINES};

/// Highest rank a tag may name (a bound on what untrusted text can ask for).
const MAX_TAGGED_RANK: i64 = 1 << 20;

/// How a rank's process ended, as its launcher reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessExit {
    /// Global rank.
    pub rank: i64,
    /// The exit code (negative: killed by that signal).
    pub exitcode: i64,
    /// The signal's name when a signal ended it (`SIGKILL`).
    pub signal: Option<String>,
}

/// Reads a line's rank tag: the rank and the line without its tag.
type Tagger = fn(&[u8]) -> Option<(i64, &[u8])>;

/// The rank a line is tagged with (`[rank3]:`, `[default3]:`) and the line
/// without its tag (and one space after it). A tag of more digits than a
/// rank has is taken off but names no rank (`i64::MAX`).
pub(super) fn tagged(line: &[u8]) -> Option<(i64, &[u8])> {
    for tag in [&b"[rank"[..], &b"[default"[..]] {
        let Some(rest) = line.strip_prefix(tag) else {
            continue;
        };
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            continue;
        }
        let Some(body) = rest[digits..].strip_prefix(b"]:") else {
            continue;
        };
        let rank = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(i64::MAX);
        return Some((rank, body.strip_prefix(b" ").unwrap_or(body)));
    }
    None
}

/// `srun --label`'s `12: ` prefix.
fn slurm_tagged(line: &[u8]) -> Option<(i64, &[u8])> {
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 7 {
        return None;
    }
    let rank = std::str::from_utf8(&line[..digits]).ok()?.parse().ok()?;
    let body = line[digits..].strip_prefix(b": ")?;
    Some((rank, body))
}

/// Each tagged rank's lines, joined, when the text is a combined log: at
/// least two tagged lines (torchrun tags), or, for `srun --label`'s bare
/// numbers, most non-blank lines tagged. `None` for any other text.
#[must_use]
pub fn split_by_rank(bytes: &[u8]) -> Option<BTreeMap<i64, Vec<u8>>> {
    let lines: Vec<&[u8]> = bytes
        .split(|&b| b == b'\n')
        .take(MAX_LINES)
        .filter(|l| l.len() <= MAX_LINE_BYTES)
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect();
    let split = |tag: Tagger| {
        let mut out: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
        let mut count = 0usize;
        for line in &lines {
            if let Some((rank, body)) = tag(line).filter(|(r, _)| *r <= MAX_TAGGED_RANK) {
                let text = out.entry(rank).or_default();
                text.extend_from_slice(body);
                text.push(b'\n');
                count += 1;
            }
        }
        (out, count)
    };
    let (torchrun, count) = split(tagged);
    if count >= 2 {
        return Some(torchrun);
    }
    let (slurm, count) = split(slurm_tagged);
    let non_blank = lines.iter().filter(|l| !l.trim_ascii().is_empty()).count();
    (count >= 2 && count * 2 > non_blank).then_some(slurm)
}

/// The `key : value` of a summary line (`  rank      : 0 (local_rank: 0)`).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let (k, v) = line.split_once(':')?;
    (k.trim() == key).then(|| v.trim())
}

/// The leading integer of `text` (with its sign).
fn leading_int(text: &str) -> Option<i64> {
    let end = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(text.len(), |(i, _)| i);
    text[..end].parse().ok()
}

/// Every failed rank in a launcher's failure summary (`torchrun` prints one
/// block per failure: `rank : N (local_rank: M)` then `exitcode : C (pid:
/// P)` with the signal's name in parentheses when one killed it).
#[must_use]
pub fn process_exits(bytes: &[u8]) -> Vec<ProcessExit> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_LINES * 64)]);
    let mut out: Vec<ProcessExit> = Vec::new();
    let mut rank: Option<i64> = None;
    for line in text.lines().take(MAX_LINES) {
        if let Some(v) = field(line, "rank") {
            rank = leading_int(v).filter(|r| (0..=MAX_TAGGED_RANK).contains(r));
            continue;
        }
        let (Some(r), Some(v)) = (rank, field(line, "exitcode")) else {
            continue;
        };
        let Some(exitcode) = leading_int(v) else {
            continue;
        };
        let signal = v
            .rsplit_once('(')
            .map(|(_, s)| s.trim_end_matches(')').trim())
            .filter(|s| s.starts_with("SIG") && s.chars().all(|c| c.is_ascii_alphanumeric()))
            .map(str::to_owned);
        if !out.iter().any(|e| e.rank == r) {
            out.push(ProcessExit {
                rank: r,
                exitcode,
                signal,
            });
        }
        rank = None;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchrun_tags_split_a_combined_log() {
        let log = b"W1205 launcher line\n[rank0]: Traceback (most recent call last):\n[rank1]: hello\n[rank0]: RuntimeError: boom\n";
        let split = split_by_rank(log).expect("a combined log");
        assert_eq!(split.len(), 2);
        assert_eq!(
            split[&0],
            b"Traceback (most recent call last):\nRuntimeError: boom\n".to_vec()
        );
        assert_eq!(split[&1], b"hello\n".to_vec());
    }

    #[test]
    fn plain_text_is_not_split() {
        assert!(split_by_rank(b"Traceback (most recent call last):\nRuntimeError: x\n").is_none());
        // A stray number at a line start is no srun label.
        assert!(split_by_rank(b"12: one\nplain\nplain\nplain\nplain\n").is_none());
        let srun = b"0: a\n1: b\n0: c\n";
        assert_eq!(split_by_rank(srun).map(|s| s.len()), Some(2));
    }

    #[test]
    fn torchrun_failure_summary_names_the_killed_rank() {
        let log = b"Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-05_08:05:18\n  host      : localhost\n  rank      : 0 (local_rank: 0)\n  exitcode  : -9 (pid: 13108)  (SIGKILL)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 13108\n";
        assert_eq!(
            process_exits(log),
            vec![ProcessExit {
                rank: 0,
                exitcode: -9,
                signal: Some("SIGKILL".into())
            }]
        );
        let plain = b"  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 77)\n";
        assert_eq!(process_exits(plain)[0].signal, None);
        assert!(process_exits(b"rank: x\nexitcode: y\n").is_empty());
    }
}
