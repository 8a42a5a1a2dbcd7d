/* The host side of the command ring that is not the proxy: a producer with the device's protocol
 * (mk_ring.h; CPU tests, the CPU benchmark, tools) and the spec's constants by name, which every
 * mirror of the spec is checked against. */
#include <stddef.h>
#include <string.h>

#include "mk_ring.h"
#include "mk_transport.h"

/* A host-side producer with the device's protocol, for CPU tests and the CPU benchmark. Returns MK_OK,
 * MK_ERR_TIMEOUT (no credit in time; *slot_out names the slot) or MK_ERR_ABORTED. */
int mk_host_push(mk_cmd *ring, mk_ring_ctl *ctl, uint64_t cap, uint64_t *head, const mk_cmd *c,
                 uint64_t timeout_ns, uint64_t *slot_out) {
  if (__atomic_load_n(&ctl->abort, __ATOMIC_ACQUIRE)) return MK_ERR_ABORTED;
  uint64_t slot = __atomic_fetch_add(head, 1, __ATOMIC_RELAXED);
  if (slot_out) *slot_out = slot;
  uint64_t deadline = 0;
  while (slot - __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE) >= cap) {
    if (__atomic_load_n(&ctl->abort, __ATOMIC_ACQUIRE)) return MK_ERR_ABORTED;
    uint64_t now = mk_now_ns();
    if (!deadline) deadline = now + timeout_ns;
    else if (now > deadline) return MK_ERR_TIMEOUT;
    CPU_RELAX();
  }
  mk_cmd *rec = &ring[slot % cap];
  memcpy((char *)rec + 4, (const char *)c + 4, MK_CMD_BYTES - 4);
  rec->timestamp = mk_now_ns();
  __atomic_store_n(&rec->seq, (uint32_t)(slot + 1), __ATOMIC_RELEASE);
  return MK_OK;
}

/* Push n PUTs of `bytes` each, chunk i % n_chunks at offset chunk*bytes: the throughput driver. */
int mk_host_produce(mk_cmd *ring, mk_ring_ctl *ctl, uint64_t cap, uint64_t *head, uint32_t dst_rank,
                    uint64_t n, uint32_t n_chunks, uint32_t bytes, uint64_t epoch, uint64_t timeout_ns) {
  mk_cmd c = {0};
  c.type = MK_CMD_PUT;
  c.dst_rank = (uint16_t)dst_rank;
  c.bytes = bytes;
  c.epoch = epoch;
  for (uint64_t i = 0; i < n; i++) {
    c.chunk = (uint32_t)(i % n_chunks);
    c.src_off = c.dst_off = (uint64_t)c.chunk * bytes;
    int rc = mk_host_push(ring, ctl, cap, head, &c, timeout_ns, NULL);
    if (rc) return rc;
  }
  return MK_OK;
}

/* Every constant of mk_ring.h by name (field offsets, sizes, enum values), so that a test can check
 * each mirror of the spec (hw/lowering/ring.py and layout.py, hw/kernels/sync.py, the Python names of
 * roles and whats) against the compiled C, and can list them all (mk_constant_name) to miss none. */
#define MK_FIELD(T, f) {#T "." #f, offsetof(T, f)}
#define MK_VALUE(v) {#v, (uint64_t)(v)}
static const struct {
  const char *name;
  uint64_t value;
} MK_CONSTANTS[] = {
    MK_FIELD(mk_cmd, seq), MK_FIELD(mk_cmd, type), MK_FIELD(mk_cmd, dst_rank), MK_FIELD(mk_cmd, chunk),
    MK_FIELD(mk_cmd, bytes), MK_FIELD(mk_cmd, src_off), MK_FIELD(mk_cmd, dst_off), MK_FIELD(mk_cmd, epoch),
    MK_FIELD(mk_cmd, timestamp), {"sizeof(mk_cmd)", sizeof(mk_cmd)}, MK_VALUE(MK_CMD_BYTES),
    MK_FIELD(mk_ring_ctl, tail), MK_FIELD(mk_ring_ctl, abort), {"sizeof(mk_ring_ctl)", sizeof(mk_ring_ctl)},
    MK_FIELD(mk_dev_err, code), MK_FIELD(mk_dev_err, rank), MK_FIELD(mk_dev_err, role), MK_FIELD(mk_dev_err, what),
    MK_FIELD(mk_dev_err, index), MK_FIELD(mk_dev_err, epoch), MK_FIELD(mk_dev_err, observed),
    MK_FIELD(mk_dev_err, expected), MK_FIELD(mk_dev_err, task), MK_VALUE(MK_ERROR_BYTES),
    MK_VALUE(MK_WAIT_CHECK_EVERY), MK_VALUE(MK_WAIT_ABORT_EVERY), MK_VALUE(MK_MAX_BATCH),
    MK_VALUE(MK_CMD_PUT), MK_VALUE(MK_CMD_SIGNAL),
    MK_VALUE(MK_OK), MK_VALUE(MK_ERR_TYPE), MK_VALUE(MK_ERR_DST_RANK), MK_VALUE(MK_ERR_BYTES),
    MK_VALUE(MK_ERR_SRC_RANGE), MK_VALUE(MK_ERR_DST_RANGE), MK_VALUE(MK_ERR_CHUNK), MK_VALUE(MK_ERR_TRANSPORT),
    MK_VALUE(MK_ERR_TIMEOUT), MK_VALUE(MK_ERR_ABORTED),
    MK_VALUE(MK_ROLE_COMPUTE), MK_VALUE(MK_ROLE_INTRA), MK_VALUE(MK_ROLE_SEND), MK_VALUE(MK_ROLE_RECV),
    MK_VALUE(MK_WHAT_FLAG), MK_VALUE(MK_WHAT_RING_SLOT), MK_VALUE(MK_WHAT_BULK_STAGE),
};
#define MK_N_CONSTANTS ((int)(sizeof MK_CONSTANTS / sizeof MK_CONSTANTS[0]))

/* Constant i's name (as written in mk_ring.h, fields as "struct.field"), or NULL past the last. */
const char *mk_constant_name(int i) { return i >= 0 && i < MK_N_CONSTANTS ? MK_CONSTANTS[i].name : NULL; }

/* The value of the constant called `name` into *out: 0, or -1 if no constant has that name. */
int mk_constant(const char *name, uint64_t *out) {
  for (int i = 0; i < MK_N_CONSTANTS; i++)
    if (strcmp(MK_CONSTANTS[i].name, name) == 0) {
      *out = MK_CONSTANTS[i].value;
      return 0;
    }
  return -1;
}
