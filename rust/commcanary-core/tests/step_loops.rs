//! Step loops: a trace with iterations compiles to one loop block that runs
//! exactly the flat program's occurrences, and the reader refuses a loop
//! that is not well formed.

use commcanary_core::canary::expand::occurrence_columns;
use commcanary_core::canary::read::read_canary;
use commcanary_core::compile::{CompileOptions, compile};
use commcanary_core::trace::{LoadOptions, Trace, load_bytes};

/// A DDP-like job: a warm-up iteration with a broadcast, then `steps`
/// iterations of two bucket all_reduces and, every third step, a metrics
/// all_reduce; gaps and arrivals vary from step to step.
fn job(steps: usize) -> Trace {
    let mut events = Vec::new();
    let mut t = 0.0f64;
    let push = |events: &mut Vec<String>, op: &str, bytes: u64, step: usize, t: &mut f64| {
        *t += 100.0 + ((step * 37 + bytes as usize) % 17) as f64 * 3.25;
        let skew = ((step * 13) % 7) as f64 * 0.5;
        events.push(format!(
            r#"{{"op":"{op}","bytes":{bytes},"ranks":[0,1,2,3],"group":"0","start_us":{t},"step":{step},"rank_arrival_us":[0.0,{skew},1.5,0.25],"compute_overlap_us":0.0,"compute_before_us":5.0}}"#
        ));
    };
    push(&mut events, "broadcast", 64, 0, &mut t);
    for step in 0..steps {
        push(&mut events, "all_reduce", 4096, step, &mut t);
        push(&mut events, "all_reduce", 2048, step, &mut t);
        if step % 3 == 2 {
            push(&mut events, "all_reduce", 4, step, &mut t);
        }
    }
    let text = format!(
        r#"{{"format":"commcanary.trace.v1","workload":{{"name":"loop-test"}},"events":[{}]}}"#,
        events.join(",")
    );
    load_bytes(text.as_bytes(), &LoadOptions::default()).unwrap()
}

fn flat() -> CompileOptions {
    CompileOptions {
        step_loops: false,
        ..CompileOptions::default()
    }
}

#[test]
fn a_job_with_iterations_is_one_loop_running_the_flat_program() {
    let trace = job(30);
    for limit in [128, 16, 4] {
        let options = CompileOptions {
            timing_sample_limit: limit,
            ..CompileOptions::default()
        };
        let looped = compile(&trace, &options).unwrap();
        let flat = compile(
            &trace,
            &CompileOptions {
                timing_sample_limit: limit,
                ..flat()
            },
        )
        .unwrap();
        let text = String::from_utf8(looped.canary.clone()).unwrap();
        assert!(text.contains(r#""format":"commcanary.canary.v4""#));
        assert_eq!(looped.summary.canary_events, 1);
        assert_eq!(
            looped.summary.expanded_canary_events,
            flat.summary.expanded_canary_events
        );
        assert!(
            String::from_utf8(flat.canary.clone())
                .unwrap()
                .contains("canary.v3")
        );
        let read = read_canary(&looped.canary).unwrap();
        assert!(read.program.loops == looped.program.loops);
        assert!(occurrence_columns(&read.program) == occurrence_columns(&looped.program));
        if limit == 128 {
            // Lossless: the same occurrences, so the same commitments.
            assert_eq!(
                looped.summary.execution_semantic_sha256,
                flat.summary.execution_semantic_sha256
            );
            assert_eq!(
                looped.summary.calibration_evaluation_sha256,
                flat.summary.calibration_evaluation_sha256
            );
            assert!(occurrence_columns(&looped.program) == occurrence_columns(&flat.program));
            assert!(looped.summary.canary_bytes < flat.summary.canary_bytes);
        } else {
            assert_eq!(looped.summary.fidelity.mode(), "bounded_approximate");
        }
        // The total gap is kept exactly either way.
        assert_eq!(
            looped.summary.fidelity.encoded_gap_total_us,
            looped.summary.fidelity.source_gap_total_us
        );
    }
}

#[test]
fn traces_without_iterations_or_too_few_stay_flat() {
    let trace = job(2);
    let c = compile(&trace, &CompileOptions::default()).unwrap();
    assert!(!c.program.has_loop());
    let off = compile(&job(30), &flat()).unwrap();
    assert!(!off.program.has_loop());
}

fn refused(text: &str) -> String {
    read_canary(text.as_bytes())
        .unwrap_err()
        .message()
        .to_owned()
}

#[test]
fn the_reader_refuses_a_malformed_loop() {
    let c = compile(&job(9), &CompileOptions::default()).unwrap();
    let text = String::from_utf8(c.canary).unwrap();
    // A loop in a v3 file.
    let v3 = text.replace("commcanary.canary.v4", "commcanary.canary.v3");
    assert!(refused(&v3).contains("only a commcanary.canary.v4 canary may hold"));
    // A schedule naming a variant that does not exist.
    let at = text.find(r#""schedule":[["#).unwrap() + r#""schedule":[["#.len();
    let mut bad = text.clone();
    bad.replace_range(at..at + 1, "9");
    assert!(
        refused(&bad).contains("schedule[0] names 9"),
        "{}",
        refused(&bad)
    );
    // A variant whose counts no longer match its slot's records.
    let at = text.find(r#""variants":[[["#).unwrap() + r#""variants":[[[0,"#.len();
    let mut bad = text.clone();
    bad.replace_range(at..at + 1, "7");
    assert!(
        refused(&bad).contains("but the schedule takes"),
        "{}",
        refused(&bad)
    );
}
