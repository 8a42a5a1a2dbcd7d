"""MoE Dispatch+GEMM: data mode on every topology and transport with uniform, Zipf and shifted Zipf routing, the
closed-form network bytes (only tokens routed off-node, once per node), and what it refuses."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mkernel import Cluster, Op, Workload, reference
from mkernel.cluster import FabricSpec
from mkernel.builders import moe_dispatch_gemm as moe
from mkernel.errors import ProblemError
from mkernel.report import static_bytes
from mkernel.routing import route
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

TOPOLOGIES = [(1, 1), (1, 2), (1, 8), (2, 1), (2, 2), (2, 8), (3, 2), (4, 4)]


def shape(world: int, routing: str) -> Workload:
    return Workload(kernel="moe_dispatch_gemm", m=48 * world, n=40, k=32, experts=4 * world, topk=3,
                    routing=routing, tile_m=16, tile_n=32)


@pytest.mark.parametrize("routing", ["uniform", "zipf", "zipf_shifted"])
@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES)
def test_data_mode_matches_numpy(nodes, gpus, transport, routing):
    c = Cluster("t", nodes, gpus, transport=transport)
    w = shape(c.world, routing)
    inputs = moe.make_inputs(w, c, np.random.default_rng(nodes * 10 + gpus))
    expected = reference.expected(w, inputs, gpus)["Y"]
    for build in (moe.build, moe.build_baseline):
        s = build(w, c)
        s.validate()
        out = SimBackend().run(s, c, inputs=inputs).outputs["Y"]
        for rank, (o, e) in enumerate(zip(out, expected)):
            assert reference.relative_error(o, e) <= DATA_RTOL, f"{s.variant} rank {rank}"


@pytest.mark.parametrize("routing", ["uniform", "zipf", "zipf_shifted"])
@pytest.mark.parametrize("nodes,gpus,spine", [(2, 2, None), (2, 8, None), (4, 4, None), (4, 4, (2, 2.0))])
def test_each_node_gets_its_routed_tokens_once_or_the_whole_buffer_zero_copy(nodes, gpus, spine, routing):
    """Closed form: rank r sends each other node m the tokens it routes to any expert hosted there,
    once (staged), or all of its T/world tokens straight from X (zero-copy, as the reference code
    always does) when the network time of the rows m does not need is below the send SMs' time to
    stage the rows it does: (T/world - needed) * row / rate < needed * 2 * row / (send SMs x
    stream rate), the rate the NIC's, or to a node across an oversubscribed spine (``spine``: nodes
    per leaf, oversubscription) its share: (nodes - 1) / (oversubscription x (nodes - nodes per leaf))
    when every node sends to every other. The all-to-all sends a token once per destination GPU."""
    c = Cluster("t", nodes, gpus)
    if spine:
        c = dataclasses.replace(c, fabric=FabricSpec(*spine))
    w = Workload(kernel="moe_dispatch_gemm", m=64 * c.world, n=64, k=128, experts=8 * c.world, topk=4,
                 routing=routing)
    per_gpu, per, row = w.experts // c.world, w.m // c.world, w.k * 2
    routes = route(w, c.world, c.gpus_per_node)
    stage_us = 2 * row / (moe.DEFAULT_SEND_SMS * c.gpu.sm_stream_gb_per_s * 1e3)
    share = min(1.0, (nodes - 1) / (spine[1] * (nodes - spine[0]))) if spine else 1.0
    closed, straight, at_nic_rate = [], [], []
    for r in range(c.world):
        node_of_expert = routes[r] // per_gpu // gpus
        sent = 0
        for m in range(nodes):
            if m == c.node_of(r):
                continue
            needed = int((node_of_expert == m).any(axis=1).sum())
            crosses = bool(spine) and c.node_of(r) // spine[0] != m // spine[0]
            extra_us = (per - needed) * row / (c.nic.gb_per_s * 1e3)
            zero_copy = extra_us / (share if crosses else 1.0) < needed * stage_us
            straight.append(zero_copy)
            at_nic_rate.append(extra_us < needed * stage_us)
            sent += per if zero_copy else needed
        closed.append(float(sent * row))
    fused = static_bytes(moe.build(w, c))["network"]
    assert fused == closed
    if spine and routing != "uniform":  # Zipf's hot nodes: the spine's share stages some a NIC's rate would not
        assert straight != at_nic_rate
    # top-4 of 8 experts per GPU: at 2 nodes ~94% of a rank's tokens go to the other node (zero-copy
    # wins); at 4 nodes ~70% go to each under uniform routing (staging wins; Zipf's hot nodes may not)
    if nodes == 2:
        assert all(straight)
    elif routing == "uniform":
        assert not any(straight)
    assert sum(static_bytes(moe.build_baseline(w, c))["network"]) >= sum(fused)


def test_the_grouped_gemm_starts_on_local_tokens():
    """GEMM tiles are queued by the farthest source they wait for: own tokens, then node, then remote."""
    c = Cluster("t", 2, 2)
    s = moe.build(dataclasses.replace(shape(c.world, "uniform"), tile_m=4), c)  # tiles inside one source
    source_of = {}  # the source rank of the tokens behind each dispatch signal
    for t in s.tasks:
        if t.op is Op.GATHER and t.writes[0].buffer == "XE":
            src = t.rank if t.label.startswith("tokens to") else int(t.label.split()[3])
            source_of.update({sig: src for sig in t.signals})

    def distance(source: int) -> tuple[int, int]:
        return ((c.node_of(source) - c.node_of(0)) % c.nodes, (c.local_of(source) - c.local_of(0)) % c.gpus_per_node)

    keys = [max(distance(source_of[w.signal]) for w in t.waits) for t in s.tasks if t.rank == 0 and t.op is Op.GEMM]
    assert keys == sorted(keys) and keys[0] == (0, 0) and keys[-1][0] == 1


def test_dispatch_moves_at_most_16_tokens_per_gather():
    c = Cluster("t", 2, 2)
    w = Workload(kernel="moe_dispatch_gemm", m=96 * c.world, n=40, k=32, experts=2 * c.world, topk=2)
    s = moe.build(w, c)
    s.validate()
    sizes = [t.writes[0].shape[0] for t in s.tasks if t.op is Op.GATHER and t.writes[0].buffer == "XE"]
    assert max(sizes) == 16 and min(sizes) < 16  # segments of more than 16 tokens were split
    inputs = moe.make_inputs(w, c, np.random.default_rng(4))
    out = SimBackend().run(s, c, inputs=inputs).outputs["Y"]
    for o, e in zip(out, reference.expected(w, inputs, 2)["Y"]):
        assert reference.relative_error(o, e) <= DATA_RTOL


def test_shapes_that_do_not_split_are_refused():
    with pytest.raises(ProblemError, match="multiples of 4; got m=102"):
        moe.check(Workload(kernel="moe_dispatch_gemm", m=102, n=64, k=64, experts=16), Cluster("t", 2, 2))
    with pytest.raises(ProblemError, match="topk=9 distinct experts, more than the 8 experts"):
        moe.check(Workload(kernel="moe_dispatch_gemm", m=64, n=64, k=64, experts=8, topk=9), Cluster("t", 2, 2))
