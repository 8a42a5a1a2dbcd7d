"""Compile the CUDA C++ device code with nvcc for sm_90a and load it through CuPy.

The same command compiles every ``.cu`` file in CI (no GPU, compile only) and on the GPU machine,
so CI checks exactly what runs. Cubins are cached per source hash.
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
from pathlib import Path

from mkernel.errors import BackendUnavailable

DEVICE = Path(__file__).with_name("device")
CSRC = Path(__file__).parents[1] / "runtime" / "csrc"  # mk_ring.h: the device protocol, specified once
INCLUDES = (CSRC, DEVICE)
ARCH = "sm_90a"  # wgmma and TMA need the arch-specific target, not plain sm_90


def sources() -> list[Path]:
    """Every device source file: what CI compile-checks."""
    return sorted(DEVICE.glob("*.cu"))


def nvcc_command(src: Path, out: Path) -> list[str]:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        raise BackendUnavailable("compiling device kernels needs nvcc (CUDA 12.4 or newer); none found")
    return [nvcc, "-cubin", f"-gencode=arch=compute_{ARCH[3:]},code={ARCH}", "-O3", "-std=c++17",
            "-Xptxas=-warn-spills", *[f"-I{i}" for i in INCLUDES], str(src), "-o", str(out)]


def build(name: str, cache_dir: Path | None = None) -> Path:
    """Compile hw/measure/device/<name>.cu to a cubin (cached by the hash of every device source)."""
    src = DEVICE / f"{name}.cu"
    if not src.is_file():
        raise BackendUnavailable(f"no device source {src}")
    digest = hashlib.sha256()
    for f in sorted([*DEVICE.glob("*"), *CSRC.glob("*.h")]):
        digest.update(f.name.encode() + f.read_bytes())
    out_dir = (cache_dir or Path.home() / ".cache" / "mkernel") / f"cubin-{digest.hexdigest()[:16]}"
    out = out_dir / f"{name}.{ARCH}.cubin"
    if out.is_file():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{id(out)}.tmp")
    res = subprocess.run(nvcc_command(src, tmp), capture_output=True, text=True)
    if res.returncode != 0:
        raise BackendUnavailable(f"nvcc failed on {src.name}:\n{res.stderr}")
    tmp.replace(out)
    return out


@functools.cache
def module(name: str):
    """The loaded CuPy RawModule of hw/measure/device/<name>.cu."""
    import cupy

    return cupy.RawModule(path=str(build(name)))
