/* What the network transports share (mk_net.h): creating one by name, the address blob's header,
 * bounds checks against registered regions, the immediate's encoding with the receiver's epoch
 * window, and the sender's SIGNAL fence on an unordered transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_net.h"

mk_transport *mk_net_create(const char *name, const mk_net_opts *o, const void *verbs_api, char *err, int errlen) {
  if (strcmp(name, "verbs_rc") == 0) return mk_verbs_rc_transport(o, verbs_api, err, errlen);
  if (strcmp(name, "verbs_srd") == 0) return mk_verbs_srd_transport(o, verbs_api, err, errlen);
  if (strcmp(name, "ofi") == 0) return mk_ofi_transport(o, err, errlen);
  snprintf(err, errlen, "network transport %s is not one of: verbs_rc, verbs_srd, ofi", name);
  return NULL;
}

int mk_net_address(mk_transport *t, uint8_t *out, int max) {
  if (!t->address) return snprintf(t->err, sizeof t->err, "transport %s has no network address", t->name), -1;
  return t->address(t, out, max);
}

int mk_net_connect(mk_transport *t, int peer, const uint8_t *addr, int len) {
  if (!t->connect) return snprintf(t->err, sizeof t->err, "transport %s connects to no peer", t->name), -1;
  return t->connect(t, peer, addr, len);
}

void mk_transport_destroy(mk_transport *t) {
  if (t) t->destroy(t);
}

const char *mk_transport_error(mk_transport *t) { return t->err; }

int mk_net_check_opts(const mk_net_opts *o, const char *name, char *err, int errlen) {
  if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks) {
    snprintf(err, errlen, "%s: rank %d / nranks %d out of range", name, o->rank, o->nranks);
    return -1;
  }
  if (!o->mem_base || !o->mem_bytes || o->mem_base + o->mem_bytes < o->mem_base) {
    snprintf(err, errlen, "%s: rank %d's region (base %#llx, %llu bytes) is empty or wraps", name, o->rank,
             (unsigned long long)o->mem_base, (unsigned long long)o->mem_bytes);
    return -1;
  }
  if (o->n_flags < 1) {
    snprintf(err, errlen, "%s: n_flags must be >= 1", name);
    return -1;
  }
  if (mk_net_in(o->flag_base, 8ull * o->n_flags, o->mem_base, o->mem_bytes, "arrival flags", o->rank, err, errlen))
    return -1;
  if (!o->peers) {
    snprintf(err, errlen, "%s: rank %d names no peers", name, o->rank);
    return -1;
  }
  if (o->mem_kind != MK_MEM_HOST && o->mem_kind != MK_MEM_CUDA) {
    snprintf(err, errlen, "%s: memory kind %d is not host (0) or cuda (1)", name, o->mem_kind);
    return -1;
  }
  return 0;
}

uint8_t *mk_net_adopt(mk_net_opts *dst, const mk_net_opts *src) {
  *dst = *src;
  if (!dst->sq_depth) dst->sq_depth = 256;
  if (!dst->rq_depth) dst->rq_depth = 512;
  if (!dst->signal_every) dst->signal_every = 16;
  if (!dst->timeout_ns) dst->timeout_ns = 5000000000ull;
  uint8_t *peers = malloc(src->nranks);
  memcpy(peers, src->peers, src->nranks);
  dst->peers = peers;
  return peers;
}

void mk_net_fill_addr(mk_net_addr *a, uint32_t kind, const mk_net_opts *o, uint64_t key, uint32_t len) {
  memset(a, 0, sizeof *a);
  a->magic = MK_NET_MAGIC;
  a->kind = kind;
  a->rank = o->rank;
  a->nranks = o->nranks;
  a->base = o->mem_base;
  a->bytes = o->mem_bytes;
  a->key = key;
  a->n_flags = o->n_flags;
  a->len = len;
}

int mk_net_read_addr(const uint8_t *blob, int len, uint32_t kind, int peer, const mk_net_opts *o, mk_peer *out,
                     char *err, int errlen) {
  mk_net_addr a;
  if (len < (int)sizeof a) {
    snprintf(err, errlen, "rank %d's address is %d bytes, shorter than its header", peer, len);
    return -1;
  }
  memcpy(&a, blob, sizeof a);
  if (a.magic != MK_NET_MAGIC || a.kind != kind || (int)a.len != len) {
    snprintf(err, errlen, "rank %d's address is not a kind-%u mkernel address of %d bytes (magic %#x, kind %u, "
             "len %u): was it published by another transport or version?", peer, kind, len, a.magic, a.kind, a.len);
    return -1;
  }
  if (a.rank != peer || a.nranks != o->nranks || a.n_flags != o->n_flags) {
    snprintf(err, errlen, "rank %d's address says rank %d of %d with %u flags; this rank expects rank %d of %d with "
             "%u flags", peer, a.rank, a.nranks, a.n_flags, peer, o->nranks, o->n_flags);
    return -1;
  }
  if (!a.base || !a.bytes || a.base + a.bytes < a.base) {
    snprintf(err, errlen, "rank %d registered an empty or wrapping region", peer);
    return -1;
  }
  out->connected = 1;
  out->base = a.base;
  out->bytes = a.bytes;
  out->key = a.key;
  return 0;
}

int mk_net_in(uint64_t addr, uint64_t bytes, uint64_t base, uint64_t size, const char *what, int rank, char *err,
              int errlen) {
  if (addr >= base && bytes <= size && addr - base <= size - bytes) return 0;
  snprintf(err, errlen, "%s [%#llx, +%llu) outside rank %d's registered region [%#llx, +%llu)", what,
           (unsigned long long)addr, (unsigned long long)bytes, rank, (unsigned long long)base,
           (unsigned long long)size);
  return -1;
}

/* The last line of defence before a post: the op's source in this rank's registration, its data
 * and flag in the peer's. The proxy checked the same against the same regions; a mismatch here is
 * a registration that disagrees with the proxy's, refused rather than posted. */
int mk_net_check_op(mk_transport *t, const mk_net_opts *o, const mk_peer *peer, const mk_op *op) {
  char *e = t->err;
  int n = (int)sizeof t->err;
  if (op->dst_rank >= (uint32_t)o->nranks || !peer->connected) {
    snprintf(e, n, "rank %d is not connected to rank %u", o->rank, op->dst_rank);
  } else if (op->bytes && mk_net_in(op->src, op->bytes, o->mem_base, o->mem_bytes, "source", o->rank, e, n)) {
  } else if (op->bytes && mk_net_in(op->dst, op->bytes, peer->base, peer->bytes, "destination", op->dst_rank, e, n)) {
  } else if (mk_net_in(op->flag, 8, peer->base, peer->bytes, "flag", op->dst_rank, e, n)) {
  } else {
    return 0;
  }
  t->err_op = *op;
  t->err_has_op = 1;
  return -1;
}

/* -- the immediate ------------------------------------------------------------------------------ */

uint32_t mk_chunk_bits(uint32_t n_flags) {
  uint32_t b = 1;
  while (b < 32 && (1ull << b) < n_flags) b++;
  return b;
}

int mk_arrivals_init(mk_arrivals *a, uint32_t n_flags, uint64_t flag_base, char *err, int errlen) {
  a->chunk_bits = mk_chunk_bits(n_flags);
  if (a->chunk_bits > 24) {
    snprintf(err, errlen, "%u arrival flags need %u bits of the 32-bit immediate, leaving fewer than 8 for the "
             "epoch", n_flags, a->chunk_bits);
    return -1;
  }
  a->n_flags = n_flags;
  a->flag_base = flag_base;
  a->last = calloc(n_flags, sizeof(uint64_t)); /* flags start at 0: the buffer is zeroed before any call */
  return a->last ? 0 : (snprintf(err, errlen, "out of memory"), -1);
}

void mk_arrivals_free(mk_arrivals *a) {
  free(a->last);
  a->last = NULL;
}

uint32_t mk_imm_encode(uint32_t chunk_bits, uint32_t chunk, uint64_t epoch) {
  return (uint32_t)(epoch << chunk_bits) | chunk;
}

int mk_arrival(mk_arrivals *a, uint32_t imm, uint64_t *flag, uint64_t *epoch, char *err, int errlen) {
  uint32_t chunk = imm & (uint32_t)((1ull << a->chunk_bits) - 1);
  if (chunk >= a->n_flags) {
    snprintf(err, errlen, "an immediate %#x names flag %u, outside this rank's %u flags", imm, chunk, a->n_flags);
    return -1;
  }
  const uint32_t k = 32 - a->chunk_bits;
  const uint64_t mask = (1ull << k) - 1, low = imm >> a->chunk_bits;
  uint64_t last = __atomic_load_n(&a->last[chunk], __ATOMIC_RELAXED);
  uint64_t e = last + ((low - last) & mask); /* the first epoch >= last with these low bits */
  __atomic_store_n(&a->last[chunk], e, __ATOMIC_RELAXED);
  *flag = a->flag_base + 8ull * chunk;
  *epoch = e;
  return 0;
}

void mk_arrivals_rebase(mk_arrivals *a, uint64_t epoch) {
  for (uint32_t i = 0; i < a->n_flags; i++) __atomic_store_n(&a->last[i], epoch, __ATOMIC_RELAXED);
}

int mk_backlog_push(mk_backlog *b, uint64_t flag, uint64_t epoch) {
  if (b->n == b->cap) { /* grow, unrolling the ring */
    uint32_t cap = b->cap ? 2 * b->cap : 64;
    uint64_t *p = malloc(2 * (size_t)cap * sizeof(uint64_t));
    if (!p) return -1;
    for (uint32_t i = 0; i < b->n; i++) {
      uint32_t j = (b->head + i) % b->cap;
      p[2 * i] = b->pairs[2 * j];
      p[2 * i + 1] = b->pairs[2 * j + 1];
    }
    free(b->pairs);
    b->pairs = p;
    b->cap = cap;
    b->head = 0;
  }
  uint32_t k = (b->head + b->n++) % b->cap;
  b->pairs[2 * k] = flag;
  b->pairs[2 * k + 1] = epoch;
  return 0;
}

void mk_backlog_free(mk_backlog *b) {
  free(b->pairs);
  b->pairs = NULL;
  b->n = b->cap = b->head = 0;
}

/* -- the SIGNAL fence ----------------------------------------------------------------------------- */

int mk_fence_init(mk_fence *f, int nranks) {
  memset(f, 0, sizeof *f);
  f->nranks = nranks;
  f->outstanding = calloc(nranks, sizeof(uint32_t));
  f->held = calloc(nranks, sizeof(mk_held));
  return f->outstanding && f->held ? 0 : -1;
}

void mk_fence_free(mk_fence *f) {
  if (f->held)
    for (int i = 0; i < f->nranks; i++) free(f->held[i].ops);
  free(f->held);
  free(f->outstanding);
  memset(f, 0, sizeof *f);
}

static void hold(mk_fence *f, const mk_op *op) {
  mk_held *h = &f->held[op->dst_rank];
  if (h->n == h->cap) { /* grow, unrolling the ring */
    uint32_t cap = h->cap ? 2 * h->cap : 16;
    mk_op *ops = malloc(cap * sizeof(mk_op));
    for (uint32_t i = 0; i < h->n; i++) ops[i] = h->ops[(h->head + i) % h->cap];
    free(h->ops);
    h->ops = ops;
    h->cap = cap;
    h->head = 0;
  }
  h->ops[(h->head + h->n) % h->cap] = *op;
  h->n++;
  f->total_held++;
}

int mk_fence_admit(mk_fence *f, const mk_op *op) {
  int p = (int)op->dst_rank;
  if (f->held[p].n || (op->bytes == 0 && f->outstanding[p])) {
    hold(f, op);
    return 0;
  }
  return 1;
}

void mk_fence_posted(mk_fence *f, int peer) {
  f->outstanding[peer]++;
  f->total_out++;
}

void mk_fence_completed(mk_fence *f, int peer) {
  if (f->outstanding[peer]) {
    f->outstanding[peer]--;
    f->total_out--;
  }
}

int mk_fence_release(mk_fence *f, int peer, mk_op *out, int max) {
  mk_held *h = &f->held[peer];
  int n = 0;
  while (h->n && n < max) {
    const mk_op *op = &h->ops[h->head];
    if (op->bytes == 0 && (f->outstanding[peer] || n)) break; /* a SIGNAL waits for what went before */
    out[n++] = *op;
    h->head = (h->head + 1) % h->cap;
    h->n--;
    f->total_held--;
  }
  return n;
}

/* -- the unordered transports' sending side -------------------------------------------------------- */

int mk_sender_init(mk_sender *s, int nranks, uint32_t per_op, uint32_t *n_free, void *owner,
                   int (*post)(void *, const mk_op *, int), int (*progress)(mk_transport *)) {
  memset(s, 0, sizeof *s);
  s->peers = calloc(nranks, sizeof(mk_peer));
  s->per_op = per_op;
  s->n_free = n_free;
  s->owner = owner;
  s->post = post;
  s->progress = progress;
  return s->peers && mk_fence_init(&s->fence, nranks) == 0 ? 0 : -1;
}

void mk_sender_free(mk_sender *s) {
  mk_fence_free(&s->fence);
  free(s->peers);
  s->peers = NULL;
}

static void admit(mk_sender *s, const mk_op *op, mk_op *now, int *m) {
  now[(*m)++] = *op;
  for (uint32_t k = 0; k < s->per_op; k++) mk_fence_posted(&s->fence, (int)op->dst_rank);
}

int mk_sender_post(mk_transport *t, mk_sender *s, const mk_net_opts *o, const mk_op *ops, int n) {
  static const mk_peer none;
  for (int i = 0; i < n; i++) {
    uint32_t d = ops[i].dst_rank;
    if (mk_net_check_op(t, o, d < (uint32_t)o->nranks && d == ops[0].dst_rank ? &s->peers[d] : &none, &ops[i]))
      return -1;
  }
  /* room first, then the fence: ops held earlier go out (progress sweeps) before these are admitted */
  uint64_t deadline = 0;
  while (*s->n_free < (uint32_t)n * s->per_op) {
    if (s->progress(t) < 0) return -1;
    uint64_t now = mk_now_ns();
    if (!deadline) deadline = now + o->timeout_ns;
    else if (now > deadline)
      return snprintf(t->err, sizeof t->err, "rank %d: %u writes stayed in flight (the send queue is full) for "
                      "%.3f s", o->rank, o->sq_depth, o->timeout_ns / 1e9), -1;
  }
  mk_op now[MK_MAX_BATCH];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (mk_fence_admit(&s->fence, &ops[i])) admit(s, &ops[i], now, &m);
  return m ? s->post(s->owner, now, m) : 0;
}

int mk_sender_sweep(mk_sender *s, int nranks) {
  mk_op now[MK_MAX_BATCH];
  for (int p = 0; s->fence.total_held && p < nranks; p++) {
    uint32_t cap;
    int n;
    while (s->fence.held[p].n && (cap = *s->n_free / s->per_op) > 0 &&
           (n = mk_fence_release(&s->fence, p, now, cap < MK_MAX_BATCH ? (int)cap : MK_MAX_BATCH)) > 0) {
      for (int i = 0; i < n; i++)
        for (uint32_t k = 0; k < s->per_op; k++) mk_fence_posted(&s->fence, p);
      if (s->post(s->owner, now, n)) return -1;
    }
  }
  return 0;
}

/* What this build holds: 1 verbs (infiniband/verbs.h), 2 libfabric (rdma/fabric.h), 4 CUDA (cuda.h). */
int mk_build_features(void) {
  int f = 0;
#ifdef MK_HAVE_VERBS
  f |= 1;
#endif
#ifdef MK_HAVE_OFI
  f |= 2;
#endif
#ifdef MK_HAVE_CUDA
  f |= 4;
#endif
  return f;
}
