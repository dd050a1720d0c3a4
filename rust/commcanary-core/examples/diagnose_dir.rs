//! Gathers evidence and diagnoses a hang, timing the two halves (a
//! profiling aid): `cargo run --release --example diagnose_dir -- PATH...`.

use std::path::PathBuf;
use std::time::Instant;

use commcanary_core::analysis::evidence::{GatherOptions, gather};
use commcanary_core::analysis::hang::diagnose;

fn main() {
    let paths: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let start = Instant::now();
    let evidence = gather(&paths, &GatherOptions::default()).expect("evidence reads");
    let gathered = start.elapsed().as_secs_f64();
    let report = diagnose(evidence).expect("diagnosis runs");
    let total = start.elapsed().as_secs_f64();
    eprintln!(
        "{}: gather {gathered:.3}s, diagnose {:.3}s, {} document bytes",
        report.verdict,
        total - gathered,
        report.document.len()
    );
}
