//! Loads one trace file N times and prints the mean time (a profiling aid):
//! `cargo run --release --example load_file -- TRACE [N]`.

use std::time::Instant;

use commcanary_core::input::read_input;
use commcanary_core::trace::{LoadOptions, load_owned};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: load_file TRACE [N]");
    let n: u32 = args
        .next()
        .map_or(5, |v| v.parse().expect("N is an integer"));
    let bytes = read_input(path.as_ref(), u64::MAX)
        .expect("trace reads")
        .into_vec();
    let start = Instant::now();
    for _ in 0..n {
        let trace = load_owned(bytes.clone(), &LoadOptions::default()).expect("trace loads");
        assert!(!trace.events.is_empty());
    }
    let mean = start.elapsed().as_secs_f64() / f64::from(n);
    eprintln!(
        "{:.3}s per load, {:.0} MB/s",
        mean,
        bytes.len() as f64 / mean / 1e6
    );
}
