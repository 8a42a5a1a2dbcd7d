"""Analytic oracles: network collectives at 2-64 nodes against closed-form alpha-beta times, bytes
conservation, and no link ever above its capacity."""
from __future__ import annotations

import pytest

from mkernel import BufferKind, Cluster, NicSpec, Op, ProxySpec, Region, Role, ScheduleBuilder, Signal, Wait
from mkernel.builders import _collectives as coll
from mkernel.builders._tiling import split_rows
from mkernel.cluster import GpuSpec, NvlinkSpec
from mkernel.sim import SimBackend

ROWS, COLS = 4096, 1024  # 8 MiB of bf16 in all
PROXY = ProxySpec(gpu_enqueue_us=0.4, poll_us=0.0, per_command_us=0.3, doorbell_us=0.2, batch_window_us=0.0)
NIC = NicSpec(count=1, gbit_per_s=400.0, latency_us=2.5, per_message_us=0.6)
ALPHA_US = 0.4 + 0.3 + 0.2 + 0.6 + 2.5  # enqueue + command + doorbell + message + wire
BETA = 50e3  # bytes per us


def cluster(nodes: int) -> Cluster:
    return Cluster("oracle", nodes, 1, gpu=GpuSpec(sm_stream_gb_per_s=1e9), nvlink=NvlinkSpec(latency_us=0.0),
                   nic=NIC, proxy=PROXY)


def ring_schedule(nodes: int, kind: str):
    """An unchunked ring over ``nodes`` single-GPU nodes: each block travels as one message a hop."""
    sb = ScheduleBuilder("oracle", kind, nodes, 1, 132)
    for name in ("X", "IN", "STAGE"):
        sb.buffer(name, ROWS, COLS, kind=BufferKind.SCRATCH)
    sb.buffer("OUT", ROWS, COLS, kind=BufferKind.SCRATCH)
    sb.launch("k", {Role.SEND: 1, Role.RECV: 1})
    blocks = [(r0, r1) for r0, r1 in split_rows(0, ROWS, nodes)]
    ring = coll.Ring(list(range(nodes)), [blocks], COLS, ROWS, True, "r")
    def got(r, _lane):
        return (Signal(r, "got"),)

    if kind in ("reduce_scatter", "all_reduce"):
        coll.reduce_scatter(sb, ring, src="X", inbuf="IN", stage="STAGE",
                            dest=lambda r, r0, r1: Region("OUT", r, r0, r1, 0, COLS),
                            done=lambda r, lane: (Signal(r, "rs_done"),) + got(r, lane))
    if kind in ("all_gather", "all_reduce"):
        ready = coll.none if kind == "all_gather" else (lambda r, lane, _block: (Wait(Signal(r, "rs_done"), 1),))
        coll.all_gather(sb, ring, buf="OUT", ready=ready, arrived_extra=got)
    for rank in range(nodes):  # the collective ends on a rank when all it receives has landed
        sb.add(rank, Role.RECV, Op.NOP, waits=(Wait(Signal(rank, "got"), sb.bumped(Signal(rank, "got"))),))
    return sb.build(0.0)


@pytest.mark.parametrize("nodes", [2, 3, 4, 8, 16, 64])
@pytest.mark.parametrize("kind,hops", [("all_gather", 1), ("reduce_scatter", 1), ("all_reduce", 2)])
def test_ring_collectives_match_alpha_beta(nodes, kind, hops):
    stats = SimBackend().run(ring_schedule(nodes, kind), cluster(nodes))
    block = ROWS // nodes * COLS * 2
    expected_us = hops * (nodes - 1) * (ALPHA_US + block / BETA)
    assert stats.time_s * 1e6 == pytest.approx(expected_us, rel=0.01)
    assert stats.hazards == ()


def tree_broadcast(nodes: int):
    """Heap-ordered binary tree: node i forwards to 2i+1 and 2i+2 at once, after its data arrived."""
    sb = ScheduleBuilder("oracle", "tree_broadcast", nodes, 1, 132)
    sb.buffer("OUT", ROWS, COLS, kind=BufferKind.SCRATCH)
    sb.launch("k", {Role.SEND: 2})
    for i in range(nodes):
        for child in (2 * i + 1, 2 * i + 2):
            if child < nodes:
                waits = (Wait(Signal(i, "got"), 1),) if i else ()
                sb.add(i, Role.SEND, Op.PUT, reads=(Region("OUT", i, 0, ROWS, 0, COLS),),
                       writes=(Region("OUT", child, 0, ROWS, 0, COLS),), waits=waits,
                       signals=(Signal(child, "got"),), label=f"to {child}")
    for i in range(1, nodes):  # a leaf's kernel ends when its data has landed
        if 2 * i + 1 >= nodes:
            sb.add(i, Role.SEND, Op.NOP, waits=(Wait(Signal(i, "got"), 1),))
    return sb.build(0.0)


@pytest.mark.parametrize("nodes", [2, 3, 5, 8, 16, 33, 64])
def test_tree_broadcast_matches_alpha_beta(nodes):
    stats = SimBackend().run(tree_broadcast(nodes), cluster(nodes))
    size = ROWS * COLS * 2
    # A parent with two children posts both (one proxy batch each, d = command + doorbell apart) and
    # its NIC is shared while both flows run: the first lands at 2S/beta - d, the second at 2S/beta.
    d = 0.3 + 0.2

    def arrival(node: int) -> float:
        if node == 0:
            return 0.0
        parent = (node - 1) // 2
        kids = sum(1 for c in (2 * parent + 1, 2 * parent + 2) if c < nodes)
        wire = size / BETA if kids == 1 else 2 * size / BETA - (d if node == 2 * parent + 1 else 0.0)
        return arrival(parent) + ALPHA_US + wire

    assert stats.time_s * 1e6 == pytest.approx(max(arrival(n) for n in range(nodes)), rel=0.01)


@pytest.mark.parametrize("nodes", [2, 5, 16])
def test_bytes_are_conserved_and_no_link_exceeds_capacity(nodes):
    schedule = ring_schedule(nodes, "all_reduce")
    stats = SimBackend().run(schedule, cluster(nodes), trace=True)
    sent = sum(r.size * 2 for t in schedule.tasks if t.op is Op.PUT for r in t.reads)
    assert stats.bytes_total["network"] == sent
    links = stats.counters
    out_bytes = sum(v for r, name, v in _integrate(links) if name.endswith(".out"))
    in_bytes = sum(v for r, name, v in _integrate(links) if name.endswith(".in"))
    assert out_bytes == pytest.approx(in_bytes, rel=1e-9) and out_bytes == pytest.approx(sent, rel=1e-6)
    capacity = {"nic0.out": 50.0, "nic0.in": 50.0}
    for _rank, name, samples in links:
        assert max(v for _, v in samples) <= capacity[name] * (1 + 1e-9), name
    assert stats.metrics["max_link_utilization"] <= 1.0


def _integrate(counters):
    """Bytes each link carried: the integral of its GB/s samples over microseconds (x 1e3)."""
    for rank, name, samples in counters:
        total = sum(v * (t1 - t0) for (t0, v), (t1, _) in zip(samples, samples[1:]))
        yield rank, name, total * 1e3
