//! Tests of the input side and the bounds: gzip (multi-member,
//! truncated), `max_event_bytes` / `max_header_bytes` / `max_total_bytes`,
//! nesting depth, the peak buffer, a callback's error, files on disk.

use super::tests::{gzip, sample, scan, scan_chunked};
use super::*;

#[test]
fn stream_gzip_single_and_multi_member() {
    let bytes = sample();
    let whole = scan(&bytes, &ScanLimits::default(), false).unwrap();
    let (a, b) = bytes.split_at(bytes.len() / 3);
    for packed in [gzip(&[&bytes]), gzip(&[a, b])] {
        for chunk in [7, 4096] {
            let ours = scan_chunked(&packed, &ScanLimits::default(), chunk).unwrap();
            assert_eq!(ours, whole);
        }
    }
}

#[test]
fn stream_truncated_gzip_is_an_error() {
    let packed = gzip(&[&sample()]);
    for cut in 2..packed.len() {
        let e = scan_chunked(&packed[..cut], &ScanLimits::default(), 7).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "cut {cut}: {e}");
        assert_eq!(e.message(), "is a truncated gzip file", "cut {cut}");
    }
    let mut trailing = packed.clone();
    trailing.extend_from_slice(b"garbage, not a gzip member at all");
    let e = scan_chunked(&trailing, &ScanLimits::default(), 4096).unwrap_err();
    assert!(e.message().starts_with("is not a valid gzip file"), "{e}");
}

#[test]
fn stream_limits() {
    let doc =
        br#"{"h": [1, 2, 3], "traceEvents": [{"ph": "X"}, {"ph": "X", "name": "0123456789"}]}"#;
    for chunk in [3, 4096] {
        let limits = ScanLimits {
            max_event_bytes: 20,
            ..ScanLimits::default()
        };
        let e = scan_chunked(doc, &limits, chunk).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit);
        assert_eq!(e.message(), "event 1 exceeds max_event_bytes=20");
        assert_eq!(scan(doc, &limits, false).unwrap_err(), e);
        let limits = ScanLimits {
            max_header_bytes: 8,
            ..ScanLimits::default()
        };
        let e = scan_chunked(doc, &limits, chunk).unwrap_err();
        assert_eq!(
            e.message(),
            "header member \"h\" exceeds max_header_bytes=8"
        );
        assert_eq!(scan(doc, &limits, false).unwrap_err(), e);
        let limits = ScanLimits {
            max_total_bytes: doc.len() as u64 - 1,
            ..ScanLimits::default()
        };
        let e = scan_chunked(doc, &limits, chunk).unwrap_err();
        assert_eq!(
            e.message(),
            format!("exceeds max_total_bytes={}", doc.len() - 1)
        );
        assert_eq!(scan(doc, &limits, false).unwrap_err(), e);
        let limits = ScanLimits {
            max_total_bytes: doc.len() as u64,
            ..ScanLimits::default()
        };
        assert!(scan_chunked(doc, &limits, chunk).is_ok());
    }
}

#[test]
fn stream_depth_limit() {
    let nested = |levels: usize| {
        let doc = format!(
            r#"[{{"args": {}{}}}]"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        scan(doc.as_bytes(), &ScanLimits::default(), false)
    };
    assert!(nested(63).is_ok(), "the event and 63 levels inside it");
    let e = nested(64).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.message().contains("nesting depth exceeds 64"), "{e}");
    let e = scan(&vec![b'['; 100_000], &ScanLimits::default(), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
}

#[test]
fn stream_memory_stays_bounded() {
    let mut doc = String::from(r#"{"traceEvents": ["#);
    for i in 0..20_000 {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(&format!(
            r#"{{"ph": "X", "name": "op{i}", "pid": 1, "tid": 2, "ts": {i}.5, "dur": 1.25, "args": {{"External id": {i}}}}}"#
        ));
    }
    doc.push_str("]}");
    let mut seen = 0u64;
    let (scanned, peak) = scan_reader(doc.as_bytes(), &ScanLimits::default(), 4096, &mut |e| {
        seen += u64::from(e.ts.is_some());
        Ok(())
    })
    .unwrap();
    assert_eq!(
        (scanned.events, seen, scanned.bytes),
        (20_000, 20_000, doc.len() as u64)
    );
    assert!(
        peak <= 4096 + 256,
        "peak buffer {peak} for a {} byte document",
        doc.len()
    );
}

#[test]
fn stream_callback_errors_stop_the_scan() {
    let bytes = sample();
    let mut calls = 0;
    let e = scan_bytes(&bytes, &ScanLimits::default(), &mut |_| {
        calls += 1;
        Err(Error::invalid("stop"))
    })
    .unwrap_err();
    assert_eq!((e.message(), calls), ("stop", 1));
}

#[test]
fn stream_files() {
    let dir = std::env::temp_dir().join(format!("commcanary-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("t.json");
    let packed = dir.join("t.json.gz");
    std::fs::write(&plain, sample()).unwrap();
    std::fs::write(&packed, gzip(&[&sample()])).unwrap();
    let limits = ScanLimits::default();
    let count = |p: &Path| scan_file(p, &limits, &mut |_| Ok(())).map(|s| (s.events, s.bytes));
    let expected = (6, sample().len() as u64);
    assert_eq!(count(&plain).unwrap(), expected);
    assert_eq!(count(&packed).unwrap(), expected);
    assert_eq!(
        count(&dir.join("missing")).unwrap_err().message(),
        "does not exist"
    );
    assert_eq!(
        count(&dir).unwrap_err().message(),
        "is a directory, not a file"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
