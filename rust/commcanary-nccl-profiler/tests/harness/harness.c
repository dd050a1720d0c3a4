/*
 * Drives libnccl-profiler-commcanary.so as NCCL does.
 *
 * - dlopen()s the plugin and resolves ncclProfiler_v6, _v5 and _v4;
 * - checks every offset and size the plugin exports (commcanary_nccl_layout)
 *   against offsetof/sizeof on the declarations below, written from the
 *   profiler ABI headers (profiler_v4.h, profiler_v5.h, profiler_v6.h);
 * - calls init for 4 communicators, then drives events from N threads in the
 *   order NCCL issues them (API events, group, collective and its proxy and
 *   kernel-channel children, p2p, copy-engine events), with their states and
 *   parent handles, and calls finalize;
 * - writes one 64-bit digest per call it made (the same digest the Rust test
 *   computes from the decoded log), and prints timings as one JSON line.
 *
 * Usage: harness LIB ABI THREADS EVENTS DIGESTS_OUT [--hold]
 *   --hold: drive slowly until killed (for the SIGKILL test).
 *        harness LIB ABI job STEPS LATE_RANK [HANG_STEP HANG_RANK]
 *   one rank of a job (RANK, WORLD_SIZE from the environment); see job().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- The ABI, from the headers' facts ---------------------------------- */
typedef int ncclResult_t;
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

enum {
  ProfileGroup = 1 << 0, ProfileColl = 1 << 1, ProfileP2p = 1 << 2, ProfileProxyOp = 1 << 3,
  ProfileProxyStep = 1 << 4, ProfileProxyCtrl = 1 << 5, ProfileKernelCh = 1 << 6,
  ProfileNetPlugin = 1 << 7, ProfileGroupApi = 1 << 8, ProfileCollApi = 1 << 9,
  ProfileP2pApi = 1 << 10, ProfileKernelLaunch = 1 << 11, ProfileCeColl = 1 << 12,
  ProfileCeSync = 1 << 13, ProfileCeBatch = 1 << 14,
};
enum {
  StateProxyStepSendGPUWait = 8, StateProxyStepRecvWait = 10, StateProxyCtrlIdle = 13,
  StateProxyCtrlAppend = 17, StateProxyOpInProgress = 19, StateKernelChStop = 22,
  StateGroupStartApiStop = 23, StateGroupEndApiStart = 24, StateCeCollStart = 25,
  StateCeCollComplete = 26,
};

struct coll_v4 { uint64_t seqNumber; const char* func; void const* sendBuff; void* recvBuff; size_t count; int root;
                 const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto; };
struct coll_v5 { uint64_t seqNumber; const char* func; void const* sendBuff; void* recvBuff; size_t count; int root;
                 const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto; void* parentGroup; };
struct p2p_v4 { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; };
struct p2p_v5 { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; void* parentGroup; };
struct proxy_op { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; };
struct proxy_step { int step; };
struct kernel_ch { uint8_t channelId; uint64_t pTimer; };
struct net_plugin { int64_t id; void* data; };
struct group_api_v5 { int graphCaptured; int groupDepth; };
struct group_api_v6 { bool graphCaptured; int groupDepth; };
struct coll_api { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured; };
struct p2p_api { const char* func; size_t count; const char* datatype; void* stream; bool graphCaptured; };
struct kernel_launch { void* stream; };
struct ce_coll { uint64_t seqNumber; const char* func; void const* sendBuff; void* recvBuff; size_t count; int root;
                 const char* datatype; const char* syncStrategy; bool intraBatchSync; uint32_t batchSize;
                 uint32_t numBatches; uint32_t ceSeqNum; void* stream; };
struct ce_sync { bool isComplete; int nRanks; };
struct ce_batch { int numOps; size_t totalBytes; bool useIntraSync; };

typedef struct {
  uint8_t type; void* parentObj; int rank;
  union { struct coll_v4 coll; struct p2p_v4 p2p; struct proxy_op proxyOp; struct proxy_step proxyStep;
          struct kernel_ch kernelCh; struct net_plugin netPlugin; };
} descr_v4;
typedef struct {
  uint64_t type; void* parentObj; int rank;
  union { struct group_api_v5 groupApi; struct coll_api collApi; struct p2p_api p2pApi; struct kernel_launch kernelLaunch;
          struct coll_v5 coll; struct p2p_v5 p2p; struct proxy_op proxyOp; struct proxy_step proxyStep;
          struct kernel_ch kernelCh; struct net_plugin netPlugin; };
} descr_v5;
typedef struct {
  uint64_t type; void* parentObj; int rank;
  union { struct group_api_v6 groupApi; struct coll_api collApi; struct p2p_api p2pApi; struct kernel_launch kernelLaunch;
          struct coll_v5 coll; struct p2p_v5 p2p; struct proxy_op proxyOp; struct proxy_step proxyStep;
          struct kernel_ch kernelCh; struct net_plugin netPlugin; struct ce_coll ceColl; struct ce_sync ceCollSync;
          struct ce_batch ceCollBatch; };
} descr_v6;
typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
} state_args;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, descr_v4* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, state_args* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} table_v4;
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, void* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, state_args* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} table_v5;

/* ---- Layout check -------------------------------------------------------- */
struct entry { const char* name; uint64_t value; };
#define U(d, m) (offsetof(d, m))
static const struct entry C_LAYOUT[] = {
  {"sizeof.v4", sizeof(descr_v4)}, {"sizeof.v5", sizeof(descr_v5)}, {"sizeof.v6", sizeof(descr_v6)},
  {"sizeof.args", sizeof(state_args)}, {"sizeof.table", sizeof(table_v5)},
  {"v4.type", U(descr_v4, type)}, {"v4.parentObj", U(descr_v4, parentObj)}, {"v4.rank", U(descr_v4, rank)},
  {"v4.coll.seqNumber", U(descr_v4, coll.seqNumber)}, {"v4.coll.func", U(descr_v4, coll.func)},
  {"v4.coll.count", U(descr_v4, coll.count)}, {"v4.coll.root", U(descr_v4, coll.root)},
  {"v4.coll.datatype", U(descr_v4, coll.datatype)}, {"v4.coll.nChannels", U(descr_v4, coll.nChannels)},
  {"v4.coll.nWarps", U(descr_v4, coll.nWarps)}, {"v4.coll.algo", U(descr_v4, coll.algo)},
  {"v4.coll.proto", U(descr_v4, coll.proto)}, {"v4.p2p.func", U(descr_v4, p2p.func)},
  {"v4.p2p.datatype", U(descr_v4, p2p.datatype)}, {"v4.p2p.count", U(descr_v4, p2p.count)},
  {"v4.p2p.peer", U(descr_v4, p2p.peer)}, {"v4.p2p.nChannels", U(descr_v4, p2p.nChannels)},
  {"v4.proxyOp.pid", U(descr_v4, proxyOp.pid)}, {"v4.proxyOp.channelId", U(descr_v4, proxyOp.channelId)},
  {"v4.proxyOp.peer", U(descr_v4, proxyOp.peer)}, {"v4.proxyOp.nSteps", U(descr_v4, proxyOp.nSteps)},
  {"v4.proxyOp.chunkSize", U(descr_v4, proxyOp.chunkSize)}, {"v4.proxyOp.isSend", U(descr_v4, proxyOp.isSend)},
  {"v4.proxyStep.step", U(descr_v4, proxyStep.step)}, {"v4.kernelCh.channelId", U(descr_v4, kernelCh.channelId)},
  {"v4.kernelCh.pTimer", U(descr_v4, kernelCh.pTimer)}, {"v4.netPlugin.id", U(descr_v4, netPlugin.id)},
  {"v4.netPlugin.data", U(descr_v4, netPlugin.data)},
  {"v5.type", U(descr_v5, type)}, {"v5.parentObj", U(descr_v5, parentObj)}, {"v5.rank", U(descr_v5, rank)},
  {"v5.groupApi.graphCaptured", U(descr_v5, groupApi.graphCaptured)},
  {"v5.groupApi.groupDepth", U(descr_v5, groupApi.groupDepth)}, {"v5.collApi.func", U(descr_v5, collApi.func)},
  {"v5.collApi.count", U(descr_v5, collApi.count)}, {"v5.collApi.datatype", U(descr_v5, collApi.datatype)},
  {"v5.collApi.root", U(descr_v5, collApi.root)}, {"v5.collApi.stream", U(descr_v5, collApi.stream)},
  {"v5.collApi.graphCaptured", U(descr_v5, collApi.graphCaptured)}, {"v5.p2pApi.func", U(descr_v5, p2pApi.func)},
  {"v5.p2pApi.count", U(descr_v5, p2pApi.count)}, {"v5.p2pApi.datatype", U(descr_v5, p2pApi.datatype)},
  {"v5.p2pApi.stream", U(descr_v5, p2pApi.stream)}, {"v5.p2pApi.graphCaptured", U(descr_v5, p2pApi.graphCaptured)},
  {"v5.kernelLaunch.stream", U(descr_v5, kernelLaunch.stream)}, {"v5.coll.seqNumber", U(descr_v5, coll.seqNumber)},
  {"v5.coll.func", U(descr_v5, coll.func)}, {"v5.coll.count", U(descr_v5, coll.count)},
  {"v5.coll.root", U(descr_v5, coll.root)}, {"v5.coll.datatype", U(descr_v5, coll.datatype)},
  {"v5.coll.nChannels", U(descr_v5, coll.nChannels)}, {"v5.coll.nWarps", U(descr_v5, coll.nWarps)},
  {"v5.coll.algo", U(descr_v5, coll.algo)}, {"v5.coll.proto", U(descr_v5, coll.proto)},
  {"v5.coll.parentGroup", U(descr_v5, coll.parentGroup)}, {"v5.p2p.func", U(descr_v5, p2p.func)},
  {"v5.p2p.count", U(descr_v5, p2p.count)}, {"v5.p2p.peer", U(descr_v5, p2p.peer)},
  {"v5.p2p.nChannels", U(descr_v5, p2p.nChannels)}, {"v5.p2p.parentGroup", U(descr_v5, p2p.parentGroup)},
  {"v5.proxyOp.pid", U(descr_v5, proxyOp.pid)}, {"v5.proxyOp.isSend", U(descr_v5, proxyOp.isSend)},
  {"v5.proxyStep.step", U(descr_v5, proxyStep.step)}, {"v5.kernelCh.channelId", U(descr_v5, kernelCh.channelId)},
  {"v5.kernelCh.pTimer", U(descr_v5, kernelCh.pTimer)}, {"v5.netPlugin.data", U(descr_v5, netPlugin.data)},
  {"v6.type", U(descr_v6, type)}, {"v6.parentObj", U(descr_v6, parentObj)}, {"v6.rank", U(descr_v6, rank)},
  {"v6.groupApi.graphCaptured", U(descr_v6, groupApi.graphCaptured)},
  {"v6.groupApi.groupDepth", U(descr_v6, groupApi.groupDepth)},
  {"v6.collApi.graphCaptured", U(descr_v6, collApi.graphCaptured)}, {"v6.coll.seqNumber", U(descr_v6, coll.seqNumber)},
  {"v6.coll.algo", U(descr_v6, coll.algo)}, {"v6.coll.parentGroup", U(descr_v6, coll.parentGroup)},
  {"v6.p2p.peer", U(descr_v6, p2p.peer)}, {"v6.p2p.parentGroup", U(descr_v6, p2p.parentGroup)},
  {"v6.kernelCh.pTimer", U(descr_v6, kernelCh.pTimer)}, {"v6.ceColl.seqNumber", U(descr_v6, ceColl.seqNumber)},
  {"v6.ceColl.func", U(descr_v6, ceColl.func)}, {"v6.ceColl.count", U(descr_v6, ceColl.count)},
  {"v6.ceColl.root", U(descr_v6, ceColl.root)}, {"v6.ceColl.datatype", U(descr_v6, ceColl.datatype)},
  {"v6.ceColl.syncStrategy", U(descr_v6, ceColl.syncStrategy)},
  {"v6.ceColl.intraBatchSync", U(descr_v6, ceColl.intraBatchSync)},
  {"v6.ceColl.batchSize", U(descr_v6, ceColl.batchSize)}, {"v6.ceColl.numBatches", U(descr_v6, ceColl.numBatches)},
  {"v6.ceColl.ceSeqNum", U(descr_v6, ceColl.ceSeqNum)}, {"v6.ceColl.stream", U(descr_v6, ceColl.stream)},
  {"v6.ceCollSync.isComplete", U(descr_v6, ceCollSync.isComplete)},
  {"v6.ceCollSync.nRanks", U(descr_v6, ceCollSync.nRanks)},
  {"v6.ceCollBatch.numOps", U(descr_v6, ceCollBatch.numOps)},
  {"v6.ceCollBatch.totalBytes", U(descr_v6, ceCollBatch.totalBytes)},
  {"v6.ceCollBatch.useIntraSync", U(descr_v6, ceCollBatch.useIntraSync)},
};

static int check_layout(void* lib) {
  const struct entry* (*layout)(size_t*) = (const struct entry* (*)(size_t*))dlsym(lib, "commcanary_nccl_layout");
  if (!layout) { fprintf(stderr, "layout: commcanary_nccl_layout not exported\n"); return 1; }
  size_t n = 0;
  const struct entry* rust = layout(&n);
  size_t mine = sizeof(C_LAYOUT) / sizeof(C_LAYOUT[0]);
  int bad = 0;
  if (n != mine) { fprintf(stderr, "layout: the plugin exports %zu facts, the harness checks %zu\n", n, mine); bad = 1; }
  for (size_t i = 0; i < mine; i++) {
    size_t j = 0;
    while (j < n && strcmp(rust[j].name, C_LAYOUT[i].name) != 0) j++;
    if (j == n) { fprintf(stderr, "layout: %s missing from the plugin\n", C_LAYOUT[i].name); bad = 1; continue; }
    if (rust[j].value != C_LAYOUT[i].value) {
      fprintf(stderr, "layout: %s is %llu in C, %llu in Rust\n", C_LAYOUT[i].name,
              (unsigned long long)C_LAYOUT[i].value, (unsigned long long)rust[j].value);
      bad = 1;
    }
  }
  return bad;
}

/* ---- Digests (the Rust test computes the same from the decoded log) ----- */
#define CALL_START 1
#define CALL_STOP 2
#define CALL_STATE 3
typedef struct { uint64_t h; } fnv;
static inline void fnv_bytes(fnv* f, const void* p, size_t n) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; i++) { f->h ^= b[i]; f->h *= 0x100000001b3ULL; }
}
static inline void fnv_u64(fnv* f, uint64_t v) { fnv_bytes(f, &v, 8); }
static inline void fnv_str(fnv* f, const char* s) { if (s) fnv_bytes(f, s, strlen(s)); fnv_bytes(f, "|", 1); }

/* What one call is, in the digest's terms. */
typedef struct {
  uint64_t call, id, kind, context, parent, rank, state, arg, k1, k2, k3;
  const char *s1, *s2, *s3, *s4;
} digest_in;
static uint64_t digest(const digest_in* d) {
  fnv f = {0xcbf29ce484222325ULL};
  fnv_u64(&f, d->call); fnv_u64(&f, d->id); fnv_u64(&f, d->kind); fnv_u64(&f, d->context);
  fnv_u64(&f, d->parent); fnv_u64(&f, d->rank); fnv_u64(&f, d->state); fnv_u64(&f, d->arg);
  fnv_u64(&f, d->k1); fnv_u64(&f, d->k2); fnv_u64(&f, d->k3);
  fnv_str(&f, d->s1); fnv_str(&f, d->s2); fnv_str(&f, d->s3); fnv_str(&f, d->s4);
  return f.h;
}

/* ---- Driving ------------------------------------------------------------- */
static int ABI;
static void* LIB;
static table_v4* T4;
static table_v5* T5; /* v5 and v6 tables share a shape; the descriptor differs */
static void* CONTEXTS[4];
static atomic_int GO;
static bool HOLD;

typedef struct {
  int index;
  long quota;
  long started;
  uint64_t* digests;
  size_t n, cap;
  uint64_t* pair_ns;
  size_t pairs, pairs_cap;
  pid_t tid;
  uint64_t timer;
} worker;

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void keep(worker* w, const digest_in* d) {
  if (w->n < w->cap) w->digests[w->n++] = digest(d);
}

static const char* FUNCS[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
static const char* TYPES[] = {"ncclFloat32", "ncclBfloat16", "ncclInt64"};

/* A descriptor of the version driven, zeroed. */
typedef union { descr_v4 v4; descr_v5 v5; descr_v6 v6; } any_descr;

static void* start(worker* w, int ctx, uint64_t type, void* parent, any_descr* d, digest_in* in) {
  void* handle = NULL;
  int rank = ctx;
  if (ABI == 4) { d->v4.type = (uint8_t)type; d->v4.parentObj = parent; d->v4.rank = rank; }
  else if (ABI == 5) { d->v5.type = type; d->v5.parentObj = parent; d->v5.rank = rank; }
  else { d->v6.type = type; d->v6.parentObj = parent; d->v6.rank = rank; }
  if (ABI == 4) T4->startEvent(CONTEXTS[ctx], &handle, &d->v4);
  else T5->startEvent(CONTEXTS[ctx], &handle, d);
  w->started++;
  in->call = CALL_START; in->id = (uint64_t)(uintptr_t)handle; in->kind = (uint64_t)__builtin_ctzll(type);
  in->context = (uint64_t)ctx; in->parent = (uint64_t)(uintptr_t)parent; in->rank = (uint64_t)(uint32_t)rank;
  keep(w, in);
  return handle;
}
static void stop(worker* w, void* h) {
  T5 ? T5->stopEvent(h) : T4->stopEvent(h);
  digest_in in = {.call = CALL_STOP, .id = (uint64_t)(uintptr_t)h};
  keep(w, &in);
}
static void state(worker* w, void* h, int s, state_args* a, uint64_t arg) {
  T5 ? T5->recordEventState(h, s, a) : T4->recordEventState(h, s, a);
  digest_in in = {.call = CALL_STATE, .id = (uint64_t)(uintptr_t)h, .state = (uint64_t)s, .arg = a ? arg : 0};
  keep(w, &in);
}

/* One round of what NCCL issues around one collective and one p2p. */
static void round_of_events(worker* w, uint64_t iter) {
  int ctx = w->index % 4;
  const char* func = FUNCS[iter % 4];
  const char* dtype = TYPES[iter % 3];
  any_descr d;
  digest_in in;
  void *group_api = NULL, *coll_api = NULL, *group, *coll, *op, *step, *ch, *p2p;
  state_args args;

  if (ABI >= 5) {
    memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
    if (ABI == 5) { d.v5.groupApi.groupDepth = 1; d.v5.groupApi.graphCaptured = (int)(iter & 1); }
    else { d.v6.groupApi.groupDepth = 1; d.v6.groupApi.graphCaptured = (iter & 1) != 0; }
    in.k1 = 1; in.k2 = iter & 1;
    group_api = start(w, ctx, ProfileGroupApi, NULL, &d, &in);

    memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
    d.v5.collApi.func = func; d.v5.collApi.count = 1024 + iter; d.v5.collApi.datatype = dtype; d.v5.collApi.root = -1;
    in.k1 = 1024 + iter; in.k2 = (uint32_t)-1; in.s1 = func; in.s2 = dtype;
    coll_api = start(w, ctx, ProfileCollApi, group_api, &d, &in);
    uint64_t t0 = now_ns();
    stop(w, coll_api);
    state(w, group_api, StateGroupStartApiStop, NULL, 0);
    state(w, group_api, StateGroupEndApiStart, NULL, 0);

    memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
    d.v5.kernelLaunch.stream = (void*)(uintptr_t)(0x5000 + ctx);
    in.k1 = 0x5000 + (uint64_t)ctx;
    /* The measured pair: a start and a stop on the calling thread, nothing
       else between the clock reads (the digests are kept after). */
    void* launch = NULL;
    if (ABI == 5) { d.v5.type = ProfileKernelLaunch; d.v5.parentObj = group_api; d.v5.rank = ctx; }
    else { d.v6.type = ProfileKernelLaunch; d.v6.parentObj = group_api; d.v6.rank = ctx; }
    uint64_t a = now_ns();
    T5->startEvent(CONTEXTS[ctx], &launch, &d);
    T5->stopEvent(launch);
    uint64_t b = now_ns();
    if (w->pairs < w->pairs_cap) w->pair_ns[w->pairs++] = b - a;
    w->started++;
    in.call = CALL_START; in.id = (uint64_t)(uintptr_t)launch; in.kind = 11; in.context = (uint64_t)ctx;
    in.parent = (uint64_t)(uintptr_t)group_api; in.rank = (uint64_t)ctx;
    keep(w, &in);
    digest_in stopped = {.call = CALL_STOP, .id = (uint64_t)(uintptr_t)launch};
    keep(w, &stopped);
    (void)t0;
  }

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  group = start(w, ctx, ProfileGroup, NULL, &d, &in);

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  if (ABI == 4) {
    d.v4.coll = (struct coll_v4){iter, func, NULL, NULL, 4096 + iter, -1, dtype, 4, 16, "RING", "SIMPLE"};
  } else {
    d.v5.coll = (struct coll_v5){iter, func, NULL, NULL, 4096 + iter, -1, dtype, 4, 16, "RING", "SIMPLE", group};
  }
  in.k1 = iter; in.k2 = 4096 + iter; in.k3 = (uint32_t)-1; in.s1 = func; in.s2 = dtype; in.s3 = "RING"; in.s4 = "SIMPLE";
  coll = start(w, ctx, ProfileColl, ABI == 4 ? group : coll_api, &d, &in);
  stop(w, coll); /* enqueued: NCCL stops a collective when it is enqueued */

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  struct proxy_op po = {getpid(), 1, (ctx + 1) % 4, 8, 65536, 1};
  if (ABI == 4) d.v4.proxyOp = po; else d.v5.proxyOp = po;
  in.k1 = 1; in.k2 = (uint64_t)((ctx + 1) % 4); in.k3 = 8;
  op = start(w, ctx, ProfileProxyOp, coll, &d, &in);

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  if (ABI == 4) d.v4.proxyStep.step = (int)(iter % 8); else d.v5.proxyStep.step = (int)(iter % 8);
  in.k1 = iter % 8;
  step = start(w, ctx, ProfileProxyStep, op, &d, &in);
  args.proxyStep.transSize = 65536;
  state(w, step, StateProxyStepSendGPUWait, &args, 65536);
  state(w, step, StateProxyStepRecvWait, &args, 65536);
  stop(w, step);
  state(w, op, StateProxyOpInProgress, NULL, 0);
  stop(w, op);

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  uint64_t gpu = 1700000000000000000ULL + iter * 1000;
  if (ABI == 4) d.v4.kernelCh = (struct kernel_ch){2, gpu}; else d.v5.kernelCh = (struct kernel_ch){2, gpu};
  in.k1 = 2; in.k2 = gpu;
  ch = start(w, ctx, ProfileKernelCh, coll, &d, &in);
  args.kernelCh.pTimer = gpu + 777;
  state(w, ch, StateKernelChStop, &args, gpu + 777);
  stop(w, ch);

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  args.proxyCtrl.appendedProxyOps = 3;
  void* ctrl = start(w, ctx, ProfileProxyCtrl, NULL, &d, &in);
  state(w, ctrl, StateProxyCtrlAppend, &args, 3);
  stop(w, ctrl);

  memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
  if (ABI == 4) d.v4.p2p = (struct p2p_v4){"Send", NULL, dtype, 256 + iter, (ctx + 1) % 4, 2};
  else d.v5.p2p = (struct p2p_v5){"Send", NULL, dtype, 256 + iter, (ctx + 1) % 4, 2, group};
  in.k1 = (uint64_t)((ctx + 1) % 4); in.k2 = 256 + iter; in.k3 = 2; in.s1 = "Send"; in.s2 = dtype;
  p2p = start(w, ctx, ProfileP2p, group, &d, &in);
  stop(w, p2p);

  if (ABI == 6) {
    memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
    d.v6.ceColl = (struct ce_coll){iter, "AllGather", NULL, NULL, 8192, -1, dtype, "multicast", true, 4, 2,
                                   (uint32_t)iter, NULL};
    in.k1 = iter; in.k2 = 8192; in.k3 = (uint32_t)iter; in.s1 = "AllGather"; in.s2 = dtype; in.s3 = "multicast";
    void* ce = start(w, ctx, ProfileCeColl, group_api, &d, &in);
    state(w, ce, StateCeCollStart, NULL, 0);
    memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
    d.v6.ceCollSync = (struct ce_sync){true, 4};
    in.k1 = 4; in.k2 = 1;
    void* sync = start(w, ctx, ProfileCeSync, ce, &d, &in);
    stop(w, sync);
    memset(&d, 0, sizeof d); memset(&in, 0, sizeof in);
    d.v6.ceCollBatch = (struct ce_batch){3, 12288, false};
    in.k1 = 3; in.k2 = 12288;
    void* batch = start(w, ctx, ProfileCeBatch, ce, &d, &in);
    stop(w, batch);
    state(w, ce, StateCeCollComplete, NULL, 0);
    stop(w, ce);
  }
  stop(w, group);
  if (group_api) stop(w, group_api);
}

static void* drive(void* arg) {
  worker* w = arg;
  w->tid = (pid_t)syscall(SYS_gettid);
  /* Register the thread's ring before the measured stretch. */
  round_of_events(w, 0);
  while (!atomic_load(&GO)) {}
  syscall(SYS_getppid); /* marker: the measured stretch starts (the futex count reads it) */
  uint64_t iter = 1;
  while (HOLD || w->started < w->quota) {
    round_of_events(w, iter++);
    if (HOLD) { struct timespec ts = {0, 200000}; nanosleep(&ts, NULL); }
  }
  syscall(SYS_getppid); /* marker: it ends */
  return NULL;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* ---- Job mode: one rank of a job, as NCCL would report it ---------------
 * harness LIB ABI job STEPS LATE_RANK
 * RANK and WORLD_SIZE from the environment. Communicators: the world
 * ("default_pg:0", every rank) and pairs ("dp:pairK", ranks 2K and 2K+1).
 * Each step: an AllReduce on the world, an AllGather on the pair, and a ring
 * of p2p (Send to rank+1, Recv from rank-1) on the world; every operation has
 * two kernel channels that complete with GPU stamps, after every rank has
 * called it (HARNESS_BARRIER). LATE_RANK arrives 2 ms late at every step
 * (-1: none). Prints the operations it issued. HARNESS_STEP_MS adds a pause
 * per step (below 1000); HARNESS_HOLD_S keeps a hung process alive. */
/* A barrier across the job's processes in a shared file (HARNESS_BARRIER,
   created zeroed by the caller): a collective completes on no rank before
   every rank has called it, as on a real network. */
typedef struct { atomic_int arrived; atomic_int generation; } job_barrier;
static job_barrier* BARRIER;
static int WORLD;
static void barrier_wait(void) {
  if (!BARRIER) return;
  int gen = atomic_load(&BARRIER->generation);
  if (atomic_fetch_add(&BARRIER->arrived, 1) + 1 == WORLD) {
    atomic_store(&BARRIER->arrived, 0);
    atomic_fetch_add(&BARRIER->generation, 1);
  } else {
    while (atomic_load(&BARRIER->generation) == gen) sched_yield();
  }
}

static void job_op(void* ctx, int rank, uint64_t type, uint64_t seq, const char* func, size_t count, int peer,
                   void* group, uint64_t* gpu) {
  descr_v6 d;
  void *h = NULL, *k = NULL;
  memset(&d, 0, sizeof d);
  d.type = type; d.parentObj = group; d.rank = rank;
  if (type == ProfileColl) d.coll = (struct coll_v5){seq, func, NULL, NULL, count, -1, "ncclFloat32", 2, 8, "RING", "SIMPLE", group};
  else d.p2p = (struct p2p_v5){func, NULL, "ncclFloat32", count, peer, 2, group};
  T5->startEvent(ctx, &h, &d);
  T5->stopEvent(h); /* enqueued */
  barrier_wait();
  for (int c = 0; c < 2; c++) {
    memset(&d, 0, sizeof d);
    d.type = ProfileKernelCh; d.parentObj = h; d.rank = rank;
    d.kernelCh = (struct kernel_ch){(uint8_t)c, *gpu};
    T5->startEvent(ctx, &k, &d);
    struct timespec ts = {0, 300000};
    nanosleep(&ts, NULL);
    state_args a; a.kernelCh.pTimer = *gpu + 250000;
    T5->recordEventState(k, StateKernelChStop, &a);
    T5->stopEvent(k);
  }
  *gpu += 400000;
}

/* The collective every other rank waits in: enqueued, its kernel channels
   started and never stopped. */
static void job_hung_op(void* ctx, int rank, uint64_t seq, void* group, uint64_t gpu) {
  descr_v6 d;
  void *h = NULL, *k = NULL;
  memset(&d, 0, sizeof d);
  d.type = ProfileColl; d.parentObj = group; d.rank = rank;
  d.coll = (struct coll_v5){seq, "AllReduce", NULL, NULL, 1 << 20, -1, "ncclFloat32", 2, 8, "RING", "SIMPLE", group};
  T5->startEvent(ctx, &h, &d);
  T5->stopEvent(h);
  for (int c = 0; c < 2; c++) {
    memset(&d, 0, sizeof d);
    d.type = ProfileKernelCh; d.parentObj = h; d.rank = rank;
    d.kernelCh = (struct kernel_ch){(uint8_t)c, gpu};
    T5->startEvent(ctx, &k, &d);
  }
}

static int job(int steps, int late, int hang_step, int hang_rank) {
  int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
  int world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
  const char* shared = getenv("HARNESS_BARRIER");
  WORLD = world;
  if (shared) {
    int fd = open(shared, O_RDWR);
    if (fd < 0) { perror(shared); return 1; }
    BARRIER = mmap(NULL, sizeof(job_barrier), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (BARRIER == MAP_FAILED) { perror("mmap"); return 1; }
  }
  void *wctx = NULL, *pctx = NULL;
  int mask = 0;
  char pair[32];
  snprintf(pair, sizeof pair, "dp:pair%d", rank / 2);
  T5->init(&wctx, 0xA11A11ULL, &mask, "default_pg:0", 1, world, rank, NULL);
  T5->init(&pctx, 0xB00B00ULL + (uint64_t)(rank / 2), &mask, pair, 1, 2, rank % 2, NULL);
  uint64_t gpu = 1700000000000000000ULL + (uint64_t)rank * 1000;
  long issued = 0;
  const char* step_ms = getenv("HARNESS_STEP_MS");
  for (int s = 0; s < steps; s++) {
    if (rank == late) { struct timespec ts = {0, 2000000}; nanosleep(&ts, NULL); }
    if (step_ms) { struct timespec ts = {0, atoi(step_ms) * 1000000L}; nanosleep(&ts, NULL); }
    void* group = NULL;
    descr_v6 d; memset(&d, 0, sizeof d); d.type = ProfileGroup; d.rank = rank;
    if (s == hang_step) {
      /* The hang: hang_rank never calls this step's AllReduce; the others
         wait in it. Every process stops here without finalize, as a job
         killed in a hang does; the plugin's exit hook seals the logs. */
      if (rank != hang_rank) {
        T5->startEvent(wctx, &group, &d);
        job_hung_op(wctx, rank, (uint64_t)s, group, gpu);
      }
      printf("{\"rank\": %d, \"operations\": %ld, \"hung_at_step\": %d}\n", rank, issued, s);
      fflush(stdout);
      /* HARNESS_HOLD_S: stay hung this long (a live agent watches), then exit. */
      const char* hold = getenv("HARNESS_HOLD_S");
      if (hold) { struct timespec ts = {atoi(hold), 0}; nanosleep(&ts, NULL); }
      return 0;
    }
    T5->startEvent(wctx, &group, &d);
    job_op(wctx, rank, ProfileColl, (uint64_t)s, "AllReduce", 1 << 20, -1, group, &gpu); issued++;
    job_op(pctx, rank % 2, ProfileColl, (uint64_t)s, "AllGather", 1 << 16, -1, group, &gpu); issued++;
    job_op(wctx, rank, ProfileP2p, 0, "Send", 4096, (rank + 1) % world, group, &gpu); issued++;
    job_op(wctx, rank, ProfileP2p, 0, "Recv", 4096, (rank + world - 1) % world, group, &gpu); issued++;
    T5->stopEvent(group);
  }
  T5->finalize(pctx);
  T5->finalize(wctx);
  dlclose(LIB);
  printf("{\"rank\": %d, \"operations\": %ld}\n", rank, issued);
  return 0;
}

int main(int argc, char** argv) {
  if ((argc == 6 || argc == 8) && strcmp(argv[3], "job") == 0) {
    LIB = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!LIB) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    ABI = atoi(argv[2]);
    T5 = dlsym(LIB, ABI == 5 ? "ncclProfiler_v5" : "ncclProfiler_v6");
    if (!T5 || ABI < 5) { fprintf(stderr, "job mode drives v5 or v6\n"); return 1; }
    return job(atoi(argv[4]), atoi(argv[5]), argc == 8 ? atoi(argv[6]) : -1, argc == 8 ? atoi(argv[7]) : -1);
  }
  if (argc < 6) {
    fprintf(stderr, "usage: %s LIB ABI THREADS EVENTS DIGESTS_OUT [--hold]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  ABI = atoi(argv[2]);
  int threads = atoi(argv[3]);
  long events = atol(argv[4]);
  HOLD = argc > 6 && strcmp(argv[6], "--hold") == 0;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  void* v4 = dlsym(lib, "ncclProfiler_v4");
  void* v5 = dlsym(lib, "ncclProfiler_v5");
  void* v6 = dlsym(lib, "ncclProfiler_v6");
  if (!v4 || !v5 || !v6) { fprintf(stderr, "a versioned table is missing (v4 %p, v5 %p, v6 %p)\n", v4, v5, v6); return 1; }
  if (check_layout(lib)) return 1;
  if (ABI == 4) T4 = v4; else T5 = ABI == 5 ? v5 : v6;
  const char* name = T5 ? T5->name : T4->name;
  if (!name || strcmp(name, "commcanary") != 0) { fprintf(stderr, "unexpected plugin name\n"); return 1; }

  static const char* NAMES[] = {"tp:0", "pp:1", "dp:2", "default_pg:0"};
  for (int c = 0; c < 4; c++) {
    int mask = 0;
    ncclResult_t r = T5 ? T5->init(&CONTEXTS[c], 0xC0FFEE00ULL + (uint64_t)c, &mask, NAMES[c], 2, 8, c, NULL)
                        : T4->init(&CONTEXTS[c], &mask, NAMES[c], 0xC0FFEE00ULL + (uint64_t)c, 2, 8, c, NULL);
    if (r != 0 || !CONTEXTS[c] || mask == 0) { fprintf(stderr, "init %d failed\n", c); return 1; }
  }

  worker* ws = calloc((size_t)threads, sizeof(worker));
  pthread_t* ts = calloc((size_t)threads, sizeof(pthread_t));
  for (int t = 0; t < threads; t++) {
    ws[t].index = t;
    ws[t].quota = events / threads;
    ws[t].cap = HOLD ? 0 : (size_t)(ws[t].quota * 3 + 4096);
    ws[t].digests = ws[t].cap ? malloc(ws[t].cap * sizeof(uint64_t)) : NULL;
    ws[t].pairs_cap = HOLD ? 0 : (size_t)(ws[t].quota / 4 + 16);
    ws[t].pair_ns = ws[t].pairs_cap ? malloc(ws[t].pairs_cap * sizeof(uint64_t)) : NULL;
    pthread_create(&ts[t], NULL, drive, &ws[t]);
  }
  atomic_store(&GO, 1);
  for (int t = 0; t < threads; t++) pthread_join(ts[t], NULL);
  for (int c = 0; c < 4; c++) (T5 ? T5->finalize : T4->finalize)(CONTEXTS[c]);
  /* NCCL may unload its profiler plugin when the last communicator goes; the
     plugin's writer thread and exit hook must survive that. */
  dlclose(lib);

  FILE* out = fopen(argv[5], "wb");
  if (!out) { perror(argv[5]); return 1; }
  long started = 0;
  size_t calls = 0, pairs = 0;
  for (int t = 0; t < threads; t++) {
    fwrite(ws[t].digests, sizeof(uint64_t), ws[t].n, out);
    started += ws[t].started;
    calls += ws[t].n;
    pairs += ws[t].pairs;
  }
  fclose(out);
  uint64_t* all = malloc((pairs + 1) * sizeof(uint64_t));
  size_t k = 0;
  for (int t = 0; t < threads; t++) for (size_t i = 0; i < ws[t].pairs; i++) all[k++] = ws[t].pair_ns[i];
  qsort(all, k, sizeof(uint64_t), cmp_u64);
  uint64_t clock_cost[1001];
  for (int i = 0; i < 1001; i++) { uint64_t a = now_ns(); uint64_t b = now_ns(); clock_cost[i] = b - a; }
  qsort(clock_cost, 1001, sizeof(uint64_t), cmp_u64);
  printf("{\"abi\": %d, \"threads\": %d, \"events\": %ld, \"calls\": %zu, \"pairs\": %zu, "
         "\"pair_median_ns\": %llu, \"pair_p99_ns\": %llu, \"clock_read_median_ns\": %llu, \"tids\": [",
         ABI, threads, started, calls, k, k ? (unsigned long long)all[k / 2] : 0ULL,
         k ? (unsigned long long)all[(k * 99) / 100] : 0ULL, (unsigned long long)clock_cost[500]);
  for (int t = 0; t < threads; t++) printf("%s%d", t ? ", " : "", (int)ws[t].tid);
  printf("]}\n");
  for (int t = 0; t < threads; t++) { free(ws[t].digests); free(ws[t].pair_ns); }
  free(all); free(ws); free(ts);
  return 0;
}
