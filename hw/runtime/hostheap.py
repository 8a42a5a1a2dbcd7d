"""A rank's symmetric buffer in pinned, device-mapped host memory: for a network transport whose NIC
cannot reach GPU memory.

Why: a network transport registers the buffer with its NIC, and where the provider has no GPU
memory support (libfabric built without CUDA HMEM, as on the lent H200: "Hmem iface FI_HMEM_CUDA not
supported") GPU memory cannot be registered at all. Host memory can, and a GPU reaches pinned,
mapped host memory with its ordinary loads, stores and atomics over PCIe: the kernels run unchanged,
slower, and exact. The ranks of a node must reach each other's buffers too (peer stores), and
torch symmetric memory allocates GPU memory only, so each rank's buffer is a file in /dev/shm that
every rank of its node maps and registers with the CUDA driver (``cuMemHostRegister``, portable and
device-mapped), as NCCL's shared-memory transport does. The files are unlinked once every rank of
the node has opened them, so nothing is left behind however a process ends.

The mappings live as long as the buffer tensor and every view of it (the tensor's owner holds
them), so no kernel or transport is left with an address that was unmapped under it.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import uuid
from pathlib import Path

from mkernel.errors import BackendUnavailable

SHM = Path("/dev/shm")
REGISTER_FLAGS = 0x01 | 0x02  # CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP


class _Driver:
    """The three libcuda calls a host heap needs, by ctypes (as hw/runtime/packed.py loads its launch)."""

    def __init__(self) -> None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise BackendUnavailable(f"heap='host' needs the CUDA driver, and libcuda.so.1 could not be loaded: "
                                     f"{exc}") from None
        self.register = lib.cuMemHostRegister_v2
        self.register.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint)
        self.unregister = lib.cuMemHostUnregister
        self.unregister.argtypes = (ctypes.c_void_p,)
        self.device_pointer = lib.cuMemHostGetDevicePointer_v2
        self.device_pointer.argtypes = (ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint)
        self._name = lib.cuGetErrorName
        self._name.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))

    def check(self, rc: int, what: str) -> None:
        if rc:
            name = ctypes.c_char_p()
            self._name(rc, ctypes.byref(name))
            raise BackendUnavailable(f"{what} failed: {(name.value or b'CUDA error').decode()} ({rc})")


class _Mapping:
    """One rank's file, mapped into this process and registered with CUDA."""

    def __init__(self, driver: _Driver, path: Path, nbytes: int, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, nbytes)  # zero pages
            self._mm = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        self._view = (ctypes.c_uint8 * nbytes).from_buffer(self._mm)
        self.host = ctypes.addressof(self._view)
        self._driver = driver
        driver.check(driver.register(self.host, nbytes, REGISTER_FLAGS), f"cuMemHostRegister of {path} ({nbytes} B)")
        dev = ctypes.c_uint64()
        driver.check(driver.device_pointer(ctypes.byref(dev), self.host, 0), f"cuMemHostGetDevicePointer of {path}")
        self.device = dev.value

    def release(self) -> None:
        if self._view is not None:
            self._driver.unregister(self.host)  # at exit the context may be gone: nothing left to undo
            self._view = None
            self._mm.close()


class _Owner:
    """What the buffer tensor keeps alive: every mapping of the node (``__cuda_array_interface__``
    gives torch the device address; torch holds this object until the last view is freed)."""

    def __init__(self, maps: list[_Mapping], me: int, nbytes: int) -> None:
        self.maps = maps
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (maps[me].device, False),
                                         "version": 3, "strides": None}

    def __del__(self) -> None:
        for m in getattr(self, "maps", ()):
            m.release()


class HostHeap:
    """Every rank of ``group`` (one node's ranks, a torch ProcessGroup) allocates ``nbytes`` of
    mapped host memory and maps its node peers'. ``buffer``: this rank's, as a uint8 CUDA tensor;
    ``ptrs``: each group rank's buffer as this GPU addresses it; ``host_ptr``: this rank's buffer as
    the host (and the NIC registration) addresses it. Collective over ``group``."""

    def __init__(self, nbytes: int, *, group, device) -> None:
        import torch
        import torch.distributed as dist

        size = -(-max(nbytes, 1) // mmap.PAGESIZE) * mmap.PAGESIZE
        driver = _Driver()
        path = SHM / f"mkernel-heap-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        me, n = dist.get_rank(group), dist.get_world_size(group)
        mapped: dict[int, _Mapping] = {}
        try:
            mapped[me] = _Mapping(driver, path, size, create=True)
            names: list[str | None] = [None] * n
            dist.all_gather_object(names, str(path), group=group)
            for r in range(n):
                if r != me:
                    mapped[r] = _Mapping(driver, Path(names[r]), size, create=False)
            dist.barrier(group)  # every rank of the node has opened every file: the names can go
        except BaseException:
            for m in mapped.values():
                m.release()
            raise
        finally:
            path.unlink(missing_ok=True)
        maps = [mapped[r] for r in range(n)]
        owner = _Owner(maps, me, nbytes)
        self.buffer = torch.as_tensor(owner, device=device)
        if self.buffer.data_ptr() != maps[me].device:
            raise BackendUnavailable(f"torch copied the host heap instead of viewing it (device {device}); the "
                                     f"buffer must be the registered memory")
        self.ptrs = [m.device for m in maps]
        self.host_ptr = maps[me].host
