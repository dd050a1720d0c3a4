//! One process's records joined into operations.
//!
//! A start record opens an event under its handle; stop and state records
//! name that handle; a child names its parent's handle. Records come from
//! many threads' rings in any order, so the join reads every start first.
//!
//! NCCL stops a collective or p2p event when it is *enqueued*; it runs later,
//! on the GPU and the proxy thread. Its completion is therefore inferred the
//! way the profiler ABI documents: the latest stop among its children
//! (kernel-channel and proxy-operation events), measured only when it has
//! children and every child stopped. Kernel channels also carry the GPU's own
//! `globaltimer` stamps (start in the descriptor, stop in the
//! `ncclProfilerKernelChStop` state), whose span is the device time.

use commcanary_nccl_log::event::{kind, state};
use commcanary_nccl_log::record::{call, flag, slot};
use rustc_hash::FxHashMap;

use super::logs::ProcessLog;

/// A collective, copy-engine collective or point-to-point operation of one
/// process.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Context (communicator index in the process).
    pub context: u32,
    /// [`kind::COLL`], [`kind::CE_COLL`] or [`kind::P2P`].
    pub kind: u8,
    /// NCCL's sequence number in the communicator (collectives), −1 for p2p.
    pub seq: i64,
    /// `func` (`AllReduce`, `Send`, …).
    pub func: String,
    /// `datatype` (`ncclFloat32`, …).
    pub datatype: String,
    /// Elements.
    pub count: u64,
    /// Root (collectives) or peer (p2p), as a communicator rank; −1 when none.
    pub root_or_peer: i32,
    /// `algo` (`RING`, …), empty when unknown.
    pub algo: String,
    /// `proto`, empty when unknown.
    pub proto: String,
    /// Channels.
    pub channels: u32,
    /// When NCCL started the event (enqueue began), host ns.
    pub start_ns: u64,
    /// When NCCL stopped it (enqueued), host ns.
    pub enqueued_ns: Option<u64>,
    /// Children started (kernel channels, proxy operations).
    pub children: u32,
    /// Children stopped.
    pub children_stopped: u32,
    /// The latest child stop, host ns.
    pub children_end_ns: Option<u64>,
    /// GPU `globaltimer` span of its kernel channels, ns: (earliest start,
    /// latest stop).
    pub gpu_span: Option<(u64, u64)>,
    /// Kernel channels seen.
    pub kernel_channels: u32,
}

impl Op {
    /// The operation a start record of kind coll, ceColl or p2p opens.
    fn of_start(log: &ProcessLog, r: &commcanary_nccl_log::Record) -> Op {
        let p = &r.payload;
        let text = |s: usize| log.text(p[s]).to_owned();
        // (seq, func, datatype, count, root or peer) slots by kind.
        let (seq, func, dtype, count, root) = match r.kind {
            kind::COLL => (
                slot::COLL_SEQ,
                slot::COLL_FUNC,
                slot::COLL_DATATYPE,
                slot::COLL_COUNT,
                slot::COLL_ROOT,
            ),
            kind::CE_COLL => (
                slot::CE_COLL_SEQ,
                slot::CE_COLL_FUNC,
                slot::CE_COLL_DATATYPE,
                slot::CE_COLL_COUNT,
                slot::CE_COLL_ROOT,
            ),
            _ => (
                usize::MAX,
                slot::P2P_FUNC,
                slot::P2P_DATATYPE,
                slot::P2P_COUNT,
                slot::P2P_PEER,
            ),
        };
        let coll = r.kind == kind::COLL;
        Op {
            context: r.context,
            kind: r.kind,
            seq: if seq == usize::MAX {
                -1
            } else {
                p[seq].min(i64::MAX as u64) as i64
            },
            func: text(func),
            datatype: text(dtype),
            count: p[count],
            root_or_peer: r.signed(root),
            algo: if coll {
                text(slot::COLL_ALGO)
            } else {
                String::new()
            },
            proto: if coll {
                text(slot::COLL_PROTO)
            } else {
                String::new()
            },
            channels: match r.kind {
                kind::COLL => p[slot::COLL_CHANNELS] as u32,
                kind::P2P => p[slot::P2P_CHANNELS] as u32,
                _ => 0,
            },
            start_ns: r.ts_ns,
            enqueued_ns: None,
            children: 0,
            children_stopped: 0,
            children_end_ns: None,
            gpu_span: None,
            kernel_channels: 0,
        }
    }

    /// Whether its completion is measured (every child stopped).
    #[must_use]
    pub fn completed(&self) -> bool {
        self.children > 0 && self.children_stopped == self.children
    }

    /// When it finished: the last child's stop when measured, else its
    /// enqueue stop (not a measurement of completion), else its start.
    #[must_use]
    pub fn end_ns(&self) -> u64 {
        if self.completed() {
            self.children_end_ns.unwrap_or(self.start_ns)
        } else {
            self.enqueued_ns.unwrap_or(self.start_ns).max(self.start_ns)
        }
    }
}

/// Per communicator: how far NCCL got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommProgress {
    /// Collectives enqueued.
    pub enqueued: u64,
    /// Highest sequence number enqueued, −1 when none.
    pub last_enqueued: i64,
    /// Highest sequence number whose children all stopped, −1 when none.
    pub last_completed: i64,
    /// Collectives whose completion the logs can tell (they had children).
    pub observed: u64,
}

/// A process's operations and what did not join.
#[derive(Debug, Clone, Default)]
pub struct ProcessOps {
    /// Operations in start order.
    pub ops: Vec<Op>,
    /// Per context.
    pub progress: Vec<CommProgress>,
    /// Stop or state records whose start is not in the logs (dropped or torn).
    pub orphans: u64,
    /// Start records naming a context no `init` announced.
    pub unknown_context: u64,
}

/// Joins a process's records.
#[must_use]
pub fn join(log: &ProcessLog) -> ProcessOps {
    let mut out = ProcessOps {
        progress: vec![
            CommProgress {
                last_enqueued: -1,
                last_completed: -1,
                ..CommProgress::default()
            };
            log.comms.len()
        ],
        ..ProcessOps::default()
    };
    // Handle → (kind, op index for ops, parent op index for children).
    enum Handle {
        Op(usize),
        Child { op: Option<usize>, kernel: bool },
        Other,
    }
    let mut handles: FxHashMap<u64, Handle> = FxHashMap::default();
    let mut starts: Vec<&commcanary_nccl_log::Record> = log
        .records
        .iter()
        .filter(|r| r.call == call::START)
        .collect();
    starts.sort_by_key(|r| (r.ts_ns, r.id));
    let mut children: Vec<&commcanary_nccl_log::Record> = Vec::new();
    for r in starts {
        match r.kind {
            kind::COLL | kind::CE_COLL | kind::P2P => {
                if r.context as usize >= log.comms.len() {
                    out.unknown_context += 1;
                    handles.insert(r.id, Handle::Other);
                    continue;
                }
                let op = Op::of_start(log, r);
                if op.kind != kind::P2P {
                    let g = &mut out.progress[op.context as usize];
                    g.enqueued += 1;
                    g.last_enqueued = g.last_enqueued.max(op.seq);
                }
                handles.insert(r.id, Handle::Op(out.ops.len()));
                out.ops.push(op);
            }
            kind::KERNEL_CH | kind::PROXY_OP => children.push(r),
            _ => {
                handles.insert(r.id, Handle::Other);
            }
        }
    }
    for r in children {
        let parent = match handles.get(&r.parent) {
            Some(Handle::Op(i)) => Some(*i),
            _ => None,
        };
        let kernel = r.kind == kind::KERNEL_CH;
        if let Some(i) = parent {
            let op = &mut out.ops[i];
            op.children += 1;
            if kernel {
                op.kernel_channels += 1;
                let t = r.payload[slot::KERNEL_CH_TIMER];
                if t > 0 {
                    op.gpu_span = Some(op.gpu_span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
                }
            }
        }
        handles.insert(r.id, Handle::Child { op: parent, kernel });
    }
    for r in log.records.iter().filter(|r| r.call != call::START) {
        match (handles.get(&r.id), r.call) {
            (None, _) => out.orphans += 1,
            (Some(Handle::Op(i)), call::STOP) => {
                let op = &mut out.ops[*i];
                op.enqueued_ns = Some(op.enqueued_ns.map_or(r.ts_ns, |t| t.max(r.ts_ns)));
            }
            (Some(Handle::Child { op: Some(i), .. }), call::STOP) => {
                let op = &mut out.ops[*i];
                op.children_stopped += 1;
                op.children_end_ns = Some(op.children_end_ns.map_or(r.ts_ns, |t| t.max(r.ts_ns)));
            }
            (
                Some(Handle::Child {
                    op: Some(i),
                    kernel: true,
                }),
                call::STATE,
            ) if r.state == state::KERNEL_CH_STOP && r.flags & flag::HAS_ARGS != 0 => {
                let t = r.payload[slot::STATE_ARG];
                let op = &mut out.ops[*i];
                if t > 0 {
                    op.gpu_span = Some(op.gpu_span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
                }
            }
            _ => {}
        }
    }
    for op in &out.ops {
        if op.kind != kind::P2P && op.children > 0 {
            let g = &mut out.progress[op.context as usize];
            g.observed += 1;
            if op.completed() {
                g.last_completed = g.last_completed.max(op.seq);
            }
        }
    }
    out
}
