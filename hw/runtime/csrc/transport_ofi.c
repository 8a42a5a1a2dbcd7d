/* ofi: libfabric RDM endpoints, for EFA, Slingshot (cxi), verbs, TCP or shared memory.
 *
 * The protocol is verbs_srd's (mk_net.h): each op is one fi_writedata whose remote CQ data is the
 * immediate (flag index and the epoch's low bits); the receiving proxy reads its CQ and only then
 * publishes the flag (a CPU store, or an fi_write to itself), so no flag is inferred from the order
 * of separate writes, which libfabric does not promise. Writes complete with FI_DELIVERY_COMPLETE
 * (the data is placed at the target), and a SIGNAL waits for every earlier write to its peer
 * (mk_fence); it carries 8 bytes into the peer's last flag, the plan's sink that nobody waits on (a
 * zero-length write with delivery-complete never completed on shm, libfabric 1.17). The provider is
 * named (fabric_attr.prov_name, e.g. "tcp;ofi_rxm") or discovered in the order efa, cxi,
 * verbs;ofi_rxm, tcp;ofi_rxm (shm reaches only this host: name it).
 *
 * libfabric is opened with dlopen: its exported calls are fi_getinfo, fi_freeinfo, fi_dupinfo,
 * fi_fabric and fi_strerror; every other call is an inline through the objects' ops tables. GPU
 * memory is registered with FI_HMEM_CUDA where the provider offers FI_HMEM, else a clear error.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_net.h"

#ifdef MK_HAVE_OFI
#include <dlfcn.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define OFI_VERSION FI_VERSION(1, 10)
#define NAME_MAX_BYTES 256

enum ctx_kind { FREE = 0, DATA = 1, FLAG = 2, PUBLISH = 3, RECV = 4 };

typedef struct octx {
  struct fi_context2 fi; /* first: libfabric hands back its address */
  mk_op op;
  int kind;
} octx;

typedef struct ofi_api {
  int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
  void (*freeinfo)(struct fi_info *);
  struct fi_info *(*dupinfo)(const struct fi_info *);
  int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
  const char *(*strerror)(int);
} ofi_api;

typedef struct ofi_addr { /* follows mk_net_addr in the blob */
  uint32_t virt_addr, namelen;
  uint8_t name[];
} ofi_addr;

typedef struct ofi_conn {
  fi_addr_t addr;
  int virt_addr;
} ofi_conn;

typedef struct ofi_tr {
  mk_transport base;
  mk_net_opts o;
  uint8_t *peers;
  void *lib;
  ofi_api api;
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_ep *ep;
  struct fid_cq *cq;
  struct fid_av *av;
  struct fid_mr *mr, *pub_mr;
  void *desc, *pub_desc;
  int virt_addr, rx_cq_data;
  fi_addr_t self;
  ofi_conn *conns;
  mk_arrivals arr;
  mk_sender send; /* checks, room and the SIGNAL fence (net.c) */
  mk_backlog backlog;
  uint32_t chunk_bits;
  octx *ctx; /* sq_depth writes, rq_depth publishes, rq_depth receives */
  uint32_t *free_data, *free_pub, n_free_data, n_free_pub, n_ctx;
  uint64_t *pub; /* per context: the 8 bytes a publish, SIGNAL or planted flag write sends; then 64
                  * bytes of scratch for posted receives: all in the pub MR */
  uint8_t *scratch;
  int posting;   /* inside post_admitted: a progress from there must not sweep (it takes slots) */
  char prov[64];
} ofi_tr;

static int ofi_err(ofi_tr *t, const char *what, int rc) {
  snprintf(t->base.err, sizeof t->base.err, "%s (%s) failed: %s (%d)", what, t->prov, t->api.strerror(-rc), rc);
  return -1;
}

static uint64_t remote(const ofi_conn *c, const mk_peer *p, uint64_t addr) { return c->virt_addr ? addr : addr - p->base; }

static int ofi_progress(mk_transport *b);

/* Issue one write, retrying (boundedly, progressing the CQ) while the provider says -FI_EAGAIN. */
static int issue(ofi_tr *t, uint32_t k, const void *src, size_t len, void *desc, fi_addr_t dst, uint64_t addr,
                 uint64_t key, int with_data, uint32_t data) {
  uint64_t deadline = 0;
  for (;;) {
    ssize_t rc = with_data ? fi_writedata(t->ep, src, len, desc, data, dst, addr, key, &t->ctx[k])
                           : fi_write(t->ep, src, len, desc, dst, addr, key, &t->ctx[k]);
    if (rc == 0) return 0;
    if (rc != -FI_EAGAIN) return ofi_err(t, with_data ? "fi_writedata" : "fi_write", (int)rc);
    uint64_t now = mk_now_ns();
    if (!deadline) deadline = now + t->o.timeout_ns;
    else if (now > deadline)
      return snprintf(t->base.err, sizeof t->base.err, "rank %d: %s kept answering EAGAIN for %.3f s", t->o.rank,
                      t->prov, t->o.timeout_ns / 1e9), -1;
    if (ofi_progress(&t->base) < 0) return -1;
  }
}

static int post_admitted(ofi_tr *t, const mk_op *ops, int n) {
  for (int i = 0; i < n; i++) {
    const mk_op *op = &ops[i];
    ofi_conn *c = &t->conns[op->dst_rank];
    const mk_peer *peer = &t->send.peers[op->dst_rank];
    uint32_t k = t->free_data[--t->n_free_data];
    t->ctx[k].op = *op;
    t->ctx[k].kind = DATA;
    int rc;
    if (t->o.plant == MK_PLANT_FLAG_WRITE && op->bytes) { /* the defect: data, then the flag as its own write */
      rc = issue(t, k, (void *)(uintptr_t)op->src, op->bytes, t->desc, c->addr, remote(c, peer, op->dst), peer->key, 0, 0);
      if (!rc) {
          uint32_t f = t->free_data[--t->n_free_data];
        t->ctx[f].op = *op;
        t->ctx[f].kind = FLAG;
        t->pub[f] = op->epoch;
        rc = issue(t, f, &t->pub[f], 8, t->pub_desc, c->addr, remote(c, peer, op->flag), peer->key, 0, 0);
      }
    } else if (op->bytes) {
      rc = issue(t, k, (void *)(uintptr_t)op->src, op->bytes, t->desc, c->addr, remote(c, peer, op->dst), peer->key, 1,
                 mk_imm_encode(t->chunk_bits, op->chunk, op->epoch));
    } else { /* a SIGNAL: 8 bytes into the sink flag (see the top), its own flag in the CQ data */
      t->pub[k] = op->epoch;
      uint64_t sink = peer->base + 8ull * (t->o.n_flags - 1);
      rc = issue(t, k, &t->pub[k], 8, t->pub_desc, c->addr, remote(c, peer, sink), peer->key, 1,
                 mk_imm_encode(t->chunk_bits, op->chunk, op->epoch));
    }
    if (rc) {
      t->base.err_op = *op;
      t->base.err_has_op = 1;
      return -1;
    }
  }
  return 0;
}

static int post_batch(void *owner, const mk_op *ops, int n) {
  ofi_tr *t = (ofi_tr *)owner;
  t->posting = 1;
  int rc = post_admitted(t, ops, n);
  t->posting = 0;
  return rc;
}

static int ofi_post(mk_transport *b, const mk_op *ops, int n) {
  ofi_tr *t = (ofi_tr *)b;
  return mk_sender_post(b, &t->send, &t->o, ops, n);
}

static int post_recv(ofi_tr *t, uint32_t k) {
  t->ctx[k].kind = RECV;
  ssize_t rc = fi_recv(t->ep, t->scratch, 64, t->pub_desc, FI_ADDR_UNSPEC, &t->ctx[k]);
  return rc ? ofi_err(t, "fi_recv", (int)rc) : 0;
}

static int publish(ofi_tr *t) {
  while (t->backlog.n) {
    uint64_t *e = mk_backlog_front(&t->backlog);
    if (t->o.publish == MK_PUBLISH_STORE) {
      __atomic_store_n((uint64_t *)(uintptr_t)e[0], e[1], __ATOMIC_RELEASE);
    } else {
      if (!t->n_free_pub) return 0;
      uint32_t k = t->free_pub[--t->n_free_pub];
      memset(&t->ctx[k].op, 0, sizeof t->ctx[k].op);
      t->ctx[k].kind = PUBLISH;
      t->ctx[k].op.flag = e[0];
      t->ctx[k].op.epoch = t->pub[k] = e[1];
      uint64_t addr = t->virt_addr ? e[0] : e[0] - t->o.mem_base;
      ssize_t rc = fi_write(t->ep, &t->pub[k], 8, t->pub_desc, t->self, addr, fi_mr_key(t->mr), &t->ctx[k]);
      if (rc == -FI_EAGAIN) { /* later */
        t->ctx[k].kind = FREE;
        t->free_pub[t->n_free_pub++] = k;
        return 0;
      }
      if (rc) return ofi_err(t, "fi_write (loopback publish)", (int)rc);
    }
    mk_backlog_pop(&t->backlog);
  }
  return 0;
}

static int on_error(ofi_tr *t) {
  struct fi_cq_err_entry e;
  memset(&e, 0, sizeof e);
  if (fi_cq_readerr(t->cq, &e, 0) < 0) return snprintf(t->base.err, sizeof t->base.err, "fi_cq_readerr failed"), -1;
  char prov[128] = "";
  fi_cq_strerror(t->cq, e.prov_errno, e.err_data, prov, sizeof prov);
  octx *c = (octx *)e.op_context;
  const char *what = !c ? "an operation" : c->kind == RECV ? "a receive" : c->kind == PUBLISH ? "a loopback publish"
                   : c->kind == FLAG ? "a flag write" : "fi_writedata";
  if (c && (c->kind == DATA || c->kind == FLAG)) {
    t->base.err_op = c->op;
    t->base.err_has_op = 1;
    snprintf(t->base.err, sizeof t->base.err, "rank %d -> rank %u: %s of chunk %u (epoch %llu) failed: %s (%.40s%s%.60s)",
             t->o.rank, c->op.dst_rank, what, c->op.chunk, (unsigned long long)c->op.epoch, t->api.strerror(e.err),
             t->prov, prov[0] ? ": " : "", prov);
  } else {
    snprintf(t->base.err, sizeof t->base.err, "rank %d: %s failed: %s (%.40s%s%.60s)", t->o.rank, what,
             t->api.strerror(e.err), t->prov, prov[0] ? ": " : "", prov);
  }
  return -1;
}

static int on_entry(ofi_tr *t, const struct fi_cq_data_entry *e) {
  octx *c = (octx *)e->op_context;
  if (e->flags & FI_REMOTE_CQ_DATA) { /* a write arrived (its receive, with FI_RX_CQ_DATA, is `c`) */
    uint64_t flag, epoch;
    if (mk_arrival(&t->arr, (uint32_t)e->data, &flag, &epoch, t->base.err, sizeof t->base.err)) return -1;
    if (mk_backlog_push(&t->backlog, flag, epoch))
      return snprintf(t->base.err, sizeof t->base.err, "out of memory for arrived flags"), -1;
    if (t->rx_cq_data && c && c->kind == RECV) return post_recv(t, (uint32_t)(c - t->ctx));
    return 0; /* without FI_RX_CQ_DATA no receive was consumed, and op_context means nothing */
  }
  if (!c || c < t->ctx || c >= t->ctx + t->n_ctx || c->kind == FREE)
    return snprintf(t->base.err, sizeof t->base.err, "a completion (flags %#llx) names no operation of this rank",
                    (unsigned long long)e->flags), -1;
  uint32_t k = (uint32_t)(c - t->ctx);
  int kind = c->kind;
  c->kind = FREE;
  if (kind == PUBLISH) t->free_pub[t->n_free_pub++] = k;
  else if (kind == DATA || kind == FLAG) {
    t->free_data[t->n_free_data++] = k;
    mk_fence_completed(&t->send.fence, (int)c->op.dst_rank);
  }
  return 0;
}

static int ofi_progress(mk_transport *b) {
  ofi_tr *t = (ofi_tr *)b;
  struct fi_cq_data_entry e[32];
  ssize_t n = fi_cq_read(t->cq, e, 32);
  if (n == -FI_EAVAIL) return on_error(t);
  if (n < 0 && n != -FI_EAGAIN) return ofi_err(t, "fi_cq_read", (int)n);
  for (ssize_t i = 0; i < n; i++) {
    b->activity++;
    if (on_entry(t, &e[i])) return -1;
  }
  if ((!t->posting && mk_sender_sweep(&t->send, t->o.nranks)) || publish(t)) return -1;
  uint64_t pending = t->send.fence.total_out + t->send.fence.total_held + t->backlog.n + (t->o.rq_depth - t->n_free_pub);
  return (int)(pending > 0x7fffffff ? 0x7fffffff : pending);
}

static int ofi_drain(mk_transport *b, uint64_t timeout_ns) {
  uint64_t deadline = mk_now_ns() + timeout_ns;
  int left;
  while ((left = ofi_progress(b)) > 0) {
    if (mk_now_ns() > deadline) {
      snprintf(b->err, sizeof b->err, "%d libfabric writes or publishes still in flight after %.3f s", left,
               timeout_ns / 1e9);
      return -1;
    }
  }
  return left;
}

static void ofi_rebase(mk_transport *b, uint64_t epoch) { mk_arrivals_rebase(&((ofi_tr *)b)->arr, epoch); }

static int ofi_address(mk_transport *b, uint8_t *out, int max) {
  ofi_tr *t = (ofi_tr *)b;
  uint8_t name[NAME_MAX_BYTES];
  size_t namelen = sizeof name;
  int rc = fi_getname(&t->ep->fid, name, &namelen);
  if (rc) return ofi_err(t, "fi_getname", rc);
  int len = (int)(sizeof(mk_net_addr) + sizeof(ofi_addr) + namelen);
  if (len > max) return snprintf(b->err, sizeof b->err, "address of %d bytes exceeds %d", len, max), -1;
  memset(out, 0, len);
  mk_net_fill_addr((mk_net_addr *)out, MK_NET_OFI, &t->o, fi_mr_key(t->mr), (uint32_t)len);
  ofi_addr *a = (ofi_addr *)(out + sizeof(mk_net_addr));
  a->virt_addr = (uint32_t)t->virt_addr;
  a->namelen = (uint32_t)namelen;
  memcpy(a->name, name, namelen);
  return len;
}

static int ofi_connect(mk_transport *b, int peer, const uint8_t *blob, int len) {
  ofi_tr *t = (ofi_tr *)b;
  if (peer < 0 || peer >= t->o.nranks || peer == t->o.rank || !t->peers[peer])
    return snprintf(b->err, sizeof b->err, "rank %d did not name rank %d a peer", t->o.rank, peer), -1;
  mk_peer p;
  if (mk_net_read_addr(blob, len, MK_NET_OFI, peer, &t->o, &p, b->err, sizeof b->err)) return -1;
  const ofi_addr *a = (const ofi_addr *)(blob + sizeof(mk_net_addr));
  if (len < (int)(sizeof(mk_net_addr) + sizeof(ofi_addr)) ||
      len != (int)(sizeof(mk_net_addr) + sizeof(ofi_addr) + a->namelen))
    return snprintf(b->err, sizeof b->err, "rank %d's libfabric address has %d bytes", peer, len), -1;
  ofi_conn *c = &t->conns[peer];
  int rc = fi_av_insert(t->av, a->name, 1, &c->addr, 0, NULL);
  if (rc != 1) return snprintf(b->err, sizeof b->err, "fi_av_insert of rank %d (%s) failed (%d)", peer, t->prov, rc), -1;
  c->virt_addr = (int)a->virt_addr;
  t->send.peers[peer] = p;
  return 0;
}

static void ofi_destroy(mk_transport *b) {
  ofi_tr *t = (ofi_tr *)b;
  if (t->ep) fi_close(&t->ep->fid);
  if (t->mr) fi_close(&t->mr->fid);
  if (t->pub_mr) fi_close(&t->pub_mr->fid);
  if (t->av) fi_close(&t->av->fid);
  if (t->cq) fi_close(&t->cq->fid);
  if (t->domain) fi_close(&t->domain->fid);
  if (t->fabric) fi_close(&t->fabric->fid);
  if (t->info) t->api.freeinfo(t->info);
  if (t->lib) dlclose(t->lib);
  mk_arrivals_free(&t->arr);
  mk_sender_free(&t->send);
  mk_backlog_free(&t->backlog);
  free(t->ctx);
  free(t->free_data);
  free(t->free_pub);
  free(t->pub);
  free(t->conns);
  free(t->peers);
  free(t);
}

static const char *DISCOVER[] = {"efa", "cxi", "verbs;ofi_rxm", "tcp;ofi_rxm"};

/* The provider's fi_info: by name, or the first of DISCOVER that fi_getinfo offers. */
static int choose(ofi_tr *t, char *err, int errlen) {
  struct fi_info *hints = t->api.dupinfo(NULL), *list = NULL;
  if (!hints) return snprintf(err, errlen, "ofi: fi_allocinfo failed"), -1;
  const int cuda = t->o.mem_kind == MK_MEM_CUDA;
  hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE | (cuda ? FI_HMEM : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT |
                                (cuda ? FI_MR_HMEM : 0);
  hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  int rc = t->api.getinfo(OFI_VERSION, NULL, NULL, 0, hints, &list);
  t->api.freeinfo(hints);
  char seen[192] = "";
  struct fi_info *pick = NULL;
  for (struct fi_info *i = rc ? NULL : list; i; i = i->next) {
    const char *name = i->fabric_attr->prov_name;
    if (!strstr(seen, name) && strlen(seen) + strlen(name) + 3 < sizeof seen)
      snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s", seen[0] ? ", " : "", name);
    if (pick || i->domain_attr->cq_data_size < 4) continue;
    if (t->o.provider[0] && strcmp(name, t->o.provider) == 0) pick = i;
  }
  for (size_t d = 0; !pick && !t->o.provider[0] && d < sizeof DISCOVER / sizeof *DISCOVER; d++)
    for (struct fi_info *i = rc ? NULL : list; i && !pick; i = i->next)
      if (strcmp(i->fabric_attr->prov_name, DISCOVER[d]) == 0 && i->domain_attr->cq_data_size >= 4) pick = i;
  if (!pick) {
    const char *mem = cuda ? " on CUDA memory (FI_HMEM)" : "";
    if (t->o.provider[0])
      snprintf(err, errlen, "ofi: provider %s offers no RDM endpoint with RMA writes, remote CQ data (4+ bytes) and "
               "delivery-complete writes%s; providers that do: %s", t->o.provider, mem, seen[0] ? seen : "none");
    else
      snprintf(err, errlen, "ofi: none of efa, cxi, verbs;ofi_rxm, tcp;ofi_rxm offers RDM endpoints with RMA writes, "
               "remote CQ data and delivery-complete writes%s; providers that do: %s (name one; shm reaches only "
               "this host)", mem, seen[0] ? seen : "none");
    if (list) t->api.freeinfo(list);
    return -1;
  }
  t->info = t->api.dupinfo(pick);
  t->api.freeinfo(list);
  snprintf(t->prov, sizeof t->prov, "%s", t->info->fabric_attr->prov_name);
  t->virt_addr = (t->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  t->rx_cq_data = (t->info->mode & FI_RX_CQ_DATA) != 0;
  return 0;
}

static int reg(ofi_tr *t, void *addr, size_t len, int cuda, uint64_t access, uint64_t key, struct fid_mr **mr,
               void **desc, char *err, int errlen) {
  struct iovec iov = {addr, len};
  struct fi_mr_attr at;
  memset(&at, 0, sizeof at);
  at.mr_iov = &iov;
  at.iov_count = 1;
  at.access = access;
  at.requested_key = key;
  at.iface = cuda ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
  at.device.cuda = t->o.cuda_device;
  int rc = fi_mr_regattr(t->domain, &at, 0, mr);
  if (!rc && (t->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
    rc = fi_mr_bind(*mr, &t->ep->fid, 0);
    if (!rc) rc = fi_mr_enable(*mr);
  }
  if (rc) {
    snprintf(err, errlen, "ofi: registering %zu bytes of %s memory with %s failed: %s (%d)", len, cuda ? "CUDA" : "host",
             t->prov, t->api.strerror(-rc), rc);
    return -1;
  }
  *desc = fi_mr_desc(*mr);
  return 0;
}

/* libfabric, opened. Debian's libfabric links PSM's libinfinipath, whose constructor installs handlers for
 * SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT that print a backtrace from inside the handler (malloc: not
 * async-signal-safe), so a process stopped by SIGTERM could hang on libc's malloc lock instead of exiting.
 * That constructor reads IPATH_NO_BACKTRACE: set here (a value the user set is kept) before it runs. It cannot
 * undo a load before ours (an MPI's or NCCL's plugin's), and it reaches child processes too (as intended). Set at
 * a transport's set-up or `mkernel doctor`, not while other threads read the environment. */
static void *open_libfabric(void) {
  setenv("IPATH_NO_BACKTRACE", "1", 0);
  return dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
}

#define LOAD(field, sym)                                                                                 \
  if (!(*(void **)&t->api.field = dlsym(t->lib, sym))) {                                                 \
    snprintf(err, errlen, "ofi: libfabric.so.1 lacks %s", sym);                                          \
    goto fail;                                                                                           \
  }

#define CHECK(call, what)                                                                                \
  if ((rc = (call))) {                                                                                   \
    snprintf(err, errlen, "ofi: %s (%s) failed: %s (%d)", what, t->prov, t->api.strerror(-rc), rc);     \
    goto fail;                                                                                           \
  }

mk_transport *mk_ofi_transport(const mk_net_opts *o, char *err, int errlen) {
  if (mk_net_check_opts(o, "ofi", err, errlen)) return NULL;
  ofi_tr *t = calloc(1, sizeof *t);
  int rc;
  t->peers = mk_net_adopt(&t->o, o);
  t->base.name = "ofi";
  t->base.post = ofi_post;
  t->base.progress = ofi_progress;
  t->base.drain = ofi_drain;
  t->base.destroy = ofi_destroy;
  t->base.address = ofi_address;
  t->base.connect = ofi_connect;
  t->base.rebase = ofi_rebase;
  t->conns = calloc(o->nranks, sizeof(ofi_conn));
  t->n_ctx = t->o.sq_depth + 2 * t->o.rq_depth;
  t->ctx = calloc(t->n_ctx, sizeof(octx));
  t->pub = calloc(t->n_ctx + 8, sizeof(uint64_t));
  t->scratch = (uint8_t *)(t->pub + t->n_ctx);
  t->free_data = malloc(t->o.sq_depth * sizeof(uint32_t));
  t->free_pub = malloc(t->o.rq_depth * sizeof(uint32_t));
  for (uint32_t i = 0; i < t->o.sq_depth; i++) t->free_data[t->n_free_data++] = t->o.sq_depth - 1 - i;
  for (uint32_t i = 0; i < t->o.rq_depth; i++) t->free_pub[t->n_free_pub++] = t->o.sq_depth + t->o.rq_depth - 1 - i;
  t->chunk_bits = mk_chunk_bits(o->n_flags);
  if (mk_arrivals_init(&t->arr, o->n_flags, o->flag_base, err, errlen) ||
      mk_sender_init(&t->send, o->nranks, o->plant == MK_PLANT_FLAG_WRITE ? 2 : 1, &t->n_free_data, t, post_batch,
                     ofi_progress))
    goto fail;
  t->lib = open_libfabric();
  if (!t->lib) {
    snprintf(err, errlen, "ofi needs libfabric.so.1, which could not be loaded: %s", dlerror());
    goto fail;
  }
  LOAD(getinfo, "fi_getinfo");
  LOAD(freeinfo, "fi_freeinfo");
  LOAD(dupinfo, "fi_dupinfo");
  LOAD(fabric, "fi_fabric");
  LOAD(strerror, "fi_strerror");
  snprintf(t->prov, sizeof t->prov, "%s", o->provider[0] ? o->provider : "discovery");
  if (choose(t, err, errlen)) goto fail;
  CHECK(t->api.fabric(t->info->fabric_attr, &t->fabric, NULL), "fi_fabric");
  CHECK(fi_domain(t->fabric, t->info, &t->domain, NULL), "fi_domain");
  struct fi_cq_attr cqa;
  memset(&cqa, 0, sizeof cqa);
  cqa.format = FI_CQ_FORMAT_DATA;
  int npeers = 0;
  for (int r = 0; r < o->nranks; r++) npeers += t->peers[r];
  cqa.size = t->n_ctx + (size_t)npeers * t->o.sq_depth; /* and the peers' writes in flight to this rank */
  CHECK(fi_cq_open(t->domain, &cqa, &t->cq, NULL), "fi_cq_open");
  struct fi_av_attr ava;
  memset(&ava, 0, sizeof ava);
  ava.type = FI_AV_TABLE;
  ava.count = (size_t)o->nranks + 1;
  CHECK(fi_av_open(t->domain, &ava, &t->av, NULL), "fi_av_open");
  CHECK(fi_endpoint(t->domain, t->info, &t->ep, NULL), "fi_endpoint");
  CHECK(fi_ep_bind(t->ep, &t->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind (CQ)");
  CHECK(fi_ep_bind(t->ep, &t->av->fid, 0), "fi_ep_bind (AV)");
  CHECK(fi_enable(t->ep), "fi_enable");
  if (reg(t, (void *)(uintptr_t)o->mem_base, o->mem_bytes, o->mem_kind == MK_MEM_CUDA,
          FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 2ull * o->rank + 1, &t->mr, &t->desc, err, errlen) ||
      reg(t, t->pub, (t->n_ctx + 8) * sizeof(uint64_t), 0, FI_READ | FI_WRITE | FI_RECV | FI_SEND, 2ull * o->rank + 2,
          &t->pub_mr, &t->pub_desc, err, errlen))
    goto fail;
  uint8_t name[NAME_MAX_BYTES];
  size_t namelen = sizeof name;
  CHECK(fi_getname(&t->ep->fid, name, &namelen), "fi_getname");
  if (fi_av_insert(t->av, name, 1, &t->self, 0, NULL) != 1) {
    snprintf(err, errlen, "ofi: inserting this rank's own address (%s) failed", t->prov);
    goto fail;
  }
  for (uint32_t i = 0; t->rx_cq_data && i < t->o.rq_depth; i++)
    if (post_recv(t, t->o.sq_depth + t->o.rq_depth + i)) {
      snprintf(err, errlen, "ofi: %s", t->base.err);
      goto fail;
    }
  return &t->base;
fail:
  ofi_destroy(&t->base);
  return NULL;
}

/* The chosen provider's name, for logs and tests. */
const char *mk_ofi_provider(mk_transport *b) { return ((ofi_tr *)b)->prov; }

static int list_providers(const ofi_api *api, uint64_t caps, uint64_t op_flags, char *out, int max) {
  struct fi_info *hints = api->dupinfo(NULL), *list = NULL;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = caps;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT |
                                FI_MR_HMEM;
  hints->tx_attr->op_flags = op_flags;
  int rc = api->getinfo(OFI_VERSION, NULL, NULL, 0, hints, &list), n = 0;
  api->freeinfo(hints);
  out[0] = 0;
  for (struct fi_info *i = rc ? NULL : list; i && n < max - 1; i = i->next) {
    char line[128];
    snprintf(line, sizeof line, "%s cq_data=%zu hmem=%d\n", i->fabric_attr->prov_name, i->domain_attr->cq_data_size,
             (i->caps & FI_HMEM) != 0);
    if (!strstr(out, line)) n += snprintf(out + n, max - n, "%s", line);
  }
  if (list) api->freeinfo(list);
  return n;
}

/* The RDM providers fi_getinfo offers here, one line each ("name cq_data=8 hmem=0"): first those
 * with RMA writes and delivery-complete (what the ofi transport needs), then, after a line "--",
 * every RDM provider. For `mkernel doctor`. Returns bytes written, or -1 with the reason in `out`. */
int mk_ofi_providers(char *out, int max) {
  void *lib = open_libfabric();
  if (!lib) return snprintf(out, max, "libfabric.so.1 could not be loaded: %s", dlerror()), -1;
  ofi_api api;
  *(void **)&api.getinfo = dlsym(lib, "fi_getinfo");
  *(void **)&api.freeinfo = dlsym(lib, "fi_freeinfo");
  *(void **)&api.dupinfo = dlsym(lib, "fi_dupinfo");
  if (!api.getinfo || !api.freeinfo || !api.dupinfo) {
    dlclose(lib);
    return snprintf(out, max, "libfabric.so.1 lacks fi_getinfo/fi_freeinfo/fi_dupinfo"), -1;
  }
  int n = list_providers(&api, FI_RMA | FI_WRITE | FI_REMOTE_WRITE, FI_DELIVERY_COMPLETE, out, max);
  n += snprintf(out + n, max - n, "--\n");
  n += list_providers(&api, 0, 0, out + n, max - n);
  dlclose(lib);
  return n;
}

#else /* built without rdma/fabric.h */

mk_transport *mk_ofi_transport(const mk_net_opts *o, char *err, int errlen) {
  (void)o;
  snprintf(err, errlen, "ofi was built without rdma/fabric.h (install libfabric-dev and rebuild)");
  return NULL;
}

const char *mk_ofi_provider(mk_transport *b) {
  (void)b;
  return "";
}

int mk_ofi_providers(char *out, int max) {
  return snprintf(out, max, "mkernel was built without rdma/fabric.h (install libfabric-dev)"), -1;
}
#endif
