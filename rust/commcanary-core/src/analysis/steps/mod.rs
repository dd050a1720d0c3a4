//! Step recovery: a job's iteration boundaries from its collective sequence
//! alone, for traces without `ProfilerStep` markers, and how well the
//! recovered boundaries agree with the markers when there are some.
//!
//! Each rank's calls are keyed by (group, op), and by (root or peer, op,
//! elements) as the rank recorded them (gloo's traces leave the group to
//! matching), and cut into steps by [`cut::cut_rank`]; the keying whose
//! period explains more of the calls wins, then the one that shows more
//! once-per-step collectives (sizes tell a DDP step's buckets apart, but
//! change between phases such as prefill and decode). A call in no matched
//! instance takes the group of the rank's other calls like it. The ranks' step numbers are then aligned on the
//! collective instances their boundaries share (a rank whose trace starts a
//! step later gets the later numbers), falling back on time when they share
//! none, and shifted so the first step is 0.
//!
//! Invariants: a call's recovered step is the index of the last boundary at
//! or before it (−1 before the first); boundaries compare with markers call
//! for call (a marker's boundary is the first call inside `ProfilerStep#N`).

pub mod cut;
pub mod report;
#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap;

use super::evidence::Evidence;
use crate::error::{Error, Result};
use crate::import::kineto::AlignedJob;

pub use cut::{RankCut, cut_rank, explained};

/// One rank's recovered steps.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSteps {
    /// Global rank.
    pub rank: i64,
    /// Call indices where each step begins, ascending (empty when the
    /// rank's sequence does not repeat).
    pub cuts: Vec<usize>,
    /// The job step number of `cuts[0]`.
    pub first: i64,
    /// The once-per-step (group, op) keys, in order of first call.
    pub anchors: Vec<(usize, &'static str)>,
    /// The (group, op) of the call its first step begins with.
    pub begins_with: Option<(usize, &'static str)>,
}

impl RankSteps {
    /// The recovered step of call `i`, −1 before the first boundary.
    #[must_use]
    pub fn step_of(&self, i: usize) -> i64 {
        match self.cuts.partition_point(|&c| c <= i) {
            0 => -1,
            k => self.first + k as i64 - 1,
        }
    }
}

/// How recovered boundaries agree with `ProfilerStep` markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// (rank, step) marker boundaries: each rank's first call in each step.
    pub markers: usize,
    /// Those that are also recovered boundaries.
    pub matched: usize,
}

/// A job's recovered steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// Per profile slot.
    pub ranks: Vec<RankSteps>,
    /// Agreement with the markers, when the traces have some.
    pub agreement: Option<Agreement>,
}

impl Recovery {
    /// The number of steps (the largest step number plus one).
    #[must_use]
    pub fn count(&self) -> usize {
        (self.ranks.iter())
            .filter(|r| !r.cuts.is_empty())
            .map(|r| r.first as usize + r.cuts.len())
            .max()
            .unwrap_or(0)
    }
}

/// Per slot, per call: its instance, `usize::MAX` when none.
fn instances_of_calls(job: &AlignedJob) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = (job.profiles.iter())
        .map(|p| vec![usize::MAX; p.calls.len()])
        .collect();
    for (i, inst) in job.instances.iter().enumerate() {
        for m in &inst.members {
            out[m.slot][m.call] = i;
        }
    }
    out
}

/// Per slot, per call: its job group, `usize::MAX` when it is in no instance.
#[must_use]
pub fn groups_of_calls(job: &AlignedJob) -> Vec<Vec<usize>> {
    let mut out = instances_of_calls(job);
    for slot in &mut out {
        for i in slot.iter_mut().filter(|i| **i != usize::MAX) {
            *i = job.instances[*i].group;
        }
    }
    out
}

/// A call in no instance (at a window's edge, or the call a hang left
/// unmatched) takes the group the rank's other calls of the same op and
/// element count are in, so it keys like them.
fn fill_unmatched_groups(job: &AlignedJob, groups: &mut [Vec<usize>]) {
    for (p, slot) in job.profiles.iter().zip(groups.iter_mut()) {
        let mut seen: FxHashMap<(&'static str, i64), FxHashMap<usize, usize>> =
            FxHashMap::default();
        for (c, &g) in p.calls.iter().zip(slot.iter()) {
            if g != usize::MAX {
                *seen
                    .entry((c.kind.trace_op().0, c.in_elems))
                    .or_default()
                    .entry(g)
                    .or_default() += 1;
            }
        }
        for (c, g) in p.calls.iter().zip(slot.iter_mut()) {
            if *g != usize::MAX {
                continue;
            }
            if let Some(counts) = seen.get(&(c.kind.trace_op().0, c.in_elems)) {
                *g = counts
                    .iter()
                    .max_by_key(|&(&group, &n)| (n, std::cmp::Reverse(group)))
                    .map_or(usize::MAX, |(&group, _)| group);
            }
        }
    }
}

/// Recovers the steps of every rank of `job` from its calls alone (markers
/// are only compared with, never used).
///
/// # Errors
/// No rank has a repeating collective sequence.
pub fn recover(job: &AlignedJob) -> Result<Recovery> {
    let mut groups = groups_of_calls(job);
    fill_unmatched_groups(job, &mut groups);
    // A key's identity: (group, op, −1) coarse, (peer, op, elements) sized.
    let mut names: FxHashMap<(i64, &'static str, i64), u32> = FxHashMap::default();
    let mut key_of: Vec<(usize, &'static str)> = Vec::new();
    let mut ranks: Vec<RankSteps> = Vec::with_capacity(job.profiles.len());
    for (slot, p) in job.profiles.iter().enumerate() {
        let mut keyed = |sized: bool| -> Vec<u32> {
            (p.calls.iter().zip(&groups[slot]))
                .map(|(c, &g)| {
                    let op = c.kind.trace_op().0;
                    // Sized keys leave out the group, which gloo's traces
                    // leave to matching (an instance matched into another
                    // group would key apart), and count elements, not
                    // bytes (a call's recorded dtype can vary: DDP's
                    // coalesced buffer broadcasts); its shape does not.
                    let id = if sized {
                        (c.peer, op, c.in_elems)
                    } else {
                        (g as i64, op, -1)
                    };
                    *names.entry(id).or_insert_with(|| {
                        key_of.push((g, op));
                        key_of.len() as u32 - 1
                    })
                })
                .collect()
        };
        let (coarse, sized) = (keyed(false), keyed(true));
        let arrival: Vec<f64> = p.calls.iter().map(|c| c.arrival).collect();
        let end: Vec<f64> = p.calls.iter().map(|c| c.end).collect();
        // Sizes help when they repeat per step (a DDP step's buckets) and
        // hurt when they change (prefill, decode). Of the two keyings, those
        // whose period explains nearly as many calls as the better one (a
        // broadcast called three times a step is no step of its own) are
        // kept, and the one with more once-per-step collectives wins (three
        // broadcasts and three reduces a step make one coarse key each, no
        // anchor block), then the larger period, ties going to (group, op).
        let (cc, ss) = (
            cut_rank(&coarse, &arrival, &end),
            cut_rank(&sized, &arrival, &end),
        );
        let found = match (cc, ss) {
            (Some(c), Some(s)) => {
                let (ec, es) = (explained(&coarse, c.period), explained(&sized, s.period));
                let near = |e: usize| e as f64 >= cut::PERIOD_SLACK * ec.max(es) as f64;
                let rank_of = |e: usize, cut: &RankCut| (near(e), cut.anchors.len(), cut.period);
                if rank_of(es, &s) > rank_of(ec, &c) {
                    Some(s)
                } else {
                    Some(c)
                }
            }
            (c, s) => c.or(s),
        };
        let mut cuts = found.as_ref().map(|f| f.cuts.clone()).unwrap_or_default();
        cut::open_with_sized_one_offs(&mut cuts, &sized);
        ranks.push(RankSteps {
            rank: p.rank,
            begins_with: (cuts.first()).map(|&c| (groups[slot][c], p.calls[c].kind.trace_op().0)),
            cuts,
            first: 0,
            anchors: (found.iter())
                .flat_map(|f| f.anchors.iter().map(|&k| key_of[k as usize]))
                .collect(),
        });
    }
    if ranks.iter().all(|r| r.cuts.len() < 2) {
        return Err(Error::invalid(
            "no repeating pattern in the collective sequence: the steps cannot be recovered",
        ));
    }
    number(job, &mut ranks);
    let agreement = agreement(job, &ranks);
    Ok(Recovery { ranks, agreement })
}

/// Aligns the ranks' step numbers on the reference rank (the one with the
/// most boundaries): by shared boundary instances, else by time.
fn number(job: &AlignedJob, ranks: &mut [RankSteps]) {
    let inst = instances_of_calls(job);
    let reference = (0..ranks.len())
        .max_by_key(|&s| (ranks[s].cuts.len(), std::cmp::Reverse(s)))
        .unwrap_or(0);
    let at = |slot: usize, call: usize| job.profiles[slot].calls[call].arrival + job.shifts[slot];
    let by_instance: FxHashMap<usize, i64> = (ranks[reference].cuts.iter().enumerate())
        .filter(|(_, c)| inst[reference][**c] != usize::MAX)
        .map(|(k, c)| (inst[reference][*c], k as i64))
        .collect();
    let reference_times: Vec<f64> = (ranks[reference].cuts.iter())
        .map(|&c| at(reference, c))
        .collect();
    for slot in 0..ranks.len() {
        let Some(&c0) = ranks[slot].cuts.first() else {
            continue;
        };
        let mut votes: FxHashMap<i64, usize> = FxHashMap::default();
        for (k, &c) in ranks[slot].cuts.iter().enumerate() {
            if let Some(&rk) = by_instance.get(&inst[slot][c]) {
                *votes.entry(rk - k as i64).or_default() += 1;
            }
        }
        ranks[slot].first = match votes.into_iter().max_by_key(|&(d, n)| (n, -d)) {
            Some((d, _)) => d,
            None => {
                let t = at(slot, c0);
                (0..reference_times.len())
                    .min_by(|&a, &b| {
                        (reference_times[a] - t)
                            .abs()
                            .total_cmp(&(reference_times[b] - t).abs())
                    })
                    .unwrap_or(0) as i64
            }
        };
    }
    let lowest = (ranks.iter())
        .filter(|r| !r.cuts.is_empty())
        .map(|r| r.first)
        .min()
        .unwrap_or(0);
    for r in ranks.iter_mut() {
        r.first -= lowest;
    }
}

/// Each rank's first call in each `ProfilerStep#N`, compared with its
/// recovered boundaries; `None` without markers.
fn agreement(job: &AlignedJob, ranks: &[RankSteps]) -> Option<Agreement> {
    let mut out = Agreement {
        markers: 0,
        matched: 0,
    };
    for (p, r) in job.profiles.iter().zip(ranks) {
        let mut previous = -1;
        for (i, c) in p.calls.iter().enumerate() {
            if c.step >= 0 && c.step != previous {
                out.markers += 1;
                out.matched += usize::from(r.cuts.binary_search(&i).is_ok());
            }
            previous = c.step;
        }
    }
    (out.markers > 0).then_some(out)
}

/// Gives every call of `job` its recovered step (replacing the markers'
/// steps, if any).
pub fn assign(job: &mut AlignedJob, recovery: &Recovery) {
    for (p, r) in job.profiles.iter_mut().zip(&recovery.ranks) {
        for (i, c) in p.calls.iter_mut().enumerate() {
            c.step = r.step_of(i);
        }
        p.steps.clear();
    }
}

/// Imports a job (`import::kineto::import_job`), giving every call the
/// step recovered from its rank's collective sequence when the traces have
/// no `ProfilerStep` markers, so the trace's `step` column holds the
/// program's iterations either way (`workload.kineto_steps: "recovered"`).
/// A sequence that does not repeat leaves the calls without steps.
///
/// # Errors
/// As `import_job`.
pub fn import_job_with_steps(
    profiles: Vec<crate::import::kineto::RankProfile>,
    labels: &[String],
    options: &crate::import::kineto::JobOptions,
) -> Result<crate::import::kineto::JobImport> {
    let files = profiles.len() as u64;
    let mut job = crate::import::kineto::align_job(profiles, labels, &options.clock_offsets_us)?;
    let mut recovered = None;
    if !has_markers(&job)
        && !job.profiles.iter().all(|p| p.calls.is_empty())
        && let Ok(recovery) = recover(&job)
        && recovery.count() >= 2
    {
        assign(&mut job, &recovery);
        recovered = Some(recovery.count());
    }
    crate::import::kineto::import_aligned(&job, files, options, recovered)
}

/// Each event of a merged trace (a capture) the step recovered from its
/// ranks' collective sequences: the step of its first member's call, −1
/// where none applies (before the first boundary, or an event the analyses
/// cannot place). `None` when the sequence does not repeat.
///
/// # Errors
/// A trace without the members' arrivals the recovery needs.
pub fn trace_event_steps(trace: &crate::trace::Trace, label: &str) -> Result<Option<Vec<i64>>> {
    let (job, _, events) = crate::import::kineto::from_trace::job_and_events(trace, label)?;
    let Ok(recovery) = recover(&job) else {
        return Ok(None);
    };
    if recovery.count() < 2 {
        return Ok(None);
    }
    let mut steps = vec![-1i64; trace.events.len()];
    for (instance, &event) in job.instances.iter().zip(&events) {
        if let Some(m) = instance.members.first() {
            steps[event] = recovery.ranks[m.slot].step_of(m.call);
        }
    }
    Ok(Some(steps))
}

/// Whether any call of `job` lies in a `ProfilerStep`.
#[must_use]
pub fn has_markers(job: &AlignedJob) -> bool {
    (job.profiles.iter()).any(|p| p.calls.iter().any(|c| c.step >= 0))
}

/// A step recovery, ready to print and write.
#[derive(Debug, Clone, PartialEq)]
pub struct StepsReport {
    /// Steps recovered.
    pub count: usize,
    /// The lines a person reads first.
    pub lines: Vec<String>,
    /// The `commcanary.steps.v1` document, canonical JSON.
    pub document: Vec<u8>,
}

/// Recovers steps from gathered evidence, which must hold profiler traces.
///
/// # Errors
/// No profiler traces, no collectives, no repeating pattern.
pub fn diagnose(evidence: Evidence) -> Result<StepsReport> {
    let damage = evidence.damage_line();
    let Some(job) = evidence.traces else {
        return Err(Error::invalid(
            "no profiler traces in the evidence: steps are recovered from each rank's Kineto trace",
        ));
    };
    if job.profiles.iter().all(|p| p.calls.is_empty()) {
        return Err(Error::invalid("no collective calls in the traces"));
    }
    let recovery = recover(&job)?;
    let mut lines = report::lines(&job, &recovery);
    lines.extend(damage);
    Ok(StepsReport {
        count: recovery.count(),
        lines,
        document: report::document(&job, &recovery).to_canonical(),
    })
}
