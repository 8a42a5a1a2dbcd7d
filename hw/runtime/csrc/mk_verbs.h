/* What the two verbs transports share: the verbs calls they make outside the data path, as a table,
 * and an opened device with its protection domain and the registered region.
 *
 * The data path (ibv_post_send, ibv_post_recv, ibv_poll_cq, the ibv_wr_* calls) is libibverbs'
 * inline functions, which go through the context's and the QP's ops tables; every other call goes
 * through mk_verbs_api. The real table is filled by dlopen of libibverbs.so.1 (and libefa.so.1 for
 * SRD, libcuda.so.1 for GPU memory), so nothing links at import and a missing library is one error
 * naming it; a test passes its own table (tests/native/fake_verbs.c), whose objects carry its own
 * ops, so the same transport code runs against a harness with no NIC.
 */
#ifndef MK_VERBS_H
#define MK_VERBS_H
#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include "mk_net.h"

/* efadv bits newer than rdma-core 44 (CI's), by value: device_caps and efadv_qp_init_attr.flags. */
#define MK_EFADV_CAPS_RDMA_WRITE (1u << 3)              /* rdma-core 46 */
#define MK_EFADV_CAPS_UNSOLICITED_WRITE_RECV (1u << 4)  /* rdma-core 52 */
#define MK_EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV (1u << 0)

/* efadv_qp_init_attr as rdma-core 52 lays it out (44 has reserved[4] where flags and sl sit). */
typedef struct mk_efadv_qp_init_attr {
  uint64_t comp_mask;
  uint32_t driver_qp_type;
  uint16_t flags;
  uint8_t sl;
  uint8_t reserved;
} mk_efadv_qp_init_attr;

typedef struct mk_verbs_api {
  struct ibv_device **(*get_device_list)(int *num);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *dev);
  struct ibv_context *(*open_device)(struct ibv_device *dev);
  int (*close_device)(struct ibv_context *ctx);
  int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd,
                                  int access); /* NULL: rdma-core < 34 */
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
                              int vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
  int (*destroy_ah)(struct ibv_ah *ah);
  struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *qp);
  const char *(*wc_status_str)(enum ibv_wc_status status);
  /* libefa: verbs_srd only */
  int (*efadv_query_device)(struct ibv_context *ctx, struct efadv_device_attr *attr, uint32_t inlen);
  struct ibv_qp *(*efadv_create_qp_ex)(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
                                       struct efadv_qp_init_attr *efa, uint32_t inlen);
} mk_verbs_api;

typedef struct mk_verbs {
  const mk_verbs_api *api;
  mk_verbs_api own;          /* the real libraries' table, when no test table was given */
  void *lib, *efa_lib, *cuda_lib;
  struct ibv_device **list;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_mr *mr;         /* the region: flags, receive and send areas */
  struct ibv_port_attr port;
  union ibv_gid gid;
  int port_num, gid_index, dmabuf_fd;
  const char *reg_path;      /* how the region was registered: host, dmabuf, peer memory */
  char dev_name[64];
} mk_verbs;

/* Load the libraries (unless `api` is given), open the device, query its port and GID, allocate the
 * PD and register the region. `who` names the transport in errors. */
int mk_verbs_open(mk_verbs *v, const mk_net_opts *o, const void *api, int need_efa, const char *who, char *err,
                  int errlen);
void mk_verbs_close(mk_verbs *v);
const char *mk_verbs_status(const mk_verbs *v, enum ibv_wc_status s);
#endif
