/* A fake verbs provider at the ABI boundary, for tests of the real proxy and verbs transports with
 * no NIC (tests/hw/test_transport_verbs.py).
 *
 * It fills mk_verbs_api (the setup calls, hw/runtime/csrc/mk_verbs.h) and hands out contexts and QPs whose
 * ops tables are its own, so the transports' ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_wr_*
 * calls (libibverbs inlines through those tables) land here. All "devices" live in this process:
 * a write moves bytes with memcpy once the harness lets it land, after checking its keys and ranges
 * against the registered MRs as a NIC would (a bad one completes with a protection or access error).
 *
 * Order: each poll lands a few in-flight writes, chosen by a seeded generator: on an RC QP only its
 * oldest (RC executes a QP's writes in order), on an SRD QP any of them (SRD reorders). A write with
 * immediate consumes a posted receive on its target (it waits, as an RNR retry would, when none is
 * posted) unless the QP has unsolicited write-recv, and completes there with the immediate. A rule
 * can fail the n-th write a device posts with a chosen status; the QP is then in error and flushes
 * the rest. Every landed write is logged (source device, target device, address, length, immediate).
 */
#define _DEFAULT_SOURCE
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_verbs.h"

#define NDEV 32 /* fake_rc0..15, fake_efa0..15 */
#define MAX_INLINE 64

typedef struct fdev {
  struct ibv_device dev;
  int index, efa;
} fdev;

typedef struct fctx {
  struct ibv_context ctx;
  int index, efa;
  uint64_t posted; /* writes posted by this device, for the failure rules */
} fctx;

typedef struct fmr {
  struct ibv_mr mr;
  int access;
  struct fmr *next;
} fmr;

typedef struct fcq {
  struct ibv_cq cq;
  struct ibv_wc *wc;
  int head, n, cap;
} fcq;

typedef struct fqp fqp;

typedef struct pkt {
  fqp *src;
  uint64_t wr_id, dev_seq, qp_seq;
  int signaled, has_imm, is_inline;
  uint32_t imm, rkey, lkey, len, dst_qpn;
  uint64_t remote, local;
  union ibv_gid dgid; /* SRD: the address handle's */
  uint8_t data[MAX_INLINE];
} pkt;

struct fqp {
  struct ibv_qp_ex qpx; /* first: qpx.qp_base is the ibv_qp */
  fctx *ctx;
  fcq *scq, *rcq;
  int srd, unsolicited, error, building, cap_send, cap_recv;
  uint32_t dest_qpn;
  uint64_t posted, retired; /* send-queue slots: posted, freed by signalled completions */
  uint64_t *recv;           /* posted receive wr_ids, FIFO */
  int rhead, rn;
  pkt batch[64];
  int nbatch;
  fqp *next;
};

typedef struct fah {
  struct ibv_ah ah;
  union ibv_gid gid;
} fah;

typedef struct rule {
  int dev, status;
  uint64_t nth;
} rule;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fdev devs[NDEV];
static struct ibv_device *dev_list[NDEV + 1];
static fmr *mrs;
static fqp *qps;
static pkt *fly;
static size_t nfly, capfly;
static uint64_t rng = 1, *logv;
static size_t nlog, caplog;
static uint32_t efa_caps, next_key = 1, next_qpn = 100;
static rule rules[16];
static int nrules, fail_reg, deliveries_per_poll = 4;

static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void push_wc(fcq *c, struct ibv_wc wc) {
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    struct ibv_wc *w = malloc(cap * sizeof *w);
    for (int i = 0; i < c->n; i++) w[i] = c->wc[(c->head + i) % c->cap];
    free(c->wc);
    c->wc = w;
    c->cap = cap;
    c->head = 0;
  }
  c->wc[(c->head + c->n++) % c->cap] = wc;
}

static fmr *find_mr(uint32_t key, struct ibv_context *ctx) {
  for (fmr *m = mrs; m; m = m->next)
    if (m->mr.lkey == key && m->mr.context == ctx) return m;
  return NULL;
}

static int in_mr(const fmr *m, uint64_t addr, uint64_t len) {
  if (!m) return 0;
  uint64_t b = (uintptr_t)m->mr.addr;
  return addr >= b && len <= m->mr.length && addr - b <= m->mr.length - len;
}

static fqp *find_qp(uint32_t qpn) {
  for (fqp *q = qps; q; q = q->next)
    if (q->qpx.qp_base.qp_num == qpn) return q;
  return NULL;
}

static void send_wc(pkt *p, enum ibv_wc_status st) {
  fqp *q = p->src;
  if (p->signaled || st != IBV_WC_SUCCESS) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    wc.wr_id = p->wr_id;
    wc.status = st;
    wc.opcode = IBV_WC_RDMA_WRITE;
    wc.qp_num = q->qpx.qp_base.qp_num;
    wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x42;
    push_wc(q->scq, wc);
  }
  if (p->signaled && p->qp_seq + 1 > q->retired) q->retired = p->qp_seq + 1; /* frees its slot and those before */
}

/* Land packet i (or keep it in flight: 0), as the NIC would. */
static int land(size_t i) {
  pkt *p = &fly[i];
  fqp *q = p->src;
  enum ibv_wc_status st = IBV_WC_SUCCESS;
  fqp *d = NULL;
  fmr *rm = NULL;
  for (int r = 0; r < nrules; r++)
    if (rules[r].dev == q->ctx->index && rules[r].nth == p->dev_seq) st = (enum ibv_wc_status)rules[r].status;
  if (q->error) st = IBV_WC_WR_FLUSH_ERR;
  if (st == IBV_WC_SUCCESS && !p->is_inline && p->len && !in_mr(find_mr(p->lkey, &q->ctx->ctx), p->local, p->len))
    st = IBV_WC_LOC_PROT_ERR;
  if (st == IBV_WC_SUCCESS) {
    d = find_qp(q->srd ? p->dst_qpn : q->dest_qpn);
    if (!d || (q->srd && ((fdev *)d->ctx->ctx.device)->index != p->dgid.raw[15]))
      st = IBV_WC_RETRY_EXC_ERR; /* nobody answers at that address */
  }
  if (st == IBV_WC_SUCCESS) {
    rm = find_mr(p->rkey, &d->ctx->ctx);
    if (!rm || !(rm->access & IBV_ACCESS_REMOTE_WRITE) || !in_mr(rm, p->remote, p->len)) st = IBV_WC_REM_ACCESS_ERR;
  }
  if (st != IBV_WC_SUCCESS) {
    q->error = 1;
    send_wc(p, st);
    return 1;
  }
  if (p->has_imm && !d->unsolicited && d->rn == 0) return 0; /* no receive posted: the sender retries */
  if (p->len) memcpy((void *)(uintptr_t)p->remote, p->is_inline ? (void *)p->data : (void *)(uintptr_t)p->local, p->len);
  if (nlog + 5 > caplog) {
    caplog = caplog ? 2 * caplog : 4096;
    logv = realloc(logv, caplog * sizeof *logv);
  }
  uint64_t entry[5] = {(uint64_t)q->ctx->index, (uint64_t)d->ctx->index, p->remote, p->len,
                       p->has_imm ? (1ull << 32) | be32toh(p->imm) : 0};
  memcpy(&logv[nlog], entry, sizeof entry);
  nlog += 5;
  if (p->has_imm) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    if (!d->unsolicited) {
      wc.wr_id = d->recv[d->rhead];
      d->rhead = (d->rhead + 1) % d->cap_recv;
      d->rn--;
    }
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = p->imm;
    wc.byte_len = p->len;
    wc.qp_num = d->qpx.qp_base.qp_num;
    wc.src_qp = q->qpx.qp_base.qp_num;
    push_wc(d->rcq, wc);
  }
  send_wc(p, IBV_WC_SUCCESS);
  return 1;
}

/* Whether packet i may land now: on RC, only the oldest of its QP. */
static int eligible(size_t i) {
  if (fly[i].src->srd) return 1;
  for (size_t j = 0; j < i; j++)
    if (fly[j].src == fly[i].src) return 0;
  return 1;
}

static void advance(void) {
  int steps = 1 + (int)(rnd() % (uint64_t)deliveries_per_poll);
  for (int s = 0; s < steps && nfly; s++) {
    size_t i = rnd() % nfly;
    while (!eligible(i)) i--; /* the oldest of its QP comes earlier in the list */
    if (land(i)) {
      memmove(&fly[i], &fly[i + 1], (nfly - i - 1) * sizeof *fly);
      nfly--;
    }
  }
}

static int enqueue(fqp *q, pkt *p) {
  if (q->posted - q->retired >= (uint64_t)q->cap_send) return ENOMEM;
  p->src = q;
  p->dev_seq = q->ctx->posted++;
  p->qp_seq = q->posted++;
  if (nfly == capfly) {
    capfly = capfly ? 2 * capfly : 1024;
    fly = realloc(fly, capfly * sizeof *fly);
  }
  fly[nfly++] = *p;
  return 0;
}

/* -- the data path: the context's and QP's ops ------------------------------------------------- */

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  fcq *c = (fcq *)cq;
  pthread_mutex_lock(&lock);
  advance();
  int k = 0;
  for (; k < n && c->n; k++) {
    wc[k] = c->wc[c->head];
    c->head = (c->head + 1) % c->cap;
    c->n--;
  }
  pthread_mutex_unlock(&lock);
  return k;
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  fqp *q = (fqp *)qp;
  int rc = 0;
  pthread_mutex_lock(&lock);
  for (; wr && !rc; wr = wr->next) {
    pkt p;
    memset(&p, 0, sizeof p);
    if (qp->state != IBV_QPS_RTS || (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) ||
        wr->num_sge > 1) {
      rc = EINVAL;
      break;
    }
    p.wr_id = wr->wr_id;
    p.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    p.has_imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    p.imm = wr->imm_data;
    p.remote = wr->wr.rdma.remote_addr;
    p.rkey = wr->wr.rdma.rkey;
    if (wr->num_sge) {
      p.len = wr->sg_list[0].length;
      p.local = wr->sg_list[0].addr;
      p.lkey = wr->sg_list[0].lkey;
    }
    if (wr->send_flags & IBV_SEND_INLINE) {
      if (p.len > MAX_INLINE) {
        rc = EINVAL;
        break;
      }
      p.is_inline = 1;
      memcpy(p.data, (void *)(uintptr_t)p.local, p.len);
    }
    rc = enqueue(q, &p);
    if (rc) break;
  }
  if (rc && bad) *bad = wr;
  pthread_mutex_unlock(&lock);
  return rc;
}

static int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  fqp *q = (fqp *)qp;
  int rc = 0;
  pthread_mutex_lock(&lock);
  for (; wr; wr = wr->next) {
    if (q->rn == q->cap_recv) {
      rc = ENOMEM;
      if (bad) *bad = wr;
      break;
    }
    q->recv[(q->rhead + q->rn++) % q->cap_recv] = wr->wr_id;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

/* the extended send API (SRD) */
static void x_start(struct ibv_qp_ex *x) {
  fqp *q = (fqp *)x;
  pthread_mutex_lock(&lock);
  q->building = 1;
  q->nbatch = 0;
  pthread_mutex_unlock(&lock);
}

static pkt *x_new(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote) {
  fqp *q = (fqp *)x;
  if (q->nbatch == 64) return NULL;
  pkt *p = &q->batch[q->nbatch++];
  memset(p, 0, sizeof *p);
  p->wr_id = x->wr_id;
  p->signaled = (x->wr_flags & IBV_SEND_SIGNALED) != 0;
  p->rkey = rkey;
  p->remote = remote;
  p->dst_qpn = 0xffffffff; /* until wr_set_ud_addr */
  return p;
}

static void x_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote) { x_new(x, rkey, remote); }

static void x_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote, __be32 imm) {
  pkt *p = x_new(x, rkey, remote);
  if (p) {
    p->has_imm = 1;
    p->imm = imm;
  }
}

static void x_ud(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey) {
  fqp *q = (fqp *)x;
  (void)qkey;
  if (!q->nbatch) return;
  q->batch[q->nbatch - 1].dst_qpn = qpn;
  q->batch[q->nbatch - 1].dgid = ((fah *)ah)->gid;
}

static void x_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t len) {
  fqp *q = (fqp *)x;
  if (!q->nbatch) return;
  pkt *p = &q->batch[q->nbatch - 1];
  p->lkey = lkey;
  p->local = addr;
  p->len = len;
}

static void x_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg) {
  if (n == 0) x_sge(x, 0, 0, 0);
  else x_sge(x, sg[0].lkey, sg[0].addr, sg[0].length);
}

static int x_complete(struct ibv_qp_ex *x) {
  fqp *q = (fqp *)x;
  int rc = 0;
  pthread_mutex_lock(&lock);
  if (!q->building || x->qp_base.state != IBV_QPS_RTS) rc = EINVAL;
  for (int i = 0; i < q->nbatch && !rc; i++)
    if (q->batch[i].dst_qpn == 0xffffffff) rc = EINVAL; /* no address handle */
  if (!rc && q->posted - q->retired + (uint64_t)q->nbatch > (uint64_t)q->cap_send) rc = ENOMEM;
  for (int i = 0; i < q->nbatch && !rc; i++) rc = enqueue(q, &q->batch[i]);
  q->building = 0;
  q->nbatch = 0;
  pthread_mutex_unlock(&lock);
  return rc;
}

static void x_abort(struct ibv_qp_ex *x) {
  fqp *q = (fqp *)x;
  q->building = 0;
  q->nbatch = 0;
}

/* -- setup: mk_verbs_api ------------------------------------------------------------------------ */

static struct ibv_device **f_get_device_list(int *num) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < NDEV; i++) {
    fdev *d = &devs[i];
    d->index = i;
    d->efa = i >= NDEV / 2;
    snprintf(d->dev.name, sizeof d->dev.name, "%s%d", d->efa ? "fake_efa" : "fake_rc", i % (NDEV / 2));
    dev_list[i] = &d->dev;
  }
  dev_list[NDEV] = NULL;
  pthread_mutex_unlock(&lock);
  *num = NDEV;
  return dev_list;
}

static void f_free_device_list(struct ibv_device **l) { (void)l; }
static const char *f_get_device_name(struct ibv_device *d) { return d->name; }

static struct ibv_context *f_open_device(struct ibv_device *dev) {
  fdev *d = (fdev *)dev;
  fctx *c = calloc(1, sizeof *c);
  c->ctx.device = dev;
  c->ctx.ops.poll_cq = f_poll_cq;
  c->ctx.ops.post_send = f_post_send;
  c->ctx.ops.post_recv = f_post_recv;
  c->index = d->index % (NDEV / 2);
  c->efa = d->efa;
  return &c->ctx;
}

static int f_close_device(struct ibv_context *ctx) {
  free(ctx);
  return 0;
}

static int f_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a) {
  if (port != 1) return EINVAL;
  memset(a, 0, sizeof *a);
  a->state = IBV_PORT_ACTIVE;
  a->active_mtu = a->max_mtu = IBV_MTU_4096;
  a->lid = (uint16_t)(((fctx *)ctx)->index + 1);
  a->link_layer = ((fctx *)ctx)->efa ? IBV_LINK_LAYER_UNSPECIFIED : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

static int f_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) {
  if (port != 1 || index != 0) return EINVAL;
  memset(gid, 0, sizeof *gid);
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  gid->raw[15] = (uint8_t)(((fdev *)ctx->device)->index); /* the device, for routing SRD writes */
  return 0;
}

static struct ibv_pd *f_alloc_pd(struct ibv_context *ctx) {
  struct ibv_pd *pd = calloc(1, sizeof *pd);
  pd->context = ctx;
  return pd;
}

static int f_dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  if (fail_reg && len > 4096) { /* the region, not the transports' small buffers */
    errno = EFAULT;
    return NULL;
  }
  fmr *m = calloc(1, sizeof *m);
  pthread_mutex_lock(&lock);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = m->mr.rkey = next_key++;
  m->access = access;
  m->next = mrs;
  mrs = m;
  pthread_mutex_unlock(&lock);
  return &m->mr;
}

static struct ibv_mr *f_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd, int acc) {
  (void)pd, (void)off, (void)len, (void)iova, (void)fd, (void)acc;
  errno = EOPNOTSUPP;
  return NULL;
}

static int f_dereg_mr(struct ibv_mr *mr) {
  pthread_mutex_lock(&lock);
  for (fmr **p = &mrs; *p; p = &(*p)->next)
    if (&(*p)->mr == mr) {
      fmr *m = *p;
      *p = m->next;
      free(m);
      break;
    }
  pthread_mutex_unlock(&lock);
  return 0;
}

static struct ibv_cq *f_create_cq(struct ibv_context *ctx, int cqe, void *cc, struct ibv_comp_channel *ch, int v) {
  (void)cc, (void)ch, (void)v;
  fcq *c = calloc(1, sizeof *c);
  c->cq.context = ctx;
  c->cq.cqe = cqe;
  return &c->cq;
}

static int f_destroy_cq(struct ibv_cq *cq) {
  free(((fcq *)cq)->wc);
  free(cq);
  return 0;
}

static fqp *new_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *s, struct ibv_cq *r,
                   struct ibv_qp_cap cap, enum ibv_qp_type type) {
  fqp *q = calloc(1, sizeof *q);
  struct ibv_qp *b = &q->qpx.qp_base;
  b->context = ctx;
  b->pd = pd;
  b->send_cq = s;
  b->recv_cq = r;
  b->qp_type = type;
  b->state = IBV_QPS_RESET;
  q->ctx = (fctx *)ctx;
  q->scq = (fcq *)s;
  q->rcq = (fcq *)r;
  q->cap_send = (int)cap.max_send_wr;
  q->cap_recv = cap.max_recv_wr ? (int)cap.max_recv_wr : 1;
  q->recv = calloc(q->cap_recv, sizeof(uint64_t));
  pthread_mutex_lock(&lock);
  b->qp_num = next_qpn++;
  q->next = qps;
  qps = q;
  pthread_mutex_unlock(&lock);
  return q;
}

static struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
  if (a->qp_type != IBV_QPT_RC || a->cap.max_inline_data > MAX_INLINE) {
    errno = EINVAL;
    return NULL;
  }
  return &new_qp(pd->context, pd, a->send_cq, a->recv_cq, a->cap, IBV_QPT_RC)->qpx.qp_base;
}

static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
  fqp *q = (fqp *)qp;
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  if (a->qp_state == IBV_QPS_RTR && !q->srd) {
    if (!(mask & IBV_QP_DEST_QPN)) return EINVAL;
    q->dest_qpn = a->dest_qp_num;
  }
  qp->state = a->qp_state;
  return 0;
}

static int f_destroy_qp(struct ibv_qp *qp) {
  pthread_mutex_lock(&lock);
  for (fqp **p = &qps; *p; p = &(*p)->next)
    if (&(*p)->qpx.qp_base == qp) {
      *p = (*p)->next;
      break;
    }
  for (size_t i = 0; i < nfly;) /* its writes in flight are gone with it */
    if (&fly[i].src->qpx.qp_base == qp) {
      memmove(&fly[i], &fly[i + 1], (nfly - i - 1) * sizeof *fly);
      nfly--;
    } else {
      i++;
    }
  pthread_mutex_unlock(&lock);
  free(((fqp *)qp)->recv);
  free(qp);
  return 0;
}

static struct ibv_ah *f_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a) {
  if (!a->is_global) {
    errno = EINVAL;
    return NULL;
  }
  fah *h = calloc(1, sizeof *h);
  h->ah.context = pd->context;
  h->ah.pd = pd;
  h->gid = a->grh.dgid;
  return &h->ah;
}

static int f_destroy_ah(struct ibv_ah *ah) {
  free(ah);
  return 0;
}

static struct ibv_qp_ex *f_qp_to_qp_ex(struct ibv_qp *qp) { return ((fqp *)qp)->srd ? &((fqp *)qp)->qpx : NULL; }

static const char *f_wc_status_str(enum ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "unknown";
  }
}

static int f_efadv_query_device(struct ibv_context *ctx, struct efadv_device_attr *a, uint32_t inlen) {
  if (!((fctx *)ctx)->efa) return EOPNOTSUPP;
  memset(a, 0, inlen);
  a->device_caps = efa_caps;
  a->max_rdma_size = 1u << 30;
  return 0;
}

static struct ibv_qp *f_efadv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
                                           struct efadv_qp_init_attr *efa, uint32_t inlen) {
  const mk_efadv_qp_init_attr *e = (const mk_efadv_qp_init_attr *)efa;
  if (!((fctx *)ctx)->efa || a->qp_type != IBV_QPT_DRIVER || inlen != sizeof *e ||
      e->driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD || !(a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ||
      !(a->send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) ||
      ((e->flags & MK_EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV) && !(efa_caps & MK_EFADV_CAPS_UNSOLICITED_WRITE_RECV))) {
    errno = EINVAL;
    return NULL;
  }
  fqp *q = new_qp(ctx, a->pd, a->send_cq, a->recv_cq, a->cap, IBV_QPT_DRIVER);
  q->srd = 1;
  q->unsolicited = (e->flags & MK_EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV) != 0;
  q->qpx.wr_start = x_start;
  q->qpx.wr_complete = x_complete;
  q->qpx.wr_abort = x_abort;
  q->qpx.wr_rdma_write = x_write;
  q->qpx.wr_rdma_write_imm = x_write_imm;
  q->qpx.wr_set_ud_addr = x_ud;
  q->qpx.wr_set_sge = x_sge;
  q->qpx.wr_set_sge_list = x_sge_list;
  return &q->qpx.qp_base;
}

static const mk_verbs_api api = {
    f_get_device_list, f_free_device_list, f_get_device_name, f_open_device, f_close_device, f_query_port,
    f_query_gid, f_alloc_pd, f_dealloc_pd, f_reg_mr, f_reg_dmabuf_mr, f_dereg_mr, f_create_cq, f_destroy_cq,
    f_create_qp, f_modify_qp, f_destroy_qp, f_create_ah, f_destroy_ah, f_qp_to_qp_ex, f_wc_status_str,
    f_efadv_query_device, f_efadv_create_qp_ex,
};

/* -- control, for the tests ---------------------------------------------------------------------- */

const void *mk_fake_verbs_api(void) { return &api; }

/* Forget every rule, log entry and packet in flight; seed the order; set the EFA capabilities. */
void mk_fake_verbs_reset(uint64_t seed, uint32_t caps, int per_poll) {
  pthread_mutex_lock(&lock);
  rng = seed;
  efa_caps = caps;
  nrules = 0;
  nlog = 0;
  nfly = 0;
  fail_reg = 0;
  deliveries_per_poll = per_poll > 0 ? per_poll : 4;
  pthread_mutex_unlock(&lock);
}

/* Fail the nth write (0-based) that fake device `dev` posts, with work-completion `status`. */
void mk_fake_verbs_fail(int dev, uint64_t nth, int status) {
  pthread_mutex_lock(&lock);
  if (nrules < 16) rules[nrules++] = (rule){dev, status, nth};
  pthread_mutex_unlock(&lock);
}

/* Forget the log (between calls). */
void mk_fake_verbs_clear_log(void) {
  pthread_mutex_lock(&lock);
  nlog = 0;
  pthread_mutex_unlock(&lock);
}

/* Refuse to register regions (both the dmabuf and the peer-memory path). */
void mk_fake_verbs_fail_registration(int on) { fail_reg = on; }

/* Landed writes, 5 words each: source device, target device, address, length, (1 << 32 | imm) or 0. */
size_t mk_fake_verbs_log(uint64_t *out, size_t max_entries) {
  pthread_mutex_lock(&lock);
  size_t n = nlog / 5 < max_entries ? nlog / 5 : max_entries;
  memcpy(out, logv, 5 * n * sizeof *out);
  pthread_mutex_unlock(&lock);
  return n;
}
