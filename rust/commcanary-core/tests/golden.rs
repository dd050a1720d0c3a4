//! The shared golden vectors in `tests/golden/`, read with the crate's own
//! JSON reader (the Python suite reads the same files).

use std::path::{Path, PathBuf};

use commcanary_core::compile::{CompileOptions, FIDELITY_FIELDS, compile};
use commcanary_core::json::{JsonLimits, Value, canon, parse};
use commcanary_core::pyfloat;
use commcanary_core::trace::{LoadOptions, hex, load_bytes};
use sha2::{Digest, Sha256};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

fn read(name: &str) -> commcanary_core::json::Doc {
    let bytes = std::fs::read(golden_dir().join(name)).expect("golden file");
    parse(&bytes, JsonLimits::default()).expect("golden file is JSON")
}

fn text<'a>(v: Value<'a>, key: &str) -> &'a str {
    v.get(key)
        .and_then(|x| x.as_str())
        .unwrap_or_else(|| panic!("missing string {key}"))
}

#[test]
fn canonical_json_vectors() {
    let doc = read("canonical_json.json");
    for case in doc.root().unwrap().elements() {
        let input = text(case, "input");
        let parsed = parse(input.as_bytes(), JsonLimits::default()).unwrap();
        let out = canon::to_vec(parsed.root().unwrap());
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            text(case, "canonical"),
            "{}",
            text(case, "name")
        );
        assert_eq!(hex(&Sha256::digest(&out)), text(case, "sha256"));
    }
}

fn from_hex_float(s: &str) -> f64 {
    // CPython's float.hex(): [-]0x1.<hex>p<exp> or 0x0.0p+0.
    let (negative, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let s = s.strip_prefix("0x").unwrap();
    let (mantissa, exponent) = s.split_once('p').unwrap();
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut bits: u64 = u64::from_str_radix(int, 16).unwrap();
    for c in frac.chars() {
        bits = (bits << 4) | u64::from(c.to_digit(16).unwrap());
    }
    let exponent: i32 = exponent.parse().unwrap();
    // Scale in two exact steps so subnormal results do not underflow early.
    let shift = exponent - 4 * frac.len() as i32;
    let value = bits as f64 * 2f64.powi(shift / 2) * 2f64.powi(shift - shift / 2);
    if negative { -value } else { value }
}

#[test]
fn cpython_float_vectors() {
    let doc = read("pyfloat.json");
    for case in doc.root().unwrap().elements() {
        let x = from_hex_float(text(case, "hex"));
        assert_eq!(pyfloat::repr(x), text(case, "repr"));
        for (n, want) in case.get("round").unwrap().members() {
            let n: u32 = std::str::from_utf8(n).unwrap().parse().unwrap();
            assert_eq!(
                pyfloat::repr(pyfloat::round(x, n)),
                want.as_str().unwrap(),
                "round({x:?}, {n})"
            );
        }
    }
}

fn options(v: Option<Value<'_>>) -> CompileOptions {
    let mut o = CompileOptions::default();
    if let Some(v) = v {
        for (key, value) in v.members() {
            match key {
                b"timing_sample_limit" => o.timing_sample_limit = value.as_i64().unwrap() as usize,
                b"max_events" => o.max_events = Some(value.as_i64().unwrap() as u64),
                b"sequence_motifs" => o.sequence_motifs = value.as_bool().unwrap(),
                other => panic!("unknown option {}", String::from_utf8_lossy(other)),
            }
        }
    }
    o
}

#[test]
fn compile_vectors() {
    let doc = read("compile.json");
    for case in doc.root().unwrap().elements() {
        let name = text(case, "name");
        let bytes = match case.get("trace_file") {
            Some(f) => std::fs::read(golden_dir().join(Path::new(f.as_str().unwrap()))).unwrap(),
            None => canon::to_vec(case.get("trace").unwrap()),
        };
        let trace = load_bytes(&bytes, &LoadOptions::default()).unwrap();
        let c = compile(&trace, &options(case.get("options")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = case.get("expected").unwrap();
        let s = &c.summary;
        let int = |k: &str| want.get(k).unwrap().as_i64().unwrap() as u64;
        assert_eq!(s.source_events, int("source_events"), "{name}");
        assert_eq!(s.canary_events, int("canary_events"), "{name}");
        assert_eq!(
            s.sequence_motif_count,
            int("sequence_motif_count"),
            "{name}"
        );
        assert_eq!(
            s.event_compression_ratio,
            want.get("event_compression_ratio")
                .unwrap()
                .as_number()
                .unwrap(),
            "{name}"
        );
        assert_eq!(s.timing_mode, text(want, "timing_mode"), "{name}");
        assert_eq!(s.fidelity.mode(), text(want, "fidelity_mode"), "{name}");
        let bounds = want.get("bounds").unwrap();
        for (field, got) in FIDELITY_FIELDS.iter().zip(s.fidelity.maxima) {
            assert_eq!(
                got,
                bounds.get(field).unwrap().as_number().unwrap(),
                "{name} {field}"
            );
        }
        assert_eq!(
            s.source_trace_sha256,
            text(want, "source_trace_sha256"),
            "{name}"
        );
        assert_eq!(
            s.execution_semantic_sha256,
            text(want, "execution_semantic_sha256"),
            "{name}"
        );
        assert_eq!(
            hex(&Sha256::digest(&c.canary)),
            text(want, "canary_sha256"),
            "{name}"
        );
    }
}

#[test]
fn replay_vectors() {
    use commcanary_core::canary::read::read_canary;
    use commcanary_core::report::{join_sections, sections};
    use commcanary_core::sim::{Ablations, Settings, replay};

    let compile_doc = read("compile.json");
    let compile_cases: Vec<Value<'_>> = compile_doc.root().unwrap().elements().collect();
    let doc = read("replay.json");
    for case in doc.root().unwrap().elements() {
        let name = text(case, "name");
        let source = compile_cases
            .iter()
            .find(|c| text(**c, "name") == text(case, "compile_case"))
            .unwrap();
        let bytes = match source.get("trace_file") {
            Some(f) => std::fs::read(golden_dir().join(Path::new(f.as_str().unwrap()))).unwrap(),
            None => canon::to_vec(source.get("trace").unwrap()),
        };
        let trace = load_bytes(&bytes, &LoadOptions::default()).unwrap();
        let compiled = compile(&trace, &options(source.get("options"))).unwrap();
        let canary = read_canary(&compiled.canary).unwrap();
        let mut s = Settings::default();
        let given = case.get("settings").unwrap();
        if let Some(b) = given.get("backend") {
            for (k, v) in b.members() {
                match k {
                    b"label" => s.label = v.as_str().unwrap().to_owned(),
                    b"bandwidth_gbps" => s.bandwidth_gbps = v.as_number().unwrap(),
                    b"latency_floor_us" => s.latency_floor_us = v.as_number().unwrap(),
                    b"compute_pressure" => s.compute_pressure = v.as_number().unwrap(),
                    b"overlap_efficiency" => s.overlap_efficiency = v.as_number().unwrap(),
                    other => panic!("unknown backend key {}", String::from_utf8_lossy(other)),
                }
            }
        }
        if let Some(i) = given.get("iterations") {
            s.iterations = i.as_i64().unwrap() as u32;
        }
        if let Some(seed) = given.get("seed") {
            s.seed = seed.as_i64().unwrap();
        }
        if let Some(a) = given.get("ablations") {
            s.ablations = Ablations::parse(a.elements().map(|v| v.as_str().unwrap())).unwrap();
        }
        let r = replay(&canary.program, &s).unwrap();
        let report = join_sections(&sections(&canary, &r, &s, false));
        let want = case.get("expected").unwrap();
        assert_eq!(
            hex(&Sha256::digest(&report)),
            text(want, "report_sha256"),
            "{name}"
        );
    }
}
