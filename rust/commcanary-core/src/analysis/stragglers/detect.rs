//! The detector and the tables: occurrences from the aligned job, robust
//! baselines, findings with their what-if cost, per-step and per-rank rows.

use std::collections::BTreeMap;

use super::bandwidth::{Row, Sample, table};
use super::whatif::{Change, StepInstance, Visit, saved};
use crate::error::{Error, Result};
use crate::import::kineto::AlignedJob;
use rustc_hash::FxHashMap;

/// A rank's excess is late when above `median + LATE_Z · σ` of all (rank,
/// step) excesses; σ is 1.4826 × the median absolute deviation.
pub const LATE_Z: f64 = 6.0;
/// A member's time inside is slow when above `median + SLOW_Z · σ` of its
/// (group, op, bytes) class.
pub const SLOW_Z: f64 = 6.0;
/// σ is at least this fraction of the median step duration.
pub const NOISE_FLOOR: f64 = 0.01;
/// A finding is material when its lag and its what-if cost both exceed
/// `MATERIAL_Z` × the job's step-time noise (σ of the step durations): a
/// delay the job's own step-to-step variation would hide is no straggler.
pub const MATERIAL_Z: f64 = 1.0;
/// Rounds of taking the steps that clear the threshold out of the
/// step-time noise.
const NOISE_TRIM_ROUNDS: usize = 4;
/// A slow collective's what-if cost must exceed `SLOW_MATERIAL_Z` × the
/// step-time noise.
pub const SLOW_MATERIAL_Z: f64 = 2.0;

/// What a finding says slowed the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingKind {
    /// The rank reached the collective late (compute, host, data loading).
    LateArrival,
    /// The rank was on time but slow inside the collective (link, NIC).
    SlowCollective,
}

impl FindingKind {
    /// `late_arrival` or `slow_collective`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LateArrival => "late_arrival",
            Self::SlowCollective => "slow_collective",
        }
    }
}

/// One straggler finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Global rank.
    pub rank: i64,
    /// `N` of `ProfilerStep#N`.
    pub step: i64,
    /// Late arrival or slow collective.
    pub kind: FindingKind,
    /// How late it arrived (excess over the latest other member), or how
    /// much longer it spent inside than its class's median, µs.
    pub lag_us: f64,
    /// Step time the what-if replay saves without it, µs.
    pub estimated_cost_us: f64,
    /// The instance (index into [`AlignedJob::instances`]).
    pub instance: usize,
    /// Its group (index into [`AlignedJob::groups`]).
    pub group: usize,
    /// Its canonical op (`all_reduce`, …).
    pub op: &'static str,
    /// The rank's gap before the call (compute or idle since its previous
    /// call ended), µs; `NaN` for its first call.
    pub gap_before_us: f64,
    /// The rank's median gap before the same call (same group, op and
    /// bytes, same place among them in the step) on its other steps, µs;
    /// `NaN` when it has none. `gap_before_us` minus this is the rank's
    /// own delay, which the step pays only in part when others were late
    /// too.
    pub usual_gap_before_us: f64,
    /// The member's arrival (job clock, µs).
    pub at_us: f64,
    /// Its arrival lag behind the instance's first arrival, µs.
    pub behind_first_us: f64,
}

/// Every member of every occurrence (complete instance with two or more
/// members, collectives and p2p), as columns: the per-instance view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Members {
    /// Instance index in the aligned job.
    pub instance: Vec<i64>,
    /// Step (−1 when none).
    pub step: Vec<i64>,
    /// Global rank.
    pub rank: Vec<i64>,
    /// Job group index.
    pub group: Vec<i64>,
    /// Canonical op.
    pub op: Vec<&'static str>,
    /// Message bytes.
    pub bytes: Vec<i64>,
    /// Arrival, job clock, µs.
    pub arrival_us: Vec<f64>,
    /// End, job clock, µs.
    pub end_us: Vec<f64>,
    /// Arrival minus the instance's first arrival, µs.
    pub lag_us: Vec<f64>,
    /// Arrival minus the latest other member's arrival, µs.
    pub excess_us: Vec<f64>,
    /// End minus the instance's last arrival, µs (≥ 0).
    pub inside_us: Vec<f64>,
}

fn members(occ: &[Occurrence]) -> Members {
    let mut t = Members::default();
    for o in occ {
        let (first, last) = (o.first(), o.last_arrival());
        for (m, excess) in o.members.iter().zip(o.excesses()) {
            t.instance.push(o.instance as i64);
            t.step.push(o.step);
            t.rank.push(m.rank);
            t.group.push(o.class.0 as i64);
            t.op.push(o.class.1);
            t.bytes.push(o.class.2);
            t.arrival_us.push(m.arrival);
            t.end_us.push(m.end);
            t.lag_us.push(m.arrival - first);
            t.excess_us.push(excess);
            t.inside_us.push((m.end - last).max(0.0));
        }
    }
    t
}

/// One step's row.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSummary {
    /// `N` of `ProfilerStep#N`.
    pub step: i64,
    /// The `ProfilerStep#N` span over all ranks (first start to last end),
    /// or without spans first arrival to last end of its instances, µs.
    pub duration_us: f64,
    /// The rank with the largest excess in the step.
    pub last_rank: i64,
    /// Its excess, µs.
    pub lag_us: f64,
    /// Ranks with a finding in the step, ascending.
    pub straggler_ranks: Vec<i64>,
}

/// One rank's row.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSummary {
    /// Global rank.
    pub rank: i64,
    /// Steps with a finding on this rank.
    pub straggler_steps: usize,
    /// Sum of its findings' costs, µs.
    pub total_estimated_cost_us: f64,
}

/// The analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct Stragglers {
    /// Steps ascending.
    pub steps: Vec<StepSummary>,
    /// Findings by step, then rank.
    pub findings: Vec<Finding>,
    /// Every rank, by total cost (largest first), then rank.
    pub ranks: Vec<RankSummary>,
    /// Median of the (rank, step) excesses, µs.
    pub baseline_us: f64,
    /// Their robust spread σ, µs (after the floor).
    pub noise_us: f64,
    /// The lateness threshold, µs.
    pub threshold_us: f64,
    /// The job's step-time noise: σ (1.4826 · MAD) of its step durations, µs.
    pub step_noise_us: f64,
    /// Communication performance per (group, op, size bucket).
    pub bandwidth: Vec<Row>,
    /// The per-instance view: every member's lag and time inside.
    pub members: Members,
}

/// One member of an occurrence.
#[derive(Debug, Clone, Copy)]
struct Member {
    rank: i64,
    arrival: f64,
    end: f64,
    gap: f64,
}

/// One complete instance with two or more members.
struct Occurrence {
    instance: usize,
    algorithm: u8,
    step: i64,
    p2p: bool,
    class: (usize, &'static str, i64),
    members: Vec<Member>,
}

impl Occurrence {
    fn first(&self) -> f64 {
        self.members
            .iter()
            .map(|m| m.arrival)
            .fold(f64::INFINITY, f64::min)
    }

    fn last_arrival(&self) -> f64 {
        self.members
            .iter()
            .map(|m| m.arrival)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// Each member's end minus the last arrival.
    fn times_inside(&self) -> impl Iterator<Item = f64> + '_ {
        let last = self.last_arrival();
        self.members.iter().map(move |m| (m.end - last).max(0.0))
    }

    /// Each member's arrival minus the latest other arrival (one pass: the
    /// latest other is the latest, except for the latest itself).
    fn excesses(&self) -> Vec<f64> {
        let (mut top, mut second, mut at) = (f64::NEG_INFINITY, f64::NEG_INFINITY, 0);
        for (i, m) in self.members.iter().enumerate() {
            if m.arrival > top {
                (second, top, at) = (top, m.arrival, i);
            } else if m.arrival > second {
                second = m.arrival;
            }
        }
        let others = |i: usize| if i == at { second } else { top };
        (self.members.iter().enumerate())
            .map(|(i, m)| m.arrival - others(i))
            .collect()
    }
}

fn occurrences(job: &AlignedJob) -> Vec<Occurrence> {
    // Each call's gap since the rank's previous call ended.
    let gaps: Vec<Vec<f64>> = job
        .profiles
        .iter()
        .map(|p| {
            let mut order: Vec<usize> = (0..p.calls.len()).collect();
            order.sort_by(|&a, &b| p.calls[a].arrival.total_cmp(&p.calls[b].arrival));
            let mut gap = vec![f64::NAN; p.calls.len()];
            for w in order.windows(2) {
                gap[w[1]] = p.calls[w[1]].arrival - p.calls[w[0]].end;
            }
            gap
        })
        .collect();
    let mut out = Vec::new();
    for (i, inst) in job.instances.iter().enumerate() {
        if !inst.complete || inst.members.len() < 2 {
            continue;
        }
        let calls: Vec<_> = inst
            .members
            .iter()
            .map(|m| (m, &job.profiles[m.slot].calls[m.call]))
            .collect();
        let step = calls.iter().map(|(_, c)| c.step).max().unwrap_or(-1);
        let (op, p2p) = calls[0].1.kind.trace_op();
        let members = calls
            .iter()
            .map(|(m, c)| {
                let shift = job.shifts[m.slot];
                Member {
                    rank: job.profiles[m.slot].rank,
                    arrival: c.arrival + shift,
                    end: c.end.max(c.arrival) + shift,
                    gap: gaps[m.slot][m.call],
                }
            })
            .collect();
        out.push(Occurrence {
            instance: i,
            algorithm: calls[0].1.algorithm,
            step,
            p2p: p2p || calls[0].1.kind.is_p2p(),
            class: (inst.group, op, calls[0].1.bytes),
            members,
        });
    }
    // Keyed once: `first` walks the members.
    let mut keyed: Vec<((i64, f64), Occurrence)> =
        out.into_iter().map(|o| ((o.step, o.first()), o)).collect();
    keyed.sort_by(|a, b| a.0.0.cmp(&b.0.0).then(a.0.1.total_cmp(&b.0.1)));
    keyed.into_iter().map(|(_, o)| o).collect()
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        0.5 * (values[n / 2 - 1] + values[n / 2])
    }
}

/// (median, σ = 1.4826 · MAD).
fn robust(values: &[f64]) -> (f64, f64) {
    let mut v = values.to_vec();
    let m = median(&mut v);
    let mut dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    (m, 1.4826 * median(&mut dev))
}

/// Analyzes an aligned job.
///
/// # Errors
/// Fewer than two ranks, no complete collective instance, or no
/// `ProfilerStep` markers on the instances.
pub fn analyze(job: &AlignedJob) -> Result<Stragglers> {
    if job.profiles.len() < 2 {
        return Err(Error::invalid(format!(
            "stragglers need the traces of at least two ranks, got {}",
            job.profiles.len()
        )));
    }
    let occ = occurrences(job);
    if !occ.iter().any(|o| !o.p2p) {
        return Err(Error::invalid(
            "no collective that two or more ranks completed in the traces",
        ));
    }
    if occ.iter().all(|o| o.step < 0) {
        return Err(Error::invalid(
            "no ProfilerStep markers on the collectives: the steps are not known",
        ));
    }
    let mut by_step: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, o) in occ.iter().enumerate().filter(|(_, o)| o.step >= 0) {
        by_step.entry(o.step).or_default().push(i);
    }
    let ranks: Vec<i64> = {
        let mut r: Vec<i64> = job.profiles.iter().map(|p| p.rank).collect();
        r.sort_unstable();
        r
    };
    // Each (rank, step)'s largest excess, and where.
    let mut worst: BTreeMap<(i64, i64), (f64, usize, usize)> = BTreeMap::new();
    for (&step, list) in &by_step {
        for &oi in list {
            let o = &occ[oi];
            if o.p2p {
                continue;
            }
            for (mi, (m, e)) in o.members.iter().zip(o.excesses()).enumerate() {
                // A rank's first call has no call before it: its lateness
                // is process start-up, not a step's work.
                let e = if m.gap.is_nan() { 0.0 } else { e.max(0.0) };
                let slot = worst.entry((m.rank, step)).or_insert((0.0, oi, mi));
                if e > slot.0 {
                    *slot = (e, oi, mi);
                }
            }
        }
    }
    let mut durations: Vec<f64> = by_step.values().map(|l| span(&occ, l)).collect();
    let floor = NOISE_FLOOR * median(&mut durations);
    let excesses: Vec<f64> = worst.values().map(|w| w.0).collect();
    let (baseline, spread) = robust(&excesses);
    let noise = spread.max(floor);
    let mut late_in_step: BTreeMap<i64, f64> = BTreeMap::new();
    for (&(_, step), w) in &worst {
        let e = late_in_step.entry(step).or_insert(0.0);
        *e = e.max(w.0);
    }
    // The step-time noise without the lateness of the steps that clear the
    // threshold it sets, until that set no longer grows: a short job where
    // half the steps have a straggler does not hide them in its noise, and
    // lateness below the threshold stays noise.
    let threshold_over =
        |steps_sigma: f64| baseline + (LATE_Z * noise).max(MATERIAL_Z * steps_sigma);
    let mut trimmed: BTreeMap<i64, f64> = BTreeMap::new();
    let mut steps_sigma = step_noise(&occ, &by_step, &trimmed);
    let mut threshold = threshold_over(steps_sigma);
    for _ in 0..NOISE_TRIM_ROUNDS {
        let clearing: BTreeMap<i64, f64> = (late_in_step.iter())
            .filter(|&(_, &e)| e > threshold)
            .map(|(&s, &e)| (s, e))
            .collect();
        if clearing.len() <= trimmed.len() {
            break;
        }
        trimmed = clearing;
        steps_sigma = step_noise(&occ, &by_step, &trimmed);
        threshold = threshold_over(steps_sigma);
    }
    let step_noise = steps_sigma;
    let material = MATERIAL_Z * step_noise;
    let mut findings = Vec::new();
    for (&(rank, step), &(worst_e, _, _)) in &worst {
        if worst_e > threshold {
            // The step's first late arrival of the rank: its later calls
            // (DDP's next bucket) are late because of it, not besides it.
            let Some((oi, mi, e)) = first_late(&occ, &by_step[&step], rank, threshold) else {
                continue;
            };
            let o = &occ[oi];
            // Its lag set to the median lag of the other members.
            let mut lags: Vec<f64> = (o.members.iter().enumerate())
                .filter(|&(j, _)| j != mi)
                .map(|(_, m)| m.arrival - o.first())
                .collect();
            let lag = o.members[mi].arrival - o.first();
            let earlier = (lag - median(&mut lags)).max(0.0);
            findings.push(finding(
                &occ,
                &by_step[&step],
                oi,
                mi,
                rank,
                step,
                e,
                earlier,
                0.0,
            ));
        }
    }
    // A (rank, step) gets one finding: the costlier of its late arrival and
    // its slow collective (a slow collective makes its rank late to the
    // next call: a knock-on, not a second cause).
    for slow in slow_collectives(&occ, &by_step, threshold) {
        let same = |f: &Finding| f.rank == slow.rank && f.step == slow.step;
        match findings.iter().position(same) {
            Some(i) if findings[i].estimated_cost_us >= slow.estimated_cost_us => {}
            Some(i) => findings[i] = slow,
            None => findings.push(slow),
        }
    }
    // A finding must cost more than the job's own step-to-step noise.
    // A slow collective needs twice that: on a shared host every member's
    // time inside wanders, and one member's excess is weaker evidence than
    // everybody waiting for a late one.
    findings.retain(|f| {
        let bar = match f.kind {
            FindingKind::SlowCollective => SLOW_MATERIAL_Z * step_noise,
            FindingKind::LateArrival => material,
        };
        f.estimated_cost_us > bar.max(0.0)
    });
    findings.sort_by_key(|f| (f.step, f.rank));
    usual_gaps(&occ, &by_step, &mut findings);
    let spans = step_spans(job);
    let mut out = tables(
        &occ, &by_step, &worst, &ranks, findings, baseline, noise, threshold,
    );
    out.step_noise_us = step_noise;
    for row in &mut out.steps {
        if let Some(&(start, end)) = spans.get(&row.step) {
            row.duration_us = end - start;
        }
    }
    out.bandwidth = table(&samples(&occ));
    out.members = members(&occ);
    Ok(out)
}

/// The job's step-time noise: σ (1.4826 · MAD) of each step's duration less
/// the median duration of the steps of its shape (the same collectives), so
/// steps that differ by design (an extra collective every few steps,
/// prefill and decode) do not count as noise. A step in `late` is taken
/// without that lateness (its straggler's): the noise the findings must
/// clear is what the stragglers do not explain.
fn step_noise(
    occ: &[Occurrence],
    by_step: &BTreeMap<i64, Vec<usize>>,
    late: &BTreeMap<i64, f64>,
) -> f64 {
    let mut by_shape: BTreeMap<Vec<(usize, &'static str, i64)>, Vec<f64>> = BTreeMap::new();
    for (step, list) in by_step {
        let mut shape: Vec<(usize, &'static str, i64)> =
            list.iter().map(|&i| occ[i].class).collect();
        shape.sort_unstable();
        let lateness = late.get(step).copied().unwrap_or(0.0);
        by_shape
            .entry(shape)
            .or_default()
            .push(span(occ, list) - lateness);
    }
    let mut residuals = Vec::new();
    for durations in by_shape.values_mut() {
        if durations.len() < 2 {
            continue;
        }
        let m = median(&mut durations.clone());
        residuals.extend(durations.iter().map(|d| d - m));
    }
    robust(&residuals).1
}

/// The first occurrence of `list` (time order) where `rank` arrived more than
/// `threshold` after every other member: `(occurrence, member, excess)`.
fn first_late(
    occ: &[Occurrence],
    list: &[usize],
    rank: i64,
    threshold: f64,
) -> Option<(usize, usize, f64)> {
    list.iter().filter(|&&oi| !occ[oi].p2p).find_map(|&oi| {
        let o = &occ[oi];
        let mi = o.members.iter().position(|m| m.rank == rank)?;
        let e = o.excesses()[mi];
        (e > threshold && !o.members[mi].gap.is_nan()).then_some((oi, mi, e))
    })
}

/// Fills each finding's `usual_gap_before_us`: its rank's median gap before
/// the same call on the other steps. The same call is the same class (group,
/// op, bytes) at the same place among the step's occurrences of that class.
fn usual_gaps(occ: &[Occurrence], by_step: &BTreeMap<i64, Vec<usize>>, findings: &mut [Finding]) {
    type Place = ((usize, &'static str, i64), usize);
    // Each instance's (class, place in its step), and the occurrences at
    // each such place.
    let mut place: FxHashMap<usize, Place> = FxHashMap::default();
    let mut holders: BTreeMap<Place, Vec<usize>> = BTreeMap::new();
    for list in by_step.values() {
        let mut seen: FxHashMap<(usize, &'static str, i64), usize> = FxHashMap::default();
        for &oi in list {
            let n = seen.entry(occ[oi].class).or_insert(0);
            place.insert(occ[oi].instance, (occ[oi].class, *n));
            holders.entry((occ[oi].class, *n)).or_default().push(oi);
            *n += 1;
        }
    }
    for f in findings {
        let Some(at) = place.get(&f.instance) else {
            continue;
        };
        let mut gaps: Vec<f64> = (holders.get(at).into_iter().flatten())
            .filter(|&&oi| occ[oi].step != f.step)
            .filter_map(|&oi| occ[oi].members.iter().find(|m| m.rank == f.rank))
            .map(|m| m.gap)
            .filter(|g| g.is_finite())
            .collect();
        if !gaps.is_empty() {
            f.usual_gap_before_us = median(&mut gaps);
        }
    }
}

/// Each occurrence as the bandwidth table sees it.
fn samples(occ: &[Occurrence]) -> Vec<Sample> {
    occ.iter()
        .map(|o| {
            let last = o.last_arrival();
            let slowest = (o.members.iter())
                .max_by(|a, b| a.end.total_cmp(&b.end))
                .map_or(-1, |m| m.rank);
            let end = o.members.iter().map(|m| m.end).fold(last, f64::max);
            Sample {
                group: o.class.0,
                // Both ends of a transfer: one row, whichever end is first.
                op: if o.p2p { "send_recv" } else { o.class.1 },
                bytes: o.class.2,
                ranks: o.members.len(),
                time_us: end - last,
                step: o.step,
                slowest_rank: slowest,
                algorithm: o.algorithm,
                instance: o.instance,
            }
        })
        .collect()
}

/// Each `ProfilerStep#N`'s first start and last end over the ranks (job
/// clock).
fn step_spans(job: &AlignedJob) -> BTreeMap<i64, (f64, f64)> {
    let mut spans: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for (p, shift) in job.profiles.iter().zip(&job.shifts) {
        for &(n, start, end) in &p.steps {
            let span = spans.entry(n).or_insert((f64::INFINITY, f64::NEG_INFINITY));
            span.0 = span.0.min(start + shift);
            span.1 = span.1.max(end + shift);
        }
    }
    spans
}

/// First arrival to last end over the occurrences `list`.
fn span(occ: &[Occurrence], list: &[usize]) -> f64 {
    let first = list
        .iter()
        .map(|&i| occ[i].first())
        .fold(f64::INFINITY, f64::min);
    let last = list
        .iter()
        .flat_map(|&i| occ[i].members.iter().map(|m| m.end))
        .fold(f64::NEG_INFINITY, f64::max);
    (last - first).max(0.0)
}

/// A finding on member `mi` of occurrence `oi`, costed by replaying its
/// step (`list`) with it arriving `earlier` sooner and leaving `shorter`
/// sooner.
#[allow(clippy::too_many_arguments)]
fn finding(
    occ: &[Occurrence],
    list: &[usize],
    oi: usize,
    mi: usize,
    rank: i64,
    step: i64,
    lag: f64,
    earlier: f64,
    shorter: f64,
) -> Finding {
    let instances: Vec<StepInstance> = list
        .iter()
        .map(|&i| StepInstance {
            visits: occ[i]
                .members
                .iter()
                .map(|m| Visit {
                    rank: m.rank,
                    arrival: m.arrival,
                    end: m.end,
                })
                .collect(),
        })
        .collect();
    let at = list.iter().position(|&i| i == oi).unwrap_or(0);
    let change = Change {
        at,
        rank,
        earlier_us: earlier,
        shorter_us: shorter,
    };
    let kind = if shorter > 0.0 {
        FindingKind::SlowCollective
    } else {
        FindingKind::LateArrival
    };
    Finding {
        rank,
        step,
        kind,
        lag_us: lag,
        estimated_cost_us: saved(&instances, change),
        instance: occ[oi].instance,
        group: occ[oi].class.0,
        op: occ[oi].class.1,
        gap_before_us: occ[oi].members[mi].gap,
        usual_gap_before_us: f64::NAN,
        at_us: occ[oi].members[mi].arrival,
        behind_first_us: occ[oi].members[mi].arrival - occ[oi].first(),
    }
}

/// Members that stayed inside far longer than their class (group, op,
/// bytes) usually takes, by more than the job's lateness `threshold` too,
/// and longer than the other members of their instance by more than the
/// threshold: the slowest member of such an occurrence, one per
/// (rank, step).
fn slow_collectives(
    occ: &[Occurrence],
    by_step: &BTreeMap<i64, Vec<usize>>,
    threshold: f64,
) -> Vec<Finding> {
    let mut classes: BTreeMap<(usize, &'static str, i64), Vec<f64>> = BTreeMap::new();
    for o in occ.iter().filter(|o| !o.p2p && o.step >= 0) {
        classes.entry(o.class).or_default().extend(o.times_inside());
    }
    // Per class: (median, the limit above which a member is slow).
    let limits: BTreeMap<_, (f64, f64)> = classes
        .iter()
        .map(|(k, v)| {
            let (m, s) = robust(v);
            (*k, (m, m + SLOW_Z * s.max(0.05 * m).max(1.0)))
        })
        .collect();
    let mut out: Vec<Finding> = Vec::new();
    for (&step, list) in by_step {
        for &oi in list {
            let o = &occ[oi];
            if o.p2p {
                continue;
            }
            let Some((mi, took)) = o
                .times_inside()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(&b.1))
            else {
                continue;
            };
            let (Some(&(typical, limit)), m) = (limits.get(&o.class), &o.members[mi]) else {
                continue;
            };
            let flagged = |f: &Finding| f.rank == m.rank && f.step == step;
            let extra = took - typical;
            // It must stand out from its own instance too: when everybody
            // was slow inside, nobody in particular is to blame.
            let mut others: Vec<f64> = (o.times_inside().enumerate())
                .filter(|&(j, _)| j != mi)
                .map(|(_, t)| t)
                .collect();
            let alone = took - median(&mut others) > threshold;
            let slow = took > limit && extra > threshold && alone;
            if slow && !out.iter().any(flagged) {
                let f = finding(occ, list, oi, mi, m.rank, step, extra, 0.0, extra);
                if f.estimated_cost_us > threshold {
                    out.push(f);
                }
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn tables(
    occ: &[Occurrence],
    by_step: &BTreeMap<i64, Vec<usize>>,
    worst: &BTreeMap<(i64, i64), (f64, usize, usize)>,
    ranks: &[i64],
    findings: Vec<Finding>,
    baseline_us: f64,
    noise_us: f64,
    threshold_us: f64,
) -> Stragglers {
    // Per step, the (rank, excess) with the largest excess (the lowest rank
    // on ties: `worst` is in rank order).
    let mut last: BTreeMap<i64, (i64, f64)> = BTreeMap::new();
    for (&(r, step), w) in worst {
        let best = last.entry(step).or_insert((-1, f64::NEG_INFINITY));
        if w.0 > best.1 {
            *best = (r, w.0);
        }
    }
    let steps = by_step
        .iter()
        .map(|(&step, list)| {
            let (last_rank, lag_us) = last.get(&step).copied().unwrap_or((-1, 0.0));
            let mut straggler_ranks: Vec<i64> = findings
                .iter()
                .filter(|f| f.step == step)
                .map(|f| f.rank)
                .collect();
            straggler_ranks.sort_unstable();
            straggler_ranks.dedup();
            StepSummary {
                step,
                duration_us: span(occ, list),
                last_rank,
                lag_us: lag_us.max(0.0),
                straggler_ranks,
            }
        })
        .collect();
    let mut rank_rows: Vec<RankSummary> = ranks
        .iter()
        .map(|&rank| {
            let mine: Vec<&Finding> = findings.iter().filter(|f| f.rank == rank).collect();
            let mut steps: Vec<i64> = mine.iter().map(|f| f.step).collect();
            steps.dedup();
            RankSummary {
                rank,
                straggler_steps: steps.len(),
                total_estimated_cost_us: mine.iter().map(|f| f.estimated_cost_us).sum(),
            }
        })
        .collect();
    rank_rows.sort_by(|a, b| {
        b.total_estimated_cost_us
            .total_cmp(&a.total_estimated_cost_us)
            .then(a.rank.cmp(&b.rank))
    });
    Stragglers {
        steps,
        findings,
        ranks: rank_rows,
        baseline_us,
        noise_us,
        threshold_us,
        step_noise_us: 0.0,
        bandwidth: Vec::new(),
        members: Members::default(),
    }
}

#[cfg(test)]
mod noise_tests {
    use super::*;

    /// One all_reduce per step of two ranks: the step lasts `ms` and rank
    /// 1 arrives `late` ms after rank 0.
    fn steps(
        durations_and_lateness: &[(f64, f64)],
    ) -> (Vec<Occurrence>, BTreeMap<i64, Vec<usize>>) {
        let mut occ = Vec::new();
        let mut by_step = BTreeMap::new();
        let mut t = 0.0;
        for (s, &(ms, late)) in durations_and_lateness.iter().enumerate() {
            let (start, end) = (t, t + ms * 1000.0);
            occ.push(Occurrence {
                instance: s,
                algorithm: 0,
                step: s as i64,
                p2p: false,
                class: (0, "all_reduce", 64),
                members: vec![
                    Member {
                        rank: 0,
                        arrival: start,
                        end,
                        gap: 1.0,
                    },
                    Member {
                        rank: 1,
                        arrival: start + late * 1000.0,
                        end,
                        gap: 1.0,
                    },
                ],
            });
            by_step.insert(s as i64, vec![s]);
            t = end + 1.0;
        }
        (occ, by_step)
    }

    #[test]
    fn a_steps_straggler_taken_out_leaves_the_noise_it_does_not_explain() {
        // Six 100 ms steps (±1 ms), half of them 60-120 ms longer for a
        // late rank (a short job, as after DDP's first two steps, whose
        // shapes differ): with them the noise is tens of ms, without them
        // about 1 ms.
        let plan = [
            (100.0, 0.0),
            (220.0, 120.0),
            (101.0, 0.0),
            (160.0, 60.0),
            (99.0, 0.0),
            (161.0, 60.0),
        ];
        let (occ, by_step) = steps(&plan);
        let all = step_noise(&occ, &by_step, &BTreeMap::new());
        assert!(all > 20_000.0, "{all}");
        let late: BTreeMap<i64, f64> = [(1, 120_000.0), (3, 60_000.0), (5, 60_000.0)].into();
        let rest = step_noise(&occ, &by_step, &late);
        assert!(rest < 2_000.0, "{rest}");
    }
}
