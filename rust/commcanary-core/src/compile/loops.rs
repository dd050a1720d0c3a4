//! Step loops: a training job's program as one iteration's slots run by a
//! schedule, instead of one leaf per group of every iteration.
//!
//! Iterations come from the trace's `step` column only. A group belongs to
//! the iteration of its first event; a new iteration starts at a group whose
//! step is larger than every step seen before it (ranks of a merged job may
//! report a step a little out of order; a smaller step stays where it is).
//! Groups before the first stepped one form an iteration of their own.
//!
//! A *slot* is the k-th group of one signature within an iteration; its
//! samples over all iterations, in execution order, are one record stream,
//! compressed by the same ladder as a flat group. A *variant* is an
//! iteration's sequence of `(slot, events)`; the *schedule* run-length
//! encodes which variant each iteration runs. The loop's logical events are
//! exactly the flat program's groups, so both execute the same occurrences
//! and share their commitments.
//!
//! The loop is used when the trace has at least [`MIN_ITERATIONS`]
//! iterations and it stores at most half as many slots as the flat program
//! has groups; otherwise the trace compiles flat, byte for byte as before.

use rustc_hash::FxHashMap;

use super::program::Groups;
use crate::canary::StepLoop;

/// Fewest iterations a loop is built for.
pub const MIN_ITERATIONS: usize = 3;

/// A loop chosen for a trace, in terms of the flat groups.
pub(super) struct LoopPlan {
    /// Sample indices in stream order: slot 0's samples over all
    /// iterations, then slot 1's, and so on.
    pub order: Vec<usize>,
    /// `(trace signature, first position in `order`, samples)` per slot.
    pub slot_spans: Vec<(u32, usize, usize)>,
    /// The loop, its leaves starting at 0.
    pub step_loop: StepLoop,
}

/// Iteration starts (group indices) from each group's step (`NaN` when its
/// first event carries none).
fn iteration_starts(group_steps: &[f64]) -> Vec<usize> {
    let mut starts = vec![0];
    let mut latest: Option<f64> = None;
    for (g, &step) in group_steps.iter().enumerate() {
        if step.is_nan() || latest.is_some_and(|l| step <= l) {
            continue;
        }
        if g > 0 {
            starts.push(g);
        }
        latest = Some(step);
    }
    starts
}

/// Plans a loop over `groups`, whose group `g` starts at sample
/// `groups.spans[g].1`; `step_of_sample(k)` is sample `k`'s step (`NaN`
/// when absent). `None` when the trace has no iterations or a loop would
/// not be smaller.
pub(super) fn plan(groups: &Groups, step_of_sample: impl Fn(usize) -> f64) -> Option<LoopPlan> {
    let spans = &groups.spans;
    if spans.len() < 2 * MIN_ITERATIONS {
        return None;
    }
    let group_steps: Vec<f64> = spans.iter().map(|&(_, k, _)| step_of_sample(k)).collect();
    if group_steps.iter().all(|s| s.is_nan()) {
        return None;
    }
    let starts = iteration_starts(&group_steps);
    if starts.len() < MIN_ITERATIONS {
        return None;
    }
    let mut slot_of: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    let mut slot_sig: Vec<u32> = Vec::new();
    let mut slot_groups: Vec<Vec<usize>> = Vec::new();
    let mut variant_of: FxHashMap<Vec<(u32, u64)>, u32> = FxHashMap::default();
    let mut variants: Vec<Vec<(u32, u64)>> = Vec::new();
    let mut schedule: Vec<(u32, u64)> = Vec::new();
    let mut nth: FxHashMap<u32, u32> = FxHashMap::default();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(spans.len());
        nth.clear();
        let mut variant = Vec::with_capacity(end - start);
        for (g, &(sig, _, len)) in spans.iter().enumerate().take(end).skip(start) {
            let k = nth.entry(sig).or_insert(0);
            let key = (sig, *k);
            *k += 1;
            let slot = *slot_of.entry(key).or_insert_with(|| {
                slot_sig.push(sig);
                slot_groups.push(Vec::new());
                slot_sig.len() as u32 - 1
            });
            slot_groups[slot as usize].push(g);
            variant.push((slot, len as u64));
        }
        let v = match variant_of.get(&variant) {
            Some(&v) => v,
            None => {
                let v = variants.len() as u32;
                variant_of.insert(variant.clone(), v);
                variants.push(variant);
                v
            }
        };
        match schedule.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => schedule.push((v, 1)),
        }
    }
    if 2 * slot_sig.len() > spans.len() {
        return None;
    }
    let mut order = Vec::new();
    let mut slot_spans = Vec::with_capacity(slot_sig.len());
    for (slot, members) in slot_groups.iter().enumerate() {
        let first = order.len();
        for &g in members {
            let (_, k, len) = spans[g];
            order.extend(k..k + len);
        }
        slot_spans.push((slot_sig[slot], first, order.len() - first));
    }
    Some(LoopPlan {
        order,
        slot_spans,
        step_loop: StepLoop {
            first_leaf: 0,
            slot_count: slot_sig.len() as u32,
            variants,
            schedule,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(sigs: &[u32]) -> Groups {
        let spans = sigs
            .iter()
            .enumerate()
            .map(|(k, &s)| (s, k, 1))
            .collect::<Vec<_>>();
        Groups {
            limits: vec![128; spans.len()],
            spans,
            overrides: Vec::new(),
        }
    }

    #[test]
    fn iterations_start_where_the_step_grows() {
        let nan = f64::NAN;
        assert_eq!(
            iteration_starts(&[nan, nan, 0.0, 0.0, 1.0, 0.0, 2.0]),
            vec![0, 2, 4, 6]
        );
        assert_eq!(iteration_starts(&[0.0, 1.0, nan, 2.0]), vec![0, 1, 3]);
    }

    #[test]
    fn a_warm_up_iteration_is_a_variant_of_the_same_slots() {
        // Iteration 0 has an extra broadcast (signature 9); then A B x4.
        let sigs = [9, 0, 1, 0, 1, 0, 1, 0, 1];
        let steps = [0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
        let plan = plan(&groups(&sigs), |k| steps[k]).unwrap();
        let l = &plan.step_loop;
        assert_eq!(l.slot_count, 3);
        assert_eq!(
            l.variants,
            vec![vec![(0, 1), (1, 1), (2, 1)], vec![(1, 1), (2, 1)]]
        );
        assert_eq!(l.schedule, vec![(0, 1), (1, 3)]);
        assert_eq!(l.logical_events(), sigs.len() as u64);
        assert_eq!(plan.order, vec![0, 1, 3, 5, 7, 2, 4, 6, 8]);
        assert_eq!(plan.slot_spans, vec![(9, 0, 1), (0, 1, 4), (1, 5, 4)]);
    }

    #[test]
    fn no_loop_without_steps_or_without_saving() {
        let sigs = [0, 1, 0, 1, 0, 1, 0, 1];
        assert!(plan(&groups(&sigs), |_| f64::NAN).is_none());
        // Every iteration different: as many slots as groups.
        let sigs = [0, 1, 2, 3, 4, 5, 6, 7];
        let steps = [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
        assert!(plan(&groups(&sigs), |k| steps[k]).is_none());
    }
}
