//! Flight Recorder dumps as a job of per-rank calls (an [`AlignedJob`]), so
//! the timeline (and what it draws on: steps recovered from the collective
//! sequence, straggler findings) can be made from the evidence people
//! usually have after a hang, when no profiler trace was recorded.
//!
//! The dumps are reduced exactly as the hang diagnosis reduces them
//! ([`super::fr::add_dumps`]: one snapshot per rank, membership resolved,
//! the same-job and same-run checks). Each entry becomes a call on its
//! group: it arrives when the rank issued it (`time_created_ns`); it ends
//! when it completed where the dump records it (NCCL), else, for a call
//! every member of its group issued, when the last member arrived (a
//! collective cannot finish earlier: the time inside it is unknown and
//! drawn as zero), else — a call still in flight when the dump was taken
//! (listed in [`AlignedJob::in_flight`]) — at the last moment any dump
//! records (gloo's dumps do not say when they were taken), else where it
//! arrived. Collectives
//! are matched across ranks by group and sequence number; a send and a
//! receive by their pair's order. Barriers are not calls (as in traces).
//!
//! Invariants: calls are sorted by arrival on every rank; every instance's
//! members are calls of that instance's group; times are µs from the
//! earliest issue time of any entry (one clock: CLOCK_REALTIME).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::fr::{self, LabeledDump};
use super::model::{Model, Op};
use crate::error::{Error, Result};
use crate::import::kineto::AlignedJob;
use crate::import::kineto::align::{Instance, Member};
use crate::import::kineto::ops::{Kind, dtype, normalize};
use crate::import::kineto::profile::{Call, GroupDecl, RankProfile, groups_of_rank};

/// The job the dumps describe.
///
/// # Errors
/// Dumps of different jobs or runs (as for a hang diagnosis); no call of
/// any kind in them.
pub fn job_from_dumps(dumps: Vec<LabeledDump>) -> Result<AlignedJob> {
    let mut model = Model::default();
    fr::add_dumps(&mut model, dumps, &Vec::new())?;
    let origin_ns = (model.ranks.values())
        .flat_map(|r| r.ops.iter().map(|o| o.time_ns))
        .filter(|&t| t > 0)
        .min()
        .ok_or_else(|| Error::invalid("no timed call in the Flight Recorder dumps"))?;
    let us = |ns: i64| (ns - origin_ns) as f64 / 1000.0;
    let last_us = (model.ranks.values())
        .flat_map(|r| r.ops.iter().flat_map(|o| [o.time_ns, o.done_ns]))
        .filter(|&t| t > 0)
        .map(us)
        .fold(0.0, f64::max);
    let ranks: Vec<i64> = model.ranks.keys().copied().collect();
    let groups: Vec<GroupDecl> = (model.groups.iter())
        .map(|g| GroupDecl {
            name: g.name.clone(),
            desc: g.desc.clone(),
            ranks: g.ranks.clone(),
        })
        .collect();
    // Per rank: (op, call), ordered by arrival; then instances by key.
    let mut profiles = Vec::with_capacity(ranks.len());
    let mut keyed: BTreeMap<Key, Vec<(Member, f64)>> = BTreeMap::new();
    let mut group_maps: Vec<Vec<usize>> = Vec::with_capacity(ranks.len());
    let mut open_calls = Vec::new();
    for (slot, &rank) in ranks.iter().enumerate() {
        let ev = &model.ranks[&rank];
        let (mine, local) = groups_of_rank(&groups, rank);
        let mut calls: Vec<(Call, Key, bool)> = Vec::with_capacity(ev.ops.len());
        let mut pairs: FxHashMap<(usize, i64, i64), i64> = FxHashMap::default();
        for o in ev.ops.iter().filter(|o| o.time_ns > 0) {
            let Some(kind) = Kind::of_normalized(&normalize(o.op)) else {
                continue;
            };
            let peer = peer_global(&model, o, kind);
            let key = match kind {
                Kind::Send | Kind::Recv if peer >= 0 => {
                    let (from, to) = if kind == Kind::Send {
                        (rank, peer)
                    } else {
                        (peer, rank)
                    };
                    let k = pairs.entry((o.group, from, to)).or_insert(0);
                    *k += 1;
                    Key::Transfer(o.group, from, to, *k - 1)
                }
                Kind::Send | Kind::Recv => Key::None,
                _ => Key::Collective(o.group, o.seq),
            };
            let call = call_of(&model, o, kind, peer, &local, us(o.time_ns));
            calls.push((call, key, o.pending));
        }
        calls.sort_by(|a, b| a.0.arrival.total_cmp(&b.0.arrival));
        let mut own_calls = Vec::with_capacity(calls.len());
        for (i, (mut call, key, open)) in calls.into_iter().enumerate() {
            let member = Member { slot, call: i };
            if key != Key::None {
                keyed.entry(key).or_default().push((member, call.arrival));
            }
            // A call in flight when its rank was dumped runs to the
            // evidence's end.
            if open {
                if !call.end_measured {
                    call.end = last_us.max(call.arrival);
                }
                open_calls.push(member);
            }
            own_calls.push(call);
        }
        profiles.push(RankProfile {
            rank,
            world_size: Some(model.world),
            backend: None,
            groups: mine.iter().map(|&g| groups[g].clone()).collect(),
            epoch_ns: origin_ns,
            calls: own_calls,
            names: vec!["flight_recorder".to_owned()],
            ..RankProfile::default()
        });
        group_maps.push(mine);
    }
    let mut instances = Vec::with_capacity(keyed.len());
    for (key, mut members) in keyed {
        let (group, expected) = match key {
            Key::Collective(g, _) => (g, groups[g].ranks.len()),
            Key::Transfer(g, ..) => (g, 2),
            Key::None => continue,
        };
        members.sort_by_key(|m| m.0.slot);
        let complete = members.len() == expected;
        let last = members
            .iter()
            .map(|m| m.1)
            .fold(f64::NEG_INFINITY, f64::max);
        for (m, _) in &members {
            let c = &mut profiles[m.slot].calls[m.call];
            if !c.end_measured && complete {
                c.end = c.end.max(last);
            }
        }
        instances.push(Instance {
            group,
            members: members.into_iter().map(|m| m.0).collect(),
            complete,
            ambiguous: false,
        });
    }
    let labels = (ranks.iter())
        .map(|r| model.ranks[r].files.first().cloned().unwrap_or_default())
        .collect();
    Ok(AlignedJob {
        slot_of_rank: ranks.iter().enumerate().map(|(i, &r)| (r, i)).collect(),
        labels,
        shifts: vec![0.0; ranks.len()],
        epoch: origin_ns,
        groups,
        group_maps,
        profiles,
        instances,
        source: "flight_recorder",
        in_flight: open_calls,
    })
}

/// How a call pairs across ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// (group, sequence number).
    Collective(usize, i64),
    /// (group, sender, receiver, k-th transfer of that pair).
    Transfer(usize, i64, i64, i64),
    /// Not paired (a transfer whose peer is unknown).
    None,
}

/// A transfer's peer as a global rank, −1 when unknown.
fn peer_global(model: &Model, o: &Op, kind: Kind) -> i64 {
    if !matches!(kind, Kind::Send | Kind::Recv) || o.peer < 0 {
        return -1;
    }
    if o.peer_is_global {
        return o.peer;
    }
    (model.groups.get(o.group))
        .and_then(|g| g.ranks.get(o.peer as usize))
        .copied()
        .unwrap_or(-1)
}

fn call_of(
    model: &Model,
    o: &Op,
    kind: Kind,
    peer: i64,
    local: &FxHashMap<usize, i64>,
    arrival: f64,
) -> Call {
    let text = |i: u32| model.texts.get(i as usize).map_or("", String::as_str);
    let element = dtype(text(o.in_dtypes).split(',').next().unwrap_or(""));
    let size = element.map_or(1, |d| d.1);
    let in_elems = elements(text(o.in_sizes));
    let out_elems = elements(text(o.out_sizes));
    let done = o.done_ns > 0 && o.done_ns >= o.time_ns;
    let end = if done {
        arrival + (o.done_ns - o.time_ns) as f64 / 1000.0
    } else {
        arrival
    };
    Call {
        bytes: in_elems.max(out_elems).saturating_mul(size),
        in_elems,
        out_elems,
        dtype: element.map_or("unknown", |d| d.0),
        peer_global: peer,
        group: local.get(&o.group).copied().unwrap_or(-1),
        seq: if matches!(kind, Kind::Send | Kind::Recv) {
            -1
        } else {
            o.seq
        },
        end_measured: done,
        ..Call::bare(kind, arrival, end)
    }
}

/// Total elements of a sizes text (`[[2, 3], [4]]` is 10; `[[]]`, a
/// scalar, is 1); 0 when it cannot be read.
fn elements(sizes: &str) -> i64 {
    let inner = sizes.trim().trim_start_matches('[').trim_end_matches(']');
    if sizes.trim() == "[]" {
        return 0;
    }
    inner
        .split("],")
        .map(|shape| {
            let dims = shape.trim().trim_start_matches('[').trim_end_matches(']');
            dims.split(',')
                .filter(|d| !d.trim().is_empty())
                .map(|d| d.trim().parse::<i64>().unwrap_or(0).max(0))
                .fold(1i64, i64::saturating_mul)
        })
        .fold(0i64, i64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::flight_recorder::read_dump;

    /// A gloo-style dump of `rank`: all_reduces issued at the given times
    /// (ms), the last `pending` of them still in flight.
    fn dump(rank: i64, created_ms: &[i64], pending: usize) -> LabeledDump {
        let n = created_ms.len();
        let entries: Vec<String> = (created_ms.iter().enumerate())
            .map(|(i, t)| {
                format!(
                    r#"{{"collective_seq_id":{s},"op_id":{s},"p2p_seq_id":0,"pg_id":0,"record_id":{i},
                    "process_group":["0","default_pg"],"profiling_name":"gloo:all_reduce","is_p2p":false,
                    "input_sizes":[[4, 2]],"output_sizes":[[4, 2]],"input_dtypes":["Float"],"output_dtypes":["Float"],
                    "retired":{r},"state":"scheduled","time_created_ns":{c},"time_discovered_started_ns":0,
                    "time_discovered_completed_ns":0,"timeout_ms":5000}}"#,
                    s = i + 1,
                    r = i + pending < n,
                    c = 1_700_000_000_000_000_000i64 + t * 1_000_000,
                )
            })
            .collect();
        let text = format!(
            r#"{{"version":"2.10","comm_lib_version":"","pg_config":{{"0":{{"name":"0","desc":"default_pg","ranks":"[0, 1]"}}}},"pg_status":{{}},"entries":[{}]}}"#,
            entries.join(",")
        );
        LabeledDump {
            label: format!("fr_trace_rank_{rank}"),
            rank,
            dump: read_dump(text.as_bytes()).unwrap(),
        }
    }

    #[test]
    fn dumps_become_matched_calls_with_the_last_arrival_as_the_end() {
        // Rank 1 is 30 ms late to the second all_reduce; both wait in the
        // third, which rank 0 issued last.
        let job =
            job_from_dumps(vec![dump(0, &[0, 100, 200], 1), dump(1, &[1, 130, 190], 1)]).unwrap();
        assert_eq!(job.source, "flight_recorder");
        assert_eq!(job.profiles.len(), 2);
        assert_eq!(job.groups[0].ranks, vec![0, 1]);
        assert_eq!(job.instances.len(), 3);
        assert!(
            job.instances
                .iter()
                .all(|i| i.complete && i.members.len() == 2)
        );
        let r0 = &job.profiles[0].calls;
        assert_eq!(r0[0].bytes, 32);
        assert_eq!(r0[0].dtype, "float32");
        assert_eq!((r0[1].arrival, r0[1].end), (100_000.0, 130_000.0));
        assert!(!r0[1].end_measured && r0[1].step == -1);
        // The calls in flight end at the last issue time of the evidence.
        assert_eq!(job.in_flight.len(), 2);
        assert!(job.in_flight.iter().all(|m| m.call == 2));
        assert_eq!(r0[2].end, 200_000.0);
        assert_eq!(job.profiles[1].calls[2].end, 200_000.0);
    }

    #[test]
    fn a_rank_without_a_dump_leaves_its_collectives_partial() {
        // The group's ranks come from pg_config: rank 1 has no dump.
        let job = job_from_dumps(vec![dump(0, &[0, 100], 0)]).unwrap();
        assert_eq!(job.instances.len(), 2);
        assert!(job.instances.iter().all(|i| !i.complete));
        // No member came later: the end stays at the arrival.
        assert_eq!(job.profiles[0].calls[1].end, 100_000.0);
    }

    #[test]
    fn elements_of_sizes_texts() {
        assert_eq!(elements("[[3274]]"), 3274);
        assert_eq!(elements("[[2, 3], [4]]"), 10);
        assert_eq!(elements("[[2,3],[4]]"), 10);
        assert_eq!(elements("[[]]"), 1);
        assert_eq!(elements("[]"), 0);
        assert_eq!(elements("[[x]]"), 0);
    }
}
