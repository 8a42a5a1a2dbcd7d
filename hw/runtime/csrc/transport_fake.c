/* An in-process fake transport over host memory, for CPU tests of the proxy.
 *
 * Every op becomes two events, a data write and a flag write, applied later in an order the mode
 * allows, a few per progress() call, chosen by a seeded generator:
 *   RC  (unordered = 0): per destination, events land in posting order (a flag write follows its data
 *       on the same queue pair);
 *   SRD (unordered = 1): data writes land in any order; a flag is set only once its data has landed,
 *       as a receiving proxy does on the write-with-immediate completion, and a SIGNAL (no data) only
 *       once every data write posted before it to that rank has landed (the sender fences it).
 * `flag_early` plants the bug a naive SRD design has (the flag as a separate, unordered write) so the
 * tests can show their checker catches it. Every applied event is logged in the order it hit memory.
 */
#include <stdlib.h>
#include <string.h>

#include "mk_ring.h"
#include "mk_transport.h"

typedef struct event {
  mk_op op;
  uint64_t id;  /* op id: the data and flag events of one op share it */
  int is_flag, done;
} event;

typedef struct fake {
  mk_transport base;
  mk_transport_opts o;
  uint64_t rng, next_id;
  event *ev;
  size_t n, cap;
  uint32_t *log; /* (kind << 31 | chunk), then dst_rank, per applied event */
  size_t log_n, log_cap;
} fake;

static void push_event(fake *f, const mk_op *op, uint64_t id, int is_flag) {
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 256;
    f->ev = realloc(f->ev, f->cap * sizeof(event));
  }
  event *e = &f->ev[f->n++];
  e->op = *op;
  e->id = id;
  e->is_flag = is_flag;
  e->done = 0;
}

static int fake_post(mk_transport *t, const mk_op *ops, int n) {
  fake *f = (fake *)t;
  for (int i = 0; i < n; i++) {
    uint64_t id = f->next_id++;
    if (ops[i].bytes) push_event(f, &ops[i], id, 0);
    push_event(f, &ops[i], id, 1);
  }
  return 0;
}

static void apply(fake *f, event *e) {
  if (e->is_flag) __atomic_store_n((uint64_t *)(uintptr_t)e->op.flag, e->op.epoch, __ATOMIC_RELEASE);
  else memcpy((void *)(uintptr_t)e->op.dst, (const void *)(uintptr_t)e->op.src, e->op.bytes);
  if (f->log_n + 2 > f->log_cap) {
    f->log_cap = f->log_cap ? 2 * f->log_cap : 1024;
    f->log = realloc(f->log, f->log_cap * sizeof(uint32_t));
  }
  f->log[f->log_n++] = ((uint32_t)e->is_flag << 31) | e->op.chunk;
  f->log[f->log_n++] = e->op.dst_rank;
  e->done = 1;
}

/* The event that must land before `i` may: RC, the oldest pending event to the same rank; SRD, the
 * data event of a flag (unless flag_early), and for a SIGNAL any data event posted before it to the
 * same rank. Events are stored in posting order. */
static size_t first_allowed(fake *f, size_t i) {
  event *e = &f->ev[i];
  for (size_t j = 0; j < i; j++) {
    event *d = &f->ev[j];
    if (d->done) continue;
    if (!f->o.unordered && d->op.dst_rank == e->op.dst_rank) return j;
    if (f->o.unordered && !f->o.flag_early && e->is_flag && !d->is_flag &&
        (d->id == e->id || (e->op.bytes == 0 && d->op.dst_rank == e->op.dst_rank)))
      return j;
  }
  return i;
}

static int fake_progress(mk_transport *t) {
  fake *f = (fake *)t;
  /* A few events per call keep data and flags in flight across polls; a long backlog drains fully. */
  size_t budget = f->n > 4096 ? f->n : 1 + mk_rand(&f->rng) % 4;
  size_t pending = 0;
  for (size_t k = 0; k < budget && f->n; k++) {
    size_t i = mk_rand(&f->rng) % f->n;
    if (f->ev[i].done) continue;
    apply(f, &f->ev[first_allowed(f, i)]);
  }
  size_t w = 0;
  for (size_t i = 0; i < f->n; i++)
    if (!f->ev[i].done) f->ev[w++] = f->ev[i];
  f->n = w;
  pending = w;
  return (int)(pending > 0x7fffffff ? 0x7fffffff : pending);
}

static int fake_drain(mk_transport *t, uint64_t timeout_ns) {
  (void)timeout_ns;
  while (fake_progress(t) > 0) {
  }
  return 0;
}

static void fake_destroy(mk_transport *t) {
  fake *f = (fake *)t;
  free(f->ev);
  free(f->log);
  free(f);
}

mk_transport *mk_fake_transport(const mk_transport_opts *o, char *err, int errlen) {
  (void)err;
  (void)errlen;
  fake *f = calloc(1, sizeof *f);
  f->o = *o;
  f->rng = o->seed;
  f->base.name = "fake";
  f->base.post = fake_post;
  f->base.progress = fake_progress;
  f->base.drain = fake_drain;
  f->base.destroy = fake_destroy;
  return &f->base;
}

/* The applied-event log, for tests: copies up to `max` (kind<<31|chunk, dst_rank) pairs. */
size_t mk_fake_log(mk_transport *t, uint32_t *out, size_t max) {
  fake *f = (fake *)t;
  size_t n = f->log_n / 2 < max ? f->log_n / 2 : max;
  memcpy(out, f->log, 2 * n * sizeof(uint32_t));
  return n;
}
