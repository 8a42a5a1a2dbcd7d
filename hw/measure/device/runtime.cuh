// The CUDA copy of the device protocol (bounded flag waits, epochs, the producer side of the command
// ring) for the self-test kernels (selftest.cu, `mkernel selftest`). The protocol, its layouts and its
// constants are specified once, in mk_ring.h; the fused kernel's copy is Triton (hw/kernels/sync.py),
// since one kernel language cannot call the other.
//
// Every wait is bounded by %globaltimer and gives up early when the proxy aborts; a failed wait records
// one error (the first wins) naming the rank, the role, what was waited on (flag or ring slot), its
// index, the epoch, and the values seen and expected. The host reads it after the stream finishes.
#pragma once
#include "mk_ring.h"

struct mk_wait_ctx {  // what a role needs to wait boundedly and to say why it stopped
  const mk_ring_ctl *ctl;  // may be null (no proxy)
  mk_dev_err *err;
  unsigned long long timeout_ns;
  int rank, role;
};

__device__ __forceinline__ unsigned long long mk_clock_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned long long mk_ld_acquire(const volatile unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void mk_st_release(volatile unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void mk_st_release_u32(volatile unsigned int *p, unsigned int v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ bool mk_aborted(const mk_wait_ctx &w) {
  return w.ctl && mk_ld_acquire((const volatile unsigned long long *)&w.ctl->abort) != 0;
}

__device__ inline void mk_record_error(const mk_wait_ctx &w, int code, int what, unsigned long long index,
                                       unsigned long long epoch, unsigned long long observed,
                                       unsigned long long expected) {
  if (atomicCAS(&w.err->code, 0, code) != 0) return;  // the first error wins
  w.err->rank = w.rank;
  w.err->role = w.role;
  w.err->what = what;
  w.err->index = index;
  w.err->epoch = epoch;
  w.err->observed = observed;
  w.err->expected = expected;
  __threadfence_system();
}

// Spin until *flag >= target (flags only grow: epochs and monotonic counters, so nothing is zeroed
// between calls). Returns 0, or MK_ERR_TIMEOUT / MK_ERR_ABORTED after recording why.
__device__ inline int mk_wait_ge(const mk_wait_ctx &w, const unsigned long long *flag, unsigned long long target,
                                 unsigned long long index, unsigned long long epoch) {
  unsigned long long v = mk_ld_acquire(flag);
  if (v >= target) return 0;
  const unsigned long long start = mk_clock_ns();
  for (unsigned it = 1;; it++) {
    v = mk_ld_acquire(flag);
    if (v >= target) return 0;
    if ((it % MK_WAIT_CHECK_EVERY) == 0) {  // the abort word is in host memory: read it rarely (PCIe)
      if ((it % MK_WAIT_ABORT_EVERY) == 0 && mk_aborted(w)) {
        mk_record_error(w, MK_ERR_ABORTED, MK_WHAT_FLAG, index, epoch, v, target);
        return MK_ERR_ABORTED;
      }
      if (mk_clock_ns() - start > w.timeout_ns) {
        mk_record_error(w, MK_ERR_TIMEOUT, MK_WHAT_FLAG, index, epoch, v, target);
        return MK_ERR_TIMEOUT;
      }
    }
  }
}

// Epochs: a launch reads its epoch as the stored value + 1 and the last block to finish stores it.
// Every block reads before any block can be last, so all blocks agree, and the next launch on the
// stream sees the new value: no host synchronisation, so a call can be captured in a CUDA graph.
struct mk_epoch {
  unsigned long long *value;  // device memory, starts at 0
  unsigned int *done;         // device memory, blocks finished in the current launch
};

__device__ __forceinline__ unsigned long long mk_epoch_begin(const mk_epoch &e) {
  return *((volatile unsigned long long *)e.value) + 1;
}

__device__ inline void mk_epoch_end(const mk_epoch &e, unsigned long long epoch) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(e.done, 1u) == gridDim.x - 1) {
      *e.done = 0;
      *((volatile unsigned long long *)e.value) = epoch;
      __threadfence();
    }
  }
}

struct mk_ring {
  mk_cmd *records;            // host-mapped pinned memory
  mk_ring_ctl *ctl;           // host-mapped pinned memory
  unsigned long long *head;   // device memory: [0] slot claims, [1] last tail seen, [2] poller lock
  unsigned long long capacity;
};

// Credits. The tail lives in host memory; reading it is a PCIe round trip, and many SMs polling
// host memory slow down every driver call the proxy makes (measured: 100+ us per call with 64
// pollers). So producers spin on a copy of the tail in device memory, and one elected producer at a
// time reads the host tail, refreshes the copy and checks the abort word, with backoff.
__device__ inline int mk_ring_credit(const mk_ring &r, const mk_wait_ctx &w, unsigned long long slot,
                                     unsigned long long epoch) {
  volatile unsigned long long *cached = r.head + 1;
  if (slot - *cached < r.capacity) return 0;
  const unsigned long long start = mk_clock_ns();
  unsigned ns = 128;
  for (;;) {
    if (slot - *cached < r.capacity) return 0;
    if (atomicCAS(r.head + 2, 0ull, 1ull) == 0ull) {  // elected: one PCIe reader at a time
      const unsigned long long t = mk_ld_acquire((const volatile unsigned long long *)&r.ctl->tail);
      atomicMax(r.head + 1, t);
      const bool aborted = mk_aborted(w);
      atomicExch(r.head + 2, 0ull);
      if (slot - t < r.capacity) return 0;
      if (aborted || mk_clock_ns() - start > w.timeout_ns) {
        const int code = aborted ? MK_ERR_ABORTED : MK_ERR_TIMEOUT;
        mk_record_error(w, code, MK_WHAT_RING_SLOT, slot, epoch, t, slot - r.capacity + 1);
        return code;
      }
    } else if (mk_clock_ns() - start > w.timeout_ns) {
      mk_record_error(w, MK_ERR_TIMEOUT, MK_WHAT_RING_SLOT, slot, epoch, *cached, slot - r.capacity + 1);
      return MK_ERR_TIMEOUT;
    }
    __nanosleep(ns);
    ns = ns < 2048 ? 2 * ns : ns;
  }
}

// The command ring, producer side. One thread calls this. The slot is claimed with an atomic on a
// device counter; the thread waits (boundedly) for a credit, writes the body, and commits the
// header with a system-scope release store, which orders the body and every earlier write of this
// thread (the chunk's data, after a __syncthreads) before the proxy can see the record.
__device__ inline int mk_ring_push(const mk_ring &r, const mk_wait_ctx &w, unsigned short type,
                                   unsigned short dst_rank, unsigned int chunk, unsigned int bytes,
                                   unsigned long long src_off, unsigned long long dst_off,
                                   unsigned long long epoch) {
  const unsigned long long slot = atomicAdd(r.head, 1ull);
  if (int rc = mk_ring_credit(r, w, slot, epoch)) return rc;
  volatile mk_cmd *rec = r.records + slot % r.capacity;
  rec->type = type;
  rec->dst_rank = dst_rank;
  rec->chunk = chunk;
  rec->bytes = bytes;
  rec->src_off = src_off;
  rec->dst_off = dst_off;
  rec->epoch = epoch;
  rec->timestamp = mk_clock_ns();
  mk_st_release_u32(&rec->seq, (unsigned int)(slot + 1));
  return 0;
}
