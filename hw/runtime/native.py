"""Build and load the native host library (the proxy, its transports and a host-side producer).

The C sources in ``hw/runtime/csrc`` are compiled once per source hash with the system C compiler into a
per-user cache and loaded with ctypes. ctypes is enough because Python only starts, stops and
inspects the proxy: the hot loop runs on the library's own thread and never takes the GIL.

The network transports compile where their headers are (rdma-core's ``infiniband/verbs.h`` and
``efadv.h``, libfabric's ``rdma/fabric.h``) and open their libraries with dlopen when chosen, so
the library builds and loads on a machine with neither; :func:`features` says what was built.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from mkernel.errors import BackendUnavailable

CSRC = Path(__file__).with_name("csrc")
SOURCES = ("proxy.c", "host_ring.c", "transport_fake.c", "transport_cuda.c", "net.c", "verbs.c",
           "transport_verbs_rc.c", "transport_verbs_srd.c", "transport_ofi.c")
HEADERS = ("mk_ring.h", "mk_transport.h", "mk_net.h", "mk_verbs.h")
INCLUDE_DIRS = (Path("/usr/include"), Path("/usr/local/include"))
# what each network transport needs at build time: -D flag -> headers
OPTIONAL = {"MK_HAVE_VERBS": ("infiniband/verbs.h", "infiniband/efadv.h"), "MK_HAVE_OFI": ("rdma/fabric.h",)}
FEATURES = {"verbs": 1, "ofi": 2, "cuda": 4}  # mk_build_features() bits


def cuda_include_dir() -> Path | None:
    """Where cuda.h lives (for types only; the driver itself is dlopen'ed), or None."""
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates += [Path("/usr/local/cuda/include"), Path("/usr/include")]
    return next((c for c in candidates if (c / "cuda.h").is_file()), None)


def optional_defines(include_dirs: tuple[Path, ...] = INCLUDE_DIRS) -> list[str]:
    """-D flags of the network transports whose headers are installed."""
    return [flag for flag, headers in OPTIONAL.items()
            if all(any((d / h).is_file() for d in include_dirs) for h in headers)]


def compile_command(cc: str, out: Path, sources: list[Path], defines: list[str], inc: Path | None) -> list[str]:
    """The one compiler command every build uses: warnings are errors, nothing is linked but libdl."""
    cmd = [cc, "-O2", "-g", "-std=c11", "-Wall", "-Werror", "-fPIC", "-shared", "-pthread", f"-I{CSRC}"]
    cmd += [f"-D{d}" for d in defines]
    if inc is not None:
        cmd += ["-DMK_HAVE_CUDA", f"-I{inc}"]
    return cmd + [str(s) for s in sources] + ["-o", str(out), "-ldl"]


def compiler() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BackendUnavailable("the hw runtime needs a C compiler (cc or gcc) to build its proxy; none is on PATH")
    return cc


def build(cache_dir: Path | None = None) -> Path:
    """Compile the library if this source hash has not been built yet; return its path."""
    cc = compiler()
    inc = cuda_include_dir()
    defines = optional_defines()
    digest = hashlib.sha256()
    for name in SOURCES + HEADERS:
        digest.update((CSRC / name).read_bytes())
    digest.update(f"{inc} {defines}".encode())
    out_dir = (cache_dir or Path.home() / ".cache" / "mkernel") / f"native-{digest.hexdigest()[:16]}"
    lib = out_dir / "libmkproxy.so"
    if lib.is_file():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f"libmkproxy.{os.getpid()}.{id(digest)}.so"
    cmd = compile_command(cc, tmp, [CSRC / s for s in SOURCES], defines, inc)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BackendUnavailable(f"building the native proxy failed:\n{' '.join(cmd)}\n{res.stderr}")
    tmp.replace(lib)  # atomic: concurrent ranks never load a half-written file
    return lib


@functools.cache
def load() -> ctypes.CDLL:
    """The loaded library with its prototypes declared (see hw/lowering/ring.py for the structures)."""
    from ..lowering import ring

    lib = ctypes.CDLL(str(build()))
    P, U64, U32 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32
    sig = {
        "mk_proxy_create": (P, [ctypes.POINTER(ring.ProxyConfig), P, P, ctypes.c_char_p,
                                ctypes.POINTER(ring.TransportOptions), ctypes.c_char_p, ctypes.c_int]),
        "mk_proxy_start": (ctypes.c_int, [P]),
        "mk_proxy_stop": (ctypes.c_int, [P, U64]),
        "mk_proxy_running": (ctypes.c_int, [P]),
        "mk_proxy_kick": (None, [P]),
        "mk_proxy_get_error": (None, [P, ctypes.POINTER(ring.ProxyError)]),
        "mk_proxy_get_stats": (None, [P, ctypes.POINTER(ring.ProxyStats)]),
        "mk_proxy_transport": (P, [P]),
        "mk_proxy_destroy": (None, [P]),
        "mk_host_push": (ctypes.c_int, [P, P, U64, P, P, U64, ctypes.POINTER(U64)]),
        "mk_host_produce": (ctypes.c_int, [P, P, U64, P, U32, U64, U32, U32, U64, U64]),
        "mk_fake_log": (ctypes.c_size_t, [P, ctypes.POINTER(U32), ctypes.c_size_t]),
        "mk_constant": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(U64)]),
        "mk_constant_name": (ctypes.c_char_p, [ctypes.c_int]),
        "mk_build_features": (ctypes.c_int, []),
        "mk_net_create": (P, [ctypes.c_char_p, ctypes.POINTER(ring.NetOptions), P, ctypes.c_char_p, ctypes.c_int]),
        "mk_net_address": (ctypes.c_int, [P, P, ctypes.c_int]),
        "mk_net_connect": (ctypes.c_int, [P, ctypes.c_int, P, ctypes.c_int]),
        "mk_transport_destroy": (None, [P]),
        "mk_transport_error": (ctypes.c_char_p, [P]),
        "mk_proxy_create_with": (P, [ctypes.POINTER(ring.ProxyConfig), P, P, P, ctypes.c_char_p, ctypes.c_int]),
        "mk_proxy_rebase": (None, [P, U64]),
        "mk_ofi_providers": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
        "mk_ofi_provider": (ctypes.c_char_p, [P]),
        "mk_srd_unsolicited": (ctypes.c_int, [P]),
        "mk_verbs_dmabuf": (ctypes.c_int, []),
        "mk_efa_caps": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(U32), ctypes.POINTER(U32),
                                       ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def features() -> set[str]:
    """What the loaded library was built with: "verbs", "ofi", "cuda"."""
    bits = load().mk_build_features()
    return {name for name, bit in FEATURES.items() if bits & bit}
