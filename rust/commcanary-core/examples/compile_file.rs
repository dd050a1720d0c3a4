//! Compiles one trace file and prints the phase timings (a profiling aid):
//! `cargo run --release --example compile_file -- TRACE [LIMIT]`.

use std::time::Instant;

use commcanary_core::compile::{CompileOptions, compile};
use commcanary_core::trace::{LoadOptions, load};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: compile_file TRACE [LIMIT]");
    let limit = args
        .next()
        .map_or(128, |l| l.parse().expect("limit is an integer"));
    let t0 = Instant::now();
    let trace = load(path.as_ref(), &LoadOptions::default()).expect("trace loads");
    let t1 = Instant::now();
    let options = CompileOptions {
        timing_sample_limit: limit,
        ..CompileOptions::default()
    };
    let compiled = compile(&trace, &options).expect("trace compiles");
    let t2 = Instant::now();
    eprintln!(
        "load {:.3}s compile {:.3}s: {} events -> {} canary events, {} bytes",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        compiled.summary.source_events,
        compiled.summary.canary_events,
        compiled.summary.canary_bytes
    );
}
