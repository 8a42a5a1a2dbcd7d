"""The command ring and the native proxy on the CPU: encode/decode, ordering, credits, rejection.

The proxy here is the same native library the GPU path uses; only the producer (a host function with
the device's protocol) and the transport (a fake over host memory with RC or seeded SRD order) differ.
"""
from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mkernel.hw.lowering import ring
from mkernel.hw.runtime.proxy import HostRing, ProxyError

from harness.mesh import CHUNK, Mesh, flag_before_data, run_all

# -- the record layout (every constant of mk_ring.h against its mirrors: test_protocol.py) ----------

@settings(max_examples=200, deadline=None)
@given(seq=st.integers(0, 2**32 - 1), type=st.integers(0, 2**16 - 1), dst=st.integers(0, 2**16 - 1),
       chunk=st.integers(0, 2**32 - 1), nbytes=st.integers(0, 2**32 - 1), src=st.integers(0, 2**64 - 1),
       dst_off=st.integers(0, 2**64 - 1), epoch=st.integers(0, 2**64 - 1), ts=st.integers(0, 2**64 - 1))
def test_encode_decode_round_trip(seq, type, dst, chunk, nbytes, src, dst_off, epoch, ts):
    cmd = ring.Command(type, dst, chunk, nbytes, src, dst_off, epoch, ts)
    raw = ring.encode(cmd, seq)
    assert len(raw) == 48
    assert ring.decode(raw) == (seq, cmd)


@settings(max_examples=30, deadline=None)
@given(cmds=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 15), st.integers(1, 2**40)), min_size=1,
                     max_size=40))
def test_what_python_encodes_the_proxy_executes(cmds):
    """Through the real ring and proxy: each PUT lands at its dst_off and sets its flag to its epoch."""
    mesh = Mesh(4, 16, seed=len(cmds))
    hr = HostRing(64)
    with mesh.proxy(hr, seed=1) as p:
        for dst, chunk, epoch in cmds:
            hr.push(mesh.put(dst, chunk, epoch))
    last = {(d, c): e for d, c, e in cmds}
    for (d, c), e in last.items():
        assert mesh.flags[d][c] == e
        assert (mesh.dst[d][c * CHUNK:(c + 1) * CHUNK] == mesh.src[c * CHUNK:(c + 1) * CHUNK]).all()
    assert p.stats()["commands"] == len(cmds)


# -- ordering: never a flag before its data -----------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("unordered", [False, True], ids=["rc", "srd"])
def test_no_flag_before_its_data(unordered, seed):
    mesh = Mesh(4, 32, seed)
    p = run_all(mesh, unordered=unordered, seed=seed)
    log = p.fake_log()
    assert len(log) == 2 * 4 * 32
    assert flag_before_data(log) == []
    for d in range(4):
        assert (mesh.dst[d] == mesh.src).all()
        assert (mesh.flags[d] == 5).all()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("unordered", [False, True], ids=["rc", "srd"])
def test_a_signal_lands_after_every_put_posted_before_it_to_its_rank(unordered, seed):
    """A put of several pairs is data-only PUTs (flag: the sink) and then a SIGNAL (hw/lowering/remote.py): the
    receiver trusts the SIGNAL's flag for all of them, so no transport may land it before any data
    posted ahead of it to that rank, SRD included (the order the protocol asks of every transport)."""
    nranks, groups, per_group, sink = 4, 4, 6, 31
    mesh = Mesh(nranks, 32, seed)
    hr = HostRing(nranks * groups * (per_group + 1))
    for g in range(groups):
        for d in range(nranks):
            for i in range(g * per_group, (g + 1) * per_group):
                hr.push(ring.Command(ring.PUT, d, sink, CHUNK, i * CHUNK, i * CHUNK, 5))
            hr.push(ring.Command(ring.SIGNAL, d, g, 0, 0, 0, 5))
    with mesh.proxy(hr, unordered=unordered, seed=seed) as p:
        pass
    landed = [0] * nranks
    for is_flag, chunk, dst in p.fake_log().tolist():
        if not is_flag:
            landed[dst] += 1
        elif chunk != sink:
            assert landed[dst] >= (chunk + 1) * per_group, f"SIGNAL {chunk} to rank {dst} before its data"
    for d in range(nranks):
        n = groups * per_group * CHUNK
        assert (mesh.dst[d][:n] == mesh.src[:n]).all() and (mesh.flags[d][:groups] == 5).all()


def test_srd_really_reorders_and_rc_keeps_order():
    """The fake transport must reorder under SRD (else the test above proves nothing) and not under RC."""
    def data_order(log):
        return [(d, c) for f, c, d in log.tolist() if not f]
    posted = [(d, c) for c in range(32) for d in range(4)]
    rc = data_order(run_all(Mesh(4, 32, 0), unordered=False, seed=3).fake_log())
    srd = data_order(run_all(Mesh(4, 32, 0), unordered=True, seed=3).fake_log())
    for d in range(4):  # RC: per destination, posting order
        assert [x for x in rc if x[0] == d] == [x for x in posted if x[0] == d]
    assert srd != posted and sorted(srd) == sorted(posted)


def test_checker_catches_a_planted_flag_race():
    """With the flag as a separate unordered write (a naive SRD design) some flag beats its data."""
    caught = [flag_before_data(run_all(Mesh(4, 32, s), unordered=True, seed=s, flag_early=True).fake_log())
              for s in range(4)]
    assert any(caught)


# -- credits ------------------------------------------------------------------------------------------

def test_full_ring_blocks_the_producer_boundedly_and_names_the_slot():
    mesh = Mesh(2, 8, 0)
    hr = HostRing(4)
    p = mesh.proxy(hr)
    for c in range(4):  # proxy not running: 4 credits, then none
        hr.push(mesh.put(1, c, 1))
    t0 = time.perf_counter()
    with pytest.raises(ProxyError, match=r"no credit for ring slot 4 within 0.05 s .*epoch 1, chunk 4"):
        hr.push(mesh.put(1, 4, 1), timeout_s=0.05)
    assert time.perf_counter() - t0 < 1.0
    p.close()


def test_blocked_producer_proceeds_once_credits_return():
    mesh = Mesh(2, 64, 0)
    hr = HostRing(4)
    done = threading.Event()

    def producer():  # ctypes releases the GIL while the C producer waits for credits
        for c in range(64):
            hr.push(mesh.put(c % 2, c, 3), timeout_s=5.0)
        done.set()

    th = threading.Thread(target=producer)
    th.start()
    time.sleep(0.05)
    assert not done.is_set() and int(hr.head[0]) == 5  # 4 written, the 5th waits for a credit
    with mesh.proxy(hr, seed=2):
        th.join(10)
    assert done.is_set()
    for c in range(64):
        assert mesh.flags[c % 2][c] == 3
        assert (mesh.dst[c % 2][c * CHUNK:(c + 1) * CHUNK] == mesh.src[c * CHUNK:(c + 1) * CHUNK]).all()


# -- malformed commands ---------------------------------------------------------------------------------

BAD = {
    "type": (ring.Command(7, 1, 0, CHUNK, 0, 0, 9), "bad command type.*type 7"),
    "dst_rank": (ring.Command(ring.PUT, 2, 0, CHUNK, 0, 0, 9), "destination rank out of range.*dst_rank 2"),
    "bytes": (ring.Command(ring.PUT, 1, 0, 0, 0, 0, 9), "zero-byte PUT"),
    "src_range": (ring.Command(ring.PUT, 1, 0, CHUNK, 8 * CHUNK - 1, 0, 9), "source range.*512-byte send"),
    "dst_range": (ring.Command(ring.PUT, 1, 0, CHUNK, 0, 2**64 - 8, 9), "destination range.*rank 1's 512-byte"),
    "chunk": (ring.Command(ring.PUT, 1, 8, CHUNK, 0, 0, 9), "chunk outside.*chunk 8 is not in"),
    "signal_chunk": (ring.Command(ring.SIGNAL, 0, 99, 0, 0, 0, 9), "chunk outside"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_command_is_rejected_with_no_write(case):
    bad, pattern = BAD[case]
    mesh = Mesh(2, 8, 1)
    before = [d.copy() for d in mesh.dst]
    hr = HostRing(16)
    good = [mesh.put(0, 3, 4), mesh.put(1, 5, 4)]
    for cmd in good + [bad]:
        hr.push(cmd)
    p = mesh.proxy(hr).start()
    with pytest.raises(ProxyError, match=pattern) as err:
        p.stop()
    assert "proxy rank 0: " in str(err.value) and "at ring slot 2 (dst_rank" in str(err.value)
    assert "epoch 9" in str(err.value)
    # the valid commands before it landed; nothing else changed
    expect = [b.copy() for b in before]
    expect[0][3 * CHUNK:4 * CHUNK] = mesh.src[3 * CHUNK:4 * CHUNK]
    expect[1][5 * CHUNK:6 * CHUNK] = mesh.src[5 * CHUNK:6 * CHUNK]
    for d in range(2):
        assert (mesh.dst[d] == expect[d]).all()
    assert [f.tolist() for f in mesh.flags] == [[0, 0, 0, 4, 0, 0, 0, 0], [0, 0, 0, 0, 0, 4, 0, 0]]
    assert int(hr.ctl[ring.CTL_ABORT]) != 0  # device waiters see the abort
    with pytest.raises(ProxyError, match="proxy aborted"):
        hr.push(mesh.put(0, 0, 4))
    p.close()


# -- batching -------------------------------------------------------------------------------------------

def test_full_batches_of_eight_per_connection():
    mesh = Mesh(2, 32, 0)
    hr = HostRing(64)
    for c in range(32):
        for d in range(2):
            hr.push(mesh.put(d, c, 1))
    with mesh.proxy(hr, window_us=1e6) as p:
        pass
    s = p.stats()
    assert s["commands"] == 64 and s["batches"] == 8 and s["full_batches"] == 8


def test_partial_batch_goes_out_within_the_window():
    mesh = Mesh(2, 8, 0)
    hr = HostRing(8)
    with mesh.proxy(hr, window_us=200.0) as p:
        for c in range(3):
            hr.push(mesh.put(1, c, 2))
        deadline = time.perf_counter() + 1.0
        while mesh.flags[1][2] != 2 and time.perf_counter() < deadline:
            time.sleep(1e-4)
        assert mesh.flags[1][2] == 2
    assert p.stats()["full_batches"] == 0


def test_bad_config_is_one_clear_error():
    mesh = Mesh(2, 8, 0)
    hr = HostRing(8)
    with pytest.raises(ProxyError, match=r"max_batch 9 must be in \[1, 8\]"):
        mesh.proxy(hr, max_batch=9)
    with pytest.raises(ProxyError, match="native transport carrier-pigeon is not one of"):
        mesh.proxy(hr, transport="carrier-pigeon")


def test_a_registration_that_could_misdirect_a_write_is_refused():
    """Empty or wrapping regions, missing flags, and flags inside a receive buffer (a flag store would
    land in the data): one clear error at creation, before any command is read."""
    import dataclasses

    mesh = Mesh(2, 8, 0)
    hr = HostRing(8)
    r = mesh.regions
    dst1 = mesh.dst[1].ctypes.data
    bad = {
        "empty send buffer": dataclasses.replace(r, src=(r.src[0], 0)),
        "empty receive buffer": dataclasses.replace(r, dst=(r.dst[0], (dst1, 0))),
        "wrapping receive buffer": dataclasses.replace(r, dst=(r.dst[0], (dst1, 2**64 - 8))),
        "no flags": dataclasses.replace(r, flags=(r.flags[0], 0)),
        "flags inside the data": dataclasses.replace(r, flags=(r.flags[0], dst1 + 64)),
    }
    patterns = {"empty send buffer": "rank 0's send buffer", "flags inside the data": "rank 1's 8 flags .* overlap"}
    for case, regions in bad.items():
        mesh.regions = regions
        with pytest.raises(ProxyError, match="registration refused: " + patterns.get(case, "rank 1's receive buffer")):
            mesh.proxy(hr)


def test_a_command_to_a_rank_that_registered_nothing_is_refused():
    """A rank given as all zeros (a one-way run registers no receive side for itself) is no
    destination: a SIGNAL to it would otherwise store an epoch near address 0."""
    import dataclasses

    mesh = Mesh(2, 8, 0)
    mesh.regions = dataclasses.replace(mesh.regions, dst=((0, 0), mesh.regions.dst[1]), flags=(0, mesh.regions.flags[1]))
    hr = HostRing(8)
    hr.push(mesh.put(1, 2, 5))
    hr.push(ring.Command(ring.SIGNAL, 0, 1, 0, 0, 0, 5))
    p = mesh.proxy(hr).start()
    with pytest.raises(ProxyError, match="SIGNAL to rank 0, which registered no receive buffer or flags"):
        p.stop()
    assert mesh.flags[1][2] == 5  # the valid command before it landed
    p.close()


def test_stop_right_after_a_push_loses_nothing():
    """stop() races the last commit: the proxy must see every command committed before stop()."""
    mesh = Mesh(2, 4, 0)
    for i in range(300):
        hr = HostRing(4)
        with mesh.proxy(hr):
            hr.push(mesh.put(1, i % 4, i + 1))
        assert mesh.flags[1][i % 4] == i + 1, f"iteration {i}: the command pushed before stop() was dropped"


def test_proxy_thread_can_be_pinned_and_a_bad_cpu_is_an_error():
    import os

    mesh = Mesh(2, 4, 0)
    hr = HostRing(4)
    with mesh.proxy(hr, cpu=max(os.sched_getaffinity(0))):
        hr.push(mesh.put(1, 2, 7))
    assert mesh.flags[1][2] == 7
    p = mesh.proxy(HostRing(4), cpu=4095).start()
    with pytest.raises(ProxyError, match="cannot pin the proxy thread to CPU 4095"):
        p.stop(timeout_s=1.0)
    p.close()


def _cpu_s_over(seconds: float) -> float:
    """CPU seconds this process spends while its main thread sleeps for ``seconds``."""
    t0 = time.process_time()
    time.sleep(seconds)
    return time.process_time() - t0


def test_an_idle_proxy_sleeps_and_still_serves_the_next_command():
    """Past idle_spin_us with nothing to do the proxy naps (it no longer holds a core), and a command
    committed after a long idle is still executed at once; with idle_sleep_us=0 it spins."""
    mesh = Mesh(2, 4, 0)
    hr = HostRing(4)
    with mesh.proxy(hr, idle_spin_us=1000.0, idle_sleep_us=200.0) as p:
        busy = _cpu_s_over(0.5)
        naps = p.stats()["idle_sleeps"]
        t0 = time.perf_counter()
        hr.push(mesh.put(1, 3, 9))
        while mesh.flags[1][3] != 9 and time.perf_counter() - t0 < 1.0:
            time.sleep(1e-5)
        waited = time.perf_counter() - t0
    assert mesh.flags[1][3] == 9 and (mesh.dst[1][3 * CHUNK:4 * CHUNK] == mesh.src[3 * CHUNK:4 * CHUNK]).all()
    assert naps > 500 and busy < 0.25, (naps, busy)  # naps of 200 us: ~2500 in 0.5 s, a few % of a core
    assert waited < 0.1, waited  # one nap (200 us) plus scheduling, far below this
    with mesh.proxy(HostRing(4), idle_sleep_us=0.0) as p:
        time.sleep(0.05)
    assert p.stats()["idle_sleeps"] == 0


def test_a_kick_wakes_a_napping_proxy_at_once():
    """The executor kicks the proxy at every launch: a proxy deep in long naps serves the call's
    first command right away instead of at the end of its nap."""
    mesh = Mesh(2, 4, 0)
    hr = HostRing(4)
    with mesh.proxy(hr, idle_spin_us=1000.0, idle_sleep_us=2e6) as p:
        time.sleep(0.6)  # naps double from 1 us: by now one lasts a quarter of a second or more
        t0 = time.perf_counter()
        p.kick()
        hr.push(mesh.put(1, 1, 4))
        while mesh.flags[1][1] != 4 and time.perf_counter() - t0 < 3.0:
            time.sleep(1e-5)
        waited = time.perf_counter() - t0
    assert mesh.flags[1][1] == 4
    assert waited < 0.1, waited


def test_stop_does_not_wait_out_a_nap():
    mesh = Mesh(2, 4, 0)
    p = mesh.proxy(HostRing(4), idle_spin_us=1000.0, idle_sleep_us=2e6).start()
    time.sleep(0.6)  # deep in naps of a quarter of a second or more
    t0 = time.perf_counter()
    p.stop()
    stopped = time.perf_counter() - t0
    p.close()
    assert stopped < 0.1, stopped
