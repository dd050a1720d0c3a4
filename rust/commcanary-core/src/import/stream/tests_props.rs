//! Property tests with seeded randomness (SplitMix64): random bytes,
//! single-byte mutations, random traces and truncations, all checked
//! against the tree walk and across chunk sizes; real fixtures (when
//! present); correctly rounded numbers.

use super::bytes::number_value;
use super::tests::{
    Summary, gzip, owned, reference, sample, sample_without_duplicates, scan, scan_chunked, summary,
};
use super::*;

/// SplitMix64: the tests' seeded randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALPHABET: &[u8] = b"{}[]:,\"\\ \n0123456789.eE+-tfnrulsaNIu\x01\x7f\x80\xc3\xa9\xff";

/// The properties every input must have: no panic, the same outcome
/// whole and in small chunks, and the tree walk's outcome wherever that
/// reader and this one agree on what JSON is (this one does not detect
/// duplicate keys everywhere, nor count depth from the root).
fn check_against_reference(bytes: &[u8], chunk: usize) {
    let whole = scan(bytes, &ScanLimits::default(), false);
    let chunked = scan_chunked(bytes, &ScanLimits::default(), chunk);
    assert_eq!(
        whole,
        chunked,
        "chunk {chunk}: {:?}",
        String::from_utf8_lossy(bytes)
    );
    let ours = scan(bytes, &ScanLimits::default(), true);
    match reference(bytes) {
        Ok(expected) => assert_eq!(ours, Ok(expected), "{:?}", String::from_utf8_lossy(bytes)),
        Err(e) if e.message().contains("duplicate") || e.kind() == ErrorKind::Limit => {}
        Err(e) => assert!(
            ours.is_err(),
            "accepted, the tree walk says {e}: {:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
}

#[test]
fn stream_random_bytes_never_panic() {
    let mut rng = Rng(7);
    for round in 0..4000 {
        let len = rng.below(48);
        let mut bytes: Vec<u8> = match round % 3 {
            0 => Vec::new(),
            1 => b"[".to_vec(),
            _ => br#"{"traceEvents": [{"#.to_vec(),
        };
        for _ in 0..len {
            let b = if rng.below(8) == 0 {
                rng.next() as u8
            } else {
                ALPHABET[rng.below(ALPHABET.len())]
            };
            bytes.push(b);
        }
        check_against_reference(&bytes, 1 + rng.below(9));
    }
}

#[test]
fn stream_single_byte_mutations_agree_with_the_tree_walk() {
    let bytes = sample_without_duplicates();
    let mut rng = Rng(11);
    for _ in 0..3000 {
        let mut mutated = bytes.clone();
        let at = rng.below(mutated.len());
        mutated[at] = if rng.below(4) == 0 {
            rng.next() as u8
        } else {
            ALPHABET[rng.below(ALPHABET.len())]
        };
        check_against_reference(&mutated, 1 + rng.below(16));
    }
}

#[test]
fn stream_random_truncations_of_gzip_never_panic() {
    let packed = gzip(&[&sample()]);
    let mut rng = Rng(13);
    for _ in 0..300 {
        let mut mutated = packed.clone();
        let at = 2 + rng.below(mutated.len() - 2);
        mutated[at] = rng.next() as u8;
        let cut = 2 + rng.below(mutated.len() - 1);
        let _ = scan_chunked(
            &mutated[..cut.min(mutated.len())],
            &ScanLimits::default(),
            1 + rng.below(64),
        );
    }
}

/// Compares two summaries, reporting the first difference only.
fn assert_same(ours: &Summary, expected: &Summary, what: &str) {
    assert_eq!(ours.header, expected.header, "{what} header");
    for (a, b) in ours.events.iter().zip(&expected.events) {
        assert_eq!(a, b, "{what} event {}", a.index);
    }
    assert_eq!(ours, expected, "{what}");
}

fn fixture(rel: &str) -> Option<std::path::PathBuf> {
    Some(crate::test_data::fixture(rel))
}

/// Real Kineto traces: the streaming scan of the file agrees with the
/// tree walk over `read_input`.
#[test]
fn stream_real_fixtures_match_the_tree_walk() {
    let cases = [
        ("kineto/gloo_tp4_decode/rank0.json.gz", Some(6201)),
        (
            "hang/gloo_tp4_rank3_skips_allreduce/rank0.window1.json",
            None,
        ),
    ];
    for (rel, count) in cases {
        let Some(path) = fixture(rel) else {
            continue;
        };
        let (mut events, mut raw) = (Vec::new(), Vec::new());
        let scanned = scan_file(&path, &ScanLimits::default(), &mut |e| {
            events.push(owned(e, true));
            raw.push(owned(e, false));
            Ok(())
        })
        .unwrap();
        let text = crate::input::read_input(&path, crate::input::MAX_INPUT_BYTES).unwrap();
        let expected = reference(&text).unwrap();
        let ours = summary(scanned.clone(), events, true);
        assert_same(&ours, &expected, rel);
        for (raw, canon) in raw.iter().zip(&expected.events) {
            assert_eq!(
                (&raw.pid, &raw.tid),
                (&canon.pid, &canon.tid),
                "{rel} pid/tid as written"
            );
        }
        if let Some(count) = count {
            assert_eq!(scanned.events, count);
        }
        let small = scan_reader(
            std::fs::File::open(&path).unwrap(),
            &ScanLimits::default(),
            1000,
            &mut |_| Ok(()),
        );
        assert_eq!(small.unwrap().0.events, scanned.events);
    }
}

fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len())]
}

fn gen_ws(rng: &mut Rng, out: &mut String) {
    out.push_str(pick(rng, &["", "", " ", "\n  ", "\t", "\r\n"]));
}

fn gen_string(rng: &mut Rng, out: &mut String) {
    const PIECES: &[&str] = &[
        "abc",
        "X",
        " ",
        "\\n",
        "\\u00e9",
        "\u{e9}",
        "\\ud83d\\ude00",
        "\\\"",
        "\\\\",
        "\\/",
        "\\ud800",
        "aten::mm",
        "\u{1F600}",
        "\\t",
    ];
    out.push('"');
    for _ in 0..rng.below(4) {
        out.push_str(pick(rng, PIECES));
    }
    out.push('"');
}

fn gen_number(rng: &mut Rng, out: &mut String) {
    let n = rng.next();
    match rng.below(7) {
        0 => out.push_str(&format!("{}", n % 1000)),
        1 => out.push_str(&format!("-{}", n % 100_000)),
        2 => out.push_str(&format!("{}.{:03}", n % 10_000_000_000_000, n % 1000)),
        3 => out.push_str(pick(rng, &["-0", "-0.0", "0.0", "1.5e-7", "3E+2", "2e0"])),
        4 => out.push_str("123456789012345678901234567890"),
        5 => out.push_str(&format!("{}", n as i64)),
        _ => out.push_str(&format!("{:?}", f64::from_bits(n >> 2) % 1e6)),
    }
}

fn gen_value(rng: &mut Rng, depth: u32, out: &mut String) {
    match rng.below(if depth == 0 { 3 } else { 5 }) {
        0 => out.push_str(pick(rng, &["null", "true", "false"])),
        1 => gen_number(rng, out),
        2 => gen_string(rng, out),
        3 => {
            out.push('[');
            for i in 0..rng.below(4) {
                if i > 0 {
                    out.push(',');
                }
                gen_ws(rng, out);
                gen_value(rng, depth - 1, out);
                gen_ws(rng, out);
            }
            out.push(']');
        }
        _ => {
            let keys = ["a", "b", "External id", "x\\u0079", "n"];
            gen_object(rng, &keys, depth - 1, out, gen_value);
        }
    }
}

/// An object with some of `keys` (each at most once, in random order).
fn gen_object(
    rng: &mut Rng,
    keys: &[&str],
    depth: u32,
    out: &mut String,
    value: fn(&mut Rng, u32, &mut String),
) {
    let mut keys = keys.to_vec();
    out.push('{');
    for i in 0..rng.below(keys.len() + 1) {
        let key = keys.swap_remove(rng.below(keys.len()));
        if i > 0 {
            out.push(',');
        }
        gen_ws(rng, out);
        out.push_str(&format!("\"{key}\""));
        gen_ws(rng, out);
        out.push(':');
        gen_ws(rng, out);
        value(rng, depth, out);
        gen_ws(rng, out);
    }
    out.push('}');
}

/// An event: mostly well-typed selected fields, sometimes anything.
fn gen_field(rng: &mut Rng, depth: u32, out: &mut String) {
    match rng.below(4) {
        0 => gen_value(rng, depth, out),
        1 => gen_string(rng, out),
        2 => gen_number(rng, out),
        _ => gen_object(rng, &["External id", "a", "b"], depth, out, gen_value),
    }
}

fn gen_trace(rng: &mut Rng) -> String {
    let mut events = String::from("[");
    for i in 0..rng.below(6) {
        if i > 0 {
            events.push(',');
        }
        gen_ws(rng, &mut events);
        if rng.below(5) == 0 {
            gen_value(rng, 2, &mut events);
        } else {
            let cat = pick(rng, &["cat", "c\\u0061t"]);
            let keys = ["ph", cat, "name", "pid", "tid", "ts", "dur", "args", "s"];
            gen_object(rng, &keys, 3, &mut events, gen_field);
        }
    }
    events.push(']');
    if rng.below(3) == 0 {
        return events;
    }
    let mut doc = String::from("{");
    let mut members = Vec::new();
    for key in ["schemaVersion", "deviceProperties", "distributedInfo"] {
        if rng.below(2) == 0 {
            let mut m = format!("\"{key}\": ");
            gen_value(rng, 3, &mut m);
            members.push(m);
        }
    }
    let at = rng.below(members.len() + 1);
    members.insert(at, format!("\"traceEvents\": {events}"));
    doc.push_str(&members.join(",\n"));
    doc.push('}');
    doc
}

#[test]
fn stream_random_traces_agree_with_the_tree_walk() {
    let mut rng = Rng(17);
    for _ in 0..1500 {
        let doc = gen_trace(&mut rng);
        let bytes = doc.as_bytes();
        assert!(reference(bytes).is_ok(), "generated {doc}");
        check_against_reference(bytes, 1 + rng.below(12));
        let cut = rng.below(bytes.len());
        let chunk = 1 + rng.below(12);
        assert!(
            scan(&bytes[..cut], &ScanLimits::default(), false).is_err(),
            "{doc} cut {cut}"
        );
        assert!(scan_chunked(&bytes[..cut], &ScanLimits::default(), chunk).is_err());
    }
}

#[test]
fn stream_number_values_are_correctly_rounded() {
    let mut rng = Rng(19);
    let mut tokens: Vec<String> = [
        "0",
        "-0",
        "-0.0",
        "9007199254740993",
        "9007199254740992.5",
        "0.1",
        "-12.5e+3",
        "1e22",
        "1e23",
        "123456789012345678901",
        "5223593015455.128",
        "0.0000001",
        "1234567890123456789",
        "12345678901234567890",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for _ in 0..5000 {
        let (a, b) = (
            rng.next() >> rng.below(64),
            rng.next() % 10u64.pow(rng.below(8) as u32),
        );
        tokens.push(format!(
            "{}{a}.{b}",
            if rng.below(2) == 0 { "-" } else { "" }
        ));
        tokens.push(format!("{a}"));
    }
    for token in tokens {
        let float = token.contains(['.', 'e', 'E']);
        let expected: f64 = token.parse().unwrap();
        let expected = if !float && expected == 0.0 {
            0.0
        } else {
            expected
        };
        let got = number_value(token.as_bytes(), float).unwrap();
        assert_eq!(got.to_bits(), expected.to_bits(), "{token}");
    }
}
