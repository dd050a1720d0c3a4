//! Steps recovered from a rank's call sequence alone, for Flight Recorder
//! evidence without `ProfilerStep` markers.
//!
//! A training or serving loop issues the same calls every iteration, so the
//! sequence of `(group, op)` signatures is periodic. The period is the
//! smallest lag whose self-agreement is within 2 points of the best over
//! lags up to [`MAX_PERIOD`] (at least two periods observed, agreement at
//! least [`MIN_AGREEMENT`]); the first period is the template, and the
//! sequence is read against it, an iteration ending each time the template
//! is completed; a call that does not fit the template (a barrier, a
//! checkpoint) is counted in the current iteration. Only a ring that starts
//! at the job's first record gives absolute steps (the first recorded call
//! is in step 0); otherwise steps stay unknown.

use rayon::prelude::*;

use super::model::Model;

/// The longest iteration considered, in calls.
pub const MAX_PERIOD: usize = 256;
/// Calls looked at for the period.
const WINDOW: usize = 2048;
/// The least self-agreement accepted as periodic.
pub const MIN_AGREEMENT: f64 = 0.8;

/// The period of `sig`, if it has one.
#[must_use]
pub fn period(sig: &[u64]) -> Option<usize> {
    let n = sig.len().min(WINDOW);
    let sig = &sig[..n];
    let scores: Vec<f64> = (1..=MAX_PERIOD.min(n / 2))
        .map(|p| {
            let same = (0..n - p).filter(|&i| sig[i] == sig[i + p]).count();
            same as f64 / (n - p) as f64
        })
        .collect();
    let best = scores.iter().copied().fold(0.0, f64::max);
    if best < MIN_AGREEMENT {
        return None;
    }
    scores.iter().position(|&s| s >= best - 0.02).map(|i| i + 1)
}

/// The step of every call of `sig` read against the template of period `p`.
#[must_use]
pub fn steps_of(sig: &[u64], p: usize) -> Vec<i64> {
    let template = &sig[..p];
    let (mut j, mut step) = (0_usize, 0_i64);
    sig.iter()
        .map(|&s| {
            let here = step;
            if s == template[j] {
                j += 1;
                if j == p {
                    j = 0;
                    step += 1;
                }
            }
            here
        })
        .collect()
}

/// Fills the steps of every Flight Recorder rank whose ops have none and
/// whose ring starts at the job's first record; returns the periods found.
pub fn recover(model: &mut Model) -> Vec<(i64, usize)> {
    let ranks: Vec<(i64, Vec<u64>)> = model
        .ranks
        .par_iter()
        .filter(|(_, ev)| ev.from_start && !ev.ops.is_empty() && ev.ops.iter().all(|o| o.step < 0))
        .map(|(&r, ev)| (r, signature(&ev.ops, true)))
        .collect();
    let sized = ranks.iter().any(|(_, sig)| period(sig).is_some());
    // Sizes that change from step to step (a growing sequence, prefill and
    // decode) hide the loop: then the calls are told apart by op alone.
    let ranks: Vec<(i64, Vec<u64>)> = if sized {
        ranks
    } else {
        ranks
            .into_iter()
            .map(|(r, _)| (r, signature(&model.ranks[&r].ops, false)))
            .collect()
    };
    let mut distinct: Vec<&Vec<u64>> = ranks.iter().map(|(_, s)| s).collect();
    distinct.sort();
    distinct.dedup();
    let periods_of: rustc_hash::FxHashMap<&Vec<u64>, Option<usize>> =
        distinct.into_par_iter().map(|s| (s, period(s))).collect();
    type Found = (i64, Option<(usize, Vec<i64>)>);
    let found: Vec<Found> = ranks
        .par_iter()
        .map(|(r, sig)| (*r, periods_of[sig].map(|p| (p, steps_of(sig, p)))))
        .collect();
    let mut periods = Vec::new();
    for (r, f) in found {
        let Some((p, steps)) = f else { continue };
        periods.push((r, p));
        if let Some(ev) = model.ranks.get_mut(&r) {
            for (o, s) in ev.ops.iter_mut().zip(steps) {
                o.step = s;
            }
        }
    }
    periods
}

/// `(group, op, input sizes)` per call, groups numbered by first use on the
/// rank, so ranks with the same loop on different groups share one
/// signature; the sizes tell apart the several all_reduces of one step
/// (gradient buckets, a loss, a norm).
fn signature(ops: &[super::model::Op], with_sizes: bool) -> Vec<u64> {
    let mut first_use: Vec<usize> = Vec::new();
    ops.iter()
        .map(|o| {
            let g = match first_use.iter().position(|&g| g == o.group) {
                Some(i) => i,
                None => {
                    first_use.push(o.group);
                    first_use.len() - 1
                }
            };
            let sizes = if with_sizes { u64::from(o.in_sizes) } else { 0 };
            (g as u64) << 40 | u64::from(op_code(o.op)) << 32 | sizes
        })
        .collect()
}

/// `(group, op)` per call, groups numbered by first use (see [`recover`]).
#[must_use]
pub fn op_signature(ops: &[super::model::Op]) -> Vec<u64> {
    signature(ops, false)
}

/// `(group, op, input sizes)` per call (see [`recover`]).
#[must_use]
pub fn sized_signature(ops: &[super::model::Op]) -> Vec<u64> {
    signature(ops, true)
}

/// How many of a rank's last `p` calls depart from its own periodic
/// template (a skipped or reordered call shows here), when it has a period.
#[must_use]
pub fn deviation(ops: &[super::model::Op]) -> Option<usize> {
    departures(&signature(ops, false))
}

/// [`deviation`] over each call's op, sizes, dtypes and root: a call that
/// keeps its op but changes its size, dtype or root departs too.
#[must_use]
pub fn detailed_deviation(ops: &[super::model::Op]) -> Option<usize> {
    let sig: Vec<u64> = signature(ops, true)
        .into_iter()
        .zip(ops)
        .map(|(s, o)| {
            let extra = (u64::from(o.in_dtypes) << 20) ^ (o.root.max(-1) as u64 & 0xfffff);
            s ^ extra.rotate_left(17)
        })
        .collect();
    departures(&sig)
}

/// How many of the last `p` calls of `sig` depart from its loop: its first
/// period that the next period repeats exactly (a first iteration with
/// extra calls, as DDP's bucket rebuild, is warm-up, not the loop), read
/// from there on.
fn departures(sig: &[u64]) -> Option<usize> {
    let p = period(sig)?;
    let start = (0..=sig.len().saturating_sub(2 * p))
        .find(|&k| sig[k..k + p] == sig[k + p..k + 2 * p])
        .unwrap_or(0);
    let template = &sig[start..start + p];
    let (mut j, mut departures) = (0_usize, Vec::with_capacity(sig.len()));
    for &s in &sig[start..] {
        if s == template[j] {
            j = (j + 1) % p;
            departures.push(false);
        } else {
            departures.push(true);
        }
    }
    Some(
        departures[departures.len().saturating_sub(p)..]
            .iter()
            .filter(|&&d| d)
            .count(),
    )
}

fn op_code(op: &str) -> u32 {
    op.bytes()
        .fold(0_u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
        & 0xff
}

#[cfg(test)]
mod tests {
    use super::{period, steps_of};

    #[test]
    fn a_periodic_sequence_with_an_insertion_keeps_its_steps() {
        let step = [1_u64, 1, 2, 3, 1, 4];
        let mut sig: Vec<u64> = step.iter().cycle().take(6 * 10).copied().collect();
        sig.insert(6 * 7 + 2, 9);
        assert_eq!(period(&sig), Some(6));
        let steps = steps_of(&sig, 6);
        assert_eq!(steps[0], 0);
        assert_eq!(steps[6 * 7 + 2], 7);
        assert_eq!(*steps.last().unwrap(), 9);
    }

    #[test]
    fn a_sequence_that_never_repeats_has_no_period() {
        let sig: Vec<u64> = (0..200_u64).map(|i| i * i).collect();
        assert_eq!(period(&sig), None);
        let mostly: Vec<u64> = (0..200_u64)
            .map(|i| if i % 7 == 0 { 1 } else { i })
            .collect();
        assert_eq!(
            period(&mostly),
            None,
            "one repeating call in seven is no loop"
        );
    }
}
