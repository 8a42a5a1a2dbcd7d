/* The host proxy: a native thread that drains the GPU->host command ring and drives a transport.
 *
 * Why native: a Python thread shares the GIL with the user's training loop and stalls for
 * milliseconds; this thread never touches Python, so the GIL cannot starve it.
 *
 * Loop: read committed records in ring order (acquire on `seq`), validate each one against the
 * registered buffers before anything is posted, queue it on its destination's batch, hand credits
 * back (release on `tail`), post full batches at once and partial ones when the polling window
 * expires, then let the transport progress. A bad command stops the proxy: it is never posted, the
 * error is kept for the caller and `abort` tells device waiters to give up.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "mk_ring.h"
#include "mk_transport.h"


uint64_t mk_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mk_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Injected faults (issue 10), seeded; all zero: none. A lost message is reported as the failed
 * completion a reliable transport (RC, SRD) gives after its retries, never dropped silently; a dead
 * proxy stops consuming without a word, as a crashed process would. */
typedef struct mk_faults {
  uint64_t seed;
  uint32_t drop_ppm;  /* a command is lost with this probability, per million */
  uint32_t reorder;   /* nonzero: shuffle each batch's PUTs between its SIGNALs (what SRD may do) */
  uint64_t delay_ns;  /* hold every batch this long before posting it */
  uint64_t die_after; /* the proxy thread exits after consuming this many commands (0: never) */
} mk_faults;

/* What the caller registers: this rank's send buffer and, per destination rank, the receive buffer
 * and arrival flags as addresses valid in this process (peer-mapped memory on one host). */
typedef struct mk_proxy_cfg {
  int32_t rank, nranks;
  uint64_t capacity;   /* ring slots */
  uint32_t max_batch;  /* 1..MK_MAX_BATCH */
  uint32_t n_flags;    /* arrival flags per rank */
  uint64_t window_ns;  /* a partial batch waits at most this long */
  uint64_t src_base, src_bytes;
  const uint64_t *dst_base, *dst_bytes, *flag_base; /* nranks entries each */
  int32_t cpu;         /* pin the proxy thread to this CPU; -1: leave it to the scheduler */
  mk_faults faults;
  uint64_t idle_spin_ns;  /* an idle proxy (nothing pending or in flight) polls flat out this long, */
  uint64_t idle_sleep_ns; /* then sleeps between polls, 1 us doubling up to this; 0: never sleeps */
} mk_proxy_cfg;

typedef struct mk_proxy_error {
  int32_t code, rank;
  uint64_t slot;
  uint32_t dst_rank, chunk;
  uint64_t epoch;
  char msg[256];
} mk_proxy_error;

typedef struct mk_proxy_stats {
  uint64_t commands, batches, bytes, full_batches, polls_idle;
  uint64_t transport_ns; /* time inside the transport's post */
  uint64_t driver_calls;
  uint64_t killed; /* 1: the thread exited on an injected death (mk_faults.die_after) */
  uint64_t idle_sleeps; /* polls after which an idle proxy slept */
} mk_proxy_stats;

typedef struct pending {
  mk_op ops[MK_MAX_BATCH];
  int n;
  int listed; /* in mk_proxy.active */
  uint64_t first_ns;
} pending;

typedef struct mk_proxy {
  mk_proxy_cfg cfg;
  uint64_t *dst_base, *dst_bytes, *flag_base;
  mk_cmd *ring;
  mk_ring_ctl *ctl;
  mk_transport *tr;
  pending *pend;  /* one per destination rank */
  int *active;    /* ranks with a non-empty batch */
  int n_active;
  pthread_t thread;
  int started;
  int stop;
  volatile int done;
  uint64_t kicked_ns; /* mk_proxy_kick: a call was just launched, so commands are coming */
  uint32_t kick_seq;  /* bumped by every kick: the futex a napping proxy sleeps on */
  int napping;
  uint64_t fault_rng;
  mk_proxy_error error;
  mk_proxy_stats stats;
} mk_proxy;

static const char *cmd_name(uint16_t t) { return t == MK_CMD_PUT ? "PUT" : t == MK_CMD_SIGNAL ? "SIGNAL" : "?"; }

static void set_error(mk_proxy *p, int code, uint64_t slot, const mk_cmd *c, const char *fmt, ...) {
  if (p->error.code) return;
  p->error.code = code;
  p->error.rank = p->cfg.rank;
  p->error.slot = slot;
  if (c) {
    p->error.dst_rank = c->dst_rank;
    p->error.chunk = c->chunk;
    p->error.epoch = c->epoch;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->error.msg, sizeof p->error.msg, fmt, ap);
  va_end(ap);
  __atomic_store_n(&p->ctl->abort, (uint64_t)code, __ATOMIC_RELEASE);
}

/* Check one command against the registered buffers and resolve it to addresses; MK_OK or a code. */
static int validate(mk_proxy *p, uint64_t slot, const mk_cmd *c, mk_op *op) {
  const mk_proxy_cfg *g = &p->cfg;
  if (c->type != MK_CMD_PUT && c->type != MK_CMD_SIGNAL) {
    set_error(p, MK_ERR_TYPE, slot, c, "type %u is not PUT (1) or SIGNAL (2)", c->type);
    return MK_ERR_TYPE;
  }
  if (c->dst_rank >= (uint32_t)g->nranks) {
    set_error(p, MK_ERR_DST_RANK, slot, c, "%s dst_rank %u is not in [0, %d)", cmd_name(c->type), c->dst_rank,
              g->nranks);
    return MK_ERR_DST_RANK;
  }
  if (c->chunk >= g->n_flags) {
    set_error(p, MK_ERR_CHUNK, slot, c, "%s chunk %u is not in [0, %u)", cmd_name(c->type), c->chunk, g->n_flags);
    return MK_ERR_CHUNK;
  }
  if (!p->flag_base[c->dst_rank]) {
    set_error(p, MK_ERR_DST_RANK, slot, c, "%s to rank %u, which registered no receive buffer or flags",
              cmd_name(c->type), c->dst_rank);
    return MK_ERR_DST_RANK;
  }
  memset(op, 0, sizeof *op);
  if (c->type == MK_CMD_PUT) {
    uint64_t b = c->bytes;
    if (b == 0) {
      set_error(p, MK_ERR_BYTES, slot, c, "PUT bytes is 0; a PUT moves at least one byte");
      return MK_ERR_BYTES;
    }
    if (c->src_off > g->src_bytes || b > g->src_bytes - c->src_off) {
      set_error(p, MK_ERR_SRC_RANGE, slot, c, "PUT src_off %llu + bytes %llu exceeds the %llu-byte send buffer",
                (unsigned long long)c->src_off, (unsigned long long)b, (unsigned long long)g->src_bytes);
      return MK_ERR_SRC_RANGE;
    }
    uint64_t cap = p->dst_bytes[c->dst_rank];
    if (c->dst_off > cap || b > cap - c->dst_off) {
      set_error(p, MK_ERR_DST_RANGE, slot, c,
                "PUT dst_off %llu + bytes %llu exceeds rank %u's %llu-byte receive buffer",
                (unsigned long long)c->dst_off, (unsigned long long)b, c->dst_rank, (unsigned long long)cap);
      return MK_ERR_DST_RANGE;
    }
    op->src = g->src_base + c->src_off;
    op->dst = p->dst_base[c->dst_rank] + c->dst_off;
    op->bytes = b;
  }
  op->flag = p->flag_base[c->dst_rank] + 8ull * c->chunk;
  op->epoch = c->epoch;
  op->chunk = c->chunk;
  op->dst_rank = c->dst_rank;
  return MK_OK;
}

/* Injected reordering: shuffle each run of PUTs between SIGNALs (a SIGNAL stays after the PUTs
 * before it, the only order the protocol asks of an unordered transport). */
static void shuffle_puts(mk_proxy *p, pending *q) {
  for (int lo = 0; lo < q->n;) {
    int hi = lo;
    while (hi < q->n && q->ops[hi].bytes) hi++;
    for (int i = hi - 1; i > lo; i--) {
      int j = lo + (int)(mk_rand(&p->fault_rng) % (uint64_t)(i - lo + 1));
      mk_op t = q->ops[i];
      q->ops[i] = q->ops[j];
      q->ops[j] = t;
    }
    lo = hi + 1;
  }
}

/* A transport failure, naming the op the transport says failed (if it says). */
static void transport_error(mk_proxy *p, uint64_t slot, const char *fmt, int rank) {
  mk_cmd c;
  memset(&c, 0, sizeof c);
  const mk_transport *t = p->tr;
  if (t->err_has_op) {
    c.type = t->err_op.bytes ? MK_CMD_PUT : MK_CMD_SIGNAL;
    c.dst_rank = (uint16_t)t->err_op.dst_rank;
    c.chunk = t->err_op.chunk;
    c.epoch = t->err_op.epoch;
  }
  set_error(p, MK_ERR_TRANSPORT, slot, t->err_has_op ? &c : NULL, fmt, t->name, rank, t->err);
}

static int flush(mk_proxy *p, int rank) {
  pending *q = &p->pend[rank];
  if (q->n == 0) return 0;
  if (p->cfg.faults.reorder) shuffle_puts(p, q);
  if (p->cfg.faults.delay_ns) {
    uint64_t until = mk_now_ns() + p->cfg.faults.delay_ns;
    while (mk_now_ns() < until) CPU_RELAX();
  }
  uint64_t t0 = mk_now_ns();
  int rc = p->tr->post(p->tr, q->ops, q->n);
  p->stats.transport_ns += mk_now_ns() - t0;
  if (rc != 0) {
    transport_error(p, 0, "transport %s failed to post to rank %d: %s", rank);
    return -1;
  }
  p->stats.batches++;
  if (q->n == (int)p->cfg.max_batch) p->stats.full_batches++;
  q->n = 0;
  return 0;
}

static int flush_expired(mk_proxy *p, int all) {
  uint64_t now = all ? 0 : mk_now_ns();
  for (int i = 0; i < p->n_active;) {
    int r = p->active[i];
    pending *q = &p->pend[r];
    if (q->n && (all || now - q->first_ns >= p->cfg.window_ns)) {
      if (flush(p, r)) return -1;
    }
    if (q->n == 0) {
      q->listed = 0;
      p->active[i] = p->active[--p->n_active];
    } else {
      i++;
    }
  }
  return 0;
}

/* Between polls that found nothing. A proxy with work pending or in flight, or idle for less than
 * idle_spin_ns (counted from its last command or the last kick, whichever is later), spins: lowest
 * latency inside a call and between back-to-back calls. Past that it sleeps, 1 us doubling up to
 * idle_sleep_ns: every cached executor owns a context and so a proxy, and a flat-out poller per idle
 * context took a core each (24 of them on a 16-core host in the emulated 2x2 long run). The first
 * command after a long idle with no kick (a CUDA-graph replay) waits at most one nap. */
static void idle_wait(mk_proxy *p, int busy, uint64_t *idle_since, uint64_t *nap) {
  if (busy || !p->cfg.idle_sleep_ns) {
    *idle_since = 0;
    *nap = 0;
    CPU_RELAX();
    return;
  }
  uint64_t now = mk_now_ns();
  uint64_t kicked = __atomic_load_n(&p->kicked_ns, __ATOMIC_RELAXED);
  if (!*idle_since || kicked > *idle_since) {
    *idle_since = kicked > *idle_since ? kicked : now;
    *nap = 0;
  }
  if (now - *idle_since < p->cfg.idle_spin_ns) {
    CPU_RELAX();
    return;
  }
  *nap = *nap ? *nap * 2 : 1000;
  if (*nap > p->cfg.idle_sleep_ns) *nap = p->cfg.idle_sleep_ns;
  /* A kick ends the nap at once: one that came after `kicked` was read skips it (kicked_ns moved),
   * one after `seq` was read makes the futex return at once (kick_seq moved), and one while the
   * futex sleeps finds napping set and wakes it. */
  uint32_t seq = __atomic_load_n(&p->kick_seq, __ATOMIC_SEQ_CST);
  __atomic_store_n(&p->napping, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&p->kicked_ns, __ATOMIC_SEQ_CST) == kicked) {
    struct timespec ts = {(time_t)(*nap / 1000000000ull), (long)(*nap % 1000000000ull)};
    syscall(SYS_futex, &p->kick_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
  }
  __atomic_store_n(&p->napping, 0, __ATOMIC_RELAXED);
  p->stats.idle_sleeps++;
}

static void *proxy_main(void *arg) {
  mk_proxy *p = (mk_proxy *)arg;
  if (p->cfg.cpu >= 0) { /* a pinned poller is not migrated or time-shared with other threads */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cfg.cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set)) {
      set_error(p, MK_ERR_TRANSPORT, 0, NULL, "cannot pin the proxy thread to CPU %d", p->cfg.cpu);
      p->done = 1;
      return NULL;
    }
  }
  if (p->tr->attach && p->tr->attach(p->tr)) {
    set_error(p, MK_ERR_TRANSPORT, 0, NULL, "transport %s failed to start: %s", p->tr->name, p->tr->err);
    p->done = 1;
    return NULL;
  }
  prctl(PR_SET_TIMERSLACK, 1000UL); /* naps of a few us, not the default 50 us of slack */
  uint64_t next = __atomic_load_n(&p->ctl->tail, __ATOMIC_ACQUIRE);
  const uint64_t cap = p->cfg.capacity;
  uint64_t idle_since = 0, nap = 0, last_activity = p->tr->activity;
  for (;;) {
    /* Read `stop` before polling: a command committed before stop() was called is then seen by the
     * poll below, so the thread never leaves with it still in the ring. */
    const int stopping = __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE);
    int got = 0;
    while (got < 64) {
      mk_cmd *rec = &p->ring[next % cap];
      if (__atomic_load_n(&rec->seq, __ATOMIC_ACQUIRE) != (uint32_t)(next + 1)) break;
      mk_cmd c = *rec;
      mk_op op;
      const mk_faults *f = &p->cfg.faults;
      if (f->die_after && p->stats.commands >= f->die_after) { /* dead: no flush, no error, no abort */
        p->stats.killed = 1;
        p->done = 1;
        return NULL;
      }
      if (validate(p, next, &c, &op) != MK_OK) goto fail;
      if (f->drop_ppm && mk_rand(&p->fault_rng) % 1000000 < f->drop_ppm) {
        set_error(p, MK_ERR_TRANSPORT, next, &c, "%s to rank %u, chunk %u lost: the transport reports a failed "
                  "completion (injected drop)", cmd_name(c.type), c.dst_rank, c.chunk);
        goto fail;
      }
      pending *q = &p->pend[c.dst_rank];
      if (q->n == 0) q->first_ns = mk_now_ns();
      if (!q->listed) {
        q->listed = 1;
        p->active[p->n_active++] = c.dst_rank;
      }
      q->ops[q->n++] = op;
      p->stats.commands++;
      p->stats.bytes += op.bytes;
      next++;
      got++;
      if (q->n == (int)p->cfg.max_batch && flush(p, c.dst_rank)) goto fail;
    }
    if (got) __atomic_store_n(&p->ctl->tail, next, __ATOMIC_RELEASE);
    else p->stats.polls_idle++;
    /* An idle ring posts what is pending at once; a busy one holds a partial batch up to the window. */
    if (flush_expired(p, got == 0)) goto fail;
    int inflight = p->tr->progress(p->tr);
    if (inflight < 0) {
      transport_error(p, next, "transport %s failed (proxy of rank %d): %s", p->cfg.rank);
      goto fail;
    }
    const uint64_t activity = p->tr->activity; /* completions handled: arrivals count as work */
    const int active = activity != last_activity;
    last_activity = activity;
    if (stopping && got == 0 && p->n_active == 0 && inflight == 0) break;
    if (__atomic_load_n(&p->ctl->abort, __ATOMIC_ACQUIRE)) {
      set_error(p, MK_ERR_ABORTED, next, NULL, "aborted by a producer or waiter (code %llu)",
                (unsigned long long)p->ctl->abort);
      goto fail;
    }
    if (got || active) idle_since = nap = 0;
    else idle_wait(p, p->n_active != 0 || inflight != 0, &idle_since, &nap);
  }
  p->done = 1;
  return NULL;
fail:
  /* Valid commands queued before the bad one still go out: nothing approved is lost. */
  flush_expired(p, 1);
  p->done = 1;
  return NULL;
}

/* Refuse a registration that could let a valid-looking command write where it must not: the send
 * buffer and every registered rank's receive buffer and flags present and non-empty, no sum that
 * wraps, and each rank's flag array apart from its receive buffer (a flag store inside the data
 * would corrupt it silently). A rank given as all zeros registered nothing: decode() refuses any
 * command to it. */
static int register_regions(const mk_proxy_cfg *cfg, char *err, int errlen) {
  if (!cfg->src_base || !cfg->src_bytes || cfg->src_base + cfg->src_bytes < cfg->src_base) {
    snprintf(err, errlen, "registration refused: rank %d's send buffer (base %#llx, %llu bytes) is empty or wraps",
             cfg->rank, (unsigned long long)cfg->src_base, (unsigned long long)cfg->src_bytes);
    return -1;
  }
  for (int r = 0; r < cfg->nranks; r++) {
    uint64_t b = cfg->dst_base[r], n = cfg->dst_bytes[r], f = cfg->flag_base[r], fn = 8ull * cfg->n_flags;
    if (!b && !n && !f) continue;
    if (!b || !n || b + n < b || !f || f + fn < f) {
      snprintf(err, errlen, "registration refused: rank %d's receive buffer (base %#llx, %llu bytes) or flags "
               "(base %#llx) is missing, empty or wraps", r, (unsigned long long)b, (unsigned long long)n,
               (unsigned long long)f);
      return -1;
    }
    if (f < b + n && b < f + fn) {
      snprintf(err, errlen, "registration refused: rank %d's %u flags at %#llx overlap its receive buffer "
               "[%#llx, +%llu)", r, cfg->n_flags, (unsigned long long)f, (unsigned long long)b,
               (unsigned long long)n);
      return -1;
    }
  }
  return 0;
}

static int check_cfg(const mk_proxy_cfg *cfg, char *err, int errlen) {
  if (cfg->nranks < 1 || cfg->nranks > MK_MAX_RANKS || cfg->rank < 0 || cfg->rank >= cfg->nranks) {
    snprintf(err, errlen, "rank %d / nranks %d: nranks must be in [1, %d] and rank in [0, nranks)", cfg->rank,
             cfg->nranks, MK_MAX_RANKS);
    return -1;
  }
  if (cfg->max_batch < 1 || cfg->max_batch > MK_MAX_BATCH || cfg->capacity < 1 || cfg->n_flags < 1) {
    snprintf(err, errlen, "max_batch %u must be in [1, %d]; capacity %llu and n_flags %u must be >= 1",
             cfg->max_batch, MK_MAX_BATCH, (unsigned long long)cfg->capacity, cfg->n_flags);
    return -1;
  }
  return register_regions(cfg, err, errlen);
}

/* A proxy over a transport the caller made (a network transport, connected to its peers); the
 * proxy owns it from here, and destroys it on failure too. */
mk_proxy *mk_proxy_create_with(const mk_proxy_cfg *cfg, mk_cmd *ring, mk_ring_ctl *ctl, mk_transport *tr, char *err,
                               int errlen) {
  if (check_cfg(cfg, err, errlen)) {
    tr->destroy(tr);
    return NULL;
  }
  mk_proxy *p = calloc(1, sizeof *p);
  int n = cfg->nranks;
  p->cfg = *cfg;
  p->fault_rng = cfg->faults.seed;
  p->dst_base = malloc(n * sizeof(uint64_t));
  p->dst_bytes = malloc(n * sizeof(uint64_t));
  p->flag_base = malloc(n * sizeof(uint64_t));
  memcpy(p->dst_base, cfg->dst_base, n * sizeof(uint64_t));
  memcpy(p->dst_bytes, cfg->dst_bytes, n * sizeof(uint64_t));
  memcpy(p->flag_base, cfg->flag_base, n * sizeof(uint64_t));
  p->cfg.dst_base = p->cfg.dst_bytes = p->cfg.flag_base = NULL;
  p->pend = calloc(n, sizeof(pending));
  p->active = calloc(n, sizeof(int));
  p->ring = ring;
  p->ctl = ctl;
  p->tr = tr;
  return p;
}

mk_proxy *mk_proxy_create(const mk_proxy_cfg *cfg, mk_cmd *ring, mk_ring_ctl *ctl, const char *transport,
                          const mk_transport_opts *topts, char *err, int errlen) {
  if (check_cfg(cfg, err, errlen)) return NULL;
  mk_transport *tr = NULL;
  if (strcmp(transport, "fake") == 0) tr = mk_fake_transport(topts, err, errlen);
  else if (strcmp(transport, "cuda") == 0) tr = mk_cuda_transport(topts, err, errlen);
  else snprintf(err, errlen, "native transport %s is not one of: fake, cuda (network transports: mk_net_create)",
                transport);
  if (!tr) return NULL;
  return mk_proxy_create_with(cfg, ring, ctl, tr, err, errlen);
}

int mk_proxy_start(mk_proxy *p) {
  if (p->started) return 0;
  if (pthread_create(&p->thread, NULL, proxy_main, p)) return -1;
  p->started = 1;
  return 0;
}

void mk_proxy_kick(mk_proxy *p) {
  __atomic_store_n(&p->kicked_ns, mk_now_ns(), __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&p->kick_seq, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&p->napping, __ATOMIC_SEQ_CST)) syscall(SYS_futex, &p->kick_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Ask the thread to finish what is committed, wait for it (bounded), then drain the transport. */
int mk_proxy_stop(mk_proxy *p, uint64_t timeout_ns) {
  if (!p->started) return 0;
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  mk_proxy_kick(p); /* a napping proxy sees the stop now, not after its nap */
  uint64_t deadline = mk_now_ns() + timeout_ns;
  while (!p->done) {
    if (mk_now_ns() > deadline) {
      set_error(p, MK_ERR_TIMEOUT, 0, NULL, "proxy of rank %d did not drain within %.3f s (ring not empty?)",
                p->cfg.rank, timeout_ns / 1e9);
      return MK_ERR_TIMEOUT;  /* the thread still runs; abort makes it leave */
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  pthread_join(p->thread, NULL);
  p->started = 0;
  if (p->tr->drain && p->tr->drain(p->tr, timeout_ns)) {
    transport_error(p, 0, "transport %s failed to drain (proxy of rank %d): %s", p->cfg.rank);
    return MK_ERR_TRANSPORT;
  }
  return p->error.code;
}

int mk_proxy_running(mk_proxy *p) { return p->started && !p->done; }
void mk_proxy_get_error(mk_proxy *p, mk_proxy_error *e) { *e = p->error; }
void mk_proxy_get_stats(mk_proxy *p, mk_proxy_stats *s) {
  *s = p->stats;
  s->driver_calls = p->tr->driver_calls;
}
mk_transport *mk_proxy_transport(mk_proxy *p) { return p->tr; }

/* Every flag's last published epoch, for a receiving transport's window (Executor.fast_forward):
 * call it with no message in flight. */
void mk_proxy_rebase(mk_proxy *p, uint64_t epoch) {
  if (p->tr->rebase) p->tr->rebase(p->tr, epoch);
}

void mk_proxy_destroy(mk_proxy *p) {
  if (!p) return;
  if (p->started) {
    __atomic_store_n(&p->ctl->abort, (uint64_t)MK_ERR_ABORTED, __ATOMIC_RELEASE);
    mk_proxy_stop(p, 5000000000ull);
  }
  p->tr->destroy(p->tr);
  free(p->dst_base);
  free(p->dst_bytes);
  free(p->flag_base);
  free(p->pend);
  free(p->active);
  free(p);
}
