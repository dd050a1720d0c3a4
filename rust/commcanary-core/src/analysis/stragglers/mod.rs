//! Who is slow, and what it costs: per collective instance, each member's
//! arrival lag and its time inside; per step, the last rank to arrive; a
//! detector that adapts to the job's own noise; and a what-if cost of every
//! finding from a replay of its step.
//!
//! Definitions (job clock, µs):
//!
//! * An occurrence is a complete instance with two or more members. A
//!   member's *excess* is its arrival minus the latest arrival of the other
//!   members: how long everybody else waited for it (≤ 0 when it did not
//!   arrive last). Its *time inside* is its end minus the last arrival.
//! * A step is `ProfilerStep#N` (the N the members' calls carry); in traces
//!   without markers, the step [`steps`] recovers from the collective
//!   sequence (its index).
//! * Late arrival: a rank's largest excess in a step is an outlier among all
//!   (rank, step) values of the job: above `median + Z·σ`, where σ is the
//!   scaled median absolute deviation ([`LATE_Z`]), with a floor of
//!   [`NOISE_FLOOR`] of the median step so a perfectly regular job does not
//!   flag microseconds.
//! * Slow collective: a member's time inside is an outlier among the
//!   members of the same (group, op, bytes) class, longer than the class
//!   median and than the other members of its instance by more than the
//!   lateness threshold (when everybody was slow, nobody is blamed), and
//!   its what-if cost too (a finding must cost more than the job's noise).
//!   A (rank, step) with both kinds keeps the costlier.
//! * Cost: [`whatif`] replays the step with the finding undone (the lag set
//!   to the median lag of the instance's other members, or the time inside to the
//!   class median) and reports the step time saved.
//!
//! * Communication performance: [`bandwidth`], nccl-tests' algorithm and
//!   bus bandwidth per (group, op, size bucket), and the instances far
//!   below their class's own median.
//!
//! Invariants: the same job gives the same findings in the same order
//! (steps ascending, then ranks); only complete instances are used; p2p
//! transfers take part in the replay (they block) but are not judged.

pub mod bandwidth;
mod detect;
pub mod report;
#[cfg(test)]
mod tests;
pub mod whatif;

pub use detect::{
    Finding, FindingKind, LATE_Z, MATERIAL_Z, Members, NOISE_FLOOR, RankSummary, SLOW_Z,
    StepSummary, Stragglers, analyze,
};

use super::evidence::Evidence;
use super::steps;
use crate::error::{Error, Result};
use crate::import::kineto::AlignedJob;

/// A straggler diagnosis, ready to print and write.
#[derive(Debug, Clone, PartialEq)]
pub struct StragglerReport {
    /// Whether any finding was made.
    pub found: bool,
    /// The lines a person reads first.
    pub lines: Vec<String>,
    /// The `commcanary.stragglers.v1` document, canonical JSON.
    pub document: Vec<u8>,
    /// The per-instance view (not in the document: it grows with the job).
    pub members: Members,
}

/// Gives the job's calls their steps: the `ProfilerStep#N` markers, else
/// steps recovered from the collective sequence.
///
/// # Errors
/// What the step recovery refuses.
pub fn with_steps(job: &mut AlignedJob) -> Result<StepSource> {
    if steps::has_markers(job) {
        return Ok(StepSource::ProfilerStep);
    }
    if job.profiles.len() >= 2 && job.instances.iter().any(|i| i.complete) {
        let recovery = steps::recover(job)?;
        steps::assign(job, &recovery);
    }
    Ok(StepSource::Recovered)
}

/// Diagnoses stragglers from gathered evidence, which must hold profiler
/// traces (other kinds are not used; the document lists the traces).
///
/// # Errors
/// No profiler traces, fewer than two ranks, no complete collective, no
/// `ProfilerStep` markers and no step the collective sequence shows.
pub fn diagnose(evidence: Evidence) -> Result<StragglerReport> {
    let damage = evidence.damage_line();
    let Some(mut job) = evidence.traces else {
        return Err(Error::invalid(
            "no profiler traces in the evidence: stragglers are read from each rank's Kineto trace",
        ));
    };
    let source = with_steps(&mut job)?;
    let mut found = analyze(&job)?;
    let mut lines = report::lines(&job, &found, source);
    lines.extend(damage);
    Ok(StragglerReport {
        found: !found.findings.is_empty(),
        lines,
        document: report::document(&job, &found, source).to_canonical(),
        members: std::mem::take(&mut found.members),
    })
}

/// Where the steps came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSource {
    /// `ProfilerStep#N` markers: steps are the N.
    ProfilerStep,
    /// Recovered from the collective sequence ([`steps`]): steps are indices.
    Recovered,
}

impl StepSource {
    /// `ProfilerStep` or `recovered`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProfilerStep => "ProfilerStep",
            Self::Recovered => "recovered",
        }
    }
}
