//! The replay model against the walkthrough's published numbers.

use std::path::PathBuf;

use commcanary_core::canary::read::{Canary, read_canary};
use commcanary_core::compile::{CompileOptions, compile};
use commcanary_core::pyfloat::repr;
use commcanary_core::report::{aggregate, join_sections, read, sections, verify};
use commcanary_core::sim::{Ablations, Settings, replay};
use commcanary_core::trace::{LoadOptions, load};

fn canary(name: &str, limit: usize) -> Canary {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/traces")
        .join(name);
    let trace = load(&path, &LoadOptions::default()).unwrap();
    let options = CompileOptions {
        timing_sample_limit: limit,
        ..CompileOptions::default()
    };
    read_canary(&compile(&trace, &options).unwrap().canary).unwrap()
}

fn line(c: &Canary, settings: &Settings) -> String {
    let r = replay(&c.program, settings).unwrap();
    let m = aggregate(&r).metrics;
    format!(
        "replayed {} events: median={} us p95={} us p99={} us hidden={}%",
        m.exposed.count,
        repr(m.exposed.median_us),
        repr(m.exposed.p95_us),
        repr(m.exposed.p99_us),
        repr(m.communication_hidden_pct)
    )
}

#[test]
fn demo_baseline_and_candidate() {
    let c = canary("llama70b_tp8_trace.json", 128);
    assert_eq!(
        line(&c, &Settings::default()),
        "replayed 10 events: median=91.977 us p95=107.746 us p99=108.321 us hidden=16.27%"
    );
    let candidate = Settings {
        latency_floor_us: 12.0,
        ..Settings::default()
    };
    assert_eq!(
        line(&c, &candidate),
        "replayed 10 events: median=121.409 us p95=146.616 us p99=152.095 us hidden=13.25%"
    );
}

#[test]
fn demo_under_the_five_behavior_configurations() {
    let c = canary("llama70b_tp8_trace.json", 128);
    let cases = [
        (
            55.0,
            3.5,
            0.55,
            0.72,
            "median=67.992 us p95=86.173 us p99=89.929 us hidden=20.41%",
        ),
        (
            110.0,
            10.0,
            0.55,
            0.72,
            "median=37.398 us p95=44.392 us p99=46.303 us hidden=32.56%",
        ),
        (
            55.0,
            9.0,
            0.55,
            0.95,
            "median=96.744 us p95=114.011 us p99=118.56 us hidden=19.95%",
        ),
        (
            28.0,
            7.5,
            0.95,
            0.72,
            "median=442.565 us p95=603.392 us p99=622.217 us hidden=3.99%",
        ),
    ];
    for (b, f, p, eta, want) in cases {
        let s = Settings {
            bandwidth_gbps: b,
            latency_floor_us: f,
            compute_pressure: p,
            overlap_efficiency: eta,
            ..Settings::default()
        };
        assert!(line(&c, &s).ends_with(want), "{} vs {want}", line(&c, &s));
    }
}

#[test]
fn demo_ablations() {
    let c = canary("llama70b_tp8_trace.json", 128);
    let s = Settings {
        ablations: Ablations::parse(["arrival_skew", "compute_overlap", "rare_tail_windows"])
            .unwrap(),
        ..Settings::default()
    };
    assert!(
        line(&c, &s).ends_with("median=101.175 us p95=118.037 us p99=123.236 us hidden=0.0%"),
        "{}",
        line(&c, &s)
    );
}

#[test]
fn long_trace_and_iterations() {
    let c = canary("llama70b_tp8_trace_long.json", 128);
    assert_eq!(
        line(&c, &Settings::default()),
        "replayed 56 events: median=253.046 us p95=415.129 us p99=431.39 us hidden=5.56%"
    );
    let s = Settings {
        iterations: 3,
        seed: 11,
        ..Settings::default()
    };
    assert_eq!(
        line(&c, &s),
        "replayed 168 events: median=221.926 us p95=352.552 us p99=426.488 us hidden=6.32%"
    );
}

#[test]
fn first_sample_of_the_demo() {
    let c = canary("llama70b_tp8_trace.json", 128);
    let r = replay(&c.program, &Settings::default()).unwrap();
    let round3 = |x: f64| commcanary_core::pyfloat::round(x, 3);
    assert_eq!(round3(r.arrival_skew_us[0]), 6.446);
    assert_eq!(round3(r.avg_rank_wait_us[0]), 3.223);
    assert_eq!(round3(r.collective_us[0]), 88.035);
    assert_eq!(round3(r.completion_us[0]), 94.481);
    assert_eq!(round3(r.hidden_us[0]), 25.414);
    assert_eq!(r.resources[0], "tp0");
}

#[test]
fn reports_read_back_and_verify() {
    for limit in [2, 128] {
        let c = canary("llama70b_tp8_trace_long.json", limit);
        let settings = Settings {
            iterations: 2,
            ..Settings::default()
        };
        let r = replay(&c.program, &settings).unwrap();
        for samples in [false, true] {
            let bytes = join_sections(&sections(&c, &r, &settings, samples));
            let report = read::read_report(&bytes, read::SampleMode::Parse).unwrap();
            let checks = verify(&report, &c).unwrap();
            assert!(checks.iter().all(|c| c.pass), "{checks:?}");
            assert_eq!(checks.len(), if samples { 11 } else { 10 });
        }
    }
}

#[test]
fn tampered_reports_are_named() {
    let c = canary("llama70b_tp8_trace.json", 128);
    let r = replay(&c.program, &Settings::default()).unwrap();
    let text =
        String::from_utf8(join_sections(&sections(&c, &r, &Settings::default(), true))).unwrap();
    // Halve the first median_us in document order (the walkthrough's edit).
    let at = text.find("\"median_us\":").unwrap() + "\"median_us\":".len();
    let end = at + text[at..].find([',', '}']).unwrap();
    let value: f64 = text[at..end].parse().unwrap();
    let tampered = format!("{}{}{}", &text[..at], repr(value * 0.5), &text[end..]);
    let err = read::read_report(tampered.as_bytes(), read::SampleMode::Parse).unwrap_err();
    assert_eq!(
        err.message(),
        "report by_op row 'all_reduce' median_us does not match samples"
    );
    // A self-consistent change of a backend knob is caught by recomputation.
    let knob = text.replace("\"latency_floor_us\":7.5", "\"latency_floor_us\":8.5");
    let report = read::read_report(knob.as_bytes(), read::SampleMode::Parse).unwrap();
    let failing: Vec<&str> = verify(&report, &c)
        .unwrap()
        .iter()
        .filter(|c| !c.pass)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        failing,
        ["backend", "metrics", "by_phase", "by_op", "samples"]
    );
}
