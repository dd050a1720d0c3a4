//! What a file is, told by its content (never by its name alone): a pickle
//! or a JSON object shaped like a Flight Recorder dump, a profiler trace
//! (`traceEvents`), a merged `commcanary.trace.v1`, text (stacks, exception
//! texts, launcher logs: told apart when read), or something else, with the
//! reason it is not evidence.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::import::flight_recorder;
use crate::json::OPEN_BRACE;

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Dump,
    Trace,
    /// A `commcanary.trace.v1` (merged by `import-kineto` or `capture`).
    Merged,
    /// A segment of the NCCL profiler plugin's log.
    NcclLog,
    Text,
    Other(&'static str),
}

/// How many leading bytes classification looks at.
const HEAD_BYTES: u64 = 65536;

/// The first 64 KiB of a file (decompressed when gzip).
fn head(path: &Path) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot be read: {e}"));
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(HEAD_BYTES)
        .read_to_end(&mut raw)
        .map_err(io)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        let file = std::fs::File::open(path).map_err(io)?;
        let _ = flate2::read::MultiGzDecoder::new(file)
            .take(HEAD_BYTES)
            .read_to_end(&mut out);
        return Ok(out);
    }
    Ok(raw)
}

/// The top-level keys of a JSON object's head that are followed by a
/// value, found without parsing the whole file: a key at depth 1.
fn top_level_keys(head: &[u8]) -> Vec<&[u8]> {
    let mut keys = Vec::new();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < head.len() {
        match head[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < head.len() && head[j] != b'"' {
                    j += if head[j] == b'\\' { 2 } else { 1 };
                }
                let after = head[j.min(head.len())..]
                    .iter()
                    .skip(1)
                    .find(|b| !b.is_ascii_whitespace());
                if depth == 1 && after == Some(&b':') {
                    keys.push(&head[start..j.min(head.len())]);
                }
                i = j + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    keys
}

/// What `path` is.
pub(super) fn classify(path: &Path) -> Result<Kind> {
    let head = head(path)?;
    // A log segment opens with a header frame: length, checksum, kind 1, magic.
    if head.get(8) == Some(&commcanary_nccl_log::frame::kind::HEADER)
        && head.get(9..17) == Some(commcanary_nccl_log::frame::MAGIC.as_slice())
    {
        return Ok(Kind::NcclLog);
    }
    if flight_recorder::looks_like_pickle(&head)
        && (head.first() == Some(&0x80) || ends_a_pickle(path)?)
    {
        return Ok(Kind::Dump);
    }
    let first = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| head[i]);
    Ok(match first {
        None => Kind::Other("empty"),
        Some(OPEN_BRACE) => {
            let keys = top_level_keys(&head);
            // Past the head of a large merged trace only `events` shows.
            let events_only =
                keys == [b"events".as_slice()] && head.windows(4).any(|w| w == b"\"op\"");
            // Past the head of a large dump written with sorted keys
            // (`comm_lib_version`, `entries`, … `version`) only its
            // entries show.
            let entries_only = keys.last() == Some(&b"entries".as_slice())
                && head.windows(19).any(|w| w == b"\"collective_seq_id\"");
            if events_only {
                Kind::Merged
            } else if entries_only {
                Kind::Dump
            } else {
                json_kind(&keys)
            }
        }
        Some(b'[') if json_list(&head) => {
            Kind::Other("a JSON list, neither a profiler trace nor a Flight Recorder dump")
        }
        Some(_) if head.contains(&0) => Kind::Other("binary data"),
        Some(_) => Kind::Text,
    })
}

/// Whether text opening with `[` is a JSON list (`[1,`, `[{`, `["`,
/// `[true`), not a log whose lines are tagged (`[rank0]:`, `[default3]:`).
fn json_list(head: &[u8]) -> bool {
    let start = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    let body = &head[(start + 1).min(head.len())..];
    let body = &body[body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len())..];
    match body.first() {
        None | Some(b'{' | b'[' | b'"' | b']' | b'-' | b'0'..=b'9') => true,
        Some(_) => [&b"true"[..], b"false", b"null"]
            .iter()
            .any(|w| body.starts_with(w)),
    }
}

/// A JSON object by its top-level keys. Canonical traces sort `format`
/// after `events`: past the head of a large one, whose events show
/// instead (the loader then checks).
fn json_kind(keys: &[&[u8]]) -> Kind {
    let has = |k: &[u8]| keys.contains(&k);
    if has(b"traceEvents") || has(b"schemaVersion") {
        Kind::Trace
    } else if has(b"events") && (has(b"ranks") || has(b"format") || has(b"workload")) {
        Kind::Merged
    } else if has(b"entries") && (has(b"version") || has(b"pg_config") || has(b"pg_status")) {
        Kind::Dump
    } else {
        Kind::Other("JSON that is neither a profiler trace nor a Flight Recorder dump")
    }
}

/// Whether a file ends with a pickle's `STOP` (`.`), trailing whitespace aside.
fn ends_a_pickle(path: &Path) -> Result<bool> {
    use std::io::{Seek, SeekFrom};
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot be read: {e}"));
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(64)))
        .map_err(io)?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).map_err(io)?;
    Ok(tail.trim_ascii_end().ends_with(b"."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_log_is_no_json_list() {
        assert!(json_list(b"[1, 2]"));
        assert!(json_list(b" [{\"a\": 1}]"));
        assert!(json_list(b"[true]"));
        assert!(!json_list(b"[rank0]:Traceback"));
        assert!(!json_list(b"[default3]: x"));
        assert!(!json_list(b"[trainer] started"));
    }

    #[test]
    fn keys_are_read_at_the_top_level_only() {
        let head = br#"{"a": {"entries": 1}, "pg_config": {}, "b": ["traceEvents"], "c": "x"}"#;
        let keys = top_level_keys(head);
        assert_eq!(keys, vec![&b"a"[..], b"pg_config", b"b", b"c"]);
        assert_eq!(
            json_kind(&keys),
            Kind::Other("JSON that is neither a profiler trace nor a Flight Recorder dump")
        );
    }

    #[test]
    fn dumps_traces_and_merged_traces_are_told_apart() {
        let kind = |s: &[u8]| json_kind(&top_level_keys(s));
        assert_eq!(
            kind(br#"{"version":"2.10","pg_config":{},"entries":[]}"#),
            Kind::Dump
        );
        assert_eq!(kind(br#"{"schemaVersion":1,"traceEvents":[{"#), Kind::Trace);
        assert_eq!(
            kind(br#"{"events":[],"format":"commcanary.trace.v1"}"#),
            Kind::Merged
        );
        // A document that only mentions the fields (a README, a ground truth).
        assert!(matches!(
            kind(br#"{"note":"pg_config and entries","fields":{"entries":[]}}"#),
            Kind::Other(_)
        ));
        // Escaped quotes inside strings do not end them.
        assert_eq!(kind(br#"{"s":"a\"b","traceEvents":[]}"#), Kind::Trace);
    }

    #[test]
    fn a_large_dump_with_sorted_keys_is_a_dump_from_its_head() {
        // The head ends inside `entries`; `version` and `pg_config` follow.
        let dir = std::env::temp_dir().join(format!("cc-classify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let entry = r#"{"collective_seq_id":1,"input_dtypes":["Float"],"profiling_name":"gloo:all_reduce"},"#;
        let mut doc = String::from(r#"{"comm_lib_version":"","entries":["#);
        while doc.len() < 2 * HEAD_BYTES as usize {
            doc.push_str(entry);
        }
        doc.push_str(r#"{}],"pg_config":{},"version":"2.10"}"#);
        let path = dir.join("fr_trace_rank_0.json");
        std::fs::write(&path, &doc).unwrap();
        assert_eq!(classify(&path).unwrap(), Kind::Dump);
        // Only entries that are not a recorder's: not a dump.
        let other = dir.join("other.json");
        std::fs::write(&other, doc.replace("collective_seq_id", "something_else")).unwrap();
        assert!(matches!(classify(&other).unwrap(), Kind::Other(_)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
