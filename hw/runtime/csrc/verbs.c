/* The verbs transports' setup (mk_verbs.h): libraries by dlopen, the device, its port and GID, the
 * protection domain, and the region's registration: host memory directly; GPU memory as a dmabuf
 * (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr), else through the peer-memory path
 * (ibv_reg_mr on the device pointer, which needs the nvidia_peermem module), each failure named. */
#include <stdio.h>

#ifdef MK_HAVE_VERBS
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mk_verbs.h"

#define LOAD(lib, field, sym, libname)                                                                     \
  if (!(*(void **)&v->own.field = dlsym(lib, sym))) {                                                      \
    snprintf(err, errlen, "%s: %s lacks %s (rdma-core too old?)", who, libname, sym);                      \
    return -1;                                                                                             \
  }

static int load_verbs(mk_verbs *v, int need_efa, const char *who, char *err, int errlen) {
  v->lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!v->lib) {
    snprintf(err, errlen, "%s needs libibverbs.so.1 (rdma-core), which could not be loaded: %s", who, dlerror());
    return -1;
  }
  LOAD(v->lib, get_device_list, "ibv_get_device_list", "libibverbs.so.1");
  LOAD(v->lib, free_device_list, "ibv_free_device_list", "libibverbs.so.1");
  LOAD(v->lib, get_device_name, "ibv_get_device_name", "libibverbs.so.1");
  LOAD(v->lib, open_device, "ibv_open_device", "libibverbs.so.1");
  LOAD(v->lib, close_device, "ibv_close_device", "libibverbs.so.1");
  LOAD(v->lib, query_port, "ibv_query_port", "libibverbs.so.1");
  LOAD(v->lib, query_gid, "ibv_query_gid", "libibverbs.so.1");
  LOAD(v->lib, alloc_pd, "ibv_alloc_pd", "libibverbs.so.1");
  LOAD(v->lib, dealloc_pd, "ibv_dealloc_pd", "libibverbs.so.1");
  LOAD(v->lib, reg_mr, "ibv_reg_mr", "libibverbs.so.1");
  LOAD(v->lib, dereg_mr, "ibv_dereg_mr", "libibverbs.so.1");
  LOAD(v->lib, create_cq, "ibv_create_cq", "libibverbs.so.1");
  LOAD(v->lib, destroy_cq, "ibv_destroy_cq", "libibverbs.so.1");
  LOAD(v->lib, create_qp, "ibv_create_qp", "libibverbs.so.1");
  LOAD(v->lib, modify_qp, "ibv_modify_qp", "libibverbs.so.1");
  LOAD(v->lib, destroy_qp, "ibv_destroy_qp", "libibverbs.so.1");
  LOAD(v->lib, create_ah, "ibv_create_ah", "libibverbs.so.1");
  LOAD(v->lib, destroy_ah, "ibv_destroy_ah", "libibverbs.so.1");
  LOAD(v->lib, qp_to_qp_ex, "ibv_qp_to_qp_ex", "libibverbs.so.1");
  LOAD(v->lib, wc_status_str, "ibv_wc_status_str", "libibverbs.so.1");
  *(void **)&v->own.reg_dmabuf_mr = dlsym(v->lib, "ibv_reg_dmabuf_mr"); /* optional: rdma-core 34+ */
  if (need_efa) {
    v->efa_lib = dlopen("libefa.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!v->efa_lib) {
      snprintf(err, errlen, "%s needs libefa.so.1 (rdma-core's EFA provider), which could not be loaded: %s", who,
               dlerror());
      return -1;
    }
    LOAD(v->efa_lib, efadv_query_device, "efadv_query_device", "libefa.so.1");
    LOAD(v->efa_lib, efadv_create_qp_ex, "efadv_create_qp_ex", "libefa.so.1");
  }
  v->api = &v->own;
  return 0;
}

/* The CUDA driver calls a dmabuf export needs, by dlopen: CUresult is an int, a device pointer 64 bits. */
typedef struct cuda_dmabuf {
  int (*Init)(unsigned);
  int (*DeviceGet)(int *, int);
  int (*DeviceGetAttribute)(int *, int, int);
  int (*MemGetAddressRange)(unsigned long long *, size_t *, unsigned long long);
  int (*MemGetHandleForAddressRange)(void *, unsigned long long, size_t, int, unsigned long long);
} cuda_dmabuf;

#define CU_ATTR_DMA_BUF_SUPPORTED 124
#define CU_HANDLE_DMA_BUF_FD 1

/* A dmabuf fd over the whole CUDA allocation holding [base, base + bytes), and the offset of base in
 * it; -1 with `why` filled. */
static int dmabuf_export(mk_verbs *v, const mk_net_opts *o, uint64_t *offset, char *why, int n) {
  cuda_dmabuf cu;
  v->cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!v->cuda_lib) return snprintf(why, n, "libcuda.so.1 could not be loaded: %s", dlerror()), -1;
  if (!(*(void **)&cu.Init = dlsym(v->cuda_lib, "cuInit")) ||
      !(*(void **)&cu.DeviceGet = dlsym(v->cuda_lib, "cuDeviceGet")) ||
      !(*(void **)&cu.DeviceGetAttribute = dlsym(v->cuda_lib, "cuDeviceGetAttribute")) ||
      !(*(void **)&cu.MemGetAddressRange = dlsym(v->cuda_lib, "cuMemGetAddressRange_v2")))
    return snprintf(why, n, "the CUDA driver lacks cuInit/cuDeviceGetAttribute/cuMemGetAddressRange"), -1;
  if (!(*(void **)&cu.MemGetHandleForAddressRange = dlsym(v->cuda_lib, "cuMemGetHandleForAddressRange")))
    return snprintf(why, n, "the CUDA driver lacks cuMemGetHandleForAddressRange (CUDA 11.7+)"), -1;
  int dev = 0, ok = 0, r;
  if ((r = cu.Init(0)) || (r = cu.DeviceGet(&dev, o->cuda_device)) ||
      (r = cu.DeviceGetAttribute(&ok, CU_ATTR_DMA_BUF_SUPPORTED, dev)))
    return snprintf(why, n, "querying CUDA device %d failed (CUresult %d)", o->cuda_device, r), -1;
  if (!ok) return snprintf(why, n, "CUDA device %d (or its driver) does not support dmabuf", o->cuda_device), -1;
  unsigned long long base = 0;
  size_t size = 0;
  if ((r = cu.MemGetAddressRange(&base, &size, o->mem_base)))
    return snprintf(why, n, "cuMemGetAddressRange(%#llx) failed (CUresult %d): not device memory?",
                    (unsigned long long)o->mem_base, r), -1;
  int fd = -1;
  if ((r = cu.MemGetHandleForAddressRange(&fd, base, size, CU_HANDLE_DMA_BUF_FD, 0)))
    return snprintf(why, n, "cuMemGetHandleForAddressRange over [%#llx, +%zu) failed (CUresult %d)", base, size, r),
           -1;
  *offset = o->mem_base - base;
  return fd;
}

static int register_region(mk_verbs *v, const mk_net_opts *o, const char *who, char *err, int errlen) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  void *addr = (void *)(uintptr_t)o->mem_base;
  if (o->mem_kind == MK_MEM_HOST) {
    v->mr = v->api->reg_mr(v->pd, addr, o->mem_bytes, access);
    v->reg_path = "host";
    if (!v->mr) snprintf(err, errlen, "%s: ibv_reg_mr of %llu bytes of host memory failed: %s", who,
                         (unsigned long long)o->mem_bytes, strerror(errno));
    return v->mr ? 0 : -1;
  }
  char why[160] = "";
  if (!v->api->reg_dmabuf_mr) {
    snprintf(why, sizeof why, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)");
  } else {
    uint64_t offset = 0;
    v->dmabuf_fd = dmabuf_export(v, o, &offset, why, sizeof why);
    if (v->dmabuf_fd >= 0) {
      v->mr = v->api->reg_dmabuf_mr(v->pd, offset, o->mem_bytes, o->mem_base, v->dmabuf_fd, access);
      if (v->mr) {
        v->reg_path = "dmabuf";
        return 0;
      }
      snprintf(why, sizeof why, "ibv_reg_dmabuf_mr failed: %s", strerror(errno));
    }
  }
  v->mr = v->api->reg_mr(v->pd, addr, o->mem_bytes, access);
  if (v->mr) {
    v->reg_path = "peer memory";
    return 0;
  }
  snprintf(err, errlen, "%s: registering %llu bytes of GPU memory failed: dmabuf: %s; peer memory (ibv_reg_mr, "
           "needs the nvidia_peermem module): %s", who, (unsigned long long)o->mem_bytes, why, strerror(errno));
  return -1;
}

int mk_verbs_open(mk_verbs *v, const mk_net_opts *o, const void *api, int need_efa, const char *who, char *err,
                  int errlen) {
  memset(v, 0, sizeof *v);
  v->dmabuf_fd = -1;
  if (api) v->api = (const mk_verbs_api *)api;
  else if (load_verbs(v, need_efa, who, err, errlen)) return -1;
  int num = 0;
  v->list = v->api->get_device_list(&num);
  if (!v->list || num == 0) {
    snprintf(err, errlen, "%s: no RDMA device (ibv_get_device_list found none)", who);
    return -1;
  }
  struct ibv_device *dev = NULL;
  char names[160] = "";
  for (int i = 0; i < num; i++) {
    const char *name = v->api->get_device_name(v->list[i]);
    if (!dev && (!o->device[0] || strcmp(name, o->device) == 0)) dev = v->list[i];
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", name);
  }
  if (!dev) {
    snprintf(err, errlen, "%s: RDMA device %s not found; this host has %s", who, o->device, names);
    return -1;
  }
  snprintf(v->dev_name, sizeof v->dev_name, "%s", v->api->get_device_name(dev));
  v->ctx = v->api->open_device(dev);
  if (!v->ctx) {
    snprintf(err, errlen, "%s: ibv_open_device(%s) failed: %s", who, v->dev_name, strerror(errno));
    return -1;
  }
  v->port_num = o->port > 0 ? o->port : 1;
  if (v->api->query_port(v->ctx, (uint8_t)v->port_num, &v->port)) {
    snprintf(err, errlen, "%s: %s has no port %d", who, v->dev_name, v->port_num);
    return -1;
  }
  if (v->port.state != IBV_PORT_ACTIVE) {
    snprintf(err, errlen, "%s: %s port %d is not active (state %d)", who, v->dev_name, v->port_num, v->port.state);
    return -1;
  }
  v->gid_index = o->gid_index >= 0 ? o->gid_index : 0;
  if (v->api->query_gid(v->ctx, (uint8_t)v->port_num, v->gid_index, &v->gid)) {
    snprintf(err, errlen, "%s: %s port %d has no GID %d", who, v->dev_name, v->port_num, v->gid_index);
    return -1;
  }
  v->pd = v->api->alloc_pd(v->ctx);
  if (!v->pd) {
    snprintf(err, errlen, "%s: ibv_alloc_pd on %s failed: %s", who, v->dev_name, strerror(errno));
    return -1;
  }
  return register_region(v, o, who, err, errlen);
}

void mk_verbs_close(mk_verbs *v) {
  if (!v->api) return;
  if (v->mr) v->api->dereg_mr(v->mr);
  if (v->dmabuf_fd >= 0) close(v->dmabuf_fd);
  if (v->pd) v->api->dealloc_pd(v->pd);
  if (v->ctx) v->api->close_device(v->ctx);
  if (v->list) v->api->free_device_list(v->list);
  if (v->cuda_lib) dlclose(v->cuda_lib);
  if (v->efa_lib) dlclose(v->efa_lib);
  if (v->lib) dlclose(v->lib);
  memset(v, 0, sizeof *v);
}

const char *mk_verbs_status(const mk_verbs *v, enum ibv_wc_status s) {
  const char *str = v->api && v->api->wc_status_str ? v->api->wc_status_str(s) : NULL;
  return str ? str : "unknown status";
}

/* An EFA device's efadv capabilities (device_caps, max_rdma_size) and whether libibverbs can
 * register dmabufs, for `mkernel doctor`: 0, or -1 with the reason in `err`. */
int mk_efa_caps(const char *device, uint32_t *caps, uint32_t *max_rdma, int *dmabuf, char *err, int errlen) {
  mk_verbs v;
  memset(&v, 0, sizeof v);
  v.dmabuf_fd = -1;
  int rc = -1, num = 0;
  if (load_verbs(&v, 1, "doctor", err, errlen)) goto out;
  *dmabuf = v.own.reg_dmabuf_mr != NULL;
  v.list = v.api->get_device_list(&num);
  for (int i = 0; v.list && i < num && !v.ctx; i++)
    if (strcmp(v.api->get_device_name(v.list[i]), device) == 0) v.ctx = v.api->open_device(v.list[i]);
  if (!v.ctx) {
    snprintf(err, errlen, "cannot open RDMA device %s", device);
    goto out;
  }
  struct efadv_device_attr da;
  memset(&da, 0, sizeof da);
  if (v.api->efadv_query_device(v.ctx, &da, sizeof da)) {
    snprintf(err, errlen, "%s is not an EFA device (efadv_query_device failed)", device);
    goto out;
  }
  *caps = da.device_caps;
  *max_rdma = da.max_rdma_size;
  rc = 0;
out:
  mk_verbs_close(&v);
  return rc;
}

/* 1 if libibverbs has ibv_reg_dmabuf_mr, 0 if not, -1 if it does not load. */
int mk_verbs_dmabuf(void) {
  void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  int have = dlsym(lib, "ibv_reg_dmabuf_mr") != NULL;
  dlclose(lib);
  return have;
}

#else

int mk_verbs_dmabuf(void) { return -1; }

int mk_efa_caps(const char *device, unsigned *caps, unsigned *max_rdma, int *dmabuf, char *err, int errlen) {
  (void)device, (void)caps, (void)max_rdma, (void)dmabuf;
  return snprintf(err, errlen, "mkernel was built without infiniband/verbs.h (install libibverbs-dev)"), -1;
}
#endif
