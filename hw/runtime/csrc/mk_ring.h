/* The GPU->host command ring: one layout shared by the device producer (CUDA), the host proxy (C)
 * and the Python encoder (hw/lowering/ring.py mirrors it and a test checks they agree).
 *
 * A record is 48 bytes. The producer claims a slot by bumping `head`, waits (boundedly) until the
 * slot is free (slot - tail < capacity), writes the body, and then commits the 32-bit `seq` word with
 * a system-scope release store. The proxy reads `seq` with an acquire load: a record is committed
 * when seq == (uint32_t)(slot + 1), so a stale record from the previous lap never looks committed.
 * The proxy frees slots by advancing `tail` (release); that is the credit the producer waits for.
 */
#ifndef MK_RING_H
#define MK_RING_H
#include <stdint.h>

#define MK_CMD_BYTES 48
#define MK_MAX_BATCH 8   /* commands per connection per post */
#define MK_MAX_RANKS 1024

enum mk_cmd_type {
  MK_CMD_PUT = 1,    /* copy `bytes` from src_off (local) to dst_off on dst_rank, then flag[chunk] = epoch */
  MK_CMD_SIGNAL = 2, /* flag[chunk] = epoch on dst_rank, ordered after earlier PUTs to that rank */
};

typedef struct mk_cmd {
  uint32_t seq;       /* commit word, written last */
  uint16_t type;      /* enum mk_cmd_type */
  uint16_t dst_rank;
  uint32_t chunk;     /* arrival flag index on the destination */
  uint32_t bytes;
  uint64_t src_off;   /* into this rank's registered send buffer */
  uint64_t dst_off;   /* into dst_rank's registered receive buffer */
  uint64_t epoch;     /* the value the arrival flag is set to */
  uint64_t timestamp; /* producer clock (ns) at enqueue, for latency accounting */
} mk_cmd;

/* Host-mapped control words. Separate cache lines: the proxy writes tail/abort, producers read them. */
typedef struct mk_ring_ctl {
  volatile uint64_t tail;     /* records consumed by the proxy: the credits */
  uint64_t _pad0[7];
  volatile uint64_t abort;    /* nonzero: the proxy failed; producers and waiters give up */
  uint64_t _pad1[7];
} mk_ring_ctl;

/* Error codes, shared by the proxy, the device waits and Python (hw/lowering/ring.py ERRORS). */
enum mk_error {
  MK_OK = 0,
  MK_ERR_TYPE = 1,       /* unknown command type */
  MK_ERR_DST_RANK = 2,   /* destination rank out of range */
  MK_ERR_BYTES = 3,      /* bytes == 0 for a PUT */
  MK_ERR_SRC_RANGE = 4,  /* src_off + bytes outside the send buffer */
  MK_ERR_DST_RANGE = 5,  /* dst_off + bytes outside the receive buffer */
  MK_ERR_CHUNK = 6,      /* chunk >= number of arrival flags */
  MK_ERR_TRANSPORT = 7,  /* the transport failed to post or complete */
  MK_ERR_TIMEOUT = 8,    /* a bounded wait ran out */
  MK_ERR_ABORTED = 9,    /* another party aborted */
};

#ifdef __cplusplus
static_assert(sizeof(mk_cmd) == MK_CMD_BYTES, "mk_cmd must be 48 bytes");
#else
_Static_assert(sizeof(mk_cmd) == MK_CMD_BYTES, "mk_cmd must be 48 bytes");
#endif
#endif
