/* The host side of the command ring that is not the proxy: a producer with the device's protocol
 * (CPU tests, the CPU benchmark, tools) and the layout probe hw/lowering/ring.py is checked against. */
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

/* Field offsets of mk_cmd and mk_ring_ctl, so a test can check hw/lowering/ring.py mirrors this header. */
void mk_layout(uint64_t *out) {
  const uint64_t v[] = {offsetof(mk_cmd, seq),     offsetof(mk_cmd, type),      offsetof(mk_cmd, dst_rank),
                        offsetof(mk_cmd, chunk),   offsetof(mk_cmd, bytes),     offsetof(mk_cmd, src_off),
                        offsetof(mk_cmd, dst_off), offsetof(mk_cmd, epoch),     offsetof(mk_cmd, timestamp),
                        sizeof(mk_cmd),            offsetof(mk_ring_ctl, tail), offsetof(mk_ring_ctl, abort),
                        sizeof(mk_ring_ctl)};
  memcpy(out, v, sizeof v);
}
