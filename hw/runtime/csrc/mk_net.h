/* Network transports between nodes: what they share behind mk_transport.h.
 *
 * Each rank registers one region (its symmetric buffer: arrival flags, receive area, send area),
 * publishes an address blob (mk_net_addr, then the transport's own fields) through the bootstrap
 * store, and connects to its peers from theirs. The proxy resolves every command to addresses in
 * the destination's region (from the peer's blob) after checking them against that region, and a
 * transport checks them again against its registrations before posting anything.
 *
 *   verbs_rc  (transport_verbs_rc.c): one RC QP per peer; data RDMA WRITE, then the flag's RDMA
 *             WRITE on the same QP (RC delivers in order): no receiving proxy.
 *   verbs_srd (transport_verbs_srd.c): one EFA SRD QP, an address handle per peer; data as RDMA
 *             WRITE with immediate, and the receiving proxy publishes the flag on the receive
 *             completion (SRD does not order separate writes, so a flag written after the data
 *             could land first).
 *   ofi       (transport_ofi.c): libfabric fi_writedata with remote CQ data, the same receiving
 *             protocol as SRD.
 *
 * The immediate (32 bits) carries the flag index in its low `chunk_bits` and the epoch's low bits
 * above; the receiver rebuilds the epoch from the last one it published on that flag (mk_arrivals):
 * consecutive epochs of one flag must differ by less than 2^(32 - chunk_bits).
 */
#ifndef MK_NET_H
#define MK_NET_H
#include <stdint.h>

#include "mk_ring.h"
#include "mk_transport.h"

enum mk_net_kind { MK_NET_VERBS_RC = 1, MK_NET_VERBS_SRD = 2, MK_NET_OFI = 3 };
enum mk_mem_kind { MK_MEM_HOST = 0, MK_MEM_CUDA = 1 };
enum mk_publish {
  MK_PUBLISH_STORE = 0,    /* a CPU store: flags the host can address (host memory, a mapped BAR) */
  MK_PUBLISH_LOOPBACK = 1, /* an RDMA write to this rank's own flag through its NIC (GPU memory) */
};
/* A planted defect, for the harness tests only: the flag goes as its own write after the data (what
 * RC does), which SRD and libfabric may deliver first. */
enum mk_plant { MK_PLANT_NONE = 0, MK_PLANT_FLAG_WRITE = 1 };

typedef struct mk_net_opts {
  int32_t rank, nranks;
  uint32_t n_flags;                /* arrival flags per rank, the same on every rank */
  int32_t mem_kind, cuda_device;   /* enum mk_mem_kind */
  uint64_t mem_base, mem_bytes;    /* the region peers write into and this rank sends from */
  uint64_t flag_base;              /* this rank's n_flags arrival flags, inside the region */
  const uint8_t *peers;            /* nranks entries, 1: a peer this rank connects to */
  char device[64];                 /* verbs: device name ("" = the first); ofi: unused */
  char provider[64];               /* ofi: provider ("" = discover: efa, cxi, verbs;ofi_rxm, tcp;ofi_rxm) */
  int32_t port, gid_index;         /* verbs: port number, GID index (-1: LID on InfiniBand, else 0) */
  uint32_t sq_depth, rq_depth;     /* work requests in flight per send queue; receives kept posted */
  uint32_t signal_every;           /* RC: a completion every this many work requests, and per post */
  int32_t publish;                 /* enum mk_publish (receiving transports) */
  int32_t plant;                   /* enum mk_plant */
  uint64_t timeout_ns;             /* the longest post() waits for send-queue room */
} mk_net_opts;

#define MK_NET_MAGIC 0x314e4b4du /* "MKN1" */
#define MK_NET_ADDR_MAX 8192

/* The start of every address blob. */
typedef struct mk_net_addr {
  uint32_t magic, kind; /* kind: enum mk_net_kind */
  int32_t rank, nranks;
  uint64_t base, bytes; /* the registered region, in its owner's address space */
  uint64_t key;         /* rkey (verbs) or MR key (ofi) */
  uint32_t n_flags, len; /* len: the whole blob, this header included */
} mk_net_addr;

/* A peer as a sender sees it: its region, for bounds and addressing. */
typedef struct mk_peer {
  int connected;
  uint64_t base, bytes, key;
} mk_peer;

mk_transport *mk_verbs_rc_transport(const mk_net_opts *o, const void *api, char *err, int errlen);
mk_transport *mk_verbs_srd_transport(const mk_net_opts *o, const void *api, char *err, int errlen);
mk_transport *mk_ofi_transport(const mk_net_opts *o, char *err, int errlen);

/* Common checks. */
int mk_net_check_opts(const mk_net_opts *o, const char *name, char *err, int errlen);
/* A transport's own copy of its options: defaults for the zero fields, its own copy of the peer mask
 * (returned, for the transport to free). */
uint8_t *mk_net_adopt(mk_net_opts *dst, const mk_net_opts *src);
void mk_net_fill_addr(mk_net_addr *a, uint32_t kind, const mk_net_opts *o, uint64_t key, uint32_t len);
int mk_net_read_addr(const uint8_t *blob, int len, uint32_t kind, int peer, const mk_net_opts *o, mk_peer *out,
                     char *err, int errlen);
/* 0 if [addr, addr + bytes) lies in [base, base + size), else -1 with `err` naming `what`. */
int mk_net_in(uint64_t addr, uint64_t bytes, uint64_t base, uint64_t size, const char *what, int rank, char *err,
              int errlen);
int mk_net_check_op(mk_transport *t, const mk_net_opts *o, const mk_peer *peer, const mk_op *op);

/* The receiver's side of the immediate: each flag's last published epoch. */
typedef struct mk_arrivals {
  uint64_t *last;
  uint32_t n_flags, chunk_bits;
  uint64_t flag_base;
} mk_arrivals;

uint32_t mk_chunk_bits(uint32_t n_flags);
int mk_arrivals_init(mk_arrivals *a, uint32_t n_flags, uint64_t flag_base, char *err, int errlen);
void mk_arrivals_free(mk_arrivals *a);
uint32_t mk_imm_encode(uint32_t chunk_bits, uint32_t chunk, uint64_t epoch);
/* The flag address and full epoch of an immediate; -1 (with `err`) for a flag index out of range. */
int mk_arrival(mk_arrivals *a, uint32_t imm, uint64_t *flag, uint64_t *epoch, char *err, int errlen);
void mk_arrivals_rebase(mk_arrivals *a, uint64_t epoch);

/* Arrived flags a receiving proxy has yet to publish, in arrival order (a growing ring). */
typedef struct mk_backlog {
  uint64_t *pairs; /* (flag address, epoch) */
  uint32_t head, n, cap;
} mk_backlog;

int mk_backlog_push(mk_backlog *b, uint64_t flag, uint64_t epoch);
void mk_backlog_free(mk_backlog *b);
static inline uint64_t *mk_backlog_front(mk_backlog *b) { return &b->pairs[2 * b->head]; }
static inline void mk_backlog_pop(mk_backlog *b) {
  b->head = (b->head + 1) % b->cap;
  b->n--;
}

/* A sender's fence on an unordered transport: a SIGNAL (no data) waits until every write posted
 * before it to its peer has completed, and what is posted after it waits behind it. */
typedef struct mk_held {
  mk_op *ops;
  uint32_t head, n, cap;
} mk_held;

typedef struct mk_fence {
  uint32_t *outstanding; /* per peer: posted writes not yet completed */
  mk_held *held;         /* per peer, in posting order */
  int nranks;
  uint64_t total_out, total_held;
} mk_fence;

int mk_fence_init(mk_fence *f, int nranks);
void mk_fence_free(mk_fence *f);
/* 1: post `op` now (then call mk_fence_posted); 0: it was queued behind the fence. */
int mk_fence_admit(mk_fence *f, const mk_op *op);
void mk_fence_posted(mk_fence *f, int peer);
void mk_fence_completed(mk_fence *f, int peer);
/* Pops into `out` (at most max) the held ops of `peer` that may now be posted. */
int mk_fence_release(mk_fence *f, int peer, mk_op *out, int max);

/* The sending side of the unordered transports (verbs_srd, ofi): every op checked against the
 * peers' registrations, send-queue room waited for (bounded), then the fence; `post` receives the
 * ops admitted, to one peer, with room for them. An op counts as posted when admitted, so a SIGNAL
 * later in the same batch waits for it. */
typedef struct mk_sender {
  mk_fence fence;
  mk_peer *peers;    /* per rank, filled by connect */
  uint32_t per_op;   /* writes an op takes (2 with the planted flag write) */
  uint32_t *n_free;  /* the transport's free send slots */
  void *owner;
  int (*post)(void *owner, const mk_op *ops, int n);
  int (*progress)(mk_transport *t);
} mk_sender;

int mk_sender_init(mk_sender *s, int nranks, uint32_t per_op, uint32_t *n_free, void *owner,
                   int (*post)(void *, const mk_op *, int), int (*progress)(mk_transport *));
void mk_sender_free(mk_sender *s);
int mk_sender_post(mk_transport *t, mk_sender *s, const mk_net_opts *o, const mk_op *ops, int n);
/* Post the held ops that may go now (after a SIGNAL's writes completed), while slots last. */
int mk_sender_sweep(mk_sender *s, int nranks);
#endif
