//! Matched instances → trace events.
//!
//! One event per complete instance, at the first member's arrival on the
//! job clock (rebased to the job's first collective, µs rounded to 3
//! decimals): measured `rank_arrival_us` per rank, `compute_before_us` (the
//! largest member's compute since its previous call), `compute_overlap_us`
//! (the smallest member's compute while the collective ran: what every rank
//! can hide), `concurrent_groups` (distinct groups with an instance running at
//! the same time), the step (`ProfilerStep#N`) and phase (the outermost user
//! annotation around the call) of the lowest member rank, and the device time
//! when every member has linked kernels. Partial instances become
//! [`PartialCollective`]s, never events.

use rayon::prelude::*;

use super::align::{Instance, Job, SweepKey};
use super::ops::Kind;
use super::profile::Call;
use crate::json::canon::{self, ObjectWriter};
use crate::pyfloat::round;
use crate::trace::{EventExtras, EventTiming, Signature, TraceBuilder};

/// A collective seen on some of its members only.
#[derive(Debug, Clone, PartialEq)]
pub struct PartialCollective {
    /// Group name (`?` when no candidate group fitted).
    pub group: String,
    /// Trace op name.
    pub op: String,
    /// Ranks whose traces have it.
    pub seen: Vec<i64>,
    /// Members whose traces do not.
    pub missing: Vec<i64>,
    /// First arrival, µs on the job clock (rebased like the events).
    pub start_us: f64,
    /// `ProfilerStep#N` of the first member, −1 when none.
    pub step: i64,
}

/// One member's call as an event needs it.
#[derive(Clone, Copy)]
struct View<'a> {
    rank: i64,
    call: &'a Call,
    shift: f64,
    slot: usize,
}

/// One complete instance, ready to write: when it ran on the job clock, its
/// group, and where the sweep took it up (its order among instances that
/// start together).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prepared {
    /// First member's arrival, job clock, µs.
    pub start: f64,
    /// Last member's end, job clock, µs.
    pub end: f64,
    /// Job group index.
    pub group: usize,
    /// The sweep's key of the call that opened it ([`super::align::SweepKey`]),
    /// or `(index, 0, 0)` by instance index: only its order counts.
    pub order: SweepKey,
    /// Index of the instance in the caller's list.
    pub instance: usize,
}

/// Where an event goes: the job-clock origin, its concurrent groups, its
/// position in its group.
pub type Placement = (f64, i64, u64);

/// The complete instances of `instances`, with `keys[k]` the order of
/// instance `k` (by index when `None`), sorted as the events are written.
#[must_use]
pub fn prepare(job: &Job<'_>, instances: &[Instance], keys: Option<&[SweepKey]>) -> Vec<Prepared> {
    let at = |m: &super::align::Member| -> (&Call, f64) {
        (&job.profiles[m.slot].calls[m.call], job.shifts[m.slot])
    };
    let mut prepared: Vec<Prepared> = Vec::new();
    for (k, inst) in instances.iter().enumerate().filter(|(_, i)| i.complete) {
        let start = inst
            .members
            .iter()
            .map(|m| {
                let (c, s) = at(m);
                c.arrival + s
            })
            .fold(f64::INFINITY, f64::min);
        let end = inst
            .members
            .iter()
            .map(|m| {
                let (c, s) = at(m);
                c.end + s
            })
            .fold(f64::NEG_INFINITY, f64::max);
        prepared.push(Prepared {
            start,
            end,
            group: inst.group,
            order: keys.map_or((k as f64, 0, 0), |keys| keys[k]),
            instance: k,
        });
    }
    prepared.sort_by(order_of_events);
    prepared
}

/// The events' order: by start, then by where the sweep took them up.
#[must_use]
pub fn order_of_events(a: &Prepared, b: &Prepared) -> std::cmp::Ordering {
    a.start
        .total_cmp(&b.start)
        .then(a.order.0.total_cmp(&b.order.0))
        .then(a.order.1.cmp(&b.order.1))
        .then(a.order.2.cmp(&b.order.2))
}

/// The earliest arrival of any member of `instances` (the job-clock origin
/// when no instance is complete), `+inf` when none.
#[must_use]
pub fn first_arrival(job: &Job<'_>, instances: &[Instance]) -> f64 {
    instances
        .iter()
        .flat_map(|i| i.members.iter())
        .map(|m| job.profiles[m.slot].calls[m.call].arrival + job.shifts[m.slot])
        .fold(f64::INFINITY, f64::min)
}

/// Each prepared instance's placement (`prepared` in event order, across
/// the whole job): the origin is the first one's start (else
/// `fallback_origin`), concurrency counts every group running, positions
/// count per group.
#[must_use]
pub fn place(prepared: &[Prepared], groups: usize, fallback_origin: f64) -> Vec<Placement> {
    let origin = prepared.first().map_or(fallback_origin, |p| p.start);
    let concurrency = concurrent_groups(prepared);
    let mut per_group = vec![0_u64; groups];
    prepared
        .iter()
        .zip(concurrency)
        .map(|(p, concurrent)| {
            per_group[p.group] += 1;
            (origin, concurrent, per_group[p.group] - 1)
        })
        .collect()
}

/// Writes the complete instances into `b`; returns the partial ones and the
/// job-clock origin (the first complete instance's first arrival).
pub(super) fn write_events(
    job: &Job<'_>,
    instances: &[Instance],
    fallback_phase: Option<&str>,
    b: &mut TraceBuilder,
) -> (Vec<PartialCollective>, f64) {
    let prepared = prepare(job, instances, None);
    let placements = place(&prepared, job.groups.len(), first_arrival(job, instances));
    let origin = placements
        .first()
        .map_or_else(|| first_arrival(job, instances), |p| p.0);
    b.absorb(write_prepared(
        job,
        instances,
        &prepared,
        &placements,
        fallback_phase,
    ));
    let partial = partials(job, instances, origin);
    (partial, origin)
}

/// The events of `prepared` (in order), each at its placement.
#[must_use]
pub fn write_prepared(
    job: &Job<'_>,
    instances: &[Instance],
    prepared: &[Prepared],
    placements: &[Placement],
    fallback_phase: Option<&str>,
) -> TraceBuilder {
    // Events are written in parallel chunks, joined in order: the same bytes
    // as one pass.
    const CHUNK: usize = 4096;
    let chunks: Vec<TraceBuilder> = (0..prepared.len().div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut part = TraceBuilder::new();
            for k in c * CHUNK..((c + 1) * CHUNK).min(prepared.len()) {
                let p = &prepared[k];
                write_one(
                    job,
                    &instances[p.instance],
                    p,
                    placements[k],
                    fallback_phase,
                    &mut part,
                );
            }
            part
        })
        .collect();
    let mut b = TraceBuilder::new();
    for part in chunks {
        b.absorb(part);
    }
    b
}

/// Distinct groups running during each prepared instance (itself included).
///
/// Each group seen is stamped with the instance it was counted for, so an
/// instance costs the instances overlapping it, not a sort of their groups:
/// a job of many concurrent groups (data-parallel replicas) stays linear
/// in its overlap.
fn concurrent_groups(prepared: &[Prepared]) -> Vec<i64> {
    let mut out = Vec::with_capacity(prepared.len());
    let mut active: Vec<(f64, usize)> = Vec::new();
    let group_count = prepared.iter().map(|p| p.group + 1).max().unwrap_or(0);
    let mut counted_for = vec![usize::MAX; group_count];
    for (i, p) in prepared.iter().enumerate() {
        active.retain(|a| a.0 > p.start);
        let mut distinct = 0i64;
        let mut count = |g: usize| {
            if counted_for[g] != i {
                counted_for[g] = i;
                distinct += 1;
            }
        };
        active.iter().for_each(|a| count(a.1));
        count(p.group);
        for q in &prepared[i + 1..] {
            if q.start >= p.end {
                break;
            }
            count(q.group);
        }
        out.push(distinct);
        active.push((p.end, p.group));
    }
    out
}

/// Writes one instance; `at` is the job-clock origin, the instance's
/// concurrent groups and its position in its group.
fn write_one(
    job: &Job<'_>,
    inst: &Instance,
    p: &Prepared,
    at: (f64, i64, u64),
    fallback_phase: Option<&str>,
    b: &mut TraceBuilder,
) {
    let (origin, concurrent, seq) = at;
    let group = &job.groups[inst.group];
    let calls: Vec<View<'_>> = inst
        .members
        .iter()
        .map(|m| View {
            rank: job.profiles[m.slot].rank,
            call: &job.profiles[m.slot].calls[m.call],
            shift: job.shifts[m.slot],
            slot: m.slot,
        })
        .collect();
    let first = calls[0].call;
    let sig = signature(job, inst, &calls, concurrent, fallback_phase);
    let ranks = sig.ranks.clone();
    let by_rank = |r: i64| calls.iter().find(|v| v.rank == r);
    let relative = |r: i64, t: fn(&Call) -> f64| {
        by_rank(r).map_or(0.0, |v| round(t(v.call) + v.shift - p.start, 3))
    };
    let arrivals: Vec<f64> = ranks.iter().map(|&r| relative(r, |c| c.arrival)).collect();
    let ends: Vec<f64> = ranks.iter().map(|&r| relative(r, |c| c.end)).collect();
    let before = calls
        .iter()
        .map(|v| v.call.compute_before)
        .fold(0.0, f64::max);
    let overlap = calls
        .iter()
        .map(|v| v.call.compute_overlap)
        .fold(f64::INFINITY, f64::min);
    let device = if calls.iter().all(|v| v.call.kernels > 0) {
        calls.iter().map(|v| v.call.device_us).fold(0.0, f64::max)
    } else {
        f64::NAN
    };
    let step = calls
        .iter()
        .map(|v| v.call.step)
        .find(|&s| s >= 0)
        .unwrap_or(-1);
    let timing = EventTiming {
        start_us: round(p.start - origin, 3),
        compute_before_us: round(before, 3),
        compute_overlap_us: round(overlap, 3),
        device_us: if device.is_nan() {
            f64::NAN
        } else {
            round(device, 3)
        },
        step,
        ..EventTiming::default()
    };
    let mut metadata = Vec::new();
    let mut o = ObjectWriter::new(&mut metadata);
    let profile = &job.profiles[inst.members[0].slot];
    o.str(
        "kineto_collective_name",
        &profile.names[first.name as usize],
    );
    if inst.ambiguous {
        o.bool("kineto_group_ambiguous", true);
    }
    if first.group < 0 {
        o.bool("kineto_group_inferred", true);
    }
    if device.is_finite() {
        o.i64(
            "kineto_kernel_count",
            calls.iter().map(|v| i64::from(v.call.kernels)).sum(),
        );
    }
    if !group.desc.is_empty() {
        o.str("kineto_pg_desc", &group.desc);
    }
    if calls.iter().all(|v| v.call.end_measured) {
        canon::write_f64_array(o.key("kineto_rank_end_us"), &ends);
    }
    if first.seq >= 0 {
        o.i64("kineto_seq", first.seq);
    }
    o.end();
    let id = format!("kineto-pg{}-{seq:06}", group.name);
    let extras = EventExtras {
        id: Some(&id),
        metadata: Some(&metadata),
    };
    b.push_event(&sig, &timing, Some(&arrivals), &extras);
}

/// The event's identity.
fn signature(
    job: &Job<'_>,
    inst: &Instance,
    calls: &[View<'_>],
    concurrent: i64,
    fallback_phase: Option<&str>,
) -> Signature {
    let group = &job.groups[inst.group];
    let c = calls[0].call;
    let profile = &job.profiles[inst.members[0].slot];
    let (op, custom) = match c.kind {
        Kind::Send | Kind::Recv => ("point_to_point", false),
        Kind::Other => (profile.names[c.name as usize].as_str(), true),
        k => k.trace_op(),
    };
    let phase = calls
        .iter()
        .find(|v| v.call.phase >= 0)
        .map(|v| job.profiles[v.slot].phases[v.call.phase as usize].clone())
        .or_else(|| fallback_phase.map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    let mut sig = Signature {
        phase: phase.into_bytes(),
        op: op.as_bytes().to_vec(),
        bytes: calls.iter().map(|v| v.call.bytes).max().unwrap_or(0),
        ranks: group.ranks.clone(),
        group: group.name.clone().into_bytes(),
        concurrent_groups: concurrent.max(1),
        custom_op: custom,
        dtype: Some(json_str(c.dtype)),
        ..Signature::default()
    };
    if matches!(
        c.kind,
        Kind::Broadcast | Kind::Reduce | Kind::Gather | Kind::Scatter
    ) {
        let root = group
            .ranks
            .get(c.peer.max(0) as usize)
            .copied()
            .unwrap_or(0);
        sig.root_rank = Some(root.to_string().into_bytes());
    }
    if c.kind.is_p2p() {
        let send = calls
            .iter()
            .find(|v| v.call.kind == Kind::Send)
            .map_or(-1, |v| v.rank);
        let recv = calls
            .iter()
            .find(|v| v.call.kind == Kind::Recv)
            .map_or(-1, |v| v.rank);
        sig.sender_rank = Some(send);
        sig.receiver_rank = Some(recv);
        sig.ranks = vec![send.min(recv), send.max(recv)];
    }
    sig
}

fn json_str(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    canon::write_str(&mut out, s);
    out
}

/// The partial instances, in time order.
fn partials(job: &Job<'_>, instances: &[Instance], origin: f64) -> Vec<PartialCollective> {
    let mut out: Vec<PartialCollective> = partials_in_sweep_order(job, instances, origin)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    out.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    out
}

/// The partial instances in the order of `instances`, each with its index.
#[must_use]
pub fn partials_in_sweep_order(
    job: &Job<'_>,
    instances: &[Instance],
    origin: f64,
) -> Vec<(usize, PartialCollective)> {
    let mut out = Vec::new();
    for (k, inst) in instances.iter().enumerate().filter(|(_, i)| !i.complete) {
        let (c, shift) = {
            let m = inst.members[0];
            (&job.profiles[m.slot].calls[m.call], job.shifts[m.slot])
        };
        let start = inst
            .members
            .iter()
            .map(|m| job.profiles[m.slot].calls[m.call].arrival + job.shifts[m.slot])
            .fold(c.arrival + shift, f64::min);
        let seen: Vec<i64> = inst
            .members
            .iter()
            .map(|m| job.profiles[m.slot].rank)
            .collect();
        let (group, members) = match job.groups.get(inst.group) {
            Some(g) if c.kind.is_p2p() => (g.name.clone(), {
                let mut ends = seen.clone();
                ends.push(super::align::peer_of(c, g));
                ends
            }),
            Some(g) => (g.name.clone(), g.ranks.clone()),
            None => ("?".to_owned(), seen.clone()),
        };
        let missing = members
            .iter()
            .copied()
            .filter(|r| *r >= 0 && !seen.contains(r))
            .collect();
        let op = match c.kind {
            Kind::Other => job.profiles[inst.members[0].slot].names[c.name as usize].clone(),
            k => k.trace_op().0.to_owned(),
        };
        out.push((
            k,
            PartialCollective {
                group,
                op,
                seen,
                missing,
                start_us: round(start - origin, 3),
                step: c.step,
            },
        ));
    }
    out
}
