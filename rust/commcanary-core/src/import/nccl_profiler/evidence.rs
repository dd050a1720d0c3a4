//! The plugin's logs as hang evidence: each process's operations as the
//! Flight Recorder entries the hang analysis already reads.
//!
//! Per process, one synthesized dump (`encoding` `nccl_profiler`): the
//! communicators as groups with their members (`pg_config`), per
//! communicator the last collective sequence number enqueued and completed
//! (`pg_status`, 1-based as the Flight Recorder counts), and one entry per
//! operation in start order. A collective keeps NCCL's sequence number
//! (+1); a p2p operation gets its running number per communicator. An
//! operation is *completed* when every child (kernel channel, proxy
//! operation) stopped, *started* when a child started, else *scheduled*; it
//! is pending unless completed — except on a communicator whose logs carry no
//! children at all (masks without `kernelch`/`proxyop`), where completion
//! cannot be told and nothing is claimed pending.

use commcanary_nccl_log::event::kind;
use rustc_hash::FxHashMap;

use super::job::{Identities, dtype, identities};
use super::logs::ProcessLog;
use super::ops::join;
use crate::error::Result;
use crate::import::flight_recorder::{EntryState, FrDump, FrEntry, PgConfig, PgStatus};
use crate::import::kineto::ops::Kind;

/// The `encoding` of a dump made from the plugin's logs.
pub const ENCODING: &str = "nccl_profiler";

/// One dump per process: (label, world rank, dump).
///
/// # Errors
/// What the import refuses: two processes with one rank, communicators that
/// disagree or whose members' world ranks are unknown.
pub fn as_dumps(logs: &[ProcessLog]) -> Result<Vec<(String, i64, FrDump)>> {
    let Identities {
        ranks,
        names,
        members,
        ..
    } = identities(logs)?;
    Ok(logs
        .iter()
        .zip(&ranks)
        .map(|(log, &rank)| (log.label(), rank, dump(log, &names, &members)))
        .collect())
}

fn dump(
    log: &ProcessLog,
    names: &FxHashMap<u64, String>,
    members: &FxHashMap<u64, Vec<i64>>,
) -> FrDump {
    let joined = join(log);
    let mut d = FrDump {
        version: format!("nccl-profiler-abi-v{}", log.header.abi),
        comm_lib_version: String::new(),
        encoding: ENCODING,
        timing: true,
        ..FrDump::default()
    };
    let mut texts: FxHashMap<String, u32> = FxHashMap::default();
    let mut intern = |d: &mut FrDump, s: String| -> u32 {
        *texts.entry(s.clone()).or_insert_with(|| {
            d.texts.push(s);
            (d.texts.len() - 1) as u32
        })
    };
    for c in &log.comms {
        let name = names[&c.comm_id].clone();
        d.groups.push((name.clone(), c.name.clone()));
        d.pg_config.push(PgConfig {
            name,
            desc: c.name.clone(),
            ranks: Some(members[&c.comm_id].clone()),
        });
    }
    for (context, p) in joined.progress.iter().enumerate() {
        d.pg_status.push(PgStatus {
            pg_id: context as i64,
            enqueued: p.last_enqueued + 1,
            started: -1,
            completed: if p.observed > 0 {
                p.last_completed + 1
            } else {
                p.last_enqueued + 1
            },
        });
    }
    let mut p2p_seq: FxHashMap<u32, i64> = FxHashMap::default();
    let mut op_id: FxHashMap<u32, i64> = FxHashMap::default();
    for (record, op) in joined.ops.iter().enumerate() {
        let letters: String = op
            .func
            .chars()
            .filter(char::is_ascii_alphabetic)
            .collect::<String>()
            .to_ascii_lowercase();
        let kind_of = Kind::of_normalized(&letters).unwrap_or(Kind::Other);
        let canonical: &'static str = match kind_of {
            Kind::Send => "send",
            Kind::Recv => "recv",
            Kind::Other => "other",
            k => k.trace_op().0,
        };
        let is_p2p = op.kind == kind::P2P;
        let ids = op_id.entry(op.context).or_default();
        *ids += 1;
        let p2p = if is_p2p {
            let n = p2p_seq.entry(op.context).or_default();
            *n += 1;
            *n
        } else {
            0
        };
        let knows_completion = joined
            .progress
            .get(op.context as usize)
            .is_some_and(|p| p.observed > 0)
            || is_p2p && op.children > 0;
        let (state, retired) = if op.completed() {
            (EntryState::Completed, true)
        } else if op.children > 0 {
            (EntryState::Started, false)
        } else {
            (EntryState::Scheduled, !knows_completion)
        };
        let elems = op.count as i64;
        let sizes = intern(&mut d, format!("[[{elems}]]"));
        let types = intern(
            &mut d,
            dtype(&op.datatype).map_or("unknown", |t| t.0).to_owned(),
        );
        let name = intern(&mut d, format!("nccl:{}", canonical));
        d.entries.push(FrEntry {
            group: op.context,
            pg_id: i64::from(op.context),
            record_id: record as i64,
            op_id: *ids,
            seq: if is_p2p { 0 } else { op.seq + 1 },
            p2p_seq: p2p,
            is_p2p,
            name,
            op: canonical,
            peer: if is_p2p {
                i64::from(op.root_or_peer)
            } else {
                -1
            },
            in_sizes: sizes,
            out_sizes: sizes,
            in_dtypes: types,
            out_dtypes: types,
            in_numel: elems,
            out_numel: elems,
            state,
            retired,
            created_ns: op.start_ns as i64,
            started_ns: 0,
            completed_ns: if op.completed() {
                op.end_ns() as i64
            } else {
                0
            },
            duration_ms: f64::NAN,
            timeout_ms: -1,
            stack: -1,
        });
    }
    d
}
