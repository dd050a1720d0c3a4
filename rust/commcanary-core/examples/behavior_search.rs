//! Runs a behaviour search on one trace and prints the stage timings (a
//! profiling aid): `cargo run --release --example behavior_search -- TRACE [MIN] [MAX]`.

use std::time::Instant;

use commcanary_core::behavior::search::{SearchOptions, search};
use commcanary_core::behavior::{Tolerances, default_configurations, reference_program, runs};
use commcanary_core::compile::CompileOptions;
use commcanary_core::trace::{LoadOptions, load};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: behavior_search TRACE [MIN] [MAX]");
    let min = args
        .next()
        .map_or(2, |l| l.parse().expect("min is an integer"));
    let max = args
        .next()
        .map_or(128, |l| l.parse().expect("max is an integer"));
    let t0 = Instant::now();
    let trace = load(path.as_ref(), &LoadOptions::default()).expect("trace loads");
    let configurations = default_configurations();
    let t1 = Instant::now();
    let reference = reference_program(&trace).expect("reference compiles");
    let source_runs = runs(&reference, &configurations).expect("reference replays");
    let t2 = Instant::now();
    let options = SearchOptions {
        min_limit: min,
        max_limit: max,
        compile: CompileOptions::default(),
        tolerances: Tolerances::default(),
    };
    let outcome = search(&trace, &source_runs, &configurations, &options);
    let t3 = Instant::now();
    match outcome {
        Ok(o) => {
            if let Ok(path) = std::env::var("LEDGER") {
                std::fs::write(path, &o.ledger).expect("ledger written");
            }
            eprintln!(
                "load {:.3}s reference {:.3}s search {:.3}s: {} candidates, {} accepted, selected limit {} ({} bytes), ledger {} bytes",
                (t1 - t0).as_secs_f64(),
                (t2 - t1).as_secs_f64(),
                (t3 - t2).as_secs_f64(),
                o.candidate_count,
                o.accepted_candidates,
                o.selected_options.timing_sample_limit,
                o.selected.summary.canary_bytes,
                o.ledger.len()
            );
        }
        Err(e) => eprintln!("search {:.3}s: {e}", (t3 - t2).as_secs_f64()),
    }
}
