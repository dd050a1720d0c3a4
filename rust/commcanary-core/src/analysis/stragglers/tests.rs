//! The straggler analysis on the real 4-rank gloo traces with an injected
//! straggler (rank 2 sleeps 30–120 ms at the start of eight steps).

use std::path::PathBuf;

use super::{FindingKind, analyze};
use crate::import::kineto::{align_job, read_files};

fn fixture() -> Vec<PathBuf> {
    (0..4)
        .map(|r| crate::test_data::fixture(&format!("kineto/gloo_tp4_decode/rank{r}.json.gz")))
        .collect()
}

#[test]
fn the_injected_straggler_is_found_on_its_steps_only_with_its_cost() {
    let paths = fixture();
    if !paths[0].exists() {
        return;
    }
    let labels: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let (profiles, _) = read_files(&paths, &labels, None, None).expect("traces read");
    let job = align_job(profiles, &labels, &Default::default()).expect("job aligns");
    let found = analyze(&job).expect("analysis runs");
    // ProfilerStep#N is recorded step N-1; injected (N, ms).
    let injected = [
        (7, 60.0),
        (8, 60.0),
        (14, 30.0),
        (22, 120.0),
        (23, 120.0),
        (24, 120.0),
        (31, 30.0),
        (38, 60.0),
    ];
    let mut steps: Vec<(i64, i64)> = found.findings.iter().map(|f| (f.rank, f.step)).collect();
    steps.dedup();
    let expect: Vec<(i64, i64)> = injected.iter().map(|&(n, _)| (2, n)).collect();
    assert_eq!(steps, expect, "{:#?}", found.findings);
    for f in &found.findings {
        assert_eq!(f.kind, FindingKind::LateArrival);
        // The replay never credits more than the injected sleep (plus the
        // machine's ±15 ms drift), and never nothing.
        let ms = injected.iter().find(|i| i.0 == f.step).map_or(0.0, |i| i.1);
        let cost = f.estimated_cost_us / 1000.0;
        assert!(
            cost > 15.0 && cost <= 1.25 * ms,
            "step {}: cost {cost} ms for {ms} ms",
            f.step
        );
    }
    assert_eq!(found.ranks[0].rank, 2);
    assert_eq!(found.ranks[0].straggler_steps, 8);
    let s7 = found.steps.iter().find(|s| s.step == 7).expect("step 7");
    assert_eq!((s7.last_rank, s7.straggler_ranks.as_slice()), (2, &[2][..]));
}
