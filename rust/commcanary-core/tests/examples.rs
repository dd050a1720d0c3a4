//! The walkthrough's compile claims, reproduced on the bundled example traces.

use std::path::PathBuf;

use commcanary_core::compile::{Budgets, CompileOptions, compile};
use commcanary_core::pyfloat::repr;
use commcanary_core::trace::{LoadOptions, Trace, load};

fn example(name: &str) -> Trace {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/traces")
        .join(name);
    load(&path, &LoadOptions::default()).expect("example trace loads")
}

fn approximation(f: &commcanary_core::compile::Fidelity) -> String {
    format!(
        "gap<={} us, skew<={} us, compute-before<={} us, pressure<={}, prefix-gap<={} us",
        repr(f.maxima[0]),
        repr(f.maxima[1]),
        repr(f.maxima[3]),
        repr(f.maxima[5]),
        repr(f.maxima[7])
    )
}

#[test]
fn demo_trace_compiles_losslessly_to_five_events() {
    let c = compile(
        &example("llama70b_tp8_trace.json"),
        &CompileOptions::default(),
    )
    .unwrap();
    let s = &c.summary;
    assert_eq!((s.source_events, s.canary_events), (10, 5));
    assert_eq!(repr(s.event_compression_ratio), "2.0");
    assert_eq!(s.fidelity.mode(), "lossless_timing");
    assert_eq!(s.source_bytes, 3608);
    assert_eq!(c.canary.len() as u64, s.canary_bytes);
    assert!(s.canary_bytes <= 7617, "canary {} bytes", s.canary_bytes);
}

#[test]
fn long_trace_compiles_to_thirty_three_events() {
    let c = compile(
        &example("llama70b_tp8_trace_long.json"),
        &CompileOptions::default(),
    )
    .unwrap();
    let s = &c.summary;
    assert_eq!((s.source_events, s.canary_events), (56, 33));
    assert_eq!(repr(s.event_compression_ratio), "1.697");
    assert_eq!(s.fidelity.mode(), "lossless_timing");
    assert_eq!(s.source_bytes, 18928);
    assert!(
        s.byte_compression_ratio >= 1.0,
        "byte ratio {}",
        s.byte_compression_ratio
    );
}

#[test]
fn limit_two_gives_the_walkthrough_bounds() {
    let options = CompileOptions {
        timing_sample_limit: 2,
        ..CompileOptions::default()
    };
    let c = compile(&example("llama70b_tp8_trace_long.json"), &options).unwrap();
    assert_eq!(c.summary.fidelity.mode(), "bounded_approximate");
    assert_eq!(
        approximation(&c.summary.fidelity),
        "gap<=3.731571429 us, skew<=3.187 us, compute-before<=3.643 us, pressure<=0.0, prefix-gap<=4.666714286 us"
    );
}

#[test]
fn limit_four_skew_budget_is_refused_with_the_achieved_value() {
    let options = CompileOptions {
        timing_sample_limit: 4,
        budgets: Budgets {
            skew: Some(0.1),
            overlap: Some(0.1),
            ..Budgets::default()
        },
        ..CompileOptions::default()
    };
    let err = compile(&example("llama70b_tp8_trace_long.json"), &options).unwrap_err();
    assert_eq!(
        err.message(),
        "timing fidelity max_skew_error_us=2.779 us exceeds budget 0.1 us"
    );
    let options = CompileOptions {
        timing_sample_limit: 4,
        ..CompileOptions::default()
    };
    let c = compile(&example("llama70b_tp8_trace_long.json"), &options).unwrap();
    assert_eq!(
        approximation(&c.summary.fidelity),
        "gap<=2.095 us, skew<=2.779 us, compute-before<=2.75 us, pressure<=0.0, prefix-gap<=1.713 us"
    );
}

#[test]
fn size_fixed_point_falls_back_when_the_ratio_cycles() {
    // At limit 4 the demo canary's size oscillates between two lengths with
    // a three-decimal ratio; the two-decimal ratio settles it.
    let options = CompileOptions {
        timing_sample_limit: 4,
        ..CompileOptions::default()
    };
    let c = compile(&example("llama70b_tp8_trace.json"), &options).unwrap();
    assert_eq!(c.canary.len() as u64, c.summary.canary_bytes);
    assert_eq!(repr(c.summary.byte_compression_ratio), "1.16");
}

#[test]
fn compiled_canaries_read_back_and_tampering_is_caught() {
    use commcanary_core::canary::read::read_canary;
    for limit in [2, 4, 128] {
        for name in ["llama70b_tp8_trace.json", "llama70b_tp8_trace_long.json"] {
            let options = CompileOptions {
                timing_sample_limit: limit,
                ..CompileOptions::default()
            };
            let c = compile(&example(name), &options).unwrap();
            let canary =
                read_canary(&c.canary).unwrap_or_else(|e| panic!("{name} at {limit}: {e}"));
            assert_eq!(canary.source_events, c.summary.source_events);
            assert_eq!(
                canary.execution_semantic_sha256,
                c.summary.execution_semantic_sha256
            );
        }
    }
    let c = compile(
        &example("llama70b_tp8_trace.json"),
        &CompileOptions::default(),
    )
    .unwrap();
    let text = String::from_utf8(c.canary).unwrap();
    let cases = [
        (
            text.replacen("[1,75.629,", "[2,75.629,", 1),
            "source_events",
        ),
        (
            text.replacen("75.629", "75.628", 1),
            "artifact_provenance_sha256",
        ),
        (
            text.replacen("\"canary_events\":5", "\"canary_events\":6", 1),
            "canary_events",
        ),
        (
            text.replacen("commcanary.canary.v3", "commcanary.canary.v2", 1),
            "format",
        ),
        (
            text.replacen("\"signature\":2", "\"signature\":9", 1),
            "signature 9 does not exist",
        ),
    ];
    for (tampered, fragment) in cases {
        let err = read_canary(tampered.as_bytes()).unwrap_err();
        assert!(
            err.message().contains(fragment),
            "{} lacks {fragment}",
            err.message()
        );
    }
}
