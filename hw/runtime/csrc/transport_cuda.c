/* The loopback transport: ranks on one host that the cluster declares as different nodes.
 *
 * The proxy moves each chunk with the copy engine (cuMemcpyDtoDAsync into the peer-mapped receive
 * buffer) and then sets the arrival flag with a stream write-value on the same stream, so the flag
 * can never be visible before its data. Adjacent chunks of one batch are coalesced into one copy and
 * a batch's flags go out in one cuStreamBatchMemOp: two driver calls per batch, not two per command.
 *
 * Shaping mimics a NIC: each op is released no earlier than `latency_ns` after it was posted and
 * after the link has serialised the bytes before it at `gbytes_per_s`. With `unordered` (SRD) and
 * several streams, ops go to streams at random (seeded), so chunks overtake one another while each
 * flag still follows its own data. A SIGNAL (no data) is fenced, as a sender on SRD must: it is
 * released no earlier than anything posted before it, and its stream first waits for every other
 * stream's work, so its flag never lands before data posted ahead of it (a put of several pairs
 * relies on that: hw/lowering/remote.py).
 *
 * Copy streams are shared by every loopback transport of a process (per device) and live as long as
 * the process. Each stream takes one of the context's hardware work queues, which are few under MPS;
 * once streams outnumber them, a copy stream can share the compute stream's queue and its copies then
 * wait behind the persistent kernel that waits for them (a deadlock the kernel's timeout turns into an
 * error: measured with one queue per rank on the emulated 2x2). Shared, the copy
 * streams number at most MAX_STREAMS per process however many contexts it has; the emulated launcher
 * asks for enough queues (hw/runtime/emulate.py).
 *
 * The driver is opened with dlopen, so this file compiles and the library loads on machines with
 * CUDA's headers but no GPU driver; choosing this transport there fails with a clear error.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_ring.h"
#include "mk_transport.h"

#ifdef MK_HAVE_CUDA
#include <cuda.h>

#define MAX_STREAMS 8
#define MAX_DEVICES 64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CUstream pool[MAX_DEVICES][MAX_STREAMS]; /* the process's copy streams (see above) */

typedef struct cuda_api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamQuery)(CUstream);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemcpyBatchAsync)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *,
                               size_t, CUstream); /* CUDA 13 ABI (_v2); NULL on older drivers */
  CUresult (*StreamBatchMemOp)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*GetErrorString)(CUresult, const char **);
} cuda_api;

typedef struct delayed {
  mk_op op;
  uint64_t release_ns;
} delayed;

typedef struct cuda_tr {
  mk_transport base;
  mk_transport_opts o;
  cuda_api api;
  void *lib;
  CUcontext ctx;
  CUstream streams[MAX_STREAMS];
  CUevent marks[MAX_STREAMS]; /* a SIGNAL's fence: each stream's work so far */
  int nstreams;
  uint64_t rng, link_free_ns, last_release_ns;
  delayed *q; /* shaped ops not yet released, kept sorted by release time */
  size_t n, cap;
} cuda_tr;

static int check(cuda_tr *t, CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return 0;
  const char *s = "unknown error";
  if (t->api.GetErrorString) t->api.GetErrorString(r, &s);
  snprintf(t->base.err, sizeof t->base.err, "%s failed: %s (%d)", what, s, (int)r);
  return -1;
}

static int cuda_attach(mk_transport *b) {
  cuda_tr *t = (cuda_tr *)b;
  CUdevice dev;
  if (check(t, t->api.Init(0), "cuInit")) return -1;
  if (check(t, t->api.DeviceGet(&dev, t->o.device), "cuDeviceGet")) return -1;
  if (check(t, t->api.PrimaryCtxRetain(&t->ctx, dev), "cuDevicePrimaryCtxRetain")) return -1;
  if (check(t, t->api.CtxSetCurrent(t->ctx), "cuCtxSetCurrent")) return -1;
  if (t->o.device < 0 || t->o.device >= MAX_DEVICES) {
    snprintf(t->base.err, sizeof t->base.err, "device %d outside 0..%d", t->o.device, MAX_DEVICES - 1);
    return -1;
  }
  int rc = 0;
  pthread_mutex_lock(&pool_lock);
  CUstream *shared = pool[t->o.device];
  for (int i = 0; i < t->nstreams && !rc; i++) {
    if (!shared[i]) rc = check(t, t->api.StreamCreate(&shared[i], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    t->streams[i] = shared[i];
  }
  pthread_mutex_unlock(&pool_lock);
  for (int i = 0; i < t->nstreams && !rc && t->nstreams > 1; i++)
    rc = check(t, t->api.EventCreate(&t->marks[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return rc;
}

/* Issue the copies of one batch: contiguous chunks merged, then one batched driver call (or one
 * call per copy where the driver has no cuMemcpyBatchAsync). */
static int copy_batch(cuda_tr *t, const mk_op *ops, int n, CUstream s) {
  CUdeviceptr dst[MK_MAX_BATCH], src[MK_MAX_BATCH];
  size_t size[MK_MAX_BATCH], m = 0;
  for (int i = 0; i < n;) {
    int j = i + 1;
    uint64_t bytes = ops[i].bytes;
    while (j < n && ops[j].bytes && ops[j].src == ops[i].src + bytes && ops[j].dst == ops[i].dst + bytes) {
      bytes += ops[j].bytes;
      j++;
    }
    if (bytes) {
      dst[m] = ops[i].dst;
      src[m] = ops[i].src;
      size[m++] = bytes;
    }
    i = j;
  }
  if (m == 0) return 0;
  if (m > 1 && t->api.MemcpyBatchAsync) {
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.srcLocHint.type = attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
    attr.srcLocHint.id = attr.dstLocHint.id = t->o.device;
    size_t idx = 0;
    t->base.driver_calls++;
    return check(t, t->api.MemcpyBatchAsync(dst, src, size, m, &attr, &idx, 1, s), "cuMemcpyBatchAsync");
  }
  for (size_t k = 0; k < m; k++) {
    t->base.driver_calls++;
    if (check(t, t->api.MemcpyDtoDAsync(dst[k], src[k], size[k], s), "cuMemcpyDtoDAsync")) return -1;
  }
  return 0;
}

/* Copy, then flag, for ops that share one stream: the batch's copies, then its flags in one call. */
static int submit(cuda_tr *t, const mk_op *ops, int n, CUstream s) {
  CUstreamBatchMemOpParams flags[MK_MAX_BATCH];
  if (copy_batch(t, ops, n, s)) return -1;
  for (int i = 0; i < n; i++) {
    memset(&flags[i], 0, sizeof flags[i]);
    flags[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    flags[i].writeValue.address = ops[i].flag;
    flags[i].writeValue.value64 = ops[i].epoch;
    flags[i].writeValue.flags = 0; /* default: a memory barrier first, so the data is visible */
  }
  t->base.driver_calls++;
  return check(t, t->api.StreamBatchMemOp(s, (unsigned)n, flags, 0), "cuStreamBatchMemOp");
}

/* Make stream `s` wait for the work already on every other stream (a SIGNAL's fence). */
static int fence(cuda_tr *t, int s) {
  for (int k = 0; k < t->nstreams; k++) {
    if (k == s) continue;
    if (check(t, t->api.EventRecord(t->marks[k], t->streams[k]), "cuEventRecord") ||
        check(t, t->api.StreamWaitEvent(t->streams[s], t->marks[k], 0), "cuStreamWaitEvent"))
      return -1;
  }
  return 0;
}

static int submit_spread(cuda_tr *t, const mk_op *ops, int n) {
  if (t->nstreams == 1) return submit(t, ops, n, t->streams[0]);
  for (int i = 0; i < n; i++) {
    int s = (int)(mk_rand(&t->rng) % (uint64_t)t->nstreams);
    if ((ops[i].bytes == 0 && fence(t, s)) || submit(t, &ops[i], 1, t->streams[s])) return -1;
  }
  return 0;
}

static int shaped(const cuda_tr *t) { return t->o.gbytes_per_s > 0 || t->o.latency_ns > 0; }

static int cuda_post(mk_transport *b, const mk_op *ops, int n) {
  cuda_tr *t = (cuda_tr *)b;
  if (!shaped(t)) return submit_spread(t, ops, n);
  uint64_t now = mk_now_ns();
  for (int i = 0; i < n; i++) {
    uint64_t start = t->link_free_ns > now ? t->link_free_ns : now;
    uint64_t wire = t->o.gbytes_per_s > 0 ? (uint64_t)(ops[i].bytes / t->o.gbytes_per_s) : 0;
    t->link_free_ns = start + wire;
    uint64_t rel = t->link_free_ns + t->o.latency_ns;
    if (t->o.unordered && t->o.latency_ns) rel += mk_rand(&t->rng) % (t->o.latency_ns / 2 + 1);
    if (ops[i].bytes == 0 && rel < t->last_release_ns) rel = t->last_release_ns; /* fenced; ties keep order */
    if (rel > t->last_release_ns) t->last_release_ns = rel;
    if (t->n == t->cap) {
      t->cap = t->cap ? 2 * t->cap : 256;
      t->q = realloc(t->q, t->cap * sizeof(delayed));
    }
    size_t k = t->n++;
    while (k > 0 && t->q[k - 1].release_ns > rel) {
      t->q[k] = t->q[k - 1];
      k--;
    }
    t->q[k].op = ops[i];
    t->q[k].release_ns = rel;
  }
  return 0;
}

static int cuda_progress(mk_transport *b) {
  cuda_tr *t = (cuda_tr *)b;
  if (!t->n) return 0;
  uint64_t now = mk_now_ns();
  size_t k = 0;
  mk_op batch[MK_MAX_BATCH];
  while (k < t->n && t->q[k].release_ns <= now) {
    int m = 0;
    while (k < t->n && m < MK_MAX_BATCH && t->q[k].release_ns <= now) batch[m++] = t->q[k++].op;
    if (submit_spread(t, batch, m)) return -1;
  }
  memmove(t->q, t->q + k, (t->n - k) * sizeof(delayed));
  t->n -= k;
  return (int)t->n;
}

static int cuda_drain(mk_transport *b, uint64_t timeout_ns) {
  cuda_tr *t = (cuda_tr *)b;
  if (!t->ctx) return 0;
  if (check(t, t->api.CtxSetCurrent(t->ctx), "cuCtxSetCurrent")) return -1;
  uint64_t deadline = mk_now_ns() + timeout_ns;
  while (cuda_progress(b) > 0)
    if (mk_now_ns() > deadline) return snprintf(t->base.err, sizeof t->base.err, "shaped ops not released"), -1;
  for (int i = 0; i < t->nstreams; i++) {
    CUresult r;
    while ((r = t->api.StreamQuery(t->streams[i])) == CUDA_ERROR_NOT_READY) {
      if (mk_now_ns() > deadline) {
        snprintf(t->base.err, sizeof t->base.err, "copy stream %d still busy after %.3f s", i, timeout_ns / 1e9);
        return -1;
      }
    }
    if (check(t, r, "cuStreamQuery")) return -1;
  }
  return 0;
}

static void cuda_destroy(mk_transport *b) {
  cuda_tr *t = (cuda_tr *)b;
  if (t->ctx) t->api.CtxSetCurrent(t->ctx);
  for (int i = 0; i < t->nstreams; i++)
    if (t->marks[i]) t->api.EventDestroy(t->marks[i]);
  if (t->lib) dlclose(t->lib);
  free(t->q);
  free(t);
}

#define LOAD(field, sym)                                                                           \
  if (!(*(void **)&t->api.field = dlsym(t->lib, sym))) {                                           \
    snprintf(err, errlen, "the CUDA driver (libcuda.so.1) lacks %s; it is too old for mkernel", sym); \
    cuda_destroy(&t->base);                                                                        \
    return NULL;                                                                                   \
  }

mk_transport *mk_cuda_transport(const mk_transport_opts *o, char *err, int errlen) {
  cuda_tr *t = calloc(1, sizeof *t);
  t->o = *o;
  t->rng = o->seed;
  t->nstreams = o->streams < 1 ? 1 : o->streams > MAX_STREAMS ? MAX_STREAMS : o->streams;
  if (!o->unordered) t->nstreams = 1; /* RC order: one queue */
  t->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!t->lib) {
    snprintf(err, errlen, "the loopback transport needs the CUDA driver, and libcuda.so.1 could not be loaded: %s",
             dlerror());
    free(t);
    return NULL;
  }
  LOAD(Init, "cuInit");
  LOAD(DeviceGet, "cuDeviceGet");
  LOAD(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  LOAD(CtxSetCurrent, "cuCtxSetCurrent");
  LOAD(StreamCreate, "cuStreamCreate");
  LOAD(StreamQuery, "cuStreamQuery");
  LOAD(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  LOAD(StreamBatchMemOp, "cuStreamBatchMemOp_v2");
  LOAD(EventCreate, "cuEventCreate");
  LOAD(EventRecord, "cuEventRecord");
  LOAD(StreamWaitEvent, "cuStreamWaitEvent");
  LOAD(EventDestroy, "cuEventDestroy_v2");
  LOAD(GetErrorString, "cuGetErrorString");
  *(void **)&t->api.MemcpyBatchAsync = dlsym(t->lib, "cuMemcpyBatchAsync_v2"); /* optional */
  t->base.name = "cuda";
  t->base.attach = cuda_attach;
  t->base.post = cuda_post;
  t->base.progress = cuda_progress;
  t->base.drain = cuda_drain;
  t->base.destroy = cuda_destroy;
  return &t->base;
}

#else /* built without CUDA headers */

mk_transport *mk_cuda_transport(const mk_transport_opts *o, char *err, int errlen) {
  (void)o;
  snprintf(err, errlen, "the loopback transport was built without CUDA headers (cuda.h not found at build time)");
  return NULL;
}
#endif
