//! Step recovery on constructed sequences and on the real 4-rank gloo
//! traces (whose `ProfilerStep` markers are the ground truth).

use std::path::PathBuf;

use super::{assign, cut_rank, recover};
use crate::analysis::stragglers::analyze;
use crate::import::kineto::{align_job, read_files};

/// A loop of `steps` steps: `body` every step, `extra` after it every
/// `every`-th step; each call 1 µs, `idle[k]` before body call `k`.
fn sequence(
    steps: usize,
    body: &[u32],
    idle: &[f64],
    extra: (u32, usize),
) -> (Vec<u32>, Vec<f64>, Vec<f64>, Vec<usize>) {
    let (mut keys, mut arrival, mut end, mut starts) = (vec![], vec![], vec![], vec![]);
    let mut t = 0.0;
    for s in 0..steps {
        starts.push(keys.len());
        for (k, &key) in body.iter().enumerate() {
            t += idle[k];
            keys.push(key);
            arrival.push(t);
            t += 1.0;
            end.push(t);
        }
        if s % extra.1 == extra.1 - 1 {
            t += 2.0;
            keys.push(extra.0);
            arrival.push(t);
            t += 1.0;
            end.push(t);
        }
    }
    (keys, arrival, end, starts)
}

#[test]
fn a_window_is_cut_at_its_first_call_when_its_first_step_is_whole() {
    let (keys, arrival, end, starts) =
        sequence(6, &[0, 0, 0, 1, 2], &[5.0, 5.0, 5.0, 1.0, 50.0], (9, 1000));
    let cut = cut_rank(&keys, &arrival, &end).expect("repeats");
    assert_eq!(cut.period, 6);
    assert_eq!(cut.cuts, starts);
}

#[test]
fn a_window_opened_mid_step_is_cut_at_its_largest_idle_gap() {
    // 3 all_reduces (key 0), an all_gather (1), a broadcast (2); the step's
    // own overhead sits before the broadcast; the window opens after the
    // first all_reduce.
    let (keys, arrival, end, _) =
        sequence(6, &[0, 0, 0, 1, 2], &[5.0, 5.0, 5.0, 1.0, 50.0], (9, 1000));
    let cut = cut_rank(&keys[1..], &arrival[1..], &end[1..]).expect("repeats");
    assert_eq!(cut.cuts, vec![3, 8, 13, 18, 23, 28]);
}

#[test]
fn end_of_step_work_marks_the_boundary_even_with_a_larger_gap_inside() {
    // The body's second all_reduce waits longest, but a reduce every 4th
    // step ends the step: the boundary is before the first all_reduce
    // (the window opens mid-step, at the third all_reduce).
    let (keys, arrival, end, starts) = sequence(
        12,
        &[0, 0, 0, 0, 1, 2, 3],
        &[20.0, 30.0, 25.0, 25.0, 10.0, 3.0, 1.0],
        (7, 4),
    );
    let cut = cut_rank(&keys[2..], &arrival[2..], &end[2..]).expect("repeats");
    assert_eq!(cut.period, 12);
    assert_eq!(cut.anchors, vec![1, 2, 3]);
    let expected: Vec<usize> = starts[1..].iter().map(|s| s - 2).collect();
    assert_eq!(cut.cuts, expected);
}

#[test]
fn nothing_repeats_nothing_is_cut() {
    assert_eq!(
        cut_rank(&[0, 1, 2, 3], &[0.0, 1.0, 2.0, 3.0], &[0.5, 1.5, 2.5, 3.5]),
        None
    );
}

fn fixture() -> Option<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = (0..4)
        .map(|r| crate::test_data::fixture(&format!("kineto/gloo_tp4_decode/rank{r}.json.gz")))
        .collect();
    Some(paths)
}

#[test]
fn the_gloo_traces_steps_are_recovered_at_their_markers_and_stragglers_agree() {
    let Some(paths) = fixture() else {
        return;
    };
    let labels: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let (profiles, _) = read_files(&paths, &labels, None, None).expect("traces read");
    let mut job = align_job(profiles, &labels, &Default::default()).expect("job aligns");
    let marked = analyze(&job).expect("analysis with markers");
    let recovery = recover(&job).expect("steps recovered");
    assert_eq!(recovery.count(), 40);
    let a = recovery.agreement.expect("the traces have markers");
    assert_eq!(a.markers, 160);
    assert!(a.matched * 100 >= a.markers * 99, "{a:?}");
    // Without the markers (recovered step k is ProfilerStep#(k+1) here).
    assign(&mut job, &recovery);
    let recovered = analyze(&job).expect("analysis without markers");
    let shifted: Vec<_> = (recovered.findings.iter())
        .map(|f| {
            (
                f.rank,
                f.step + 1,
                f.kind,
                (f.estimated_cost_us / 100.0).round(),
            )
        })
        .collect();
    let expected: Vec<_> = (marked.findings.iter())
        .map(|f| {
            (
                f.rank,
                f.step,
                f.kind,
                (f.estimated_cost_us / 100.0).round(),
            )
        })
        .collect();
    assert_eq!(shifted, expected);
}

#[test]
fn the_nccl_ddp_trace_steps_start_at_the_buffer_broadcast() {
    let path =
        crate::test_data::fixture("kineto/third_party_hta_nccl_allreduce_2rank/rank0.json.gz");
    let labels = vec![path.display().to_string()];
    let (profiles, _) = read_files(&[path], &labels, None, None).expect("trace read");
    let job = align_job(profiles, &labels, &Default::default()).expect("job aligns");
    let recovery = recover(&job).expect("steps recovered");
    assert_eq!(recovery.count(), 3);
    let a = recovery.agreement.expect("markers");
    assert_eq!((a.matched, a.markers), (3, 3));
}

#[test]
fn one_off_calls_as_the_second_step_starts_open_it() {
    // DDP rebuilds its buckets after the first backward and broadcasts
    // them (keys 7 and 8, once each) as the second step starts.
    let (mut keys, mut arrival, mut end, starts) =
        sequence(8, &[0, 0, 1, 2], &[30.0, 5.0, 5.0, 2.0], (9, 1000));
    let second = starts[1];
    for (j, key) in [7_u32, 8].into_iter().enumerate() {
        keys.insert(second + j, key);
        arrival.insert(second + j, arrival[second + j] - 0.5 + j as f64 * 0.1);
        end.insert(second + j, arrival[second + j] + 0.05);
    }
    let cut = cut_rank(&keys, &arrival, &end).expect("repeats");
    assert_eq!(cut.cuts[1], second, "the rebuild broadcasts open step 1");
    assert_eq!(cut.cuts[2], starts[2] + 2);
}

#[test]
fn a_sized_one_off_and_a_repeat_of_the_steps_own_call_open_the_second_step() {
    // Sized keys of a DDP-like loop: buffer broadcasts 10, 11, bucket
    // reduces 20, 21, the end-of-step broadcast 12. Step 1 opens with a
    // rebuild broadcast seen once (99) and one the size of the end-of-step
    // broadcast (12); the coarse cut put the boundary at the buffer
    // broadcast after them.
    let step = [10_u32, 11, 20, 21, 12];
    let mut sized: Vec<u32> = Vec::new();
    let mut cuts = Vec::new();
    for s in 0..10 {
        if s == 1 {
            sized.extend([99, 12]);
        }
        cuts.push(sized.len());
        sized.extend(step);
    }
    let before = cuts.clone();
    super::cut::open_with_sized_one_offs(&mut cuts, &sized);
    assert_eq!(
        cuts[1],
        before[1] - 2,
        "back over the repeat to the one-off"
    );
    assert_eq!(cuts[2..], before[2..], "later boundaries stay");
    // A repeat alone, with no one-off before it, moves nothing.
    let mut plain: Vec<u32> = Vec::new();
    let mut plain_cuts = Vec::new();
    for s in 0..10 {
        if s == 1 {
            plain.push(12);
        }
        plain_cuts.push(plain.len());
        plain.extend(step);
    }
    let kept = plain_cuts.clone();
    super::cut::open_with_sized_one_offs(&mut plain_cuts, &plain);
    assert_eq!(plain_cuts, kept);
    // Sizes that change every step (a decode's growing messages) are no
    // sign of one-off work.
    let growing: Vec<u32> = (0..50).collect();
    let mut growing_cuts: Vec<usize> = (0..10).map(|s| s * 5).collect();
    let kept = growing_cuts.clone();
    super::cut::open_with_sized_one_offs(&mut growing_cuts, &growing);
    assert_eq!(growing_cuts, kept);
}
