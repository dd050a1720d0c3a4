//! A physical run of a program in the replay's own columns, so a measured
//! report has the model report's layout and passes its reconciliation.
//!
//! Per occurrence the run measures, on the iteration's clock (µs from its
//! origin): the first member's entry, the last member's entry, the last
//! member's exit, and the members' mean wait for the last. The columns then
//! follow the scheduler's definitions: skew = last − first; the collective
//! starts at max(last entry, the previous completion on its communicator);
//! queue wait = start − last entry; collective = completion − start;
//! total = completion − first entry. Nothing is hidden (the run executes the
//! compute fill before each collective, not beside it), so exposed = total.
//! A completion measured before the previous completion on the same
//! communicator (clock noise across processes) is taken as that previous
//! completion.

use super::{Replay, pending_occurrences, resource, resource_ids};
use crate::canary::Program;
use crate::error::{Error, Result};
use crate::sim::Ablations;

/// The measured times of every sample, iteration-major.
#[derive(Debug, Clone, Copy)]
pub struct MeasuredTimes<'a> {
    /// First member's entry, µs from the iteration origin.
    pub first_arrival_us: &'a [f64],
    /// Last member's entry.
    pub last_arrival_us: &'a [f64],
    /// Last member's exit.
    pub completion_us: &'a [f64],
    /// Members' mean wait for the last entry.
    pub avg_rank_wait_us: &'a [f64],
}

/// The replay columns of `iterations` measured runs of `program`.
///
/// # Errors
/// Columns of the wrong length, or times that are negative, not finite or
/// out of order (an entry after the exit).
pub fn measured_replay(program: &Program, iterations: u32, t: MeasuredTimes<'_>) -> Result<Replay> {
    let (_, occurrences) = crate::canary::expand::expanded_counts(program);
    let pending = pending_occurrences(program, Ablations::default(), occurrences as usize);
    let n = pending.len();
    let total = n * iterations as usize;
    for (name, col) in [
        ("first_arrival_us", t.first_arrival_us),
        ("last_arrival_us", t.last_arrival_us),
        ("completion_us", t.completion_us),
        ("avg_rank_wait_us", t.avg_rank_wait_us),
    ] {
        if col.len() != total {
            return Err(Error::invalid(format!(
                "measured {name} has {} values, the program runs {total} occurrences",
                col.len()
            )));
        }
        if let Some(i) = col.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err(Error::invalid(format!(
                "measured {name}[{i}] is not a time"
            )));
        }
    }
    let resources: Vec<String> = program.signatures.iter().map(resource).collect();
    let resource_id = resource_ids(&resources);
    let mut out = Replay {
        per_iteration: n,
        iterations,
        signatures: program.signatures.clone(),
        resources,
        ..Replay::default()
    };
    for iteration in 0..iterations as usize {
        let mut available = vec![f64::NEG_INFINITY; resource_id.len()];
        for (k, p) in pending.iter().enumerate() {
            let i = iteration * n + k;
            let (first, last) = (t.first_arrival_us[i], t.last_arrival_us[i]);
            if last < first || t.completion_us[i] < last {
                return Err(Error::invalid(format!(
                    "measured sample {i}: entries and exit out of order"
                )));
            }
            let slot = &mut available[resource_id[p.signature as usize]];
            let start = last.max(*slot);
            let completion = t.completion_us[i].max(start);
            *slot = completion;
            let point = &program.points[p.point as usize];
            out.signature.push(p.signature);
            out.gap_us.push(p.gap);
            out.compute_before_us.push(point.compute_before_us);
            out.arrival_skew_us.push(last - first);
            out.avg_rank_wait_us
                .push(t.avg_rank_wait_us[i].min(last - first));
            out.compute_overlap_us.push(point.compute_overlap_us);
            out.collective_us.push(completion - start);
            out.first_arrival_us.push(first);
            out.last_arrival_us.push(last);
            out.collective_start_us.push(start);
            out.queue_wait_us.push(start - last);
            out.completion_us.push(completion);
            out.total_us.push(completion - first);
            out.hidden_us.push(0.0);
            out.exposed_us.push(completion - first);
            out.observed_exposed_us.push(point.observed_exposed_us);
            out.uncertain.push(p.uncertain);
        }
    }
    Ok(out)
}
