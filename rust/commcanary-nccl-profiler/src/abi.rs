//! NCCL's profiler plugin ABI, v4 to v6, as `#[repr(C)]` layouts.
//!
//! Written from the published headers' facts (`profiler_v4.h`,
//! `profiler_v5.h`, `profiler_v6.h`): each descriptor is `type`, `parentObj`,
//! `rank` and a union of per-type structs; v4's `type` is a `uint8_t`, v5's
//! and v6's a `uint64_t`; v5 adds the API and kernel-launch events and a
//! `parentGroup` to `coll` and `p2p`; v6 adds the copy-engine events and makes
//! `groupApi.graphCaptured` a `bool`. The state arguments are one union for
//! every version. The C harness checks every offset here against `offsetof`
//! on its own declarations ([`crate::layout`]).

use std::ffi::{c_char, c_int, c_void};

/// `ncclResult_t`; the plugin only ever returns `ncclSuccess` (0).
pub type NcclResult = c_int;
/// `ncclSuccess`.
pub const NCCL_SUCCESS: NcclResult = 0;
/// `ncclDebugLogger_t` (a variadic function pointer; never called here).
pub type Logger = *const c_void;

/// `coll` (v4).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV4 {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// `coll` (v5, v6): v4's and `parentGroup`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV5 {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
    pub parent_group: *mut c_void,
}

/// `p2p` (v4).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV4 {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub n_channels: u8,
}

/// `p2p` (v5, v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV5 {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub n_channels: u8,
    pub parent_group: *mut c_void,
}

/// `proxyOp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOp {
    pub pid: libc::pid_t,
    pub channel_id: u8,
    pub peer: c_int,
    pub n_steps: c_int,
    pub chunk_size: c_int,
    pub is_send: c_int,
}

/// `proxyStep`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyStep {
    pub step: c_int,
}

/// `kernelCh`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelCh {
    pub channel_id: u8,
    pub p_timer: u64,
}

/// `netPlugin`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetPlugin {
    pub id: i64,
    pub data: *mut c_void,
}

/// `groupApi` (v5: two `int`s).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GroupApiV5 {
    pub graph_captured: c_int,
    pub group_depth: c_int,
}

/// `groupApi` (v6: `graphCaptured` is a `bool`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GroupApiV6 {
    pub graph_captured: bool,
    pub group_depth: c_int,
}

/// `collApi` (v5, v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollApi {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub root: c_int,
    pub stream: *mut c_void,
    pub graph_captured: bool,
}

/// `p2pApi` (v5, v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pApi {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub stream: *mut c_void,
    pub graph_captured: bool,
}

/// `kernelLaunch` (v5, v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelLaunch {
    pub stream: *mut c_void,
}

/// `ceColl` (v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeColl {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub sync_strategy: *const c_char,
    pub intra_batch_sync: bool,
    pub batch_size: u32,
    pub num_batches: u32,
    pub ce_seq_num: u32,
    pub stream: *mut c_void,
}

/// `ceCollSync` (v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeSync {
    pub is_complete: bool,
    pub n_ranks: c_int,
}

/// `ceCollBatch` (v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeBatch {
    pub num_ops: c_int,
    pub total_bytes: usize,
    pub use_intra_sync: bool,
}

/// The v4 descriptor's union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV4 {
    pub coll: CollV4,
    pub p2p: P2pV4,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
}

/// `ncclProfilerEventDescr_v4_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV4 {
    pub type_: u8,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV4,
}

/// The v5 descriptor's union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV5 {
    pub group_api: GroupApiV5,
    pub coll_api: CollApi,
    pub p2p_api: P2pApi,
    pub kernel_launch: KernelLaunch,
    pub coll: CollV5,
    pub p2p: P2pV5,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
}

/// `ncclProfilerEventDescr_v5_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV5 {
    pub type_: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV5,
}

/// The v6 descriptor's union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV6 {
    pub group_api: GroupApiV6,
    pub coll_api: CollApi,
    pub p2p_api: P2pApi,
    pub kernel_launch: KernelLaunch,
    pub coll: CollV5,
    pub p2p: P2pV5,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
    pub ce_coll: CeColl,
    pub ce_sync: CeSync,
    pub ce_batch: CeBatch,
}

/// `ncclProfilerEventDescr_v6_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV6 {
    pub type_: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV6,
}

/// `ncclProfilerEventStateArgs_v4_t` (= v5 = v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgs {
    pub trans_size: usize,
    pub appended_proxy_ops: c_int,
    pub data: *mut c_void,
    pub p_timer: u64,
}

/// `init` of v4: `(context, eActivationMask, commName, commHash, nNodes, nranks, rank, logfn)`.
pub type InitV4 = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_int,
    *const c_char,
    u64,
    c_int,
    c_int,
    c_int,
    Logger,
) -> NcclResult;
/// `init` of v5 and v6: `(context, commId, eActivationMask, commName, nNodes, nranks, rank, logfn)`.
pub type InitV5 = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    *mut c_int,
    *const c_char,
    c_int,
    c_int,
    c_int,
    Logger,
) -> NcclResult;
/// `stopEvent`.
pub type StopEvent = unsafe extern "C" fn(*mut c_void) -> NcclResult;
/// `recordEventState` (the state is a C enum: an `int`).
pub type RecordEventState = unsafe extern "C" fn(*mut c_void, c_int, *mut StateArgs) -> NcclResult;
/// `finalize`.
pub type Finalize = unsafe extern "C" fn(*mut c_void) -> NcclResult;

/// `ncclProfiler_v4_t`.
#[repr(C)]
pub struct ProfilerV4 {
    pub name: *const c_char,
    pub init: InitV4,
    pub start_event:
        unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut DescrV4) -> NcclResult,
    pub stop_event: StopEvent,
    pub record_event_state: RecordEventState,
    pub finalize: Finalize,
}

/// `ncclProfiler_v5_t`.
#[repr(C)]
pub struct ProfilerV5 {
    pub name: *const c_char,
    pub init: InitV5,
    pub start_event:
        unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut DescrV5) -> NcclResult,
    pub stop_event: StopEvent,
    pub record_event_state: RecordEventState,
    pub finalize: Finalize,
}

/// `ncclProfiler_v6_t`.
#[repr(C)]
pub struct ProfilerV6 {
    pub name: *const c_char,
    pub init: InitV5,
    pub start_event:
        unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut DescrV6) -> NcclResult,
    pub stop_event: StopEvent,
    pub record_event_state: RecordEventState,
    pub finalize: Finalize,
}

// SAFETY: the tables are immutable: a name pointing at a static C string and
// function pointers.
unsafe impl Sync for ProfilerV4 {}
// SAFETY: as above.
unsafe impl Sync for ProfilerV5 {}
// SAFETY: as above.
unsafe impl Sync for ProfilerV6 {}
