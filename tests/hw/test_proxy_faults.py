"""Faults the proxy injects (issue 10), on the CPU with the fake transport: each either leaves the
result exact or ends in a clear error within its timeout, never in silent corruption.

The same native proxy runs the GPU path; tests/hw/test_hw_faults.py (marked gpu) injects the same faults
into the loopback transport under the fused kernels.
"""
from __future__ import annotations

import time

import pytest

from mkernel.errors import InputError
from mkernel.hw.lowering import ring
from mkernel.hw.runtime.proxy import HostRing, ProxyError, ProxyFaults

from harness.mesh import Mesh, flag_before_data


def _all_puts(mesh: Mesh, epoch: int = 5) -> HostRing:
    """One PUT per (rank, chunk), then a SIGNAL per rank on chunk 0 (re-set after that rank's PUTs)."""
    hr = HostRing(mesh.nranks * mesh.n_flags + mesh.nranks)
    for c in range(mesh.n_flags):
        for d in range(mesh.nranks):
            hr.push(mesh.put(d, c, epoch))
    for d in range(mesh.nranks):
        hr.push(ring.Command(ring.SIGNAL, d, 0, 0, 0, 0, epoch + 1))
    return hr


def _exact(mesh: Mesh, epoch: int = 5) -> bool:
    return all((mesh.dst[d] == mesh.src).all() and (mesh.flags[d][1:] == epoch).all() and mesh.flags[d][0] == epoch + 1
               for d in range(mesh.nranks))


@pytest.mark.parametrize("seed", range(4))
def test_reordered_batches_stay_exact_and_keep_signals_after_their_puts(seed):
    mesh = Mesh(4, 32, seed)
    hr = _all_puts(mesh)
    with mesh.proxy(hr, seed=seed, faults=ProxyFaults(seed=seed, reorder=True)) as p:
        pass
    log = p.fake_log()
    assert _exact(mesh) and flag_before_data(log[:-8]) == []
    data = [(d, c) for f, c, d in log.tolist() if not f]
    posted = [(d, c) for c in range(32) for d in range(4)]
    assert data != posted and sorted(data) == sorted(posted)  # RC transport, yet the order changed
    for d in range(4):  # each rank's SIGNAL (the last flag on chunk 0) comes after all its data
        last_data = max(i for i, (f, c, r) in enumerate(log.tolist()) if r == d and not f)
        signal = max(i for i, (f, c, r) in enumerate(log.tolist()) if r == d and f and c == 0)
        assert signal > last_data


def test_delayed_batches_stay_exact_and_take_at_least_the_delay():
    mesh = Mesh(2, 8, 0)
    hr = _all_puts(mesh)
    t0 = time.perf_counter()
    with mesh.proxy(hr, max_batch=8, faults=ProxyFaults(delay_us=20_000)) as p:
        pass
    assert _exact(mesh)
    assert time.perf_counter() - t0 >= 0.02 * p.stats()["batches"] * 0.99


def test_a_lost_message_fails_the_proxy_naming_it_and_aborts_the_waiters():
    mesh = Mesh(2, 16, 0)
    hr = _all_puts(mesh)
    p = mesh.proxy(hr, faults=ProxyFaults(seed=3, drop=0.2)).start()
    with pytest.raises(ProxyError, match=r"transport failure at ring slot \d+ \(dst_rank \d, chunk \d+, epoch 5\): "
                                         r"PUT to rank \d, chunk \d+ lost: .*injected drop"):
        p.stop()
    assert ring.ERRORS[int(hr.ctl[ring.CTL_ABORT])] == "transport failure"  # producers and device waiters give up
    with pytest.raises(ProxyError, match="the proxy aborted"):
        hr.push(mesh.put(0, 0, 6), timeout_s=0.05)
    p.close()


def test_a_dead_proxy_leaves_producers_a_bounded_wait_and_check_says_it_died():
    """It dies after consuming 5 commands, before returning their credits (as a crashed process
    would): the producer fills the 8 slots, then its next push times out naming the slot."""
    mesh = Mesh(2, 64, 0)
    hr = HostRing(8)
    p = mesh.proxy(hr, faults=ProxyFaults(die_after=5))
    for c in range(8):  # a full ring before it starts: it reads 5 records in one sweep and dies
        hr.push(mesh.put(c % 2, c, 2), timeout_s=1.0)
    p.start()
    deadline = time.perf_counter() + 2.0
    while not p.stats()["killed"] and time.perf_counter() < deadline:
        time.sleep(0.001)
    with pytest.raises(ProxyError, match=r"no credit for ring slot 8 within 0.05 s"):
        hr.push(mesh.put(0, 8, 2), timeout_s=0.05)
    with pytest.raises(ProxyError, match=r"the proxy thread is dead \(injected: it died after 5 commands\)"):
        p.check()
    assert all(mesh.flags[c % 2][c] == 0 for c in range(5, 8))  # nothing after its death was posted
    p.close()


def test_no_fault_is_the_default_and_bad_fault_knobs_are_refused():
    mesh = Mesh(2, 8, 0)
    hr = _all_puts(mesh)
    with mesh.proxy(hr, faults=ProxyFaults()) as p:
        pass
    assert _exact(mesh) and p.stats()["killed"] == 0
    for bad in (dict(drop=1.5), dict(delay_us=-1.0), dict(die_after=-2)):
        with pytest.raises(InputError, match="drop must be in"):
            ProxyFaults(**bad)


def test_the_cli_form_parses_into_proxy_faults_and_refuses_bad_items(capsys):
    assert ProxyFaults.parse("reorder=1, delay_us=20,drop=0.01,die_after=100,seed=3") == ProxyFaults(
        seed=3, drop=0.01, reorder=True, delay_us=20.0, die_after=100)
    assert ProxyFaults.parse("") == ProxyFaults()
    for bad, why in (("duplicate=0.2", "key one of seed, drop, reorder, delay_us, die_after"),
                     ("drop=lots", "bad value for drop"), ("reorder", "expected key=value"), ("drop=2", "drop must be in")):
        with pytest.raises(InputError, match=why):
            ProxyFaults.parse(bad)
    from mkernel.cli import main

    assert main(["run", "--backend", "hw", "--nodes", "2", "--faults", "duplicate=0.2"]) == 2
    assert "the hw proxy's faults" in capsys.readouterr().err


SURVIVABLE = {"reorder": (ProxyFaults(seed=1, reorder=True), {}), "delay": (ProxyFaults(delay_us=30.0), {}),
              # batches of 3 end inside a run of PUTs: shuffle_puts' tail run (no SIGNAL after it)
              "reorder-3": (ProxyFaults(seed=1, reorder=True), {"max_batch": 3})}


@pytest.mark.parametrize("fault", sorted(SURVIVABLE))
@pytest.mark.parametrize("case", ["gemm_rs", "gemm_ar", "ring_attention"])
def test_every_ranks_call_commands_arrive_whole_under_the_survivable_faults(case, fault):
    """The GPU fault test's command streams without the GPU (2026-12-05: GEMM+RS timed out in its
    first call's barrier under both survivable faults on the emulated 2 x 2): each rank's ring
    commands of three calls on that cluster (arrival SIGNALs, its puts' commands, exit SIGNALs),
    through four proxies at once with the fault the GPU test injects. Every flag holds its call's
    epoch, every put's bytes land, every SIGNAL follows the puts its ring put before it (the check
    catches a planted flag-before-data transport: tests/hw/test_hw_proxy.py's flag_early)."""
    from harness.cases import workload
    from harness.mesh import replay

    from mkernel import builders
    from mkernel.cluster import Cluster
    from mkernel.hw.lowering import plan

    faults, kw = SURVIVABLE[fault]
    plans = plan.build(builders.get(workload(case).kernel).build(workload(case), Cluster("hw", 2, 2).with_sms(33)))
    assert replay(plans, 3, faults=faults, **kw) == []


def test_the_replay_check_catches_a_flag_written_before_its_data():
    """The check above can fail: a transport that writes flags as separate unordered writes
    (flag_early, the naive SRD design) lets ring attention's SIGNALs overtake their puts' data."""
    from harness.cases import workload
    from harness.mesh import replay

    from mkernel import builders
    from mkernel.cluster import Cluster
    from mkernel.hw.lowering import plan

    w = workload("ring_attention")
    plans = plan.build(builders.get(w.kernel).build(w, Cluster("hw", 2, 2).with_sms(33)))
    assert any("written after" in e for e in replay(plans, 3, seed=0, unordered=True, flag_early=True))
