//! Every process's operations → rank profiles → the job import.
//!
//! A communicator becomes a group named by its `commName` (PyTorch passes
//! `<group_desc>:<group_name>`), or by its id when it has none; its members'
//! world ranks come from each member process's `RANK`, or, for a communicator
//! as large as the world whose member logs are missing, from its own ranks.
//! Calls keep NCCL's sequence numbers, so the aligner matches instances by
//! communicator and sequence number.

use std::path::Path;

use commcanary_nccl_log::event::kind;
use commcanary_nccl_log::frame::Comm;
use rustc_hash::FxHashMap;

use super::logs::{ProcessLog, read_dir};
use super::ops::{CommProgress, ProcessOps, join};
use crate::error::{Error, Result};
use crate::import::kineto::job::{JobImport, JobOptions, import_job};
use crate::import::kineto::ops::{ALGORITHMS, Kind};
use crate::import::kineto::profile::{Call, FileFacts, GroupDecl, ProfileCounts, RankProfile};

/// A directory's import, and what the logs say beside the trace.
#[derive(Debug, Clone)]
pub struct NcclJob {
    /// The trace and its counts.
    pub import: JobImport,
    /// Per process (in rank order): its label, world rank, and per
    /// communicator (name, progress).
    pub processes: Vec<ProcessSummary>,
}

/// One process's facts.
#[derive(Debug, Clone)]
pub struct ProcessSummary {
    /// `host-pid`.
    pub label: String,
    /// World rank.
    pub rank: i64,
    /// The ABI NCCL loaded.
    pub abi: u32,
    /// Segments read, and how many are sealed.
    pub segments: (usize, usize),
    /// Records dropped by full rings.
    pub dropped: u64,
    /// Records in cut last frames.
    pub torn: u64,
    /// Stop/state records without their start.
    pub orphans: u64,
    /// Per communicator: its group name and progress.
    pub comms: Vec<(String, CommProgress)>,
}

/// NCCL's element type names → (canonical name, bytes).
#[must_use]
pub fn dtype(name: &str) -> Option<(&'static str, i64)> {
    let lower = name.trim().to_ascii_lowercase();
    Some(match lower.strip_prefix("nccl").unwrap_or(&lower) {
        "int8" | "char" => ("int8", 1),
        "uint8" => ("uint8", 1),
        "int32" | "int" => ("int32", 4),
        "uint32" => ("uint32", 4),
        "int64" => ("int64", 8),
        "uint64" => ("uint64", 8),
        "float16" | "half" => ("float16", 2),
        "float32" | "float" => ("float32", 4),
        "float64" | "double" => ("float64", 8),
        "bfloat16" => ("bfloat16", 2),
        "float8e4m3" => ("float8_e4m3fn", 1),
        "float8e5m2" => ("float8_e5m2", 1),
        _ => return None,
    })
}

/// The group name of each communicator id: its `commName`, made unique.
fn group_names(logs: &[ProcessLog]) -> FxHashMap<u64, String> {
    let mut named: FxHashMap<u64, String> = FxHashMap::default();
    for c in logs.iter().flat_map(|l| &l.comms) {
        named.entry(c.comm_id).or_insert_with(|| c.name.clone());
    }
    let mut uses: FxHashMap<String, u32> = FxHashMap::default();
    for n in named.values() {
        *uses.entry(n.clone()).or_default() += 1;
    }
    named
        .into_iter()
        .map(|(id, n)| {
            let name = if n.is_empty() {
                format!("nccl:{id:016x}")
            } else if uses[&n] > 1 {
                format!("{n}#{id:016x}")
            } else {
                n
            };
            (id, name)
        })
        .collect()
}

/// Each process's world rank: its `RANK`, else its rank in its largest
/// communicator.
fn world_ranks(logs: &[ProcessLog]) -> Result<Vec<i64>> {
    let ranks: Vec<i64> = logs
        .iter()
        .map(|l| {
            if l.header.world_rank >= 0 {
                l.header.world_rank
            } else {
                l.comms
                    .iter()
                    .max_by_key(|c| c.nranks)
                    .map_or(-1, |c| i64::from(c.rank))
            }
        })
        .collect();
    let mut seen: FxHashMap<i64, usize> = FxHashMap::default();
    for (i, &r) in ranks.iter().enumerate() {
        if r < 0 {
            return Err(Error::invalid(format!(
                "{}: no world rank (RANK was unset and no communicator was initialised)",
                logs[i].label()
            )));
        }
        if let Some(j) = seen.insert(r, i) {
            return Err(Error::invalid(format!(
                "{} and {} both say they are rank {r}: logs of two runs in one directory",
                logs[j].label(),
                logs[i].label()
            )));
        }
    }
    Ok(ranks)
}

/// Every communicator's member world ranks, by communicator rank.
fn members(logs: &[ProcessLog], ranks: &[i64], world: i64) -> Result<FxHashMap<u64, Vec<i64>>> {
    let mut out: FxHashMap<u64, (Comm, Vec<i64>)> = FxHashMap::default();
    for (l, &rank) in logs.iter().zip(ranks) {
        for c in &l.comms {
            if c.nranks <= 0
                || c.nranks as u64 > crate::limits::current().max_ranks
                || c.rank < 0
                || c.rank >= c.nranks
            {
                return Err(Error::invalid(format!(
                    "{}: communicator {:016x}: rank {} of {} ranks",
                    l.label(),
                    c.comm_id,
                    c.rank,
                    c.nranks
                )));
            }
            let entry = out
                .entry(c.comm_id)
                .or_insert_with(|| (c.clone(), vec![-1; c.nranks as usize]));
            if entry.0.nranks != c.nranks {
                return Err(Error::invalid(format!(
                    "{}: communicator {:016x} has {} ranks here and {} elsewhere",
                    l.label(),
                    c.comm_id,
                    c.nranks,
                    entry.0.nranks
                )));
            }
            entry.1[c.rank as usize] = rank;
        }
    }
    let mut done = FxHashMap::default();
    for (id, (c, mut m)) in out {
        if m.contains(&-1) {
            if i64::from(c.nranks) == world {
                for (i, r) in m.iter_mut().enumerate() {
                    if *r < 0 {
                        *r = i as i64;
                    }
                }
            } else {
                let missing: Vec<usize> = (0..m.len()).filter(|&i| m[i] < 0).collect();
                return Err(Error::invalid(format!(
                    "communicator '{}' ({id:016x}): no logs from its ranks {missing:?}, so their world ranks are unknown",
                    c.name
                )));
            }
        }
        done.insert(id, m);
    }
    Ok(done)
}

fn call_of(
    op: &super::ops::Op,
    group: i64,
    ranks_of_group: &[i64],
    epoch: u64,
    name: u32,
) -> Option<Call> {
    let letters: String = op
        .func
        .chars()
        .filter(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase();
    let kind = Kind::of_normalized(&letters)?;
    let (dtype, size) = dtype(&op.datatype).unwrap_or(("unknown", 1));
    let n = ranks_of_group.len() as i64;
    let elems = op.count as i64;
    let (in_elems, out_elems) = match kind {
        Kind::AllGather => (elems, elems * n),
        Kind::ReduceScatter => (elems * n, elems),
        Kind::AllToAll => (elems * n, elems * n),
        _ => (elems, elems),
    };
    let us = |ns: u64| ns.saturating_sub(epoch) as f64 / 1000.0;
    let peer_global = |r: i32| -> i64 {
        if r >= 0 {
            ranks_of_group.get(r as usize).copied().unwrap_or(-1)
        } else {
            -1
        }
    };
    let point = matches!(kind, Kind::Send | Kind::Recv);
    let algorithm = ALGORITHMS
        .iter()
        .position(|a| !a.is_empty() && a.eq_ignore_ascii_case(&op.algo))
        .unwrap_or(0) as u8;
    Some(Call {
        name,
        bytes: in_elems.max(out_elems).saturating_mul(size),
        in_elems,
        out_elems,
        dtype,
        peer: if point {
            -1
        } else {
            i64::from(op.root_or_peer)
        },
        peer_global: if point {
            peer_global(op.root_or_peer)
        } else {
            -1
        },
        group,
        seq: op.seq,
        end_measured: op.completed(),
        device_us: op
            .gpu_span
            .map_or(f64::NAN, |(a, b)| (b - a) as f64 / 1000.0),
        kernels: op.kernel_channels,
        algorithm,
        ..Call::bare(kind, us(op.start_ns), us(op.end_ns()))
    })
}

/// Who is who in a set of logs: each process's world rank, the world size,
/// each communicator's group name and its members' world ranks.
pub(crate) struct Identities {
    /// World rank per log.
    pub ranks: Vec<i64>,
    /// World size.
    pub world: i64,
    /// Group name per communicator id.
    pub names: FxHashMap<u64, String>,
    /// Member world ranks per communicator id, by communicator rank.
    pub members: FxHashMap<u64, Vec<i64>>,
}

/// The [`Identities`] of `logs`.
///
/// # Errors
/// Two processes with one rank, communicators that disagree, or members whose
/// world rank is unknown.
pub(crate) fn identities(logs: &[ProcessLog]) -> Result<Identities> {
    let ranks = world_ranks(logs)?;
    let world = logs
        .iter()
        .map(|l| l.header.world_size)
        .chain(
            logs.iter()
                .flat_map(|l| l.comms.iter().map(|c| i64::from(c.nranks))),
        )
        .max()
        .unwrap_or(0)
        .max(ranks.iter().max().map_or(0, |r| r + 1));
    let names = group_names(logs);
    let members = members(logs, &ranks, world)?;
    Ok(Identities {
        ranks,
        world,
        names,
        members,
    })
}

/// The rank profiles of a directory's logs (one per process), their labels,
/// and each process's summary.
///
/// # Errors
/// Logs of two runs, communicators that disagree, or members whose world rank
/// is unknown.
pub fn profiles(
    logs: &[ProcessLog],
) -> Result<(Vec<RankProfile>, Vec<String>, Vec<ProcessSummary>)> {
    let Identities {
        ranks,
        world,
        names,
        members,
    } = identities(logs)?;
    let joined: Vec<ProcessOps> = logs.iter().map(join).collect();
    let epoch = joined
        .iter()
        .flat_map(|j| j.ops.iter().map(|o| o.start_ns))
        .min()
        .unwrap_or(0);
    let mut profiles = Vec::with_capacity(logs.len());
    let mut summaries = Vec::with_capacity(logs.len());
    for ((log, ops), &rank) in logs.iter().zip(&joined).zip(&ranks) {
        let groups: Vec<GroupDecl> = log
            .comms
            .iter()
            .map(|c| GroupDecl {
                name: names[&c.comm_id].clone(),
                desc: c.name.clone(),
                ranks: members[&c.comm_id].clone(),
            })
            .collect();
        let mut funcs: Vec<String> = Vec::new();
        let mut counts = ProfileCounts {
            events: log.records.len() as u64,
            ..ProfileCounts::default()
        };
        let mut calls = Vec::with_capacity(ops.ops.len());
        for op in &ops.ops {
            let name = funcs.iter().position(|f| *f == op.func).unwrap_or_else(|| {
                funcs.push(op.func.clone());
                funcs.len() - 1
            }) as u32;
            let g = op.context as usize;
            match call_of(op, g as i64, &groups[g].ranks, epoch, name) {
                None => counts.control += 1,
                Some(c) if c.bytes == 0 => counts.empty += 1,
                Some(c) if c.dtype == "unknown" => {
                    counts.undtyped += 1;
                    calls.push(c);
                }
                Some(c) => calls.push(c),
            }
        }
        calls.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
        summaries.push(ProcessSummary {
            label: log.label(),
            rank,
            abi: log.header.abi,
            segments: (log.files.len(), log.sealed),
            dropped: log.dropped,
            torn: log.torn,
            orphans: ops.orphans,
            comms: log
                .comms
                .iter()
                .zip(&ops.progress)
                .map(|(c, p)| (names[&c.comm_id].clone(), *p))
                .collect(),
        });
        profiles.push(RankProfile {
            rank,
            world_size: Some(world),
            backend: Some("nccl".to_owned()),
            groups,
            epoch_ns: epoch as i64,
            calls,
            names: funcs,
            files: vec![FileFacts {
                bytes: log.bytes,
                base_time_ns: epoch as i64,
                process: i64::from(log.header.pid),
            }],
            counts,
            ..RankProfile::default()
        });
    }
    let labels = logs.iter().map(ProcessLog::label).collect();
    Ok((profiles, labels, summaries))
}

/// Imports a log directory as a job trace.
///
/// # Errors
/// What [`read_dir`], [`profiles`] and the job import refuse.
pub fn import_dir(dir: &Path, options: &JobOptions) -> Result<NcclJob> {
    let logs = read_dir(dir)?;
    let (profiles, labels, mut processes) = profiles(&logs)?;
    let import = import_job(profiles, &labels, options)?;
    processes.sort_by_key(|p| p.rank);
    Ok(NcclJob { import, processes })
}

/// Whether a start record's kind is an operation this import reads.
#[must_use]
pub fn is_operation(k: u8) -> bool {
    matches!(k, kind::COLL | kind::CE_COLL | kind::P2P)
}
