// Device self-tests and benchmark kernels of the hw runtime: epochs and flags, the command ring
// through the proxy, and a multi-rank exchange that uses peer stores within a node and the ring to
// the rail peers of other nodes. Data is a hash of (source rank, epoch, word), so stale data from an
// earlier epoch never passes a check.
#include "runtime.cuh"

__device__ __forceinline__ unsigned int mk_mix(unsigned int a, unsigned long long e, unsigned int i) {
  unsigned int h = a * 0x9e3779b1u ^ (unsigned int)e * 0x85ebca6bu ^ (unsigned int)(e >> 32) ^ i * 0xc2b2ae35u;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  return h;
}

__device__ __forceinline__ mk_wait_ctx mk_ctx(const mk_ring_ctl *ctl, mk_dev_err *err, unsigned long long timeout,
                                              int rank, int role) {
  mk_wait_ctx w;
  w.ctl = ctl;
  w.err = err;
  w.timeout_ns = timeout;
  w.rank = rank;
  w.role = role;
  return w;
}

// Two blocks. Block 1 writes each chunk's data for this epoch (after a delay, so block 0 usually
// meets the previous epoch's flag first) and releases the chunk's flag = epoch; block 0 waits for
// each flag and checks the data. A stale flag passing a wait shows up as mismatches.
extern "C" __global__ void mk_test_epochs(unsigned long long *flags, unsigned int *data, int n_chunks,
                                          int chunk_words, unsigned long long *epoch_value, unsigned int *epoch_done,
                                          unsigned int *mismatches, mk_dev_err *err, unsigned long long timeout_ns,
                                          unsigned long long delay_ns) {
  mk_epoch ep{epoch_value, epoch_done};
  const unsigned long long e = mk_epoch_begin(ep);
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  if (blockIdx.x == 1) {
    for (int c = 0; c < n_chunks; c++) {
      if (threadIdx.x == 0) {
        unsigned long long t0 = mk_clock_ns();
        while (mk_clock_ns() - t0 < delay_ns) {
        }
      }
      __syncthreads();
      for (int i = threadIdx.x; i < chunk_words; i += blockDim.x)
        data[c * chunk_words + i] = mk_mix(c, e, i);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        mk_st_release((volatile unsigned long long *)&flags[c], e);
      }
    }
  } else {
    mk_wait_ctx w = mk_ctx(nullptr, err, timeout_ns, 0, MK_ROLE_RECV);
    for (int c = 0; c < n_chunks && !failed; c++) {
      if (threadIdx.x == 0 && mk_wait_ge(w, &flags[c], e, c, e)) failed = 1;
      __syncthreads();
      if (failed) break;
      unsigned int bad = 0;
      for (int i = threadIdx.x; i < chunk_words; i += blockDim.x)
        bad += ((volatile unsigned int *)data)[c * chunk_words + i] != mk_mix(c, e, i);
      if (bad) atomicAdd(mismatches, bad);
    }
  }
  mk_epoch_end(ep, e);
}

// A wait that nothing satisfies: it must time out and name rank, role, flag and epoch.
extern "C" __global__ void mk_test_timeout(const unsigned long long *flags, int index, unsigned long long target,
                                           int rank, int role, mk_dev_err *err, unsigned long long timeout_ns,
                                           const mk_ring_ctl *ctl) {
  mk_wait_ctx w = mk_ctx(ctl, err, timeout_ns, rank, role);
  if (threadIdx.x == 0) mk_wait_ge(w, &flags[index], target, index, target);
}

// One thread: push a PUT of `bytes` to dst_rank's chunk 0, wait until its flag shows the new value,
// repeat. lat_ns[i] is enqueue -> flag visible on the GPU, the proxy's whole round trip.
extern "C" __global__ void mk_test_roundtrip(mk_cmd *records, mk_ring_ctl *ctl, unsigned long long *head,
                                             unsigned long long capacity, const unsigned long long *dst_flags,
                                             int dst_rank, int n_iters, int type, unsigned int bytes,
                                             unsigned long long base_value, unsigned long long *lat_ns,
                                             mk_dev_err *err, unsigned long long timeout_ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  mk_ring r{records, ctl, head, capacity};
  mk_wait_ctx w = mk_ctx(ctl, err, timeout_ns, 0, MK_ROLE_SEND);
  for (int i = 0; i < n_iters; i++) {
    const unsigned long long v = base_value + i + 1;
    const unsigned long long t0 = mk_clock_ns();
    if (mk_ring_push(r, w, type, dst_rank, 0, bytes, 0, 0, v)) return;
    if (mk_wait_ge(w, &dst_flags[0], v, 0, v)) return;
    lat_ns[i] = mk_clock_ns() - t0;
  }
}

// Many producers: block b fills its chunks of the send buffer for this epoch, pushes one PUT per
// chunk (chunk id = flag index), then waits for all of its chunks' flags on the destination. The
// host checks the destination's data afterwards. times: first push, last flag seen, and the sums
// over blocks of time spent pushing and time spent waiting for flags.
extern "C" __global__ void mk_test_stream(mk_cmd *records, mk_ring_ctl *ctl, unsigned long long *head,
                                          unsigned long long capacity, unsigned int *send,
                                          const unsigned long long *dst_flags, int dst_rank, int type,
                                          int chunks_per_block,
                                          unsigned int chunk_bytes, unsigned long long *epoch_value,
                                          unsigned int *epoch_done, unsigned long long *times, mk_dev_err *err,
                                          unsigned long long timeout_ns) {
  mk_epoch ep{epoch_value, epoch_done};
  const unsigned long long e = mk_epoch_begin(ep);
  mk_ring r{records, ctl, head, capacity};
  mk_wait_ctx w = mk_ctx(ctl, err, timeout_ns, 0, MK_ROLE_SEND);
  const unsigned int words = chunk_bytes / 4, first = blockIdx.x * chunks_per_block;
  for (unsigned int i = threadIdx.x; i < chunks_per_block * words; i += blockDim.x)
    send[first * words + i] = mk_mix(0, e, first * words + i);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    const unsigned long long t0 = mk_clock_ns();
    atomicMin(&times[0], t0);
    for (int c = first; c < first + chunks_per_block; c++)
      if (mk_ring_push(r, w, type, dst_rank, c, chunk_bytes, (unsigned long long)c * chunk_bytes,
                       (unsigned long long)c * chunk_bytes, e))
        break;
    const unsigned long long t1 = mk_clock_ns();
    for (int c = first; c < first + chunks_per_block; c++)
      if (mk_wait_ge(w, &dst_flags[c], e, c, e)) break;
    const unsigned long long t2 = mk_clock_ns();
    atomicMax(&times[1], t2);
    atomicAdd(&times[2], t1 - t0);
    atomicAdd(&times[3], t2 - t1);
  }
  mk_epoch_end(ep, e);
}

// The emulated-cluster exchange. Rank r of `nodes` x `gpn` owns a shard of `shard_bytes`, split in
// chunks; block b handles chunks b, b + gridDim.x, ... For each chunk it writes the data, stores it
// straight into every node peer's receive buffer (NVLink role) and releases the peer's flag, and
// pushes one ring command per rail peer in another node (network role, via the proxy). Then it waits
// for the same chunks from every source and checks them. recv_ptrs / flag_ptrs: per rank, this
// process's mapping of that rank's receive buffer and flags (world * shard_bytes, world * n_chunks).
extern "C" __global__ void mk_test_exchange(int rank, int nodes, int gpn, unsigned int *send,
                                            const unsigned long long *recv_ptrs, const unsigned long long *flag_ptrs,
                                            unsigned int shard_bytes, unsigned int chunk_bytes, mk_cmd *records,
                                            mk_ring_ctl *ctl, unsigned long long *head, unsigned long long capacity,
                                            unsigned long long *epoch_value, unsigned int *epoch_done,
                                            unsigned int *mismatches, mk_dev_err *err, unsigned long long timeout_ns) {
  mk_epoch ep{epoch_value, epoch_done};
  const unsigned long long e = mk_epoch_begin(ep);
  mk_ring r{records, ctl, head, capacity};
  const int world = nodes * gpn, node = rank / gpn, local = rank % gpn;
  const unsigned int n_chunks = shard_bytes / chunk_bytes, words = chunk_bytes / 4;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  for (unsigned int c = blockIdx.x; c < n_chunks; c += gridDim.x) {
    const unsigned int w0 = c * words;
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) send[w0 + i] = mk_mix(rank, e, w0 + i);
    for (int g = 0; g < gpn; g++) {  // intra-node: peer stores, then the peer's flag
      const int peer = node * gpn + g;
      if (peer == rank) continue;
      unsigned int *dst = (unsigned int *)recv_ptrs[peer] + (size_t)rank * (shard_bytes / 4) + w0;
      for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) dst[i] = mk_mix(rank, e, w0 + i);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();
        mk_st_release((volatile unsigned long long *)flag_ptrs[peer] + (size_t)rank * n_chunks + c, e);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // inter-node: one command per rail peer, the proxy moves it
      __threadfence_system();
      mk_wait_ctx w = mk_ctx(ctl, err, timeout_ns, rank, MK_ROLE_SEND);
      for (int n = 0; n < nodes; n++)
        if (n != node && mk_ring_push(r, w, MK_CMD_PUT, n * gpn + local, rank * n_chunks + c, chunk_bytes,
                                      (unsigned long long)c * chunk_bytes,
                                      (unsigned long long)rank * shard_bytes + (unsigned long long)c * chunk_bytes, e))
          failed = 1;
    }
  }
  __syncthreads();
  const unsigned long long *my_flags = (const unsigned long long *)flag_ptrs[rank];
  const unsigned int *my_recv = (const unsigned int *)recv_ptrs[rank];
  mk_wait_ctx w = mk_ctx(ctl, err, timeout_ns, rank, MK_ROLE_RECV);
  for (int src = 0; src < world && !failed; src++) {
    const bool same_node = src / gpn == node, rail = src % gpn == local;
    if (src == rank || !(same_node || rail)) continue;
    for (unsigned int c = blockIdx.x; c < n_chunks; c += gridDim.x) {
      const unsigned int idx = src * n_chunks + c;
      if (threadIdx.x == 0 && mk_wait_ge(w, &my_flags[idx], e, idx, e)) failed = 1;
      __syncthreads();
      if (failed) break;
      unsigned int bad = 0;
      const volatile unsigned int *got = my_recv + (size_t)src * (shard_bytes / 4) + c * words;
      for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) bad += got[i] != mk_mix(src, e, c * words + i);
      if (bad) atomicAdd(mismatches, bad);
    }
  }
  mk_epoch_end(ep, e);
}
