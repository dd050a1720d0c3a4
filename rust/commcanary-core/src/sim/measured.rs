//! A physical run of a program in the replay's own columns, so a measured
//! report has the model report's layout and passes its reconciliation.
//!
//! Per occurrence the run measures, on the iteration's clock (µs from its
//! origin): the members' readiness (the first and the last; a member is
//! ready at its due time on the program's timeline plus its arrival offset,
//! or at its entry if it entered earlier), the last member's entry, the last
//! member's exit, and the members' mean wait for the last to be ready. The
//! columns then follow the scheduler's definitions, which are open-loop like
//! the model's: skew = last ready − first ready; the collective starts at
//! max(last entry, the previous completion on its communicator); queue wait =
//! start − last ready (a member still busy with earlier work enters late, and
//! that wait is queueing, as in the model); collective = completion − start;
//! total = completion − first ready. Nothing is hidden (the run executes the
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
    /// First member's readiness, µs from the iteration origin.
    pub first_arrival_us: &'a [f64],
    /// Last member's readiness.
    pub last_arrival_us: &'a [f64],
    /// Last member's entry (at or after its readiness).
    pub last_entry_us: &'a [f64],
    /// Last member's exit.
    pub completion_us: &'a [f64],
    /// Members' mean wait for the last readiness.
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
        ("last_entry_us", t.last_entry_us),
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
            let entry = t.last_entry_us[i];
            if last < first || entry < last || t.completion_us[i] < entry {
                return Err(Error::invalid(format!(
                    "measured sample {i}: entries and exit out of order"
                )));
            }
            let slot = &mut available[resource_id[p.signature as usize]];
            let start = entry.max(*slot);
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
