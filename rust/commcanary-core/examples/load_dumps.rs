//! Times reading Flight Recorder dumps on one thread (a profiling aid):
//! `cargo run --release --example load_dumps -- FILE...` prints the time to
//! decode the pickles alone and to read them into dumps.

use std::time::Instant;

use commcanary_core::import::flight_recorder::read_dump;
use commcanary_core::import::pickle::{PickleLimits, load};

/// User CPU seconds of this process so far (from `/proc/self/stat`; the
/// machine this runs on may be shared, so wall time alone misleads).
fn user_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: f64 = after
        .split_whitespace()
        .nth(11)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0);
    ticks / 100.0
}

fn main() {
    let files: Vec<Vec<u8>> = std::env::args()
        .skip(1)
        .map(|p| std::fs::read(&p).expect("dump reads"))
        .collect();
    let total: usize = files.iter().map(Vec::len).sum();
    let (start, cpu) = (Instant::now(), user_cpu());
    let nodes: usize = files
        .iter()
        .map(|b| {
            load(b, PickleLimits::default())
                .expect("pickle loads")
                .node_count()
        })
        .sum();
    let decode = start.elapsed().as_secs_f64();
    let decode_cpu = user_cpu() - cpu;
    let (start, cpu) = (Instant::now(), user_cpu());
    let entries: usize = files
        .iter()
        .map(|b| read_dump(b).expect("dump reads").entries.len())
        .sum();
    let read = start.elapsed().as_secs_f64();
    let read_cpu = user_cpu() - cpu;
    eprintln!(
        "{} files, {:.0} MB, {nodes} nodes, {entries} entries: decode {decode:.3}s ({:.0} MB/s, {decode_cpu:.2}s CPU), read_dump {read:.3}s ({read_cpu:.2}s CPU)",
        files.len(),
        total as f64 / 1e6,
        total as f64 / decode / 1e6
    );
}
