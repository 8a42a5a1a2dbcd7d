/* The narrow interface between the host proxy and a transport.
 *
 * The proxy validates every command and resolves it to absolute addresses before a transport sees
 * it: in this process for the in-host transports (fake, cuda), in the destination's address space
 * for the network ones (mk_net.h), whose registered regions the proxy's bounds come from.
 * post() receives up to MK_MAX_BATCH ops for one destination rank; progress() moves posted work on and
 * returns how many ops are still in flight (or -1 with `err` filled, and `err_op` naming the op when
 * one failed).
 */
#ifndef MK_TRANSPORT_H
#define MK_TRANSPORT_H
#include <stdint.h>

typedef struct mk_op {
  uint64_t src, dst, bytes; /* absolute addresses, valid in this process; bytes 0 for SIGNAL */
  uint64_t flag;            /* absolute address of the destination's arrival flag (uint64) */
  uint64_t epoch;           /* value the flag is set to, after the data */
  uint32_t chunk, dst_rank;
} mk_op;

typedef struct mk_transport_opts {
  uint64_t seed;          /* seeded reordering */
  int unordered;          /* 0: RC order per connection; 1: SRD (data may complete in any order) */
  double gbytes_per_s;    /* shaping: 0 = as fast as the copy engine */
  uint64_t latency_ns;    /* shaping: added before each op is released */
  int device;             /* CUDA device ordinal (cuda loopback) */
  int streams;            /* copy streams (cuda loopback); >1 with unordered lets ops overtake */
  int flag_early;         /* fake only: a planted bug, flags race their data (proves the checker) */
} mk_transport_opts;

typedef struct mk_transport mk_transport;
struct mk_transport {
  const char *name;
  int (*attach)(mk_transport *t);  /* called on the proxy thread before the first post */
  int (*post)(mk_transport *t, const mk_op *ops, int n);
  int (*progress)(mk_transport *t);
  int (*drain)(mk_transport *t, uint64_t timeout_ns);
  void (*destroy)(mk_transport *t);
  /* Network transports only (NULL elsewhere): this endpoint's connection data for its peers, a
   * peer's connection data, and every flag's last published epoch (a receiving proxy's window). */
  int (*address)(mk_transport *t, uint8_t *out, int max);
  int (*connect)(mk_transport *t, int peer, const uint8_t *addr, int len);
  void (*rebase)(mk_transport *t, uint64_t epoch);
  uint64_t driver_calls; /* copies and memory-op submissions issued (cuda), for the stats */
  uint64_t activity;     /* completions handled: a change is work, so a receiving proxy keeps polling */
  mk_op err_op;          /* the op that failed, when err_has_op */
  int err_has_op;
  char err[256];
};

mk_transport *mk_fake_transport(const mk_transport_opts *o, char *err, int errlen);
mk_transport *mk_cuda_transport(const mk_transport_opts *o, char *err, int errlen);

uint64_t mk_now_ns(void);
uint64_t mk_rand(uint64_t *state); /* splitmix64 */

/* A spin-wait hint for polling loops. */
#if defined(__x86_64__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() __asm__ __volatile__("" ::: "memory")
#endif
#endif
