"""The ofi transport for real: four processes on this host, two per "node", bootstrapped through a
file store, moving the mesh stream (PUTs with flags, data-only PUTs and SIGNALs) through the real
proxy and libfabric on tcp;ofi_rxm and on shm, host memory, call after call; then the proxy's drop
and dead-proxy faults, each ending in errors that name what failed, within their bounds.

What landed is judged here: every rank reports its memory per call, and the test rebuilds what it
must hold from the senders' seeds.
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp

import numpy as np
import pytest

from mkernel.hw.runtime import native

from mkernel.hw.measure.netcheck import expected

from harness.transport_net import collect, ofi_rank

WORLD, GPN = 4, 2


def _providers() -> str:
    if "ofi" not in native.features():
        return ""
    buf = ctypes.create_string_buffer(16384)
    return buf.value.decode() if native.load().mk_ofi_providers(buf, 16384) >= 0 else ""


OFFERED = _providers().split("--")[0]
pytestmark = pytest.mark.skipif(not OFFERED, reason="no libfabric here (or the library was built without rdma/fabric.h): "
                                                     "libfabric-dev, which .ci/run installs")


def need(provider: str) -> None:
    if not any(line.split()[0] == provider for line in OFFERED.strip().splitlines()):
        pytest.skip(f"libfabric here offers no {provider} RDM endpoint with RMA and delivery-complete writes")


def run(tmp_path, provider: str, *, publish: str = "store", calls: int = 3, faults=None, wait_s: float = 10.0,
        store: str | None = None):
    """Every rank's report, by rank; a rank that did not report within the bound is a failure."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    faults = faults or {}
    store = store or str(tmp_path / "store")
    procs = [ctx.Process(target=ofi_rank, args=(r, WORLD, GPN, store, provider, publish, calls,
                                                 faults.get(r, {}), wait_s, out)) for r in range(WORLD)]
    return collect(procs, out, WORLD, 6 * wait_s + 30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("provider,publish,store", [("tcp;ofi_rxm", "store", "file"), ("shm", "store", "file"),
                                                    ("shm", "loopback", "file"), ("tcp;ofi_rxm", "loopback", "torch")])
def test_chunks_move_between_processes_exactly_call_after_call(tmp_path, provider, publish, store):
    need(provider)
    if store == "torch":  # the bootstrap real runs use: torch.distributed's TCPStore
        pytest.importorskip("torch.distributed", reason="torch is not installed (CI installs none)")
    reports = run(tmp_path, provider, publish=publish, store=f"tcp:{_free_port()}" if store == "torch" else None)
    for r, rep in sorted(reports.items()):
        assert rep["errors"] == [], (r, rep["errors"])
        assert rep["provider"] == provider
        assert [c["epoch"] for c in rep["calls"]] == [1, 2, 3]
        for call in rep["calls"]:
            want, mask = expected(r, WORLD, GPN, call["epoch"])
            assert mask.any() and np.array_equal(call["heap"][mask], want[mask]), (r, call["epoch"])


def test_a_dropped_message_fails_its_sender_naming_it_and_its_receivers_time_out(tmp_path):
    """Rank 0's proxy loses a command (a failed completion after retries, injected): it fails naming
    the destination, chunk and epoch; the receivers waiting for that chunk give up at their bound."""
    need("tcp;ofi_rxm")
    reports = run(tmp_path, "tcp;ofi_rxm", calls=1, faults={0: dict(drop=0.2, seed=3)}, wait_s=2.0)
    sender = " ".join(reports[0]["errors"])
    assert "lost: the transport reports a failed completion (injected drop)" in sender, sender
    assert "proxy rank 0: transport failure at ring slot" in sender and "epoch 1" in sender
    timed_out = [r for r in (2, 3) if any("not set to epoch 1" in e for e in reports[r]["errors"])]
    assert timed_out, {r: reports[r]["errors"] for r in (2, 3)}


def test_a_dead_proxy_leaves_every_peer_a_bounded_error(tmp_path):
    """Rank 2's proxy thread dies after 5 commands (as a crashed process would): it neither sends
    nor publishes what arrives. Every rank ends within its bounds: rank 2 learns its proxy is dead,
    and the ranks waiting for rank 2's chunks time out naming the flags."""
    need("tcp;ofi_rxm")
    reports = run(tmp_path, "tcp;ofi_rxm", calls=1, faults={2: dict(die_after=5)}, wait_s=2.0)
    dead = " ".join(reports[2]["errors"])
    assert "the proxy thread is dead (injected: it died after 5 commands)" in dead or "no credit" in dead, dead
    waiting = [r for r in (0, 1) if any("not set to epoch 1" in e for e in reports[r]["errors"])]
    assert waiting, {r: reports[r]["errors"] for r in (0, 1)}


_CAUGHT = """
import ctypes
from mkernel.hw.runtime import native
caught = lambda: next(int(line.split()[1], 16) for line in open('/proc/self/status') if line.startswith('SigCgt'))
before = caught()  # (Python's own: faulthandler's, where PYTHONFAULTHANDLER is set)
native.load().mk_ofi_providers(ctypes.create_string_buffer(16384), 16384)  # (opens libfabric and closes it)
ctypes.CDLL('libfabric.so.1')  # (again, kept open, as a transport keeps it: libinfinipath's handlers, if any, stay)
print('libinfinipath' in open('/proc/self/maps').read(), caught() & ~before)
"""


def test_opening_libfabric_leaves_sigterm_to_the_process():
    """Debian's libfabric links PSM's libinfinipath, whose constructor catches SIGTERM (and SIGSEGV, SIGBUS,
    SIGILL, SIGABRT) to print a backtrace from inside the handler, which is not async-signal-safe: a pytest
    stopped by `timeout` hung on libc's malloc lock. Once the native library has opened libfabric, the process's
    environment keeps those handlers out of every later load (that constructor reads IPATH_NO_BACKTRACE), the
    transport's own included (the provider list closes its handle: the handlers go with it)."""
    import os
    import signal
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "IPATH_NO_BACKTRACE"}
    out = subprocess.run([sys.executable, "-c", _CAUGHT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded, mask = out.stdout.split()  # (mask: the signals caught since the native library opened libfabric)
    if loaded != "True":
        pytest.skip("this libfabric does not pull in libinfinipath (PSM), whose handlers this test is about")
    caught = [s for s in (signal.SIGTERM, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT)
              if int(mask) >> (s - 1) & 1]
    assert not caught, f"after libfabric was opened, the process catches {[s.name for s in caught]}"
