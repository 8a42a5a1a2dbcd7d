/* verbs_srd: AWS EFA's Scalable Reliable Datagram, one SRD QP per rank (efadv) and an address
 * handle per peer.
 *
 * SRD is reliable but does not order separate writes, so a flag written after its data may land
 * first. Each op is therefore one RDMA WRITE with immediate: the data (none for a SIGNAL) and, in
 * the 32-bit immediate, the flag index and the epoch's low bits (mk_net.h). The receiving rank's
 * proxy polls its receive completions and only then publishes the flag, with a CPU store or a
 * loopback RDMA write through its own NIC (mk_publish): a flag is never set from the order of a
 * separate flag write. A SIGNAL is fenced at the sender: it waits until every write posted before
 * it to that peer has completed (mk_fence), so its flag cannot overtake their data.
 *
 * Receives are pre-posted and re-posted as they are used, unless the device offers unsolicited
 * write-recv (rdma-core 52+, feature-checked by value: rdma-core 44 has no name for it). RDMA write
 * needs efadv's RDMA-write capability (rdma-core 46+ reports it; checked at creation). Every work
 * request is signalled: SRD completions retire only their own request.
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_net.h"

#ifdef MK_HAVE_VERBS
#include <endian.h>
#include <errno.h>

#include "mk_verbs.h"

#define QKEY 0x4d4b5244u /* "MKRD" */
#define RECV_BIT (1ull << 63)

enum slot_kind { FREE = 0, DATA = 1, FLAG = 2, PUBLISH = 3 };

typedef struct srd_addr { /* follows mk_net_addr in the blob */
  uint8_t gid[16];
  uint32_t qpn, qkey;
} srd_addr;

typedef struct srd_conn {
  struct ibv_ah *ah;
  uint32_t qpn, qkey;
} srd_conn;

typedef struct sslot {
  mk_op op;
  int kind;
} sslot;

typedef struct srd_tr {
  mk_transport base;
  mk_net_opts o;
  uint8_t *peers;
  mk_verbs v;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_qp_ex *qpx;
  struct ibv_ah *self_ah;
  srd_conn *conns;
  mk_arrivals arr;
  mk_sender send; /* checks, room and the SIGNAL fence (net.c) */
  uint32_t chunk_bits, caps;
  int unsolicited;
  sslot *slots; /* sq_depth for writes, then rq_depth for loopback publishes */
  uint32_t *free_data, *free_pub, n_free_data, n_free_pub, n_slots;
  uint64_t *pub;  /* a slot's 8 bytes to write: an epoch (loopback publish, planted flag write) */
  struct ibv_mr *pub_mr;
  uint8_t scratch[64]; /* what a receive names; a write with immediate does not touch it */
  struct ibv_mr *scratch_mr;
  mk_backlog backlog; /* arrived flags waiting for a publish slot */
} srd_tr;

static uint32_t take(uint32_t *stack, uint32_t *n) { return stack[--*n]; }

static int post_recv(srd_tr *t, uint32_t i) {
  struct ibv_sge sge = {(uintptr_t)t->scratch, sizeof t->scratch, t->scratch_mr->lkey};
  struct ibv_recv_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = RECV_BIT | i;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  int rc = ibv_post_recv(t->qp, &wr, &bad);
  if (rc) snprintf(t->base.err, sizeof t->base.err, "ibv_post_recv failed: %s", strerror(rc));
  return rc ? -1 : 0;
}

/* One work request on an open wr_start: data with the immediate, a planted separate flag write, or
 * a loopback publish (slot kinds DATA, FLAG, PUBLISH). */
static void queue_write(srd_tr *t, uint32_t slot, uint32_t rkey, uint64_t remote, struct ibv_ah *ah, uint32_t qpn,
                        uint32_t lkey, uint64_t src, uint32_t bytes, int imm, uint32_t imm_data) {
  t->qpx->wr_id = slot;
  t->qpx->wr_flags = IBV_SEND_SIGNALED;
  if (imm) ibv_wr_rdma_write_imm(t->qpx, rkey, remote, htobe32(imm_data));
  else ibv_wr_rdma_write(t->qpx, rkey, remote);
  ibv_wr_set_ud_addr(t->qpx, ah, qpn, QKEY);
  if (bytes) ibv_wr_set_sge(t->qpx, lkey, src, bytes);
  else ibv_wr_set_sge_list(t->qpx, 0, NULL);
}

static int complete(srd_tr *t, const char *what) {
  int rc = ibv_wr_complete(t->qpx);
  if (rc) snprintf(t->base.err, sizeof t->base.err, "ibv_wr_complete (%s) failed: %s", what, strerror(rc));
  return rc ? -1 : 0;
}

/* Post ops the fence admitted, all to one peer; slots were checked by the caller. */
static int post_admitted(srd_tr *t, const mk_op *ops, int n) {
  srd_conn *c = &t->conns[ops[0].dst_rank];
  const mk_peer *peer = &t->send.peers[ops[0].dst_rank];
  ibv_wr_start(t->qpx);
  for (int i = 0; i < n; i++) {
    const mk_op *op = &ops[i];
    uint32_t s = take(t->free_data, &t->n_free_data);
    t->slots[s] = (sslot){*op, DATA};
    if (t->o.plant == MK_PLANT_FLAG_WRITE && op->bytes) { /* the defect: data, then the flag as its own write */
      queue_write(t, s, (uint32_t)peer->key, op->dst, c->ah, c->qpn, t->v.mr->lkey, op->src, (uint32_t)op->bytes,
                  0, 0);
      uint32_t f = take(t->free_data, &t->n_free_data);
      t->slots[f] = (sslot){*op, FLAG};
      t->pub[f] = op->epoch;
      queue_write(t, f, (uint32_t)peer->key, op->flag, c->ah, c->qpn, t->pub_mr->lkey, (uintptr_t)&t->pub[f], 8, 0,
                  0);
    } else {
      queue_write(t, s, (uint32_t)peer->key, op->bytes ? op->dst : op->flag, c->ah, c->qpn, t->v.mr->lkey,
                  op->src, (uint32_t)op->bytes, 1, mk_imm_encode(t->chunk_bits, op->chunk, op->epoch));
    }
  }
  if (complete(t, "RDMA write with immediate")) {
    t->base.err_op = ops[0];
    t->base.err_has_op = 1;
    return -1;
  }
  return 0;
}

static int post_batch(void *owner, const mk_op *ops, int n) { return post_admitted((srd_tr *)owner, ops, n); }

static int srd_post(mk_transport *b, const mk_op *ops, int n) {
  srd_tr *t = (srd_tr *)b;
  return mk_sender_post(b, &t->send, &t->o, ops, n);
}

/* Publish arrived flags in arrival order: a store, or a loopback write while publish slots last. */
static int publish(srd_tr *t) {
  while (t->backlog.n) {
    uint64_t *e = mk_backlog_front(&t->backlog);
    if (t->o.publish == MK_PUBLISH_STORE) {
      __atomic_store_n((uint64_t *)(uintptr_t)e[0], e[1], __ATOMIC_RELEASE);
    } else {
      if (!t->n_free_pub) return 0; /* later, when a publish completes */
      uint32_t s = take(t->free_pub, &t->n_free_pub);
      t->slots[s] = (sslot){{0}, PUBLISH};
      t->slots[s].op.flag = e[0];
      t->slots[s].op.epoch = t->pub[s] = e[1];
      ibv_wr_start(t->qpx);
      queue_write(t, s, t->v.mr->rkey, e[0], t->self_ah, t->qp->qp_num, t->pub_mr->lkey, (uintptr_t)&t->pub[s], 8, 0,
                  0);
      if (complete(t, "loopback publish")) return -1;
    }
    mk_backlog_pop(&t->backlog);
  }
  return 0;
}

static const char *peer_of_qpn(srd_tr *t, uint32_t qpn, char *buf, int n) {
  for (int r = 0; r < t->o.nranks; r++)
    if (t->send.peers[r].connected && t->conns[r].qpn == qpn) return snprintf(buf, n, "rank %d", r), buf;
  return snprintf(buf, n, "QP %u", qpn), buf;
}

static int on_receive(srd_tr *t, const struct ibv_wc *wc) {
  char who[32];
  if (wc->status != IBV_WC_SUCCESS) {
    snprintf(t->base.err, sizeof t->base.err, "rank %d: a write with immediate arriving from %s completed with '%s' "
             "(status %d, vendor error %#x)", t->o.rank, peer_of_qpn(t, wc->src_qp, who, sizeof who),
             mk_verbs_status(&t->v, wc->status), (int)wc->status, wc->vendor_err);
    return -1;
  }
  if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
    snprintf(t->base.err, sizeof t->base.err, "rank %d: a receive from %s carries no immediate", t->o.rank,
             peer_of_qpn(t, wc->src_qp, who, sizeof who));
    return -1;
  }
  uint64_t flag, epoch;
  if (mk_arrival(&t->arr, be32toh(wc->imm_data), &flag, &epoch, t->base.err, sizeof t->base.err)) return -1;
  if (mk_backlog_push(&t->backlog, flag, epoch))
    return snprintf(t->base.err, sizeof t->base.err, "rank %d: out of memory for arrived flags", t->o.rank), -1;
  if ((wc->wr_id & RECV_BIT) && post_recv(t, (uint32_t)(wc->wr_id & ~RECV_BIT))) return -1;
  return 0;
}

static int on_send(srd_tr *t, const struct ibv_wc *wc) {
  uint64_t s = wc->wr_id;
  if (s >= t->n_slots || t->slots[s].kind == FREE) {
    snprintf(t->base.err, sizeof t->base.err, "a completion names work request %llu, which this rank never posted",
             (unsigned long long)s);
    return -1;
  }
  sslot *sl = &t->slots[s];
  if (wc->status != IBV_WC_SUCCESS) {
    const char *what = sl->kind == PUBLISH ? "loopback publish of flag" : sl->kind == FLAG ? "flag write" : "write";
    t->base.err_op = sl->op;
    t->base.err_has_op = sl->kind != PUBLISH;
    snprintf(t->base.err, sizeof t->base.err, "rank %d -> rank %u: RDMA %s of chunk %u (epoch %llu) completed with "
             "'%s' (status %d, vendor error %#x)", t->o.rank, sl->kind == PUBLISH ? (uint32_t)t->o.rank : sl->op.dst_rank,
             what, sl->kind == PUBLISH ? (uint32_t)((sl->op.flag - t->o.flag_base) / 8) : sl->op.chunk,
             (unsigned long long)sl->op.epoch, mk_verbs_status(&t->v, wc->status), (int)wc->status, wc->vendor_err);
    return -1;
  }
  int kind = sl->kind, peer = (int)sl->op.dst_rank;
  sl->kind = FREE;
  if (kind == PUBLISH) {
    t->free_pub[t->n_free_pub++] = (uint32_t)s;
    return 0;
  }
  t->free_data[t->n_free_data++] = (uint32_t)s;
  mk_fence_completed(&t->send.fence, peer);
  return 0;
}

static int srd_progress(mk_transport *b) {
  srd_tr *t = (srd_tr *)b;
  struct ibv_wc wc[32];
  int n = ibv_poll_cq(t->cq, 32, wc);
  if (n < 0) return snprintf(b->err, sizeof b->err, "ibv_poll_cq failed (%d)", n), -1;
  for (int i = 0; i < n; i++) {
    b->activity++;
    /* a receive: its wr_id, or (unsolicited write-recv consumes none) its opcode */
    int recv = (wc[i].wr_id & RECV_BIT) || (wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV));
    if (recv ? on_receive(t, &wc[i]) : on_send(t, &wc[i])) return -1;
  }
  if (mk_sender_sweep(&t->send, t->o.nranks) || publish(t)) return -1;
  uint64_t pending = t->send.fence.total_out + t->send.fence.total_held + t->backlog.n + (t->o.rq_depth - t->n_free_pub);
  return (int)(pending > 0x7fffffff ? 0x7fffffff : pending);
}

static int srd_drain(mk_transport *b, uint64_t timeout_ns) {
  uint64_t deadline = mk_now_ns() + timeout_ns;
  int left;
  while ((left = srd_progress(b)) > 0) {
    if (mk_now_ns() > deadline) {
      snprintf(b->err, sizeof b->err, "%d SRD writes or publishes still in flight after %.3f s", left, timeout_ns / 1e9);
      return -1;
    }
  }
  return left;
}

static void srd_rebase(mk_transport *b, uint64_t epoch) { mk_arrivals_rebase(&((srd_tr *)b)->arr, epoch); }

static int srd_address(mk_transport *b, uint8_t *out, int max) {
  srd_tr *t = (srd_tr *)b;
  int len = (int)(sizeof(mk_net_addr) + sizeof(srd_addr));
  if (len > max) return snprintf(b->err, sizeof b->err, "address of %d bytes exceeds %d", len, max), -1;
  memset(out, 0, len);
  mk_net_fill_addr((mk_net_addr *)out, MK_NET_VERBS_SRD, &t->o, t->v.mr->rkey, (uint32_t)len);
  srd_addr *a = (srd_addr *)(out + sizeof(mk_net_addr));
  memcpy(a->gid, t->v.gid.raw, 16);
  a->qpn = t->qp->qp_num;
  a->qkey = QKEY;
  return len;
}

static struct ibv_ah *make_ah(srd_tr *t, const uint8_t *gid) {
  struct ibv_ah_attr at;
  memset(&at, 0, sizeof at);
  at.is_global = 1;
  memcpy(at.grh.dgid.raw, gid, 16);
  at.grh.sgid_index = (uint8_t)t->v.gid_index;
  at.port_num = (uint8_t)t->v.port_num;
  return t->v.api->create_ah(t->v.pd, &at);
}

static int srd_connect(mk_transport *b, int peer, const uint8_t *blob, int len) {
  srd_tr *t = (srd_tr *)b;
  if (peer < 0 || peer >= t->o.nranks || peer == t->o.rank || !t->peers[peer])
    return snprintf(b->err, sizeof b->err, "rank %d did not name rank %d a peer", t->o.rank, peer), -1;
  mk_peer p;
  if (mk_net_read_addr(blob, len, MK_NET_VERBS_SRD, peer, &t->o, &p, b->err, sizeof b->err)) return -1;
  if (len != (int)(sizeof(mk_net_addr) + sizeof(srd_addr)))
    return snprintf(b->err, sizeof b->err, "rank %d's SRD address has %d bytes", peer, len), -1;
  const srd_addr *a = (const srd_addr *)(blob + sizeof(mk_net_addr));
  srd_conn *c = &t->conns[peer];
  c->ah = make_ah(t, a->gid);
  if (!c->ah) return snprintf(b->err, sizeof b->err, "ibv_create_ah for rank %d failed: %s", peer, strerror(errno)), -1;
  c->qpn = a->qpn;
  c->qkey = a->qkey;
  t->send.peers[peer] = p;
  return 0;
}

static void srd_destroy(mk_transport *b) {
  srd_tr *t = (srd_tr *)b;
  if (t->v.api) {
    for (int r = 0; t->conns && r < t->o.nranks; r++)
      if (t->conns[r].ah) t->v.api->destroy_ah(t->conns[r].ah);
    if (t->self_ah) t->v.api->destroy_ah(t->self_ah);
    if (t->qp) t->v.api->destroy_qp(t->qp);
    if (t->cq) t->v.api->destroy_cq(t->cq);
    if (t->pub_mr) t->v.api->dereg_mr(t->pub_mr);
    if (t->scratch_mr) t->v.api->dereg_mr(t->scratch_mr);
  }
  mk_verbs_close(&t->v);
  mk_arrivals_free(&t->arr);
  mk_sender_free(&t->send);
  free(t->slots);
  free(t->free_data);
  free(t->free_pub);
  free(t->pub);
  mk_backlog_free(&t->backlog);
  free(t->conns);
  free(t->peers);
  free(t);
}

static int make_qp(srd_tr *t, char *err, int errlen) {
  struct efadv_device_attr da;
  memset(&da, 0, sizeof da);
  if (t->v.api->efadv_query_device(t->v.ctx, &da, sizeof da)) {
    snprintf(err, errlen, "verbs_srd: %s is not an EFA device (efadv_query_device failed)", t->v.dev_name);
    return -1;
  }
  t->caps = da.device_caps;
  if (!(t->caps & MK_EFADV_CAPS_RDMA_WRITE)) {
    snprintf(err, errlen, "verbs_srd: %s offers no RDMA write (efadv device_caps %#x lack bit 3: an EFA device "
             "before the second generation, or rdma-core < 46, which cannot report it); use 'ofi' with the efa "
             "provider", t->v.dev_name, t->caps);
    return -1;
  }
  t->unsolicited = (t->caps & MK_EFADV_CAPS_UNSOLICITED_WRITE_RECV) != 0;
  int npeers = 0;
  for (int r = 0; r < t->o.nranks; r++) npeers += t->peers[r];
  /* room for our writes, publishes and receives; with unsolicited write-recv, for every peer's
   * writes in flight to us too (no posted receive bounds them) */
  uint64_t cqe = 2ull * (t->o.sq_depth + t->o.rq_depth) + (t->unsolicited ? (uint64_t)npeers * t->o.sq_depth : 0);
  t->cq = t->v.api->create_cq(t->v.ctx, (int)(cqe > 1u << 22 ? 1u << 22 : cqe), NULL, NULL, 0);
  if (!t->cq) return snprintf(err, errlen, "verbs_srd: ibv_create_cq failed: %s", strerror(errno)), -1;
  struct ibv_qp_init_attr_ex ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = ia.recv_cq = t->cq;
  ia.cap.max_send_wr = t->o.sq_depth + t->o.rq_depth;
  ia.cap.max_recv_wr = t->o.rq_depth;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.qp_type = IBV_QPT_DRIVER;
  ia.pd = t->v.pd;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  mk_efadv_qp_init_attr ea;
  memset(&ea, 0, sizeof ea);
  ea.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
  if (t->unsolicited) ea.flags = MK_EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
  _Static_assert(sizeof ea == sizeof(struct efadv_qp_init_attr), "efadv_qp_init_attr layout");
  t->qp = t->v.api->efadv_create_qp_ex(t->v.ctx, &ia, (struct efadv_qp_init_attr *)&ea, sizeof ea);
  if (!t->qp) return snprintf(err, errlen, "verbs_srd: efadv_create_qp_ex (SRD) failed: %s", strerror(errno)), -1;
  t->qpx = t->v.api->qp_to_qp_ex(t->qp);
  if (!t->qpx) return snprintf(err, errlen, "verbs_srd: the SRD QP has no extended send API"), -1;
  struct ibv_qp_attr at;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_INIT;
  at.port_num = (uint8_t)t->v.port_num;
  at.qkey = QKEY;
  if (t->v.api->modify_qp(t->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return snprintf(err, errlen, "verbs_srd: modify_qp to INIT failed: %s", strerror(errno)), -1;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTR;
  if (t->v.api->modify_qp(t->qp, &at, IBV_QP_STATE))
    return snprintf(err, errlen, "verbs_srd: modify_qp to RTR failed: %s", strerror(errno)), -1;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTS;
  at.rnr_retry = 7;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN | ((da.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY) ? IBV_QP_RNR_RETRY : 0);
  if (t->v.api->modify_qp(t->qp, &at, mask))
    return snprintf(err, errlen, "verbs_srd: modify_qp to RTS failed: %s", strerror(errno)), -1;
  return 0;
}

mk_transport *mk_verbs_srd_transport(const mk_net_opts *o, const void *api, char *err, int errlen) {
  if (mk_net_check_opts(o, "verbs_srd", err, errlen)) return NULL;
  srd_tr *t = calloc(1, sizeof *t);
  t->peers = mk_net_adopt(&t->o, o);
  t->base.name = "verbs_srd";
  t->base.post = srd_post;
  t->base.progress = srd_progress;
  t->base.drain = srd_drain;
  t->base.destroy = srd_destroy;
  t->base.address = srd_address;
  t->base.connect = srd_connect;
  t->base.rebase = srd_rebase;
  t->conns = calloc(o->nranks, sizeof(srd_conn));
  t->n_slots = t->o.sq_depth + t->o.rq_depth;
  t->slots = calloc(t->n_slots, sizeof(sslot));
  t->pub = calloc(t->n_slots, sizeof(uint64_t));
  t->free_data = malloc(t->o.sq_depth * sizeof(uint32_t));
  t->free_pub = malloc(t->o.rq_depth * sizeof(uint32_t));
  for (uint32_t i = 0; i < t->o.sq_depth; i++) t->free_data[t->n_free_data++] = t->o.sq_depth - 1 - i;
  for (uint32_t i = 0; i < t->o.rq_depth; i++) t->free_pub[t->n_free_pub++] = t->n_slots - 1 - i;
  t->chunk_bits = mk_chunk_bits(o->n_flags);
  if (mk_arrivals_init(&t->arr, o->n_flags, o->flag_base, err, errlen) ||
      mk_sender_init(&t->send, o->nranks, o->plant == MK_PLANT_FLAG_WRITE ? 2 : 1, &t->n_free_data, t, post_batch,
                     srd_progress))
    goto fail;
  if (mk_verbs_open(&t->v, &t->o, api, 1, "verbs_srd", err, errlen) || make_qp(t, err, errlen)) goto fail;
  const int local = IBV_ACCESS_LOCAL_WRITE;
  t->pub_mr = t->v.api->reg_mr(t->v.pd, t->pub, t->n_slots * sizeof(uint64_t), local);
  t->scratch_mr = t->v.api->reg_mr(t->v.pd, t->scratch, sizeof t->scratch, local);
  if (!t->pub_mr || !t->scratch_mr) {
    snprintf(err, errlen, "verbs_srd: registering its small host buffers failed: %s", strerror(errno));
    goto fail;
  }
  t->self_ah = make_ah(t, t->v.gid.raw);
  if (!t->self_ah) {
    snprintf(err, errlen, "verbs_srd: ibv_create_ah to itself (loopback publish) failed: %s", strerror(errno));
    goto fail;
  }
  for (uint32_t i = 0; !t->unsolicited && i < t->o.rq_depth; i++)
    if (post_recv(t, i)) {
      snprintf(err, errlen, "verbs_srd: %s", t->base.err);
      goto fail;
    }
  return &t->base;
fail:
  srd_destroy(&t->base);
  return NULL;
}

/* Whether the device offered unsolicited write-recv (tests and doctor). */
int mk_srd_unsolicited(mk_transport *b) { return ((srd_tr *)b)->unsolicited; }

#else /* built without infiniband/verbs.h */

mk_transport *mk_verbs_srd_transport(const mk_net_opts *o, const void *api, char *err, int errlen) {
  (void)o;
  (void)api;
  snprintf(err, errlen, "verbs_srd was built without infiniband/verbs.h (install libibverbs-dev and rebuild)");
  return NULL;
}

int mk_srd_unsolicited(mk_transport *b) {
  (void)b;
  return 0;
}
#endif
