//! Gathers profiler traces and times each straggler-side stage (a profiling
//! aid): `cargo run --release --example stragglers_dir -- PATH...`.

use std::path::PathBuf;
use std::time::Instant;

use commcanary_core::analysis::evidence::{GatherOptions, Uses, gather};
use commcanary_core::analysis::{steps, stragglers};
use commcanary_core::export::timeline;

fn main() {
    let paths: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let options = GatherOptions {
        uses: Uses::Traces,
        ..GatherOptions::default()
    };
    let clock = Instant::now();
    let lap = |what: &str, since: &mut f64| {
        let now = clock.elapsed().as_secs_f64();
        eprintln!("{what}: {:.3}s", now - *since);
        *since = now;
    };
    let mut at = 0.0;
    let evidence = gather(&paths, &options).expect("traces read");
    lap("gather (parse and align)", &mut at);
    let job = evidence.traces.as_ref().expect("traces");
    let found = stragglers::analyze(job).expect("analysis runs");
    lap("stragglers::analyze", &mut at);
    let recovery = steps::recover(job).expect("steps recovered");
    lap("steps::recover", &mut at);
    let t = timeline::build(evidence, &[], None).expect("timeline");
    lap("timeline::build (analysis again, and the writer)", &mut at);
    eprintln!(
        "{} findings, {} steps, {} timeline events, {} bytes",
        found.findings.len(),
        recovery.count(),
        t.events,
        t.bytes.len()
    );
}
