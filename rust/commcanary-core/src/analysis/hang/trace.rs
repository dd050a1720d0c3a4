//! Profiler (Kineto) traces reduced to the [`Model`]: the instances the
//! importer's matcher found ([`crate::import::kineto::align_job`]), complete
//! and partial, numbered per group into sequence numbers, and each member's
//! call as an [`Op`] with its `ProfilerStep`.
//!
//! Sequence numbers: NCCL records carry the group's `Seq` and are exact.
//! gloo records carry none, so the k-th instance of a group in time order is
//! numbered k + 1, plus the group's barriers before it (barriers count in
//! the sequence; they are put on the default group), plus an estimate of the
//! collectives issued while the profiler was not recording: the steps before
//! the first recorded `ProfilerStep#N` and between windows, each counted at
//! the group's median per recorded step. Such numbers are marked estimated.
//!
//! For a rank that also has a Flight Recorder dump, the dump's ops stay and
//! only their steps come from the trace (by time: the `ProfilerStep` span
//! holding the entry's creation).

use std::collections::BTreeMap;

use super::model::{Model, Op, Source};
use crate::import::kineto::align::Instance;
use crate::import::kineto::{AlignedJob, RankProfile};

/// Adds the traces to `model`.
pub fn add_traces(model: &mut Model, aligned: &AlignedJob, dumps_lack_p2p: bool) {
    let world = aligned
        .profiles
        .iter()
        .filter_map(|p| p.world_size)
        .max()
        .unwrap_or(0);
    model.world = model.world.max(world);
    let map: Vec<usize> = aligned
        .groups
        .iter()
        .map(|g| {
            let gi = model.group_index(&g.name, &g.desc);
            if model.groups[gi].ranks.is_empty() {
                model.groups[gi].ranks.clone_from(&g.ranks);
                model.groups[gi].membership = "the traces' distributedInfo".into();
            }
            gi
        })
        .collect();
    let numbering = number_instances(aligned);
    let mut ops: BTreeMap<i64, Vec<(f64, Op)>> = BTreeMap::new();
    for (k, inst) in aligned.instances.iter().enumerate() {
        for m in &inst.members {
            let p = &aligned.profiles[m.slot];
            let dumped = model
                .ranks
                .get(&p.rank)
                .is_some_and(|e| e.source == Some(Source::FlightRecorder));
            // A dump wins for its rank, except for the send and receive
            // calls a dump that cannot record them (gloo) leaves out.
            if dumped && !(dumps_lack_p2p && p.calls[m.call].kind.is_p2p()) {
                continue;
            }
            let op = member_op(
                model,
                aligned,
                inst,
                m.slot,
                m.call,
                map[inst.group],
                numbering.seq[k],
            );
            ops.entry(p.rank)
                .or_default()
                .push((p.calls[m.call].arrival, op));
        }
    }
    for (slot, p) in aligned.profiles.iter().enumerate() {
        if model
            .ranks
            .get(&p.rank)
            .is_some_and(|e| e.source == Some(Source::FlightRecorder))
        {
            annotate_steps(model, p);
            let p2p = ops.remove(&p.rank).unwrap_or_default();
            let ev = model.ranks.entry(p.rank).or_default();
            if !p2p.is_empty() {
                ev.ops.extend(p2p.into_iter().map(|(_, o)| o));
                ev.ops.sort_by_key(|o| o.time_ns);
            }
            ev.files.push(aligned.labels[slot].clone());
            continue;
        }
        let mut list = ops.remove(&p.rank).unwrap_or_default();
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ev = model.ranks.entry(p.rank).or_default();
        ev.ops = list.into_iter().map(|(_, o)| o).collect();
        ev.source = Some(Source::Trace);
        ev.from_start = numbering.from_start;
        ev.covers_from_ns = p
            .calls
            .first()
            .map_or(0, |c| p.epoch_ns + (c.arrival * 1000.0) as i64);
        ev.files.push(aligned.labels[slot].clone());
    }
    if numbering.estimated {
        model.seq_estimated = true;
        model.notes.push(numbering.note);
    }
    if aligned.profiles.iter().any(|p| !p.steps.is_empty()) {
        model.step_source = "ProfilerStep markers in the traces".into();
    }
}

fn member_op(
    model: &mut Model,
    aligned: &AlignedJob,
    inst: &Instance,
    slot: usize,
    call: usize,
    group: usize,
    seq: i64,
) -> Op {
    let p: &RankProfile = &aligned.profiles[slot];
    let c = &p.calls[call];
    let (name, _) = c.kind.trace_op();
    let ranks = &model.groups[group].ranks;
    let peer = if c.peer_global >= 0 {
        c.peer_global
    } else {
        usize::try_from(c.peer)
            .ok()
            .and_then(|i| ranks.get(i))
            .copied()
            .unwrap_or(-1)
    };
    let in_sizes = model.intern(&format!("[[{}]]", c.in_elems));
    let out_sizes = model.intern(&format!("[[{}]]", c.out_elems));
    let dtype = model.intern(c.dtype);
    Op {
        group,
        seq,
        p2p: c.kind.is_p2p(),
        peer: if c.kind.is_p2p() { peer } else { -1 },
        peer_is_global: true,
        root: if rooted(name) { peer } else { -1 },
        op: name,
        in_sizes,
        out_sizes,
        in_dtypes: dtype,
        out_dtypes: dtype,
        pending: !inst.complete,
        time_ns: p.epoch_ns + (c.arrival * 1000.0) as i64,
        step: c.step,
        frame: super::model::NONE,
        timeout_ms: -1,
        done_ns: if c.end_measured {
            p.epoch_ns + (c.end * 1000.0) as i64
        } else {
            0
        },
    }
}

/// Sequence numbers of every instance, and how they were obtained.
struct Numbering {
    seq: Vec<i64>,
    estimated: bool,
    from_start: bool,
    note: String,
}

fn number_instances(aligned: &AlignedJob) -> Numbering {
    let mut seq = vec![0_i64; aligned.instances.len()];
    let mut by_group: BTreeMap<usize, Vec<(f64, usize)>> = BTreeMap::new();
    for (k, inst) in aligned.instances.iter().enumerate() {
        let start = inst
            .members
            .iter()
            .map(|m| aligned.profiles[m.slot].calls[m.call].arrival + aligned.shifts[m.slot])
            .fold(f64::INFINITY, f64::min);
        by_group.entry(inst.group).or_default().push((start, k));
    }
    let mut estimated = false;
    let mut notes = Vec::new();
    for (g, mut list) in by_group {
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        let reference = reference_slot(aligned, g);
        let exact = list.iter().all(|&(_, k)| recorded_seq(aligned, k) >= 0);
        let (offset, unrecorded) = if exact {
            (0, 0)
        } else {
            unrecorded_offset(aligned, reference, &list)
        };
        let barriers = is_default(aligned, g)
            .then(|| reference.map(|s| &aligned.profiles[s].barriers))
            .flatten();
        let (mut p2p, mut coll) = (0_i64, 0_i64);
        for &(start, k) in &list {
            let inst = &aligned.instances[k];
            let c0 = &aligned.profiles[inst.members[0].slot].calls[inst.members[0].call];
            if c0.kind.is_p2p() {
                p2p += 1;
                seq[k] = p2p;
                continue;
            }
            coll += 1;
            seq[k] = if exact {
                recorded_seq(aligned, k)
            } else {
                let before = barriers.map_or(0, |b| {
                    let shift = reference.map_or(0.0, |s| aligned.shifts[s]);
                    b.iter().filter(|&&t| t + shift < start).count() as i64
                });
                offset + coll + before
            };
        }
        if !exact && offset > 0 {
            estimated = true;
            notes.push(format!(
                "group '{}': {unrecorded} unrecorded step(s) counted as {offset} collective(s)",
                aligned.groups[g].name
            ));
        }
    }
    let first_step = aligned
        .profiles
        .iter()
        .filter_map(|p| p.steps.first().map(|s| s.0))
        .min();
    Numbering {
        seq,
        estimated,
        from_start: !estimated && first_step.is_none_or(|n| n == 0),
        note: format!(
            "sequence numbers from the traces are estimates: the profiler did not record every step ({})",
            notes.join("; ")
        ),
    }
}

fn recorded_seq(aligned: &AlignedJob, k: usize) -> i64 {
    let m = &aligned.instances[k].members[0];
    aligned.profiles[m.slot].calls[m.call].seq
}

fn is_default(aligned: &AlignedJob, g: usize) -> bool {
    let group = &aligned.groups[g];
    group.desc.starts_with("default_pg") || group.name == "0"
}

/// The lowest member rank with a profile.
fn reference_slot(aligned: &AlignedJob, g: usize) -> Option<usize> {
    aligned.groups[g]
        .ranks
        .iter()
        .find_map(|r| aligned.slot_of_rank.get(r).copied())
}

/// Collectives of group `g` issued in steps the profiler did not record:
/// `(estimate, unrecorded steps)`.
fn unrecorded_offset(
    aligned: &AlignedJob,
    reference: Option<usize>,
    list: &[(f64, usize)],
) -> (i64, i64) {
    let Some(slot) = reference else { return (0, 0) };
    let p = &aligned.profiles[slot];
    if p.steps.is_empty() {
        return (0, 0);
    }
    let shift = aligned.shifts[slot];
    let mut per_step: Vec<i64> = p
        .steps
        .iter()
        .take(p.steps.len().saturating_sub(1))
        .map(|&(_, s, e)| {
            list.iter()
                .filter(|&&(t, k)| {
                    let c0 = &aligned.instances[k].members[0];
                    let p2p = aligned.profiles[c0.slot].calls[c0.call].kind.is_p2p();
                    !p2p && t >= s + shift && t < e + shift
                })
                .count() as i64
        })
        .collect();
    if per_step.is_empty() {
        return (0, 0);
    }
    per_step.sort_unstable();
    let median = per_step[per_step.len() / 2];
    let numbers: Vec<i64> = p.steps.iter().map(|s| s.0).collect();
    let first = numbers[0].max(0);
    let last = *numbers.iter().max().unwrap_or(&first);
    let recorded = numbers
        .iter()
        .filter(|&&n| n >= first)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as i64;
    let unrecorded = first + (last - first + 1 - recorded).max(0);
    (unrecorded * median, unrecorded)
}

/// Steps of a Flight Recorder rank's ops, from its trace's `ProfilerStep`
/// spans.
/// Whether `op` has a root (its members must agree on it).
pub(super) fn rooted(op: &str) -> bool {
    matches!(op, "broadcast" | "reduce" | "gather" | "scatter")
}

/// How far apart a dump entry's creation and its trace call may be to be
/// taken as one call, µs.
const SAME_CALL_US: f64 = 5_000.0;

/// Gives a dumped rank's entries what its trace knows and the dump does
/// not: the `ProfilerStep` of each, and the root of a rooted collective
/// (the trace call of the same op nearest in time, within
/// [`SAME_CALL_US`]).
fn annotate_steps(model: &mut Model, p: &RankProfile) {
    let roots: Vec<(f64, &'static str, i64)> = p
        .calls
        .iter()
        .filter(|c| rooted(c.kind.trace_op().0) && c.peer >= 0)
        .map(|c| (c.arrival, c.kind.trace_op().0, c.peer))
        .collect();
    let group_ranks: Vec<Vec<i64>> = model.groups.iter().map(|g| g.ranks.clone()).collect();
    let Some(ev) = model.ranks.get_mut(&p.rank) else {
        return;
    };
    for o in ev.ops.iter_mut().filter(|o| o.time_ns > 0) {
        let t = (o.time_ns - p.epoch_ns) as f64 / 1000.0;
        if let Some(&(n, _, _)) = p.steps.iter().find(|&&(_, s, e)| t >= s && t <= e) {
            o.step = n;
        }
        if o.root < 0 && rooted(o.op) {
            let nearest = roots
                .iter()
                .filter(|r| r.1 == o.op)
                .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()));
            if let Some(&(_, _, group_rank)) = nearest.filter(|r| (r.0 - t).abs() <= SAME_CALL_US) {
                o.root = usize::try_from(group_rank)
                    .ok()
                    .and_then(|i| group_ranks.get(o.group)?.get(i).copied())
                    .unwrap_or(-1);
            }
        }
    }
}
