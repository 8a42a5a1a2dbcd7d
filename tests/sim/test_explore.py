"""Exhaustive mode: all delivery orders of small cases; the shortest counterexample of a broken one."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import Cluster, InputError, Op, Workload
from mkernel.builders import gemm_ar
from mkernel.cli import main
from mkernel.sim.explore import explore

W = Workload(m=128, n=512, k=32, chunk_tiles=1, baseline_chunk_kib=128, baseline_channels=4)


@pytest.mark.parametrize("transport,notify", [("ib_rc", "auto"), ("efa_srd", "auto"), ("efa_srd", "fence"),
                                              ("ibgda", "auto")])
@pytest.mark.parametrize("nodes,gpus", [(2, 1), (2, 2), (1, 2)])
def test_correct_fused_schedule_is_safe_in_every_order(nodes, gpus, transport, notify):
    c = Cluster("t", nodes, gpus, transport=transport, notify=notify)
    found = explore(gemm_ar.build(W, c), c)
    assert found.ok and found.states >= 1


def test_baseline_ring_is_safe_in_every_srd_order():
    c = Cluster("t", 2, 1, transport="efa_srd")
    found = explore(gemm_ar.build_baseline(W, c), c)
    assert found.ok and found.states > 100  # many orders really were tried


def test_srd_flag_write_has_a_one_step_counterexample():
    c = Cluster("t", 2, 2, transport="efa_srd", notify="flag")
    found = explore(gemm_ar.build(W, c), c)
    assert not found.ok and "hazard" in found.failure
    assert len(found.counterexample) == 1 and found.counterexample[0].startswith("flag of task")


def test_same_schedule_is_safe_on_rc():
    c = Cluster("t", 2, 2, transport="ib_rc", notify="flag")
    assert explore(gemm_ar.build(W, c), c).ok


def test_missing_wait_found_without_any_delivery():
    c = Cluster("t", 2, 1)
    s = gemm_ar.build(W, c)
    victim = next(t for t in s.tasks if t.op is Op.REDUCE and t.waits)  # the add of a received chunk
    tasks = list(s.tasks)
    tasks[victim.id] = dataclasses.replace(victim, waits=())
    found = explore(dataclasses.replace(s, tasks=tuple(tasks)), c)
    assert not found.ok and found.counterexample == ()


def test_too_large_cases_are_refused():
    with pytest.raises(InputError, match="at most 2 nodes x 2 GPUs"):
        explore(gemm_ar.build(W, Cluster("t", 2, 4)), Cluster("t", 2, 4))
    big = Workload(m=512, n=1024, k=32, chunk_tiles=1)
    with pytest.raises(InputError, match="messages in flight"):
        c = Cluster("t", 2, 1, transport="efa_srd", notify="flag")
        explore(gemm_ar.build(big, c), c)


def test_explore_command(capsys, tmp_path):
    path = tmp_path / "small.toml"
    path.write_text("[cluster]\nnodes = 2\ngpus_per_node = 1\ntransport = 'efa_srd'\n[workload]\n"
                    "kernel = 'gemm_ar'\nm = 128\nn = 512\nk = 32\nchunk_tiles = 1\nbaseline_chunk_kib = 128\n"
                    "baseline_channels = 4\n")
    argv = ["explore", str(path)]
    assert main(argv) == 0
    assert main(argv + ["--notify", "flag"]) == 1
    out = capsys.readouterr().out
    assert "every delivery order is safe" in out and "BROKEN: hazard" in out and "1. flag of task" in out


@pytest.mark.parametrize("nodes,gpus", [(2, 1), (2, 2)])
@pytest.mark.parametrize("kernel,shape", [
    ("ag_gemm", dict(m=512, n=256, k=32)),
    ("gemm_rs", dict(m=512, n=256, k=32, chunk_tiles=2)),
    ("gemm_ar", dict(m=256, n=512, k=32, chunk_tiles=1, internode="twoshot")),
    ("gemm_ar", dict(m=256, n=512, k=32, chunk_tiles=1, internode="ring")),
    ("ag_gemm", dict(m=512, n=256, k=32, internode="ring")),
    ("gemm_rs", dict(m=512, n=256, k=32, chunk_tiles=2, internode="ring")),
    ("ring_attention", dict(m=32, n=1, k=16, tile_m=16, causal=1)),
    ("moe_dispatch_gemm", dict(m=96, n=32, k=32, experts=8, topk=2, tile_m=16, tile_n=32, routing="zipf_shifted")),
])
def test_every_op_is_safe_in_every_srd_delivery_order(kernel, shape, nodes, gpus):
    from mkernel.builders import get

    c = Cluster("t", nodes, gpus, transport="efa_srd")
    found = explore(get(kernel).build(Workload(kernel=kernel, **shape), c), c)
    assert found.ok, found.failure
    assert found.states > 1  # several orders were really tried
