//! Replays one canary with samples and prints phase timings (a profiling aid):
//! `cargo run --release --example replay_file -- CANARY`.

use std::time::Instant;

use commcanary_core::canary::read::read_canary;
use commcanary_core::report::{join_sections, sections};
use commcanary_core::sim::{Settings, replay};

fn main() {
    let path = std::env::args().nth(1).expect("usage: replay_file CANARY");
    let bytes = std::fs::read(&path).expect("canary reads");
    eprintln!("parse only {:.3}s", parse_only(&bytes));
    let t0 = Instant::now();
    let canary = read_canary(&bytes).expect("canary validates");
    let t1 = Instant::now();
    let settings = Settings::default();
    let r = replay(&canary.program, &settings).expect("replay runs");
    let t2 = Instant::now();
    let s = sections(&canary, &r, &settings, true);
    let t3 = Instant::now();
    let out = join_sections(&s);
    let t4 = Instant::now();
    eprintln!(
        "read {:.3}s replay {:.3}s sections {:.3}s join {:.3}s ({} bytes)",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        (t3 - t2).as_secs_f64(),
        (t4 - t3).as_secs_f64(),
        out.len()
    );
}

#[allow(dead_code)]
fn parse_only(bytes: &[u8]) -> f64 {
    let t = Instant::now();
    let _ = commcanary_core::json::parse_tracking(
        bytes,
        commcanary_core::json::JsonLimits {
            max_items: u64::MAX,
            ..Default::default()
        },
    );
    t.elapsed().as_secs_f64()
}
