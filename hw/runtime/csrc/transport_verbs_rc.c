/* verbs_rc: InfiniBand (or RoCE) reliable connections, one RC QP per peer.
 *
 * Each op is an RDMA WRITE of its data, then an RDMA WRITE of its epoch (8 bytes, inline) into the
 * peer's arrival flag, on the same QP: RC executes a QP's writes in order, so the flag is never
 * visible before its data and no receiving proxy is needed; a SIGNAL is the flag write alone, after
 * every write posted before it. Signalling is selective: the last work request of every post (and
 * one in `signal_every`) asks for a completion, and on RC a completion retires every request posted
 * before it on that QP. An error completion (always generated, signalled or not) names the peer, the
 * chunk, the epoch and the work-completion status; the op is kept per send-queue slot for that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_net.h"

#ifdef MK_HAVE_VERBS
#include <errno.h>

#include "mk_verbs.h"

typedef struct rc_addr { /* follows mk_net_addr in the blob */
  uint16_t lid;
  uint8_t link_layer, mtu;
  uint32_t reserved;
  uint8_t gid[16];
  uint32_t qpn[]; /* per rank: this rank's QP for that peer (0: none) */
} rc_addr;

typedef struct slot {
  mk_op op;
  int is_flag;
} slot;

typedef struct rc_conn {
  struct ibv_qp *qp;
  mk_peer peer;
  uint64_t posted, done; /* work-request sequence numbers: posted, and retired by completions */
  slot *slots;           /* sq_depth entries, by sequence number */
} rc_conn;

typedef struct rc_tr {
  mk_transport base;
  mk_net_opts o;
  uint8_t *peers;
  mk_verbs v;
  struct ibv_cq *cq;
  rc_conn *conns;
  uint64_t inflight;
  uint32_t since_signal;
} rc_tr;

#define SEQ_BITS 48
#define SEQ_MASK ((1ull << SEQ_BITS) - 1)

static int rc_progress(mk_transport *b) {
  rc_tr *t = (rc_tr *)b;
  struct ibv_wc wc[32];
  int n = ibv_poll_cq(t->cq, 32, wc);
  if (n < 0) return snprintf(b->err, sizeof b->err, "ibv_poll_cq failed (%d)", n), -1;
  for (int i = 0; i < n; i++) {
    uint32_t peer = (uint32_t)(wc[i].wr_id >> SEQ_BITS);
    uint64_t seq = wc[i].wr_id & SEQ_MASK;
    if (peer >= (uint32_t)t->o.nranks || !t->conns[peer].qp) {
      snprintf(b->err, sizeof b->err, "a completion names work request %#llx, which this rank never posted",
               (unsigned long long)wc[i].wr_id);
      return -1;
    }
    rc_conn *c = &t->conns[peer];
    const slot *s = &c->slots[seq % t->o.sq_depth];
    if (wc[i].status != IBV_WC_SUCCESS) {
      b->err_op = s->op;
      b->err_has_op = 1;
      snprintf(b->err, sizeof b->err, "rank %d -> rank %u: RDMA write of chunk %u's %s (epoch %llu) completed with "
               "'%s' (status %d, vendor error %#x)", t->o.rank, peer, s->op.chunk, s->is_flag ? "flag" : "data",
               (unsigned long long)s->op.epoch, mk_verbs_status(&t->v, wc[i].status), (int)wc[i].status,
               wc[i].vendor_err);
      return -1;
    }
    /* RC: this completion retires every request posted before it on the QP (2^48 requests before
     * the sequence wraps: nine years at a million a second) */
    if (seq + 1 > c->done) {
      t->inflight -= seq + 1 - c->done;
      c->done = seq + 1;
    }
    b->activity++;
  }
  return (int)(t->inflight > 0x7fffffff ? 0x7fffffff : t->inflight);
}

/* Wait (bounded) until `need` more work requests fit on the QP. */
static int room(rc_tr *t, rc_conn *c, uint32_t need, uint32_t peer) {
  uint64_t deadline = 0;
  while (c->posted - c->done + need > t->o.sq_depth) {
    if (rc_progress(&t->base) < 0) return -1;
    uint64_t now = mk_now_ns();
    if (!deadline) deadline = now + t->o.timeout_ns;
    else if (now > deadline) {
      snprintf(t->base.err, sizeof t->base.err, "rank %d: the send queue to rank %u stayed full (%u requests) for "
               "%.3f s", t->o.rank, peer, t->o.sq_depth, t->o.timeout_ns / 1e9);
      return -1;
    }
  }
  return 0;
}

static int rc_post(mk_transport *b, const mk_op *ops, int n) {
  rc_tr *t = (rc_tr *)b;
  struct ibv_send_wr wr[2 * MK_MAX_BATCH], *bad = NULL;
  struct ibv_sge sge[2 * MK_MAX_BATCH];
  uint64_t epochs[MK_MAX_BATCH];
  if (n < 1 || n > MK_MAX_BATCH) return snprintf(b->err, sizeof b->err, "post of %d ops", n), -1;
  const uint32_t peer = ops[0].dst_rank;
  rc_conn *c = peer < (uint32_t)t->o.nranks ? &t->conns[peer] : NULL;
  uint32_t need = 0;
  static const mk_peer none;
  for (int i = 0; i < n; i++) {
    const mk_peer *p = c && c->qp && ops[i].dst_rank == peer ? &c->peer : &none;
    if (mk_net_check_op(b, &t->o, p, &ops[i])) return -1;
    need += ops[i].bytes ? 2 : 1;
  }
  if (room(t, c, need, peer)) return -1;
  int w = 0;
  for (int i = 0; i < n; i++) {
    for (int is_flag = ops[i].bytes ? 0 : 1; is_flag < 2; is_flag++) {
      memset(&wr[w], 0, sizeof wr[w]);
      uint64_t seq = c->posted + w;
      wr[w].wr_id = ((uint64_t)peer << SEQ_BITS) | (seq & SEQ_MASK);
      wr[w].opcode = IBV_WR_RDMA_WRITE;
      wr[w].sg_list = &sge[w];
      wr[w].num_sge = 1;
      wr[w].wr.rdma.rkey = (uint32_t)c->peer.key;
      if (is_flag) {
        epochs[i] = ops[i].epoch;
        sge[w] = (struct ibv_sge){(uintptr_t)&epochs[i], 8, 0};
        wr[w].send_flags = IBV_SEND_INLINE;
        wr[w].wr.rdma.remote_addr = ops[i].flag;
      } else {
        sge[w] = (struct ibv_sge){ops[i].src, (uint32_t)ops[i].bytes, t->v.mr->lkey};
        wr[w].wr.rdma.remote_addr = ops[i].dst;
      }
      if (++t->since_signal >= t->o.signal_every || (i == n - 1 && is_flag)) {
        wr[w].send_flags |= IBV_SEND_SIGNALED;
        t->since_signal = 0;
      }
      c->slots[seq % t->o.sq_depth] = (slot){ops[i], is_flag};
      if (w) wr[w - 1].next = &wr[w];
      w++;
    }
  }
  int rc = ibv_post_send(c->qp, wr, &bad);
  if (rc) {
    int k = bad ? (int)(bad - wr) : 0;
    b->err_op = c->slots[(c->posted + k) % t->o.sq_depth].op;
    b->err_has_op = 1;
    snprintf(b->err, sizeof b->err, "ibv_post_send to rank %u failed at request %d of %d: %s", peer, k, w,
             strerror(rc));
    return -1;
  }
  c->posted += w;
  t->inflight += w;
  return 0;
}

static int rc_drain(mk_transport *b, uint64_t timeout_ns) {
  rc_tr *t = (rc_tr *)b;
  uint64_t deadline = mk_now_ns() + timeout_ns;
  while (t->inflight) {
    if (rc_progress(b) < 0) return -1;
    if (mk_now_ns() > deadline) {
      snprintf(b->err, sizeof b->err, "%llu RDMA writes still in flight after %.3f s",
               (unsigned long long)t->inflight, timeout_ns / 1e9);
      return -1;
    }
  }
  return 0;
}

static int rc_address(mk_transport *b, uint8_t *out, int max) {
  rc_tr *t = (rc_tr *)b;
  int len = (int)(sizeof(mk_net_addr) + sizeof(rc_addr) + 4 * (size_t)t->o.nranks);
  if (len > max) return snprintf(b->err, sizeof b->err, "address of %d bytes exceeds %d", len, max), -1;
  memset(out, 0, len);
  mk_net_fill_addr((mk_net_addr *)out, MK_NET_VERBS_RC, &t->o, t->v.mr->rkey, (uint32_t)len);
  rc_addr *a = (rc_addr *)(out + sizeof(mk_net_addr));
  a->lid = t->v.port.lid;
  a->link_layer = t->v.port.link_layer;
  a->mtu = (uint8_t)t->v.port.active_mtu;
  memcpy(a->gid, t->v.gid.raw, 16);
  for (int r = 0; r < t->o.nranks; r++) a->qpn[r] = t->conns[r].qp ? t->conns[r].qp->qp_num : 0;
  return len;
}

static int rc_connect(mk_transport *b, int peer, const uint8_t *blob, int len) {
  rc_tr *t = (rc_tr *)b;
  if (peer < 0 || peer >= t->o.nranks || !t->conns[peer].qp)
    return snprintf(b->err, sizeof b->err, "rank %d has no QP for rank %d (not named a peer)", t->o.rank, peer), -1;
  rc_conn *c = &t->conns[peer];
  mk_peer p;
  if (mk_net_read_addr(blob, len, MK_NET_VERBS_RC, peer, &t->o, &p, b->err, sizeof b->err)) return -1;
  if (len != (int)(sizeof(mk_net_addr) + sizeof(rc_addr) + 4 * (size_t)t->o.nranks))
    return snprintf(b->err, sizeof b->err, "rank %d's RC address has %d bytes", peer, len), -1;
  const rc_addr *a = (const rc_addr *)(blob + sizeof(mk_net_addr));
  if (!a->qpn[t->o.rank])
    return snprintf(b->err, sizeof b->err, "rank %d made no QP for rank %d", peer, t->o.rank), -1;
  struct ibv_qp_attr at;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = a->mtu < t->v.port.active_mtu ? (enum ibv_mtu)a->mtu : t->v.port.active_mtu;
  at.dest_qp_num = a->qpn[t->o.rank];
  at.rq_psn = 0;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 12;
  at.ah_attr.port_num = (uint8_t)t->v.port_num;
  at.ah_attr.dlid = a->lid;
  if (t->v.port.link_layer != IBV_LINK_LAYER_INFINIBAND || t->o.gid_index >= 0) { /* RoCE: routed by GID */
    at.ah_attr.is_global = 1;
    memcpy(at.ah_attr.grh.dgid.raw, a->gid, 16);
    at.ah_attr.grh.sgid_index = (uint8_t)t->v.gid_index;
    at.ah_attr.grh.hop_limit = 64;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (t->v.api->modify_qp(c->qp, &at, mask))
    return snprintf(b->err, sizeof b->err, "modify_qp to RTR (rank %d) failed: %s", peer, strerror(errno)), -1;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTS;
  at.timeout = 14;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.sq_psn = 0;
  at.max_rd_atomic = 1;
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  if (t->v.api->modify_qp(c->qp, &at, mask))
    return snprintf(b->err, sizeof b->err, "modify_qp to RTS (rank %d) failed: %s", peer, strerror(errno)), -1;
  c->peer = p;
  return 0;
}

static void rc_destroy(mk_transport *b) {
  rc_tr *t = (rc_tr *)b;
  if (t->conns) {
    for (int r = 0; r < t->o.nranks; r++) {
      if (t->conns[r].qp) t->v.api->destroy_qp(t->conns[r].qp);
      free(t->conns[r].slots);
    }
  }
  if (t->cq) t->v.api->destroy_cq(t->cq);
  mk_verbs_close(&t->v);
  free(t->conns);
  free(t->peers);
  free(t);
}

mk_transport *mk_verbs_rc_transport(const mk_net_opts *o, const void *api, char *err, int errlen) {
  if (mk_net_check_opts(o, "verbs_rc", err, errlen)) return NULL;
  rc_tr *t = calloc(1, sizeof *t);
  t->peers = mk_net_adopt(&t->o, o);
  t->base.name = "verbs_rc";
  t->base.post = rc_post;
  t->base.progress = rc_progress;
  t->base.drain = rc_drain;
  t->base.destroy = rc_destroy;
  t->base.address = rc_address;
  t->base.connect = rc_connect;
  t->conns = calloc(o->nranks, sizeof(rc_conn));
  if (mk_verbs_open(&t->v, &t->o, api, 0, "verbs_rc", err, errlen)) goto fail;
  int npeers = 0;
  for (int r = 0; r < o->nranks; r++) npeers += r != o->rank && t->peers[r];
  t->cq = t->v.api->create_cq(t->v.ctx, (int)(t->o.sq_depth * (npeers ? npeers : 1)), NULL, NULL, 0);
  if (!t->cq) {
    snprintf(err, errlen, "verbs_rc: ibv_create_cq on %s failed: %s", t->v.dev_name, strerror(errno));
    goto fail;
  }
  for (int r = 0; r < o->nranks; r++) {
    if (r == o->rank || !t->peers[r]) continue;
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = t->cq;
    ia.cap.max_send_wr = t->o.sq_depth;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 16;
    ia.qp_type = IBV_QPT_RC;
    rc_conn *c = &t->conns[r];
    c->qp = t->v.api->create_qp(t->v.pd, &ia);
    if (!c->qp) {
      snprintf(err, errlen, "verbs_rc: ibv_create_qp (RC, for rank %d) on %s failed: %s", r, t->v.dev_name,
               strerror(errno));
      goto fail;
    }
    c->slots = calloc(t->o.sq_depth, sizeof(slot));
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_INIT;
    at.port_num = (uint8_t)t->v.port_num;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (t->v.api->modify_qp(c->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
      snprintf(err, errlen, "verbs_rc: modify_qp to INIT (rank %d) failed: %s", r, strerror(errno));
      goto fail;
    }
  }
  return &t->base;
fail:
  rc_destroy(&t->base);
  return NULL;
}

#else /* built without infiniband/verbs.h */

mk_transport *mk_verbs_rc_transport(const mk_net_opts *o, const void *api, char *err, int errlen) {
  (void)o;
  (void)api;
  snprintf(err, errlen, "verbs_rc was built without infiniband/verbs.h (install libibverbs-dev and rebuild)");
  return NULL;
}
#endif
