/* The device protocol, specified once: the GPU->host command ring, the bounded device waits and the
 * device error block. Every implementation cites this header and takes its constants from it:
 *
 *   the proxy (consumer)            proxy.c                          C, includes this header
 *   the host producer (CPU tests)   host_ring.c                      C, includes this header
 *   the device side                 hw/kernels/sync.py               Triton: its constants come from
 *     (the waits, the producer)     run by the fused kernel and      hw/lowering/ring.py and layout.py
 *                                   the self-tests (ring_kernels.py)
 *   the Python encoder and decoder  hw/lowering/ring.py, layout.py   mirrors of this header
 *
 * The device side has one copy, in Triton: `mkernel selftest` and calibration drive the same code the
 * fused kernel runs. tests/hw/test_protocol.py reads every constant below from the compiled C
 * (mk_constant in host_ring.c) and checks each mirror against it.
 *
 * THE RING. A record is 48 bytes (mk_cmd). A producer claims slot `slot` by an atomic add on its
 * claim counter, waits (boundedly) for a credit, `slot - tail < capacity`, writes the body, and then
 * commits the 32-bit `seq` word with a system-scope release store of (uint32_t)(slot + 1), which
 * orders the body and every earlier write of the producer's block (the chunk's data, after a block
 * barrier) before the record. The proxy reads `seq` with an acquire load: record `slot` is committed
 * when seq == (uint32_t)(slot + 1), so a stale record of the previous lap never looks committed. It
 * consumes records in slot order and frees them by advancing `tail` (release): the credits.
 * How a producer reads `tail` is its own business (the Triton producer acquires the host word
 * itself); what it may not do is write a slot before its credit.
 *
 * ABORT. A nonzero `abort` word (an mk_error code) says the proxy failed: producers waiting for a
 * credit and device waits give up, recording MK_ERR_ABORTED.
 *
 * DEVICE WAITS. A wait spins until a u64 flag, read with ld.acquire.sys, reaches its target (flags
 * only grow: epochs and running counts, never zeroed between calls). It is bounded by %globaltimer:
 * every MK_WAIT_CHECK_EVERY polls it checks the deadline (MK_ERR_TIMEOUT), and every
 * MK_WAIT_ABORT_EVERY polls the abort word, which lives in host memory and costs a PCIe read
 * (MK_ERR_ABORTED). A wait may also give up early once another block has recorded an error (the
 * fused kernel's waits do); it may back off between polls with nanosleep.
 *
 * THE ERROR BLOCK. 64 bytes of device memory (mk_dev_err, then padding). The first error wins: a
 * compare-and-swap of `code` from 0; the winner writes the other fields. `role` is an mk_role,
 * `what` an mk_what, `index` the flag or slot or stage waited on; `task` is the schedule task (-1:
 * the call barrier), written by the fused kernel (the self-test kernels write -1).
 */
#ifndef MK_RING_H
#define MK_RING_H
#include <stdint.h>

#define MK_CMD_BYTES 48
#define MK_MAX_BATCH 8   /* commands per connection per post */
#define MK_MAX_RANKS 1024
#define MK_ERROR_BYTES 64         /* the device error block's allocation */
#define MK_WAIT_CHECK_EVERY 256   /* a device wait checks its deadline every this many polls */
#define MK_WAIT_ABORT_EVERY 4096  /* ... and the abort word (host memory) every this many */

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

/* The roles of a persistent kernel's blocks, in mkernel.ir.Role's order. */
enum mk_role { MK_ROLE_COMPUTE = 0, MK_ROLE_INTRA = 1, MK_ROLE_SEND = 2, MK_ROLE_RECV = 3 };

/* What a failed device wait waited on. */
enum mk_what { MK_WHAT_FLAG = 0, MK_WHAT_RING_SLOT = 1, MK_WHAT_BULK_STAGE = 2 };

/* The device error block's fields (hw/lowering/layout.py ErrorField mirrors their offsets). */
typedef struct mk_dev_err {
  int32_t code, rank, role, what;
  uint64_t index, epoch, observed, expected;
  int64_t task;
} mk_dev_err;

#ifdef __cplusplus
static_assert(sizeof(mk_cmd) == MK_CMD_BYTES, "mk_cmd must be 48 bytes");
static_assert(sizeof(mk_dev_err) <= MK_ERROR_BYTES, "mk_dev_err must fit the error block");
#else
_Static_assert(sizeof(mk_cmd) == MK_CMD_BYTES, "mk_cmd must be 48 bytes");
_Static_assert(sizeof(mk_dev_err) <= MK_ERROR_BYTES, "mk_dev_err must fit the error block");
#endif
#endif
