//! The Rust side of the ABI layout check: every field's offset and every
//! struct's size, exported for the C harness, which compares them with
//! `offsetof`/`sizeof` on its own declarations from the ABI headers.

use std::ffi::c_char;
use std::mem::{offset_of, size_of};

use crate::abi::*;

/// One entry: a name (`"v5.coll.seqNumber"`, `"sizeof.v6"`), its offset
/// within the descriptor (or the size), and 0.
#[repr(C)]
pub struct Entry {
    /// NUL-terminated name.
    pub name: *const c_char,
    /// Offset from the start of the descriptor, or a size.
    pub value: u64,
}

// SAFETY: immutable pointers to static C strings.
unsafe impl Sync for Entry {}

macro_rules! field {
    ($name:literal, $d:ty, $m:ty, $f:ident) => {
        Entry {
            name: concat!($name, "\0").as_ptr().cast(),
            value: (offset_of!($d, u) + offset_of!($m, $f)) as u64,
        }
    };
}
macro_rules! top {
    ($name:literal, $d:ty, $f:ident) => {
        Entry {
            name: concat!($name, "\0").as_ptr().cast(),
            value: offset_of!($d, $f) as u64,
        }
    };
}
macro_rules! size {
    ($name:literal, $t:ty) => {
        Entry {
            name: concat!($name, "\0").as_ptr().cast(),
            value: size_of::<$t>() as u64,
        }
    };
}

/// Every checked layout fact.
pub static ENTRIES: &[Entry] = &[
    size!("sizeof.v4", DescrV4),
    size!("sizeof.v5", DescrV5),
    size!("sizeof.v6", DescrV6),
    size!("sizeof.args", StateArgs),
    size!("sizeof.table", ProfilerV6),
    top!("v4.type", DescrV4, type_),
    top!("v4.parentObj", DescrV4, parent_obj),
    top!("v4.rank", DescrV4, rank),
    field!("v4.coll.seqNumber", DescrV4, CollV4, seq_number),
    field!("v4.coll.func", DescrV4, CollV4, func),
    field!("v4.coll.count", DescrV4, CollV4, count),
    field!("v4.coll.root", DescrV4, CollV4, root),
    field!("v4.coll.datatype", DescrV4, CollV4, datatype),
    field!("v4.coll.nChannels", DescrV4, CollV4, n_channels),
    field!("v4.coll.nWarps", DescrV4, CollV4, n_warps),
    field!("v4.coll.algo", DescrV4, CollV4, algo),
    field!("v4.coll.proto", DescrV4, CollV4, proto),
    field!("v4.p2p.func", DescrV4, P2pV4, func),
    field!("v4.p2p.datatype", DescrV4, P2pV4, datatype),
    field!("v4.p2p.count", DescrV4, P2pV4, count),
    field!("v4.p2p.peer", DescrV4, P2pV4, peer),
    field!("v4.p2p.nChannels", DescrV4, P2pV4, n_channels),
    field!("v4.proxyOp.pid", DescrV4, ProxyOp, pid),
    field!("v4.proxyOp.channelId", DescrV4, ProxyOp, channel_id),
    field!("v4.proxyOp.peer", DescrV4, ProxyOp, peer),
    field!("v4.proxyOp.nSteps", DescrV4, ProxyOp, n_steps),
    field!("v4.proxyOp.chunkSize", DescrV4, ProxyOp, chunk_size),
    field!("v4.proxyOp.isSend", DescrV4, ProxyOp, is_send),
    field!("v4.proxyStep.step", DescrV4, ProxyStep, step),
    field!("v4.kernelCh.channelId", DescrV4, KernelCh, channel_id),
    field!("v4.kernelCh.pTimer", DescrV4, KernelCh, p_timer),
    field!("v4.netPlugin.id", DescrV4, NetPlugin, id),
    field!("v4.netPlugin.data", DescrV4, NetPlugin, data),
    top!("v5.type", DescrV5, type_),
    top!("v5.parentObj", DescrV5, parent_obj),
    top!("v5.rank", DescrV5, rank),
    field!(
        "v5.groupApi.graphCaptured",
        DescrV5,
        GroupApiV5,
        graph_captured
    ),
    field!("v5.groupApi.groupDepth", DescrV5, GroupApiV5, group_depth),
    field!("v5.collApi.func", DescrV5, CollApi, func),
    field!("v5.collApi.count", DescrV5, CollApi, count),
    field!("v5.collApi.datatype", DescrV5, CollApi, datatype),
    field!("v5.collApi.root", DescrV5, CollApi, root),
    field!("v5.collApi.stream", DescrV5, CollApi, stream),
    field!("v5.collApi.graphCaptured", DescrV5, CollApi, graph_captured),
    field!("v5.p2pApi.func", DescrV5, P2pApi, func),
    field!("v5.p2pApi.count", DescrV5, P2pApi, count),
    field!("v5.p2pApi.datatype", DescrV5, P2pApi, datatype),
    field!("v5.p2pApi.stream", DescrV5, P2pApi, stream),
    field!("v5.p2pApi.graphCaptured", DescrV5, P2pApi, graph_captured),
    field!("v5.kernelLaunch.stream", DescrV5, KernelLaunch, stream),
    field!("v5.coll.seqNumber", DescrV5, CollV5, seq_number),
    field!("v5.coll.func", DescrV5, CollV5, func),
    field!("v5.coll.count", DescrV5, CollV5, count),
    field!("v5.coll.root", DescrV5, CollV5, root),
    field!("v5.coll.datatype", DescrV5, CollV5, datatype),
    field!("v5.coll.nChannels", DescrV5, CollV5, n_channels),
    field!("v5.coll.nWarps", DescrV5, CollV5, n_warps),
    field!("v5.coll.algo", DescrV5, CollV5, algo),
    field!("v5.coll.proto", DescrV5, CollV5, proto),
    field!("v5.coll.parentGroup", DescrV5, CollV5, parent_group),
    field!("v5.p2p.func", DescrV5, P2pV5, func),
    field!("v5.p2p.count", DescrV5, P2pV5, count),
    field!("v5.p2p.peer", DescrV5, P2pV5, peer),
    field!("v5.p2p.nChannels", DescrV5, P2pV5, n_channels),
    field!("v5.p2p.parentGroup", DescrV5, P2pV5, parent_group),
    field!("v5.proxyOp.pid", DescrV5, ProxyOp, pid),
    field!("v5.proxyOp.isSend", DescrV5, ProxyOp, is_send),
    field!("v5.proxyStep.step", DescrV5, ProxyStep, step),
    field!("v5.kernelCh.channelId", DescrV5, KernelCh, channel_id),
    field!("v5.kernelCh.pTimer", DescrV5, KernelCh, p_timer),
    field!("v5.netPlugin.data", DescrV5, NetPlugin, data),
    top!("v6.type", DescrV6, type_),
    top!("v6.parentObj", DescrV6, parent_obj),
    top!("v6.rank", DescrV6, rank),
    field!(
        "v6.groupApi.graphCaptured",
        DescrV6,
        GroupApiV6,
        graph_captured
    ),
    field!("v6.groupApi.groupDepth", DescrV6, GroupApiV6, group_depth),
    field!("v6.collApi.graphCaptured", DescrV6, CollApi, graph_captured),
    field!("v6.coll.seqNumber", DescrV6, CollV5, seq_number),
    field!("v6.coll.algo", DescrV6, CollV5, algo),
    field!("v6.coll.parentGroup", DescrV6, CollV5, parent_group),
    field!("v6.p2p.peer", DescrV6, P2pV5, peer),
    field!("v6.p2p.parentGroup", DescrV6, P2pV5, parent_group),
    field!("v6.kernelCh.pTimer", DescrV6, KernelCh, p_timer),
    field!("v6.ceColl.seqNumber", DescrV6, CeColl, seq_number),
    field!("v6.ceColl.func", DescrV6, CeColl, func),
    field!("v6.ceColl.count", DescrV6, CeColl, count),
    field!("v6.ceColl.root", DescrV6, CeColl, root),
    field!("v6.ceColl.datatype", DescrV6, CeColl, datatype),
    field!("v6.ceColl.syncStrategy", DescrV6, CeColl, sync_strategy),
    field!(
        "v6.ceColl.intraBatchSync",
        DescrV6,
        CeColl,
        intra_batch_sync
    ),
    field!("v6.ceColl.batchSize", DescrV6, CeColl, batch_size),
    field!("v6.ceColl.numBatches", DescrV6, CeColl, num_batches),
    field!("v6.ceColl.ceSeqNum", DescrV6, CeColl, ce_seq_num),
    field!("v6.ceColl.stream", DescrV6, CeColl, stream),
    field!("v6.ceCollSync.isComplete", DescrV6, CeSync, is_complete),
    field!("v6.ceCollSync.nRanks", DescrV6, CeSync, n_ranks),
    field!("v6.ceCollBatch.numOps", DescrV6, CeBatch, num_ops),
    field!("v6.ceCollBatch.totalBytes", DescrV6, CeBatch, total_bytes),
    field!(
        "v6.ceCollBatch.useIntraSync",
        DescrV6,
        CeBatch,
        use_intra_sync
    ),
];

/// The layout table and its length, for the C harness.
///
/// # Safety
/// `count` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn commcanary_nccl_layout(count: *mut usize) -> *const Entry {
    if !count.is_null() {
        // SAFETY: the caller's promise.
        unsafe { *count = ENTRIES.len() };
    }
    ENTRIES.as_ptr()
}
