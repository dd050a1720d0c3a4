//! The reader on golden pickles of every protocol, refused globals,
//! malformed and hostile input, and the real Flight Recorder dump.

use super::text::decimal_to_le;
use super::*;
use crate::error::ErrorKind;

const FR_P0: &[u8] = include_bytes!("../../../tests/golden/pickle/fr_p0.pickle");
const FR_P2: &[u8] = include_bytes!("../../../tests/golden/pickle/fr_p2.pickle");
const FR_P4: &[u8] = include_bytes!("../../../tests/golden/pickle/fr_p4.pickle");
const FR_P5: &[u8] = include_bytes!("../../../tests/golden/pickle/fr_p5.pickle");
const EXTRAS_P5: &[u8] = include_bytes!("../../../tests/golden/pickle/extras_p5.pickle");
const RECURSIVE_P0: &[u8] = include_bytes!("../../../tests/golden/pickle/recursive_p0.pickle");
const RECURSIVE_P2: &[u8] = include_bytes!("../../../tests/golden/pickle/recursive_p2.pickle");
const MANY_P2: &[u8] = include_bytes!("../../../tests/golden/pickle/many_p2.pickle");
const SYSTEM_P0: &[u8] = include_bytes!("../../../tests/golden/pickle/system_p0.pickle");
const SYSTEM_P4: &[u8] = include_bytes!("../../../tests/golden/pickle/system_p4.pickle");
/// The real dump, in the repository's fixtures.
const FR_DUMP: &str = "hang/gloo_tp4_rank3_skips_allreduce/fr_during_hang/fr_trace_rank_3";

fn parse(bytes: &[u8]) -> PickleDoc {
    load(bytes, PickleLimits::default()).expect("pickle loads")
}

fn error(bytes: &[u8]) -> Error {
    load(bytes, PickleLimits::default()).expect_err("pickle is refused")
}

fn message(bytes: &[u8]) -> String {
    error(bytes).message().to_owned()
}

fn ints(v: PickleValue<'_>) -> Vec<i64> {
    v.elements().map(|e| e.as_i64().expect("int")).collect()
}

fn check_fr(doc: &PickleDoc) {
    let root = doc.root();
    assert!(root.is_dict());
    let keys: Vec<_> = root.members().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(keys, ["version", "pg_config", "pg_status", "entries"]);
    assert_eq!(root.get("version").unwrap().as_str(), Some("2.10"));
    let pg = root.get("pg_config").unwrap().get("0").unwrap();
    assert_eq!(pg.get("desc").unwrap().as_str(), Some("default_pg"));
    let status = root.get("pg_status").unwrap().get("0").unwrap();
    assert_eq!(
        status.get("last_completed_collective").unwrap().as_i64(),
        Some(26)
    );
    let entries = root.get("entries").unwrap();
    assert_eq!((entries.type_name(), entries.len()), ("list", Some(2)));
    let e = entries.element(0).unwrap();
    let frames = e.get("frames").unwrap();
    assert_eq!(frames.len(), Some(2));
    let f0 = frames.element(0).unwrap();
    assert_eq!(f0.get("name").unwrap().as_str(), Some("all_gather_single"));
    assert_eq!(f0.get("line").unwrap().as_i64(), Some(4387));
    let pg = e.get("process_group").unwrap();
    assert_eq!(pg.type_name(), "tuple");
    let names: Vec<_> = pg.elements().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(names, ["2", "tp_pair_1"]);
    let int = |k: &str| e.get(k).unwrap().as_i64();
    let float = |k: &str| e.get(k).unwrap().as_f64().unwrap();
    assert_eq!(int("collective_seq_id"), Some(27));
    assert_eq!(int("time_created_ns"), Some(1_796_080_643_554_207_554));
    assert_eq!(int("neg"), Some(-123_456_789_012));
    assert_eq!(int("small_neg"), Some(-7));
    let (inputs, outputs) = (
        e.get("input_sizes").unwrap(),
        e.get("output_sizes").unwrap(),
    );
    assert_eq!(inputs.id(), outputs.id(), "shared through the memo");
    assert_eq!(ints(inputs.element(1).unwrap()), [2, 32768]);
    assert!(e.get("time_discovered_started_ns").unwrap().is_none());
    assert_eq!(e.get("retired").unwrap().as_bool(), Some(false));
    assert_eq!(e.get("is_p2p").unwrap().as_bool(), Some(true));
    assert_eq!(e.get("retired").unwrap().as_i64(), None);
    let big = e.get("big").unwrap();
    assert_eq!((big.type_name(), big.as_i64()), ("int", None));
    assert_eq!(
        big.as_bigint_le(),
        Some(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40][..])
    );
    assert_eq!(big.as_f64(), Some(2f64.powi(70)));
    let neg_big = e.get("neg_big").unwrap();
    let mut expect = [0xff; 9];
    expect[8] = 0xbf;
    assert_eq!(neg_big.as_bigint_le(), Some(&expect[..]));
    assert_eq!(neg_big.as_f64(), Some(-(2f64.powi(70))));
    assert_eq!(float("duration_ms"), 1.5);
    assert_eq!(float("tiny"), -2.5e-300);
    assert_eq!(float("huge"), 1e308);
    assert_eq!(float("inf"), f64::INFINITY);
    let text = "caf\u{e9} \u{2713} \u{65e5}\u{672c} \u{1f600} back\\slash \"q\" 'a'\n";
    assert_eq!(e.get("text").unwrap().as_str(), Some(text));
    assert_eq!(e.get("empty").unwrap().as_str(), Some(""));
    let empty = e.get("empty_tuple").unwrap();
    assert_eq!((empty.type_name(), empty.len()), ("tuple", Some(0)));
    assert_eq!(ints(e.get("one_tuple").unwrap()), [1]);
    let three = e.get("three_tuple").unwrap();
    assert_eq!(three.element(1).unwrap().type_name(), "float");
    assert_eq!(three.element(2).unwrap().as_str(), Some("x"));
    assert_eq!(ints(e.get("four_tuple").unwrap()), [1, 2, 3, 4]);
    let many = entries.element(1).unwrap().get("ints").unwrap();
    assert_eq!(ints(many), (0..1200).collect::<Vec<_>>());
}

#[test]
fn golden_fr_like_dicts_at_protocols_0_2_4_5() {
    for bytes in [FR_P0, FR_P2, FR_P4, FR_P5] {
        check_fr(&parse(bytes));
    }
}

#[test]
fn golden_bytes_sets_and_batched_dict() {
    let doc = parse(EXTRAS_P5);
    let root = doc.root();
    assert_eq!(
        root.get("bytes").unwrap().as_bytes(),
        Some(&b"\x00\xffab"[..])
    );
    let array = root.get("bytearray").unwrap();
    assert_eq!(
        (array.type_name(), array.as_bytes()),
        ("bytes", Some(&b"xy"[..]))
    );
    let set = root.get("set").unwrap();
    assert_eq!((set.type_name(), ints(set)), ("set", vec![1, 2, 3]));
    let frozen = root.get("frozenset").unwrap();
    assert!(frozen.is_sequence());
    assert_eq!(frozen.element(0).unwrap().as_str(), Some("a"));
    let many = root.get("many").unwrap();
    assert_eq!(many.len(), Some(1100));
    assert_eq!(many.get("k1099").unwrap().as_i64(), Some(1099));
}

#[test]
fn golden_recursive_tuple_pops_its_mark() {
    for bytes in [RECURSIVE_P0, RECURSIVE_P2] {
        let doc = parse(bytes);
        let root = doc.root();
        assert_eq!((root.type_name(), root.len()), ("tuple", Some(4)));
        let list = root.element(0).unwrap();
        assert_eq!(list.len(), Some(1));
        assert_eq!(list.element(0).unwrap().id(), root.id());
        assert_eq!(root.element(3).unwrap().as_i64(), Some(3));
    }
}

#[test]
fn golden_long_memo_indices() {
    let doc = parse(MANY_P2);
    let root = doc.root();
    let names = root.element(0).unwrap();
    assert_eq!(names.len(), Some(300));
    assert_eq!(root.element(2).unwrap().id(), names.id());
    let last = root.element(1).unwrap();
    assert_eq!(last.as_str(), Some("k299"));
    assert_eq!(last.id(), names.element(299).unwrap().id());
}

#[test]
fn refuses_os_system() {
    // `os.system` pickles as `posix.system` on Linux (its __module__).
    for bytes in [SYSTEM_P0, SYSTEM_P4] {
        let e = error(bytes);
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(
            e.message()
                .starts_with("pickle: refuses global 'posix.system' at byte "),
            "{}",
            e.message()
        );
        assert!(e.message().ends_with(ONLY_PLAIN));
    }
    assert_eq!(
        message(b"cos\nsystem\n(S'echo hi'\ntR."),
        format!("pickle: refuses global 'os.system' at byte 0 {ONLY_PLAIN}")
    );
    let inst = message(b"(S'echo hi'\nios\nsystem\n.");
    assert!(
        inst.contains("refuses global 'os.system' at byte 12"),
        "{inst}"
    );
    // A global whose name is not printable is named by its opcode.
    assert!(message(b"cos\nsys\x07tem\n.").contains("refuses opcode GLOBAL"));
    assert!(message(b"\x80\x04K\x01K\x02\x93.").contains("refuses opcode STACK_GLOBAL"));
}

#[test]
fn refuses_every_object_opcode() {
    let refused = [
        (b'R', "REDUCE"),
        (b'b', "BUILD"),
        (b'o', "OBJ"),
        (0x81, "NEWOBJ"),
        (0x92, "NEWOBJ_EX"),
        (0x82, "EXT1"),
        (0x83, "EXT2"),
        (0x84, "EXT4"),
        (b'P', "PERSID"),
        (b'Q', "BINPERSID"),
        (0x97, "NEXT_BUFFER"),
        (0x98, "READONLY_BUFFER"),
    ];
    for (op, name) in refused {
        let bytes = [0x80, 5, b'N', b'N', op, 1, 0, 0, 0, b'.'];
        assert_eq!(
            message(&bytes),
            format!("pickle: refuses opcode {name} at byte 4 {ONLY_PLAIN}")
        );
    }
    assert_eq!(message(b"\xff."), "pickle: unknown opcode 0xff at byte 0");
}

#[test]
fn protocol_0_and_1_strings() {
    let doc = parse(b"S'a\\x41\\n\\'b'\np0\n.");
    assert_eq!(doc.root().as_str(), Some("aA\n'b"));
    assert_eq!(
        parse(b"S\"\\377\\0x\"\n.").root().as_bytes(),
        Some(&b"\xff\0x"[..])
    );
    assert_eq!(parse(b"T\x03\x00\x00\x00abc.").root().as_str(), Some("abc"));
    assert_eq!(parse(b"U\x02\xc3\xa9.").root().as_str(), Some("\u{e9}"));
    assert_eq!(parse(b"U\x01\xff.").root().as_bytes(), Some(&b"\xff"[..]));
    let raw = parse(b"V\\u0041\\\\u0042\xe9\\U0001f600\n.");
    assert_eq!(raw.root().as_str(), Some("A\\\\u0042\u{e9}\u{1f600}"));
    assert!(message(b"S'abc\n.").contains("not quoted"));
    assert!(message(b"V\\ud800\n.").contains("surrogate"));
    assert!(message(b"X\x01\x00\x00\x00\xff.").contains("BINUNICODE is not valid UTF-8"));
    assert!(message(b"T\xff\xff\xff\xff.").contains("negative length"));
}

#[test]
fn binary_strings_and_bytes() {
    let hi = parse(b"\x80\x04\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi.");
    assert_eq!(hi.root().as_str(), Some("hi"));
    let b = parse(b"\x80\x03B\x02\x00\x00\x00ab.");
    assert_eq!(b.root().as_bytes(), Some(&b"ab"[..]));
    let b8 = parse(b"\x80\x04\x8e\x01\x00\x00\x00\x00\x00\x00\x00z.");
    assert_eq!(b8.root().as_bytes(), Some(&b"z"[..]));
    let ba = parse(b"\x80\x05\x96\x00\x00\x00\x00\x00\x00\x00\x00.");
    assert_eq!(ba.root().as_bytes(), Some(&b""[..]));
}

#[test]
fn integers_and_floats() {
    let i = |bytes: &[u8]| parse(bytes).root().as_i64();
    assert_eq!(i(b"I-5\n."), Some(-5));
    assert_eq!(parse(b"I01\n.").root().as_bool(), Some(true));
    assert_eq!(parse(b"I00\n.").root().as_bool(), Some(false));
    assert_eq!(i(b"L12L\n."), Some(12));
    assert_eq!(i(b"J\xfe\xff\xff\xff."), Some(-2));
    assert_eq!(i(b"M\xff\xff."), Some(65535));
    assert_eq!(i(b"\x8a\x00."), Some(0));
    assert_eq!(i(b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\xff."), Some(-1));
    assert_eq!(
        i(b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."),
        Some(i64::MIN)
    );
    assert_eq!(i(b"\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00."), Some(1));
    assert_eq!(i(b"\x8b\x02\x00\x00\x00\xff\x7f."), Some(32767));
    let big = parse(b"L-9223372036854775809L\n.");
    assert_eq!(
        big.root().as_bigint_le(),
        Some(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff][..])
    );
    let long4 = parse(b"\x8b\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40.");
    assert_eq!(long4.root().as_f64(), Some(2f64.powi(70)));
    assert_eq!(
        parse(b"I99999999999999999999\n.").root().as_f64(),
        Some(1e20)
    );
    assert!(message(b"I12x\n.").contains("bad INT argument"));
    let digits = format!("I{}\n.", "9".repeat(5000));
    assert!(message(digits.as_bytes()).contains("integer too large"));
    assert_eq!(parse(b"F-1.25e-3\n.").root().as_f64(), Some(-0.00125));
    assert!(parse(b"Fnan\n.").root().as_f64().unwrap().is_nan());
    assert_eq!(
        parse(b"G?\xf8\x00\x00\x00\x00\x00\x00.").root().as_f64(),
        Some(1.5)
    );
    assert!(message(b"Fx\n.").contains("bad FLOAT"));
}

#[test]
fn bigint_helpers() {
    assert_eq!(
        decimal_to_le(false, b"1180591620717411303424"),
        [0, 0, 0, 0, 0, 0, 0, 0, 0x40]
    );
    assert_eq!(decimal_to_le(true, b"128"), [0x80]);
    assert_eq!(decimal_to_le(true, b"129"), [0x7f, 0xff]);
    // 2**200 + 2**147 + 1: the tie is broken upward by the sticky bit.
    let mut v = [0u8; 26];
    v[25] = 1;
    v[18] = 0x08;
    v[0] = 1;
    assert_eq!(bigint_to_f64(&v), Some(2f64.powi(200) + 2f64.powi(148)));
    v[0] = 0;
    assert_eq!(bigint_to_f64(&v), Some(2f64.powi(200)));
    let huge = [0x7f; 300];
    assert_eq!(bigint_to_f64(&huge), None);
}

#[test]
fn containers_and_mutation() {
    // EMPTY_DICT MARK a 1 b 2 a 3 SETITEMS: the later `a` replaces in place.
    let doc = parse(b"\x80\x04}(\x8c\x01aK\x01\x8c\x01bK\x02\x8c\x01aK\x03u.");
    let items: Vec<_> = doc
        .root()
        .members()
        .map(|(k, v)| (k.as_str().unwrap(), v.as_i64().unwrap()))
        .collect();
    assert_eq!(items, [("a", 3), ("b", 2)]);
    // {1: 'x', True: 'y'} is {1: 'y'} in Python.
    let doc = parse(b"\x80\x04}(K\x01\x8c\x01x\x88\x8c\x01yu.");
    let (k, v) = doc.root().members().next().unwrap();
    assert_eq!(
        (doc.root().len(), k.as_i64(), v.as_str()),
        (Some(1), Some(1), Some("y"))
    );
    // A list appended to after two dict values refer to it.
    let doc = parse(b"\x80\x04]\x94}\x94(\x8c\x01ah\x00\x8c\x01bh\x00uh\x00K\x01a0.");
    let root = doc.root();
    assert_eq!(ints(root.get("a").unwrap()), [1]);
    assert_eq!(root.get("b").unwrap().id(), root.get("a").unwrap().id());
    // A set drops duplicates; LIST, DICT, TUPLE with marks.
    assert_eq!(
        ints(parse(b"\x80\x04\x8f(K\x01K\x01K\x02\x90.").root()),
        [1, 2]
    );
    assert_eq!(ints(parse(b"(I1\nI2\nl.").root()), [1, 2]);
    let d = parse(b"(S'k'\nI7\nd.");
    assert_eq!(d.root().get("k").unwrap().as_i64(), Some(7));
    let t = parse(b"(S'a'\nS'b'\ntS'c'\n0.");
    assert_eq!(t.root().len(), Some(2));
    // POP_MARK, DUP.
    assert_eq!(parse(b"N(NN1.").root().type_name(), "None");
    let dup = parse(b"]2a.");
    assert_eq!(dup.root().element(0).unwrap().id(), dup.root().id());
    // Appends to two memoized lists interleaved: chains of segments.
    let doc = parse(b"\x80\x04]\x94]\x94h\x00K\x01a0K\x02ah\x00K\x03a0\x86.");
    let pair: Vec<_> = doc.root().elements().map(ints).collect();
    assert_eq!(pair, [vec![1, 3], vec![2]]);
    // A dict of more than 64 items with a repeated key (hashed path).
    let mut bytes = b"\x80\x04}(".to_vec();
    for i in 0..70u8 {
        let key = format!("k{i}");
        bytes.extend_from_slice(&[0x8c, key.len() as u8]);
        bytes.extend_from_slice(key.as_bytes());
        bytes.extend_from_slice(&[b'K', i]);
    }
    bytes.extend_from_slice(b"\x8c\x02k5K\x63u.");
    let doc = parse(&bytes);
    let root = doc.root();
    assert_eq!(root.len(), Some(70));
    assert_eq!(root.get("k5").unwrap().as_i64(), Some(99));
    let (k, _) = root.members().nth(5).unwrap();
    assert_eq!(k.as_str(), Some("k5"));
    // A sparse PUT counts in len(memo), which MEMOIZE uses.
    let memo = parse(b"\x80\x04K\x07r\x05\x00\x00\x00K\x08\x94h\x01h\x05\x87.");
    assert_eq!(ints(memo.root()), [8, 8, 7]);
    assert!(message(b"}]K\x01s.").contains("unhashable list in SETITEM"));
    assert!(message(b"}K\x01a.").contains("APPEND onto a dict"));
    assert!(message(b"}(K\x01u.").contains("odd number of items"));
}

#[test]
fn malformed_input_is_an_error_with_an_offset() {
    assert_eq!(
        message(b"a."),
        "pickle: stack underflow in APPEND at byte 0"
    );
    assert_eq!(
        message(b"\x80\x04N"),
        "pickle: truncated at byte 3 (no STOP opcode)"
    );
    assert_eq!(message(b""), "pickle: truncated at byte 0 (no STOP opcode)");
    assert_eq!(
        message(b"N.x"),
        "pickle: 1 bytes of trailing data at byte 2 after STOP"
    );
    assert_eq!(
        message(b"Nh\x05."),
        "pickle: BINGET of unknown memo index 5 at byte 1"
    );
    assert_eq!(
        message(b"Ng5\n."),
        "pickle: GET of unknown memo index 5 at byte 1"
    );
    assert_eq!(
        message(b"\x80\x06N."),
        "pickle: unsupported protocol 6 at byte 0"
    );
    assert_eq!(message(b"."), "pickle: stack underflow in STOP at byte 0");
    assert_eq!(message(b"N(."), "pickle: stack underflow in STOP at byte 2");
    assert_eq!(message(b"Ne."), "pickle: APPENDS without a MARK at byte 1");
    assert_eq!(
        message(b"(]e."),
        "pickle: stack underflow in APPENDS at byte 2"
    );
    assert_eq!(
        message(b"X\x28\x00\x00\x00abc"),
        "pickle: truncated at byte 5 (BINUNICODE needs 40 bytes, 3 left)"
    );
    assert_eq!(
        message(b"I12"),
        "pickle: truncated at byte 1 (INT needs a newline-terminated argument, 2 left)"
    );
}

#[test]
fn huge_length_prefixes_are_refused_before_allocating() {
    let cases: [&[u8]; 8] = [
        b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xffab",
        b"\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x40ab",
        b"\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\x7fab",
        b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN.",
        b"\x80\x02\x8b\xff\xff\xff\x7fab",
        b"\x80\x02X\xff\xff\xff\xffab",
        b"\x80\x03B\xff\xff\xff\xffab",
        b"\x80\x02T\xff\xff\xff\x7fab",
    ];
    for bytes in cases {
        let m = message(bytes);
        assert!(m.starts_with("pickle: truncated at byte "), "{m}");
        assert!(m.ends_with(", 2 left)"), "{m}");
    }
}

#[test]
fn limits_are_enforced() {
    let few = PickleLimits {
        max_nodes: 3,
        ..PickleLimits::default()
    };
    let e = load(b"(NNNNl.", few).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert_eq!(
        e.message(),
        "pickle: more than max_nodes=3 values at byte 4"
    );
    let shallow = PickleLimits {
        max_depth: 3,
        ..PickleLimits::default()
    };
    let e = load(b"((((NNNNllll.", shallow).unwrap_err();
    assert_eq!(
        e.message(),
        "pickle: nesting deeper than max_depth=3 at byte 3"
    );
    assert!(load(b"]]]aa.", shallow).is_ok());
    let e = load(b"]]]]aaa.", shallow).unwrap_err();
    assert_eq!(
        e.message(),
        "pickle: nesting deeper than max_depth=3 at byte 6"
    );
    let e = load(b"))))\x85\x85\x85.", shallow).unwrap_err();
    assert_eq!(
        (e.kind(), e.message().contains("max_depth=3")),
        (ErrorKind::Limit, true)
    );
}

#[test]
fn memo_bomb_costs_one_index_per_reference() {
    let n = 1_000_000;
    // A list appended to itself a million times.
    let mut bytes = b"\x80\x04]\x94(".to_vec();
    for _ in 0..n {
        bytes.extend_from_slice(b"h\x00");
    }
    bytes.extend_from_slice(b"e.");
    let doc = parse(&bytes);
    let root = doc.root();
    assert_eq!(root.len(), Some(n));
    assert!(root.elements().all(|e| e.id() == root.id()));
    assert_eq!(doc.node_count(), 1);
    // A 1000-element list referenced a million times.
    let mut bytes = b"\x80\x04](".to_vec();
    for i in 0..1000u16 {
        bytes.push(b'M');
        bytes.extend_from_slice(&i.to_le_bytes());
    }
    bytes.extend_from_slice(b"e\x94](");
    for _ in 0..n {
        bytes.extend_from_slice(b"h\x00");
    }
    bytes.extend_from_slice(b"e.");
    let doc = parse(&bytes);
    assert_eq!(doc.node_count(), 1002);
    let shared = doc.root().element(n - 1).unwrap();
    assert_eq!(shared.element(999).unwrap().as_i64(), Some(999));
}

#[test]
fn every_truncation_is_an_error() {
    for bytes in [FR_P4, RECURSIVE_P0, RECURSIVE_P2] {
        for cut in 0..bytes.len() {
            let e = load(&bytes[..cut], PickleLimits::default()).unwrap_err();
            assert!(e.message().starts_with("pickle: "), "{}", e.message());
        }
    }
}

#[test]
fn mutated_input_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for base in [FR_P0, FR_P4, EXTRAS_P5, RECURSIVE_P2] {
        for _ in 0..600 {
            let mut bytes = base.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] = next() as u8;
            }
            let _ = load(&bytes, PickleLimits::default());
        }
    }
}

#[test]
fn real_flight_recorder_dump() {
    let bytes = crate::test_data::fixture_bytes(FR_DUMP);
    let doc = parse(&bytes);
    let root = doc.root();
    for key in ["version", "pg_config", "pg_status", "entries"] {
        assert!(root.get(key).is_some(), "missing {key}");
    }
    let entries = root.get("entries").unwrap();
    assert_eq!(entries.len(), Some(112));
    let last = entries.element(111).unwrap();
    assert_eq!(last.get("collective_seq_id").unwrap().as_i64(), Some(27));
    let pg = last.get("process_group").unwrap();
    assert_eq!(pg.type_name(), "tuple");
    let names: Vec<_> = pg.elements().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(names, ["2", "tp_pair_1"]);
    let frames = last.get("frames").unwrap();
    assert_eq!(frames.type_name(), "list");
    assert!(!frames.is_empty());
    for frame in frames.elements() {
        assert!(frame.get("name").and_then(|v| v.as_str()).is_some());
        assert!(frame.get("filename").and_then(|v| v.as_str()).is_some());
        assert!(frame.get("line").and_then(|v| v.as_i64()).is_some());
    }
}

/// BININT2.
fn int2(out: &mut Vec<u8>, v: u16) {
    out.push(b'M');
    out.extend_from_slice(&v.to_le_bytes());
}

/// SHORT_BINUNICODE.
fn short_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&[0x8c, s.len() as u8]);
    out.extend_from_slice(s.as_bytes());
}

#[test]
fn interleaved_appends_move_runs_and_keep_every_item() {
    // Lists A (memo 0) and B (memo 1), appended to alternately one item
    // at a time, then in batches: each run moves with room to spare.
    let mut b = b"\x80\x04]\x94]\x940".to_vec();
    for i in 0..300u16 {
        b.extend_from_slice(b"h\x00");
        int2(&mut b, i);
        b.extend_from_slice(b"a0h\x01");
        int2(&mut b, 1000 + i);
        b.extend_from_slice(b"a0");
    }
    for batch in 0..5u16 {
        for list in 0..2u8 {
            b.extend_from_slice(&[b'h', list, b'(']);
            for i in 0..7 {
                int2(&mut b, 5000 + u16::from(list) * 100 + batch * 7 + i);
            }
            b.extend_from_slice(b"e0");
        }
    }
    b.extend_from_slice(b"h\x00h\x01\x86.");
    let doc = parse(&b);
    let pair: Vec<_> = doc.root().elements().map(ints).collect();
    let expect = |base: i64, batched: i64| -> Vec<i64> {
        (0..300)
            .map(|i| base + i)
            .chain((0..35).map(|i| batched + i))
            .collect()
    };
    assert_eq!(pair, [expect(0, 5000), expect(1000, 5100)]);
}

#[test]
fn duplicate_keys_are_dropped_small_and_large_and_after_a_known_key_set() {
    // A dict grown by SETITEM one key at a time past the small limit:
    // keys k0..k79, then k0..k19 again with new values.
    let mut b = b"\x80\x04}\x94".to_vec();
    for i in 0..100u16 {
        short_str(&mut b, &format!("k{}", i % 80));
        int2(&mut b, i);
        b.push(b's');
    }
    b.push(b'.');
    let doc = parse(&b);
    let root = doc.root();
    assert_eq!(root.len(), Some(80));
    assert_eq!(root.get("k3").unwrap().as_i64(), Some(83));
    assert_eq!(root.get("k50").unwrap().as_i64(), Some(50));
    let (k, _) = root.members().nth(3).unwrap();
    assert_eq!(k.as_str(), Some("k3"));
    // Two dicts with one key sequence (memoized keys), then a third that
    // repeats a key: the known key set does not hide the duplicate.
    let mut b = b"\x80\x04\x8c\x01a\x94\x8c\x01b\x940(".to_vec();
    for keys in [[0u8, 1], [0, 1], [0, 0]] {
        b.extend_from_slice(b"}(");
        for (i, k) in keys.into_iter().enumerate() {
            b.extend_from_slice(&[b'h', k, b'K', i as u8 + 1]);
        }
        b.push(b'u');
    }
    b.extend_from_slice(b"l.");
    let doc = parse(&b);
    let lens: Vec<_> = doc.root().elements().map(|d| d.len()).collect();
    assert_eq!(lens, [Some(2), Some(2), Some(1)]);
    assert_eq!(
        doc.root().element(2).unwrap().get("a").unwrap().as_i64(),
        Some(2)
    );
    // A set fed by ADDITEMS in two batches with a repeat across them.
    let doc = parse(b"\x80\x04\x8f(K\x01K\x02\x90(K\x02K\x03\x90.");
    assert_eq!(ints(doc.root()), [1, 2, 3]);
}
