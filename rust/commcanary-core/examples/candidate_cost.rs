//! Cost of one behaviour-search candidate, by stage (a profiling aid):
//! `cargo run --release --example candidate_cost -- TRACE [LIMIT]`.

use std::time::Instant;

use commcanary_core::behavior::{
    Tolerances, default_configurations, evaluate, reference_program, runs,
};
use commcanary_core::compile::{CompileOptions, compile};
use commcanary_core::trace::{LoadOptions, load};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: candidate_cost TRACE [LIMIT]");
    let limit = args
        .next()
        .map_or(5, |l| l.parse().expect("limit is an integer"));
    let trace = load(path.as_ref(), &LoadOptions::default()).expect("trace loads");
    let configs = default_configurations();
    let source = runs(&reference_program(&trace).unwrap(), &configs).unwrap();
    let options = CompileOptions {
        timing_sample_limit: limit,
        ..CompileOptions::default()
    };
    let t0 = Instant::now();
    let compiled = compile(&trace, &options).unwrap();
    let t1 = Instant::now();
    let canary_runs = runs(&compiled.program, &configs).unwrap();
    let t2 = Instant::now();
    let e = evaluate(&source, &canary_runs, &configs, &Tolerances::default());
    let t3 = Instant::now();
    eprintln!(
        "compile {:.1} ms, runs {:.1} ms, evaluate {:.1} ms (rows json {} bytes)",
        (t1 - t0).as_secs_f64() * 1e3,
        (t2 - t1).as_secs_f64() * 1e3,
        (t3 - t2).as_secs_f64() * 1e3,
        e.rows_json.len()
    );
}
