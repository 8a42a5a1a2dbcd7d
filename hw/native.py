"""Build and load the native host library (the proxy, its transports and a host-side producer).

The C sources in ``hw/csrc`` are compiled once per source hash with the system C compiler into a
per-user cache and loaded with ctypes. ctypes is enough because Python only starts, stops and
inspects the proxy: the hot loop runs on the library's own thread and never takes the GIL.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import shutil
import subprocess
from pathlib import Path

from mkernel.errors import BackendUnavailable

CSRC = Path(__file__).with_name("csrc")
SOURCES = ("proxy.c", "host_ring.c", "transport_fake.c", "transport_cuda.c")
HEADERS = ("mk_ring.h", "mk_transport.h")


def cuda_include_dir() -> Path | None:
    """Where cuda.h lives (for types only; the driver itself is dlopen'ed), or None."""
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates += [Path("/usr/local/cuda/include"), Path("/usr/include")]
    return next((c for c in candidates if (c / "cuda.h").is_file()), None)


def build(cache_dir: Path | None = None) -> Path:
    """Compile the library if this source hash has not been built yet; return its path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BackendUnavailable("the hw runtime needs a C compiler (cc or gcc) to build its proxy; none is on PATH")
    inc = cuda_include_dir()
    digest = hashlib.sha256()
    for name in SOURCES + HEADERS:
        digest.update((CSRC / name).read_bytes())
    digest.update(str(inc).encode())
    out_dir = (cache_dir or Path.home() / ".cache" / "mkernel") / f"native-{digest.hexdigest()[:16]}"
    lib = out_dir / "libmkproxy.so"
    if lib.is_file():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [cc, "-O2", "-g", "-std=c11", "-Wall", "-Werror", "-fPIC", "-shared", "-pthread", f"-I{CSRC}"]
    if inc is not None:
        cmd += ["-DMK_HAVE_CUDA", f"-I{inc}"]
    tmp = out_dir / f"libmkproxy.{id(cmd)}.so"
    cmd += [str(CSRC / s) for s in SOURCES] + ["-o", str(tmp), "-ldl"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BackendUnavailable(f"building the native proxy failed:\n{' '.join(cmd)}\n{res.stderr}")
    tmp.replace(lib)  # atomic: concurrent ranks never load a half-written file
    return lib


@functools.cache
def load() -> ctypes.CDLL:
    """The loaded library with its prototypes declared (see hw/ring.py for the structures)."""
    from . import ring

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
        "mk_layout": (None, [ctypes.POINTER(U64)]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib
