//! A merged `commcanary.trace.v1` back in the per-rank form: the
//! [`AlignedJob`] that the straggler, step and timeline analyses read, from
//! a trace that `import-kineto` merged from several ranks or that `capture`
//! merged from several processes.
//!
//! Each event with an arrival for every member (`rank_arrival_us`) and an
//! absolute `start_us` is one complete instance. Member `r` arrives at
//! `start_us + (rank_arrival_us[r] − min)`; it leaves at `start_us +
//! metadata.kineto_rank_end_us[r]` (or `capture_rank_end_us`) when the
//! trace measured it, else when the last member arrived plus `device_us`
//! when known, else when the last member arrived (time inside unknown, so
//! zero). A `point_to_point` is a send on its `sender_rank` and a recv on
//! its `receiver_rank`. Groups are the events' `group` names, with the union
//! of their collectives' ranks (`metadata.kineto_pg_desc` as the
//! description). `step` becomes each call's step; a rank's step spans its
//! calls of that step (first arrival to last end), as the trace keeps no
//! `ProfilerStep` spans. Events without every arrival (one rank's view, a
//! partial arrival map), without `start_us`, or of control ops are
//! skipped and counted.
//!
//! Invariants: every profile's calls are sorted by arrival (instances are
//! built after the sort); shifts are zero (the trace has one clock).

use rustc_hash::FxHashMap;

use super::job::AlignedJob;
use super::ops::{Kind, dtype, normalize};
use super::profile::{Call, GroupDecl, RankProfile, groups_of_rank};
use crate::error::{Error, Result};
use crate::json::{Doc, JsonLimits, parse_into};
use crate::trace::{Signature, Trace, flag};

use super::align::{Instance, Member};

/// What the conversion skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Events of two or more ranks without an arrival for every member.
    pub no_arrivals: usize,
    /// Events without `start_us`.
    pub no_start: usize,
    /// Control ops (`barrier`, …) and ops with no kind.
    pub control: usize,
}

/// One member's call before the per-rank sort: (event, call).
struct Pending {
    event: usize,
    call: Call,
}

/// The job in a merged trace read from `label`.
///
/// # Errors
/// No event with every member's arrival and a start (one rank's view, or a
/// trace written without arrivals): the analyses need each member's times.
pub fn job_from_trace(trace: &Trace, label: &str) -> Result<(AlignedJob, Skipped)> {
    job_and_events(trace, label).map(|(job, skipped, _)| (job, skipped))
}

/// [`job_from_trace`], with the trace event each of the job's instances
/// came from (instance `k` is event `events[k]`).
///
/// # Errors
/// As [`job_from_trace`].
pub fn job_and_events(trace: &Trace, label: &str) -> Result<(AlignedJob, Skipped, Vec<usize>)> {
    let ev = &trace.events;
    // Steps the importer recovered are not markers: the analyses recover
    // them again (and say so) rather than take them as `ProfilerStep`s.
    let markers = !steps_were_recovered(trace);
    let mut skipped = Skipped::default();
    let mut groups = Groups::default();
    let mut per_rank: FxHashMap<i64, Vec<Pending>> = FxHashMap::default();
    let mut event_group: Vec<usize> = vec![usize::MAX; ev.len()];
    let mut doc = Doc::new();
    for (i, slot) in event_group.iter_mut().enumerate() {
        let sig = &trace.signatures[ev.signature[i] as usize];
        let Some(kind) = kind_of(sig) else {
            skipped.control += 1;
            continue;
        };
        let start = ev.start_us[i];
        if start.is_nan() {
            skipped.no_start += 1;
            continue;
        }
        let full = ev.flags[i] & flag::HAS_ARRIVAL_MAP != 0;
        if sig.ranks.len() < 2 || !full {
            skipped.no_arrivals += usize::from(sig.ranks.len() >= 2);
            continue;
        }
        let at = ev.arrival_at[i] as usize;
        let raw = &ev.arrivals[at..at + sig.ranks.len()];
        let low = raw.iter().copied().fold(f64::INFINITY, f64::min);
        let arrivals: Vec<f64> = raw.iter().map(|a| start + a - low).collect();
        let meta = Metadata::read(trace.canonical_json(i), &mut doc)?;
        let last = arrivals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let inside = if ev.device_us[i].is_finite() {
            ev.device_us[i]
        } else {
            0.0
        };
        let g = groups.add(sig, kind, meta.desc.as_deref());
        *slot = g;
        for (k, (&rank, &arrival)) in sig.ranks.iter().zip(&arrivals).enumerate() {
            let end = match meta.ends.as_ref().and_then(|e| e.get(k)) {
                Some(&e) => (start + e).max(arrival),
                None => last + inside,
            };
            let kind = match (kind, sig.sender_rank) {
                (Kind::Send | Kind::Recv, Some(s)) => {
                    if rank == s {
                        Kind::Send
                    } else {
                        Kind::Recv
                    }
                }
                (k, _) => k,
            };
            let step = if markers { ev.step[i] } else { f64::NAN };
            let call = member_call(sig, kind, arrival, end, meta.ends.is_some(), step);
            per_rank
                .entry(rank)
                .or_default()
                .push(Pending { event: i, call });
        }
    }
    if per_rank.is_empty() {
        return Err(Error::invalid(format!(
            "{label}: no event with every member's arrival (rank_arrival_us) and a start_us: \
             stragglers, steps and timelines need each member's times (import the ranks' traces \
             together, or capture with several processes)"
        )));
    }
    let events: Vec<usize> = (0..ev.len())
        .filter(|&i| event_group[i] != usize::MAX)
        .collect();
    Ok((
        assemble(per_rank, groups, &event_group, label),
        skipped,
        events,
    ))
}

/// The kind of an event's op (`point_to_point` is a send or recv, decided
/// per member); `None` for control ops.
fn kind_of(sig: &Signature) -> Option<Kind> {
    let op = String::from_utf8_lossy(&sig.op);
    if op == "point_to_point" {
        return sig.sender_rank.map(|_| Kind::Send);
    }
    Kind::of_normalized(&normalize(&op))
}

fn member_call(
    sig: &Signature,
    kind: Kind,
    arrival: f64,
    end: f64,
    measured: bool,
    step: f64,
) -> Call {
    let unquoted = |v: &Option<Vec<u8>>| {
        v.as_ref()
            .map(|t| String::from_utf8_lossy(t).trim_matches('"').to_owned())
    };
    let number = |v: &Option<Vec<u8>>| {
        unquoted(v)
            .and_then(|t| t.parse::<i64>().ok())
            .unwrap_or(-1)
    };
    let dtype = unquoted(&sig.dtype).and_then(|d| dtype(&d));
    // Element counts, as a rank's own trace records them: step recovery keys
    // calls by them (a DDP step's buckets differ in size, not in op).
    let elems = sig.bytes / dtype.map_or(1, |d| d.1.max(1));
    Call {
        bytes: sig.bytes,
        in_elems: elems,
        out_elems: elems,
        dtype: dtype.map_or("unknown", |d| d.0),
        peer_global: match kind {
            Kind::Send => sig.receiver_rank.unwrap_or(-1),
            Kind::Recv => sig.sender_rank.unwrap_or(-1),
            _ => number(&sig.root_rank),
        },
        tag: number(&sig.tag),
        group: 0,
        end_measured: measured,
        step: if step.is_finite() { step as i64 } else { -1 },
        ..Call::bare(kind, arrival, end)
    }
}

/// The per-event metadata the conversion reads.
struct Metadata {
    ends: Option<Vec<f64>>,
    desc: Option<String>,
}

impl Metadata {
    fn read(event_json: &[u8], doc: &mut Doc) -> Result<Metadata> {
        let mut out = Metadata {
            ends: None,
            desc: None,
        };
        let has = |k: &[u8]| event_json.windows(k.len()).any(|w| w == k);
        if !has(b"_rank_end_us") && !has(b"kineto_pg_desc") {
            return Ok(out);
        }
        *doc = parse_into(event_json, JsonLimits::default(), std::mem::take(doc))?;
        let Some(meta) = doc.root().and_then(|r| r.get("metadata")) else {
            return Ok(out);
        };
        let ends = meta
            .get("kineto_rank_end_us")
            .or_else(|| meta.get("capture_rank_end_us"));
        out.ends = ends.filter(|e| e.is_array()).and_then(|e| {
            e.elements()
                .map(|v| v.as_number().filter(|x| x.is_finite()))
                .collect::<Option<Vec<f64>>>()
        });
        out.desc = meta
            .get("kineto_pg_desc")
            .and_then(|d| d.as_str())
            .map(str::to_owned);
        Ok(out)
    }
}

/// The job's groups, by name, as events reveal them.
#[derive(Default)]
struct Groups {
    decls: Vec<GroupDecl>,
    /// Whether a group's ranks came from a collective (p2p pairs only widen
    /// a group no collective has described).
    from_collective: Vec<bool>,
    by_name: FxHashMap<Vec<u8>, usize>,
}

impl Groups {
    fn add(&mut self, sig: &Signature, kind: Kind, desc: Option<&str>) -> usize {
        let g = *self.by_name.entry(sig.group.clone()).or_insert_with(|| {
            self.decls.push(GroupDecl {
                name: String::from_utf8_lossy(&sig.group).into_owned(),
                desc: String::new(),
                ranks: Vec::new(),
            });
            self.from_collective.push(false);
            self.decls.len() - 1
        });
        let decl = &mut self.decls[g];
        if let Some(d) = desc.filter(|_| decl.desc.is_empty()) {
            decl.desc = d.to_owned();
        }
        let collective = !kind.is_p2p();
        if collective && !self.from_collective[g] {
            decl.ranks.clear();
            self.from_collective[g] = true;
        }
        if collective || !self.from_collective[g] {
            decl.ranks.extend(&sig.ranks);
            decl.ranks.sort_unstable();
            decl.ranks.dedup();
        }
        g
    }
}

/// Profiles (calls sorted by arrival, step spans from the calls) and one
/// complete instance per used event.
fn assemble(
    per_rank: FxHashMap<i64, Vec<Pending>>,
    groups: Groups,
    event_group: &[usize],
    label: &str,
) -> AlignedJob {
    let mut ranks: Vec<i64> = per_rank.keys().copied().collect();
    ranks.sort_unstable();
    let world = ranks.last().map_or(0, |r| r + 1);
    let mut by_rank = per_rank;
    let mut members: FxHashMap<usize, Vec<Member>> = FxHashMap::default();
    let mut profiles = Vec::with_capacity(ranks.len());
    for (slot, &rank) in ranks.iter().enumerate() {
        let mut pending = by_rank.remove(&rank).unwrap_or_default();
        pending.sort_by(|a, b| {
            a.call
                .arrival
                .total_cmp(&b.call.arrival)
                .then(a.event.cmp(&b.event))
        });
        let (mine, local) = groups_of_rank(&groups.decls, rank);
        let mut calls = Vec::with_capacity(pending.len());
        for (ci, p) in pending.into_iter().enumerate() {
            let g = event_group[p.event];
            members
                .entry(p.event)
                .or_default()
                .push(Member { slot, call: ci });
            let mut call = p.call;
            call.group = local.get(&g).copied().unwrap_or(-1);
            calls.push(call);
        }
        profiles.push(RankProfile {
            rank,
            world_size: Some(world),
            backend: None,
            groups: mine.iter().map(|&g| groups.decls[g].clone()).collect(),
            epoch_ns: 0,
            steps: step_spans(&calls),
            calls,
            names: vec![crate::document::TRACE.to_owned()],
            ..RankProfile::default()
        });
    }
    let group_maps = profiles
        .iter()
        .map(|p| {
            (p.groups.iter())
                .map(|d| {
                    groups
                        .decls
                        .iter()
                        .position(|j| j.name == d.name)
                        .unwrap_or(0)
                })
                .collect()
        })
        .collect();
    let mut events: Vec<(usize, Vec<Member>)> = members.into_iter().collect();
    events.sort_unstable_by_key(|e| e.0);
    let instances = events
        .into_iter()
        .map(|(event, mut members)| {
            members.sort_unstable_by_key(|m| m.slot);
            Instance {
                group: event_group[event],
                members,
                complete: true,
                ambiguous: false,
            }
        })
        .collect();
    AlignedJob {
        slot_of_rank: ranks.iter().enumerate().map(|(i, &r)| (r, i)).collect(),
        labels: vec![label.to_owned(); ranks.len()],
        shifts: vec![0.0; ranks.len()],
        epoch: 0,
        groups: groups.decls,
        group_maps,
        profiles,
        instances,
        source: crate::document::TRACE,
        in_flight: Vec::new(),
    }
}

/// Whether the trace's `step` column was recovered from the collective
/// sequence (`workload.kineto_steps` or `workload.capture_steps` is
/// `"recovered"`) rather than read from `ProfilerStep` markers.
#[must_use]
pub fn steps_were_recovered(trace: &Trace) -> bool {
    let Some(workload) = trace.member("workload") else {
        return false;
    };
    let Ok(doc) = crate::json::parse(workload, crate::json::JsonLimits::default()) else {
        return false;
    };
    let root = doc.root();
    ["kineto_steps", "capture_steps"]
        .iter()
        .any(|key| root.and_then(|w| w.get(key)).and_then(|v| v.as_str()) == Some("recovered"))
}

/// `(N, first arrival, last end)` of each step among `calls`.
fn step_spans(calls: &[Call]) -> Vec<(i64, f64, f64)> {
    let mut spans: std::collections::BTreeMap<i64, (f64, f64)> = Default::default();
    for c in calls.iter().filter(|c| c.step >= 0) {
        let s = spans
            .entry(c.step)
            .or_insert((f64::INFINITY, f64::NEG_INFINITY));
        s.0 = s.0.min(c.arrival);
        s.1 = s.1.max(c.end);
    }
    spans.into_iter().map(|(n, (a, b))| (n, a, b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{LoadOptions, load_bytes};

    const TRACE: &str = r#"{"format":"commcanary.trace.v1","events":[
      {"op":"all_reduce","bytes":1024,"ranks":[0,1,2],"group":"0","start_us":100.0,
       "rank_arrival_us":[5.0,0.0,20.0],"step":3,
       "metadata":{"kineto_pg_desc":"default_pg","kineto_rank_end_us":[30.0,30.5,31.0]}},
      {"op":"point_to_point","bytes":64,"ranks":[0,2],"sender_rank":2,"receiver_rank":0,
       "group":"0","start_us":200.0,"rank_arrival_us":{"0":0.0,"2":4.0},"step":3},
      {"op":"all_gather","bytes":256,"ranks":[1,2],"group":"7","start_us":150.0,
       "rank_arrival_us":[1.0,3.0],"device_us":10.0},
      {"op":"all_reduce","bytes":8,"ranks":[0,1,2],"start_us":300.0},
      {"op":"all_reduce","bytes":8,"ranks":[0,1,2],"rank_arrival_us":[0,0,0]}
    ]}"#;

    fn job() -> (AlignedJob, Skipped) {
        let trace = load_bytes(TRACE.as_bytes(), &LoadOptions::default()).expect("trace loads");
        job_from_trace(&trace, "t.json").expect("a job")
    }

    #[test]
    fn events_with_every_arrival_become_complete_instances() {
        let (job, skipped) = job();
        assert_eq!(
            skipped,
            Skipped {
                no_arrivals: 1,
                no_start: 1,
                control: 0
            }
        );
        assert_eq!(job.source, "commcanary.trace.v1");
        assert_eq!(job.instances.len(), 3);
        assert!(job.instances.iter().all(|i| i.complete));
        let ranks: Vec<i64> = job.profiles.iter().map(|p| p.rank).collect();
        assert_eq!(ranks, [0, 1, 2]);
        assert_eq!(job.groups[0].desc, "default_pg");
        assert_eq!(job.groups[0].ranks, [0, 1, 2]); // the p2p pair does not narrow it
        assert_eq!(job.groups[1].ranks, [1, 2]);
    }

    #[test]
    fn arrivals_and_ends_are_on_the_trace_clock() {
        let (job, _) = job();
        let call = |rank: usize, i: usize| &job.profiles[rank].calls[i];
        // The all_reduce: arrivals start + offset, measured ends.
        assert_eq!((call(2, 0).arrival, call(2, 0).end), (120.0, 131.0));
        assert!(call(2, 0).end_measured && call(2, 0).step == 3);
        // The all_gather: arrivals less their minimum; no measured ends, so
        // the last arrival (152) + device time.
        let gather = &job.profiles[1].calls[1];
        assert_eq!(
            (gather.kind, gather.arrival, gather.end),
            (Kind::AllGather, 150.0, 162.0)
        );
        assert!(!gather.end_measured && gather.step == -1);
        // The transfer: a send on the sender, a recv on the receiver.
        let p2p = |rank: usize| job.profiles[rank].calls.last().map(|c| (c.kind, c.arrival));
        assert_eq!(p2p(2), Some((Kind::Send, 204.0)));
        assert_eq!(p2p(0), Some((Kind::Recv, 200.0)));
        // Calls are sorted by arrival, and instances point at them.
        for p in &job.profiles {
            assert!(p.calls.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        }
        for inst in &job.instances {
            let bytes: Vec<i64> = (inst.members.iter())
                .map(|m| job.profiles[m.slot].calls[m.call].bytes)
                .collect();
            assert!(bytes.windows(2).all(|w| w[0] == w[1]));
        }
        assert_eq!(job.profiles[0].steps, [(3, 105.0, 204.0)]); // its calls of step 3
    }

    #[test]
    fn a_trace_of_one_ranks_view_is_refused() {
        let one = r#"{"format":"commcanary.trace.v1","events":[
          {"op":"all_reduce","bytes":8,"ranks":[0,1],"start_us":0.0}]}"#;
        let trace = load_bytes(one.as_bytes(), &LoadOptions::default()).expect("trace loads");
        let err = job_from_trace(&trace, "one.json").err().expect("refused");
        assert!(
            err.to_string()
                .contains("one.json: no event with every member's arrival"),
            "{err}"
        );
    }
}
