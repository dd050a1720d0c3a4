//! Tests of the scan against the tree reader, and the helpers the other
//! test files share: owned copies of events ([`Ev`], [`Summary`]), scans
//! whole and chunked, the tree-walk reference, the sample trace, gzip.
//!
//! Here: the reference agreement on the sample, fields as written,
//! borrowing, roots, chunk boundaries, truncated and malformed JSON.

use super::*;
use crate::json::{JsonLimits, Value, canon, parse};
use std::io::Write as _;

/// An event with owned fields; raw texts optionally canonicalised.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ev {
    pub(super) index: usize,
    pub(super) ph: Option<String>,
    pub(super) cat: Option<String>,
    pub(super) name: Option<String>,
    pub(super) pid: Option<Vec<u8>>,
    pub(super) tid: Option<Vec<u8>>,
    pub(super) ts: Option<u64>,
    pub(super) dur: Option<u64>,
    pub(super) args: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Summary {
    pub(super) header: Vec<(String, Vec<u8>)>,
    pub(super) events: Vec<Ev>,
    pub(super) counted: u64,
    pub(super) non_objects: u64,
    pub(super) bytes: u64,
}

fn canonical(raw: &[u8]) -> Vec<u8> {
    let doc = parse(raw, JsonLimits::default()).expect("scanned text parses");
    canon::to_vec(doc.root().expect("a root"))
}

pub(super) fn owned(e: &RawEvent<'_>, normalize: bool) -> Ev {
    let s = |v: &Option<Cow<'_, str>>| v.as_ref().map(|c| c.to_string());
    let r = |v: &Option<Cow<'_, [u8]>>| {
        v.as_ref()
            .map(|c| if normalize { canonical(c) } else { c.to_vec() })
    };
    Ev {
        index: e.index,
        ph: s(&e.ph),
        cat: s(&e.cat),
        name: s(&e.name),
        pid: r(&e.pid),
        tid: r(&e.tid),
        ts: e.ts.map(f64::to_bits),
        dur: e.dur.map(f64::to_bits),
        args: r(&e.args),
    }
}

pub(super) fn summary(scanned: ScannedTrace, events: Vec<Ev>, normalize: bool) -> Summary {
    let header = scanned
        .header
        .into_iter()
        .map(|(k, v)| (k, if normalize { canonical(&v) } else { v }))
        .collect();
    Summary {
        header,
        events,
        counted: scanned.events,
        non_objects: scanned.non_objects,
        bytes: scanned.bytes,
    }
}

pub(super) fn scan(bytes: &[u8], limits: &ScanLimits, normalize: bool) -> Result<Summary> {
    let mut events = Vec::new();
    let scanned = scan_bytes(bytes, limits, &mut |e| {
        events.push(owned(e, normalize));
        Ok(())
    })?;
    Ok(summary(scanned, events, normalize))
}

pub(super) fn scan_chunked(bytes: &[u8], limits: &ScanLimits, chunk: usize) -> Result<Summary> {
    let mut events = Vec::new();
    let (scanned, _) = scan_reader(bytes, limits, chunk, &mut |e| {
        events.push(owned(e, false));
        Ok(())
    })?;
    Ok(summary(scanned, events, false))
}

/// The tree-parser walk the streaming reader replaced (the reference
/// semantics), with canonical raw texts.
pub(super) fn reference(bytes: &[u8]) -> Result<Summary> {
    let doc = parse(bytes, JsonLimits::default())?;
    let root = doc
        .root()
        .ok_or_else(|| Error::invalid("is not a Kineto trace"))?;
    let mut header = Vec::new();
    let events = if root.is_array() {
        root
    } else if root.is_object() {
        let mut events = None;
        for (key, value) in root.members() {
            if key == b"traceEvents" {
                events = Some(value);
            } else {
                let key = String::from_utf8_lossy(key).into_owned();
                header.push((key, canon::to_vec(value)));
            }
        }
        events.filter(Value::is_array).ok_or_else(not_a_list)?
    } else {
        return Err(Error::invalid("is not a Kineto trace"));
    };
    let mut out = Vec::new();
    let mut non_objects = 0;
    for (index, event) in events.elements().enumerate() {
        if !event.is_object() {
            non_objects += 1;
            continue;
        }
        let text = |k: &str| event.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let raw = |k: &str| event.get(k).map(|v| canon::to_vec(v));
        let number = |k: &str| event.get(k).and_then(|v| v.as_number()).map(f64::to_bits);
        out.push(Ev {
            index,
            ph: text("ph"),
            cat: text("cat"),
            name: text("name"),
            pid: raw("pid"),
            tid: raw("tid"),
            ts: number("ts"),
            dur: number("dur"),
            args: raw("args"),
        });
    }
    Ok(Summary {
        header,
        counted: out.len() as u64,
        events: out,
        non_objects,
        bytes: bytes.len() as u64,
    })
}

/// A small trace with what the reader must get right: header members
/// before and after `traceEvents`, escapes, non-object elements,
/// nested args, numbers of every spelling, string pids.
pub(super) fn sample() -> Vec<u8> {
    let text = r#"{
  "schemaVersion": 1,
  "deviceProperties": [ {"id": 0, "name": "H\u00e9 \"GPU\"", "totalGlobalMem": 1e10} ],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 12, "tid": 34,
     "ts": 5223593015455.128, "dur": 3.5, "args": {"External id": 7, "Input Dims": [[2, 3], []]}},
    7, "text", null, [1, {"a": [true, false]}],
    {"ph": "M", "name": "na\u006de \u00e9\ud83d\ude00 \\ \/", "pid": "Spans", "tid": "PyTorch Profiler",
     "ts": -0, "dur": -1.5E+2, "args": {"labels": "CPU", "deep": {"x": {"y": [0.5, -0.0, 1e-7]}}}},
    {},
    {"ph": 1, "c\u0061t": null, "name": ["x"], "ts": "12", "dur": 18446744073709551617,
     "extr\u0061": 1, "extra": {"skip": "me"}},
    {"name": "\ud800 lone", "ts": 12345678901234567890.5, "args": []},
    {"ph": "i", "s": "g", "pid": -3, "tid": 0.25, "ts": 1.7976931348623157e308}
  ],
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1790857026000000000,
  "traceName": "/tmp/x.json"
}"#;
    text.as_bytes().to_vec()
}

/// `sample()` with the duplicate `extra` (escaped spelling) removed: the
/// tree parser refuses duplicate keys everywhere.
pub(super) fn sample_without_duplicates() -> Vec<u8> {
    let text = String::from_utf8(sample()).unwrap();
    text.replace(r#""extr\u0061": 1, "#, "").into_bytes()
}

#[test]
fn stream_matches_the_tree_walk() {
    let bytes = sample_without_duplicates();
    let ours = scan(&bytes, &ScanLimits::default(), true).unwrap();
    assert_eq!(ours, reference(&bytes).unwrap());
    assert_eq!(ours.counted, 6);
    assert_eq!(ours.non_objects, 4);
    let keys: Vec<&str> = ours.header.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "schemaVersion",
            "deviceProperties",
            "distributedInfo",
            "displayTimeUnit",
            "baseTimeNanoseconds",
            "traceName"
        ]
    );
}

#[test]
fn stream_fields_as_written() {
    let bytes = sample_without_duplicates();
    let ours = scan(&bytes, &ScanLimits::default(), false).unwrap();
    let first = &ours.events[0];
    assert_eq!(first.pid.as_deref(), Some(&b"12"[..]));
    assert_eq!(first.ts, Some(5223593015455.128f64.to_bits()));
    assert_eq!(
        first.args.as_deref(),
        Some(&br#"{"External id": 7, "Input Dims": [[2, 3], []]}"#[..])
    );
    let meta = &ours.events[1];
    assert_eq!(meta.index, 5);
    assert_eq!(meta.name.as_deref(), Some("name \u{e9}\u{1F600} \\ /"));
    assert_eq!(meta.pid.as_deref(), Some(&br#""Spans""#[..]));
    assert_eq!(meta.ts, Some(0f64.to_bits()));
    assert_eq!(meta.dur, Some((-150f64).to_bits()));
    let odd = &ours.events[3];
    assert_eq!(
        (odd.ph.as_ref(), odd.cat.as_ref(), odd.name.as_ref()),
        (None, None, None)
    );
    assert_eq!(odd.ts, None);
    assert_eq!(odd.dur, Some(18446744073709551617f64.to_bits()));
    assert_eq!(ours.events[4].name, None, "a lone surrogate is no str");
    assert_eq!(ours.events[5].tid.as_deref(), Some(&b"0.25"[..]));
    let header = &ours.header[1].1;
    assert!(
        header.starts_with(b"[ {\"id\": 0"),
        "header kept as written"
    );
}

#[test]
fn stream_borrows_without_escapes() {
    let bytes = sample_without_duplicates();
    let mut borrowed = Vec::new();
    scan_bytes(&bytes, &ScanLimits::default(), &mut |e| {
        borrowed.push(matches!(e.name, Some(Cow::Borrowed(_))));
        Ok(())
    })
    .unwrap();
    assert_eq!(borrowed, [true, false, false, false, false, false]);
}

#[test]
fn stream_bare_list_and_other_roots() {
    let ours = scan(br#" [ {"ph": "X"}, 1 ] "#, &ScanLimits::default(), true).unwrap();
    assert_eq!(ours, reference(br#" [ {"ph": "X"}, 1 ] "#).unwrap());
    assert_eq!(
        (ours.counted, ours.non_objects, ours.header.len()),
        (1, 1, 0)
    );
    let message = |b: &[u8]| scan(b, &ScanLimits::default(), false).unwrap_err();
    for root in [&b"3"[..], b"\"x\"", b"null"] {
        assert_eq!(message(root).message(), "is not a Kineto trace");
    }
    for doc in [&br#"{"a": 1}"#[..], b"{}", br#"{"traceEvents": {}}"#] {
        let e = message(doc);
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.message().contains("field 'traceEvents' must be a list"));
    }
    let dup = message(br#"{"traceEvents": [], "traceEvents": []}"#);
    assert_eq!(dup.kind(), ErrorKind::Json);
    assert!(
        dup.message()
            .contains("duplicate object key \"traceEvents\"")
    );
    let dup = message(br#"{"a": 1, "traceEvents": [], "a": 2}"#);
    assert!(dup.message().contains("duplicate object key \"a\""));
    let dup = message(br#"[{"ts": 1, "ts": 2}]"#);
    assert!(dup.message().contains("duplicate object key \"ts\""));
    let dup = message(br#"[{"name": "a", "n\u0061me": "b"}]"#);
    assert!(dup.message().contains("duplicate object key \"name\""));
    assert!(message(b"").message().starts_with("is not valid JSON"));
    assert!(
        message(b"\xEF\xBB\xBF[]")
            .message()
            .contains("byte-order mark")
    );
    assert!(message(b"[] x").message().contains("Extra data"));
}

#[test]
fn stream_chunk_boundaries_do_not_matter() {
    let bytes = sample();
    let whole = scan(&bytes, &ScanLimits::default(), false).unwrap();
    for chunk in [1, 2, 3, 7, 8, 64, 1 << 20] {
        let chunked = scan_chunked(&bytes, &ScanLimits::default(), chunk).unwrap();
        assert_eq!(chunked, whole, "chunk {chunk}");
    }
}

pub(super) fn gzip(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(part).unwrap();
        out.extend(enc.finish().unwrap());
    }
    out
}

#[test]
fn stream_truncated_json_is_an_error() {
    let bytes = sample();
    for cut in 0..bytes.len() {
        for result in [
            scan(&bytes[..cut], &ScanLimits::default(), false),
            scan_chunked(&bytes[..cut], &ScanLimits::default(), 7),
        ] {
            let e = result.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Json, "cut {cut}: {e}");
            assert!(
                e.message().starts_with("is not valid JSON"),
                "cut {cut}: {e}"
            );
        }
    }
    let e = scan(&bytes[..bytes.len() - 1], &ScanLimits::default(), false).unwrap_err();
    assert_eq!(
        e.message(),
        format!("is not valid JSON: truncated at byte {}", bytes.len() - 1)
    );
}

#[test]
fn stream_malformed_anywhere_is_an_error() {
    let bad_values = [
        "[1, 2,]",
        "\"\\x\"",
        "tru",
        "truex",
        "01",
        "NaN",
        "-Infinity",
        "Infinity",
        "1e999",
        "-1.5e400",
        "1.",
        ".5",
        "-",
        "1e",
        "1e+",
        "\"\\u12G4\"",
        "\"a\u{1}b\"",
        "[}",
        r#"{"a" 1}"#,
        r#"{"a": 1,}"#,
        r#"{,}"#,
        r#"{1: 2}"#,
        "[1 2]",
        "\"\\ud800\\u00\"",
    ];
    for bad in bad_values {
        for doc in [
            format!(r#"{{"traceEvents": [{{"ph": "X", "args": {{"k": {bad}}}}}]}}"#),
            format!(r#"{{"traceEvents": [{{"ph": "X", "skipped": {bad}}}]}}"#),
            format!(r#"{{"traceEvents": [{bad}]}}"#),
            format!(r#"{{"header": {bad}, "traceEvents": []}}"#),
            format!(r#"{{"traceEvents": [{{"ts": {bad}}}]}}"#),
        ] {
            for result in [
                scan(doc.as_bytes(), &ScanLimits::default(), false),
                scan_chunked(doc.as_bytes(), &ScanLimits::default(), 3),
            ] {
                let e = result.expect_err(&doc);
                assert_eq!(e.kind(), ErrorKind::Json, "{doc}: {e}");
            }
        }
    }
    let invalid_utf8 = b"[{\"name\": \"a\xff\"}]";
    let e = scan(invalid_utf8, &ScanLimits::default(), false).unwrap_err();
    assert!(e.message().contains("UTF-8"), "{e}");
    let e = scan(b"[{\"a\": 1} \xc3\xa9]", &ScanLimits::default(), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Json);
}
