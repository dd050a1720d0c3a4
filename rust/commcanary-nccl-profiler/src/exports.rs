//! The exported function tables `ncclProfiler_v6`, `_v5` and `_v4`, and the
//! functions behind them.
//!
//! The hot path (`startEvent`, `stopEvent`, `recordEventState`) reads the
//! descriptor into a [`Record`], stamps it with the host clock and pushes it
//! onto the calling thread's ring: no lock, no allocation after a thread's
//! first event, no system call. The handle returned is the event's id (never
//! dereferenced: a parent handle from another process, as PXN gives, is only
//! a number here). Every function returns `ncclSuccess`.

use std::ffi::{CStr, c_char, c_int, c_void};

use commcanary_nccl_log::Record;
use commcanary_nccl_log::event::{self, kind, state};
use commcanary_nccl_log::frame::Comm;
use commcanary_nccl_log::record::{call, flag, from_signed, slot};

use crate::abi::*;
use crate::clock::stamp;
use crate::threads::with_ring;
use crate::writer::shared;

/// What `init` hands back as the context.
struct Context {
    index: u32,
}

fn comm_name(name: *const c_char) -> String {
    if name.is_null() {
        return String::new();
    }
    // SAFETY: NCCL passes a NUL-terminated `commName` valid during `init`.
    String::from_utf8_lossy(unsafe { CStr::from_ptr(name) }.to_bytes()).into_owned()
}

/// The shared part of every version's `init`.
///
/// # Safety
/// `context` and `mask` are NCCL's out-pointers (null tolerated).
#[allow(clippy::too_many_arguments)]
unsafe fn init_common(
    abi: u32,
    context: *mut *mut c_void,
    mask: *mut c_int,
    name: *const c_char,
    comm_id: u64,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
) -> NcclResult {
    let s = shared(abi);
    let wanted = if abi == 4 {
        s.config.mask & 0xff
    } else if abi == 5 {
        s.config.mask & 0xfff
    } else {
        s.config.mask
    };
    let index = s.add_comm(Comm {
        context: 0,
        comm_id,
        n_nodes,
        nranks,
        rank,
        mask: wanted,
        abi,
        name: comm_name(name),
    });
    // SAFETY: out-pointers from NCCL, checked for null.
    unsafe {
        if !mask.is_null() {
            *mask = wanted as c_int;
        }
        if !context.is_null() {
            *context = Box::into_raw(Box::new(Context { index })).cast();
        }
    }
    NCCL_SUCCESS
}

unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    name: *const c_char,
    comm_hash: u64,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    _log: Logger,
) -> NcclResult {
    // SAFETY: NCCL's arguments, passed on.
    unsafe { init_common(4, context, mask, name, comm_hash, n_nodes, nranks, rank) }
}

unsafe extern "C" fn init_v5(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    name: *const c_char,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    _log: Logger,
) -> NcclResult {
    // SAFETY: NCCL's arguments, passed on.
    unsafe { init_common(5, context, mask, name, comm_id, n_nodes, nranks, rank) }
}

unsafe extern "C" fn init_v6(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    name: *const c_char,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    _log: Logger,
) -> NcclResult {
    // SAFETY: NCCL's arguments, passed on.
    unsafe { init_common(6, context, mask, name, comm_id, n_nodes, nranks, rank) }
}

unsafe extern "C" fn finalize(context: *mut c_void) -> NcclResult {
    if context.is_null() {
        return NCCL_SUCCESS;
    }
    // SAFETY: `context` is the box `init` made; NCCL finalizes it once.
    let ctx = unsafe { Box::from_raw(context.cast::<Context>()) };
    shared(0).finalize(ctx.index);
    NCCL_SUCCESS
}

/// Pushes a start record and returns its handle.
#[inline]
fn push_start(mut r: Record, handle: *mut *mut c_void) {
    r.call = call::START;
    r.ts_ns = stamp();
    let id = with_ring(|ring| {
        let id = ring.next_id();
        r.id = id;
        ring.push(&r);
        id
    })
    .unwrap_or(0);
    // SAFETY: checked non-null by the callers.
    unsafe { *handle = id as *mut c_void };
}

/// The start record's fixed part.
#[inline]
fn started(context: *mut c_void, kind: u8, parent: *mut c_void, rank: c_int) -> Record {
    // SAFETY: `context` is the box `init` made (checked non-null by callers).
    let index = unsafe { (*context.cast::<Context>()).index };
    Record {
        kind,
        context: index,
        parent: parent as u64,
        rank,
        ..Record::default()
    }
}

fn ptr(p: *const impl Sized) -> u64 {
    p as u64
}

fn fill_coll(r: &mut Record, c: &CollV4) {
    let p = &mut r.payload;
    p[slot::COLL_SEQ] = c.seq_number;
    p[slot::COLL_FUNC] = ptr(c.func);
    p[slot::COLL_COUNT] = c.count as u64;
    p[slot::COLL_ROOT] = from_signed(c.root);
    p[slot::COLL_DATATYPE] = ptr(c.datatype);
    p[slot::COLL_CHANNELS] = u64::from(c.n_channels);
    p[slot::COLL_WARPS] = u64::from(c.n_warps);
    p[slot::COLL_ALGO] = ptr(c.algo);
    p[slot::COLL_PROTO] = ptr(c.proto);
    p[slot::COLL_SEND_BUFF] = ptr(c.send_buff);
}

fn coll_v4_of_v5(c: &CollV5) -> CollV4 {
    CollV4 {
        seq_number: c.seq_number,
        func: c.func,
        send_buff: c.send_buff,
        recv_buff: c.recv_buff,
        count: c.count,
        root: c.root,
        datatype: c.datatype,
        n_channels: c.n_channels,
        n_warps: c.n_warps,
        algo: c.algo,
        proto: c.proto,
    }
}

fn fill_p2p(
    r: &mut Record,
    func: *const c_char,
    datatype: *const c_char,
    count: usize,
    peer: c_int,
    n_channels: u8,
    buff: *mut c_void,
) {
    let p = &mut r.payload;
    p[slot::P2P_FUNC] = ptr(func);
    p[slot::P2P_DATATYPE] = ptr(datatype);
    p[slot::P2P_COUNT] = count as u64;
    p[slot::P2P_PEER] = from_signed(peer);
    p[slot::P2P_CHANNELS] = u64::from(n_channels);
    p[slot::P2P_BUFF] = ptr(buff);
}

fn fill_proxy_op(r: &mut Record, o: &ProxyOp) {
    let p = &mut r.payload;
    p[slot::PROXY_OP_PID] = from_signed(o.pid);
    p[slot::PROXY_OP_CHANNEL] = u64::from(o.channel_id);
    p[slot::PROXY_OP_PEER] = from_signed(o.peer);
    p[slot::PROXY_OP_STEPS] = from_signed(o.n_steps);
    p[slot::PROXY_OP_CHUNK] = from_signed(o.chunk_size);
    p[slot::PROXY_OP_IS_SEND] = from_signed(o.is_send);
}

/// The fields every version shares past the v4 union (kernel channel, proxy,
/// net plugin). Returns false for a kind it does not fill.
fn fill_shared(
    r: &mut Record,
    k: u8,
    proxy_op: &ProxyOp,
    step: c_int,
    ch: &KernelCh,
    net: &NetPlugin,
) -> bool {
    match k {
        kind::PROXY_OP => fill_proxy_op(r, proxy_op),
        kind::PROXY_STEP => r.payload[slot::PROXY_STEP_STEP] = from_signed(step),
        kind::KERNEL_CH => {
            r.payload[slot::KERNEL_CH_CHANNEL] = u64::from(ch.channel_id);
            r.payload[slot::KERNEL_CH_TIMER] = ch.p_timer;
        }
        kind::NET_PLUGIN => {
            r.payload[slot::NET_PLUGIN_ID] = net.id as u64;
            r.payload[slot::NET_PLUGIN_DATA] = ptr(net.data);
        }
        kind::GROUP | kind::PROXY_CTRL => {}
        _ => return false,
    }
    true
}

unsafe extern "C" fn start_v4(
    context: *mut c_void,
    handle: *mut *mut c_void,
    descr: *mut DescrV4,
) -> NcclResult {
    if handle.is_null() {
        return NCCL_SUCCESS;
    }
    // SAFETY: NCCL's out-pointer, non-null.
    unsafe { *handle = std::ptr::null_mut() };
    if context.is_null() || descr.is_null() {
        return NCCL_SUCCESS;
    }
    // SAFETY: NCCL's descriptor, valid for this call.
    let d = unsafe { &*descr };
    let Some(k) = event::kind_of(u64::from(d.type_)) else {
        return NCCL_SUCCESS;
    };
    let mut r = started(context, k, d.parent_obj, d.rank);
    r.flags = flag::ABI_V4;
    // SAFETY: the union member read is the one `type` names.
    let known = unsafe {
        match k {
            kind::COLL => {
                fill_coll(&mut r, &d.u.coll);
                true
            }
            kind::P2P => {
                let p = &d.u.p2p;
                fill_p2p(
                    &mut r,
                    p.func,
                    p.datatype,
                    p.count,
                    p.peer,
                    p.n_channels,
                    p.buff,
                );
                true
            }
            kind::PROXY_OP => fill_shared(&mut r, k, &d.u.proxy_op, 0, &KERNEL_CH_NONE, &NET_NONE),
            kind::PROXY_STEP => fill_shared(
                &mut r,
                k,
                &PROXY_OP_NONE,
                d.u.proxy_step.step,
                &KERNEL_CH_NONE,
                &NET_NONE,
            ),
            kind::KERNEL_CH => fill_shared(&mut r, k, &PROXY_OP_NONE, 0, &d.u.kernel_ch, &NET_NONE),
            kind::NET_PLUGIN => fill_shared(
                &mut r,
                k,
                &PROXY_OP_NONE,
                0,
                &KERNEL_CH_NONE,
                &d.u.net_plugin,
            ),
            _ => fill_shared(&mut r, k, &PROXY_OP_NONE, 0, &KERNEL_CH_NONE, &NET_NONE),
        }
    };
    if known {
        push_start(r, handle);
    }
    NCCL_SUCCESS
}

const PROXY_OP_NONE: ProxyOp = ProxyOp {
    pid: 0,
    channel_id: 0,
    peer: 0,
    n_steps: 0,
    chunk_size: 0,
    is_send: 0,
};
const KERNEL_CH_NONE: KernelCh = KernelCh {
    channel_id: 0,
    p_timer: 0,
};
const NET_NONE: NetPlugin = NetPlugin {
    id: 0,
    data: std::ptr::null_mut(),
};

/// v5 and v6 share every member but `groupApi` and the copy-engine ones.
macro_rules! start_v5_like {
    ($name:ident, $descr:ty, $group_graph:expr, $extra:expr) => {
        unsafe extern "C" fn $name(
            context: *mut c_void,
            handle: *mut *mut c_void,
            descr: *mut $descr,
        ) -> NcclResult {
            if handle.is_null() {
                return NCCL_SUCCESS;
            }
            // SAFETY: NCCL's out-pointer, non-null.
            unsafe { *handle = std::ptr::null_mut() };
            if context.is_null() || descr.is_null() {
                return NCCL_SUCCESS;
            }
            // SAFETY: NCCL's descriptor, valid for this call.
            let d = unsafe { &*descr };
            let Some(k) = event::kind_of(d.type_) else {
                return NCCL_SUCCESS;
            };
            let mut r = started(context, k, d.parent_obj, d.rank);
            // SAFETY: the union member read is the one `type` names.
            let known = unsafe {
                match k {
                    kind::COLL => {
                        let c = &d.u.coll;
                        fill_coll(&mut r, &coll_v4_of_v5(c));
                        r.payload[slot::COLL_PARENT_GROUP] = ptr(c.parent_group);
                        true
                    }
                    kind::P2P => {
                        let p = &d.u.p2p;
                        fill_p2p(
                            &mut r,
                            p.func,
                            p.datatype,
                            p.count,
                            p.peer,
                            p.n_channels,
                            p.buff,
                        );
                        r.payload[slot::P2P_PARENT_GROUP] = ptr(p.parent_group);
                        true
                    }
                    kind::GROUP_API => {
                        r.payload[slot::GROUP_API_GRAPH] = $group_graph(&d.u);
                        r.payload[slot::GROUP_API_DEPTH] = from_signed(d.u.group_api.group_depth);
                        true
                    }
                    kind::COLL_API => {
                        let a = &d.u.coll_api;
                        r.payload[slot::API_FUNC] = ptr(a.func);
                        r.payload[slot::API_COUNT] = a.count as u64;
                        r.payload[slot::API_DATATYPE] = ptr(a.datatype);
                        r.payload[slot::API_ROOT_OR_STREAM] = from_signed(a.root);
                        r.payload[slot::API_STREAM_OR_GRAPH] = ptr(a.stream);
                        r.payload[slot::COLL_API_GRAPH] = u64::from(a.graph_captured);
                        true
                    }
                    kind::P2P_API => {
                        let a = &d.u.p2p_api;
                        r.payload[slot::API_FUNC] = ptr(a.func);
                        r.payload[slot::API_COUNT] = a.count as u64;
                        r.payload[slot::API_DATATYPE] = ptr(a.datatype);
                        r.payload[slot::API_ROOT_OR_STREAM] = ptr(a.stream);
                        r.payload[slot::API_STREAM_OR_GRAPH] = u64::from(a.graph_captured);
                        true
                    }
                    kind::KERNEL_LAUNCH => {
                        r.payload[slot::KERNEL_LAUNCH_STREAM] = ptr(d.u.kernel_launch.stream);
                        true
                    }
                    kind::PROXY_OP => {
                        fill_shared(&mut r, k, &d.u.proxy_op, 0, &KERNEL_CH_NONE, &NET_NONE)
                    }
                    kind::PROXY_STEP => fill_shared(
                        &mut r,
                        k,
                        &PROXY_OP_NONE,
                        d.u.proxy_step.step,
                        &KERNEL_CH_NONE,
                        &NET_NONE,
                    ),
                    kind::KERNEL_CH => {
                        fill_shared(&mut r, k, &PROXY_OP_NONE, 0, &d.u.kernel_ch, &NET_NONE)
                    }
                    kind::NET_PLUGIN => fill_shared(
                        &mut r,
                        k,
                        &PROXY_OP_NONE,
                        0,
                        &KERNEL_CH_NONE,
                        &d.u.net_plugin,
                    ),
                    kind::GROUP | kind::PROXY_CTRL => true,
                    _ => $extra(&mut r, k, &d.u),
                }
            };
            if known {
                push_start(r, handle);
            }
            NCCL_SUCCESS
        }
    };
}

/// # Safety
/// `u` holds the `groupApi` member.
unsafe fn group_graph_v5(u: &UnionV5) -> u64 {
    // SAFETY: the caller's promise.
    from_signed(unsafe { u.group_api.graph_captured })
}

/// # Safety
/// `u` holds the `groupApi` member.
unsafe fn group_graph_v6(u: &UnionV6) -> u64 {
    // SAFETY: the caller's promise.
    u64::from(unsafe { u.group_api.graph_captured })
}

fn no_extra_v5(_: &mut Record, _: u8, _: &UnionV5) -> bool {
    false
}

/// The copy-engine events (v6).
///
/// # Safety
/// `u` holds the member `k` names.
unsafe fn copy_engine_v6(r: &mut Record, k: u8, u: &UnionV6) -> bool {
    let p = &mut r.payload;
    // SAFETY: the caller's promise.
    unsafe {
        match k {
            kind::CE_COLL => {
                let c = &u.ce_coll;
                p[slot::CE_COLL_SEQ] = c.seq_number;
                p[slot::CE_COLL_FUNC] = ptr(c.func);
                p[slot::CE_COLL_COUNT] = c.count as u64;
                p[slot::CE_COLL_ROOT] = from_signed(c.root);
                p[slot::CE_COLL_DATATYPE] = ptr(c.datatype);
                p[slot::CE_COLL_SYNC] = ptr(c.sync_strategy);
                p[slot::CE_COLL_INTRA_SYNC] = u64::from(c.intra_batch_sync);
                p[slot::CE_COLL_BATCH_SIZE] = u64::from(c.batch_size);
                p[slot::CE_COLL_BATCHES] = u64::from(c.num_batches);
                p[slot::CE_COLL_CE_SEQ] = u64::from(c.ce_seq_num);
                p[slot::CE_COLL_STREAM] = ptr(c.stream);
            }
            kind::CE_SYNC => {
                p[slot::CE_SYNC_COMPLETE] = u64::from(u.ce_sync.is_complete);
                p[slot::CE_SYNC_RANKS] = from_signed(u.ce_sync.n_ranks);
            }
            kind::CE_BATCH => {
                p[slot::CE_BATCH_OPS] = from_signed(u.ce_batch.num_ops);
                p[slot::CE_BATCH_BYTES] = u.ce_batch.total_bytes as u64;
                p[slot::CE_BATCH_INTRA_SYNC] = u64::from(u.ce_batch.use_intra_sync);
            }
            _ => return false,
        }
    }
    true
}

start_v5_like!(start_v5, DescrV5, group_graph_v5, no_extra_v5);
start_v5_like!(start_v6, DescrV6, group_graph_v6, copy_engine_v6);

unsafe extern "C" fn stop_event(handle: *mut c_void) -> NcclResult {
    if handle.is_null() {
        return NCCL_SUCCESS;
    }
    let r = Record {
        call: call::STOP,
        id: handle as u64,
        ts_ns: stamp(),
        ..Record::default()
    };
    with_ring(|ring| ring.push(&r));
    NCCL_SUCCESS
}

unsafe extern "C" fn record_event_state(
    handle: *mut c_void,
    event_state: c_int,
    args: *mut StateArgs,
) -> NcclResult {
    if handle.is_null() {
        return NCCL_SUCCESS;
    }
    let mut r = Record {
        call: call::STATE,
        state: u8::try_from(event_state).unwrap_or(u8::MAX),
        id: handle as u64,
        ts_ns: stamp(),
        ..Record::default()
    };
    if !args.is_null() {
        r.flags = flag::HAS_ARGS;
        // SAFETY: NCCL's arguments for this state: the member the state
        // names (an `int` for the proxy control states, 8 bytes otherwise).
        r.payload[slot::STATE_ARG] = unsafe {
            if (state::PROXY_CTRL_IDLE..=state::PROXY_CTRL_APPEND_END).contains(&r.state) {
                from_signed((*args).appended_proxy_ops)
            } else {
                (*args).p_timer
            }
        };
    }
    with_ring(|ring| ring.push(&r));
    NCCL_SUCCESS
}

const NAME: *const c_char = c"commcanary".as_ptr();

/// The v6 table NCCL 2.29+ looks for first.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static ncclProfiler_v6: ProfilerV6 = ProfilerV6 {
    name: NAME,
    init: init_v6,
    start_event: start_v6,
    stop_event,
    record_event_state,
    finalize,
};

/// The v5 table (NCCL 2.26 to 2.28).
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static ncclProfiler_v5: ProfilerV5 = ProfilerV5 {
    name: NAME,
    init: init_v5,
    start_event: start_v5,
    stop_event,
    record_event_state,
    finalize,
};

/// The v4 table (NCCL 2.25).
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static ncclProfiler_v4: ProfilerV4 = ProfilerV4 {
    name: NAME,
    init: init_v4,
    start_event: start_v4,
    stop_event,
    record_event_state,
    finalize,
};
