"""The first simulator: closed-form transfer times, fair sharing, determinism, deadlock reports."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import cost
from mkernel import (BufferKind, Cluster, DeadlockError, NicSpec, NvlinkSpec, Op, ProxySpec, Region, Role,
                     ScheduleBuilder, Signal, Wait, Workload)
from mkernel.builders import gemm_ar
from mkernel.cluster import GpuSpec
from mkernel.sim import SimBackend

ROWS, COLS = 1024, 4096  # 8 MiB of bf16


def transfer_schedule(nodes: int, copies: int = 1):
    """Rank 0 sends ROWS x COLS bf16 to rank 1: ``copies`` NVLink pushes, or one network put."""
    gpus = 2 if nodes == 1 else 1
    sb = ScheduleBuilder("xfer", "fused", world=2, gpus_per_node=gpus, num_sms=132)
    sb.buffer("X", ROWS, COLS, kind=BufferKind.INPUT)
    sb.buffer("Y", ROWS, COLS)
    role = Role.INTRA if nodes == 1 else Role.SEND
    sb.launch("k", {role: max(copies, 1), Role.RECV: 1})
    rows = ROWS // copies
    for i in range(copies):
        region = (i * rows, (i + 1) * rows, 0, COLS)
        sb.add(0, role, Op.COPY if nodes == 1 else Op.PUT, reads=(Region("X", 0, *region),),
               writes=(Region("Y", 1, *region),), signals=(Signal(1, "got"),))
    sb.add(1, Role.RECV, Op.NOP, waits=(Wait(Signal(1, "got"), copies),))
    return sb.build(0.0)


def fast_sm_cluster(nodes: int, gpus: int) -> Cluster:
    """A cluster whose SMs never limit a transfer, so links alone set the time."""
    return Cluster("t", nodes, gpus, gpu=GpuSpec(sm_stream_gb_per_s=1e6),
                   nvlink=NvlinkSpec(bw_gb_per_s=450.0, latency_us=1.5, sm_copy_gb_per_s=1e6, half_efficiency_bytes=0.0),
                   nic=NicSpec(count=2, gbit_per_s=200.0, latency_us=3.0, per_message_us=0.0),
                   proxy=ProxySpec(gpu_enqueue_us=0.0, poll_us=0.0, per_command_us=0.0, doorbell_us=0.0,
                                   batch_window_us=0.0))


@pytest.mark.parametrize("copies", [1, 8])
def test_nvlink_transfer_is_latency_plus_bytes_over_bandwidth(copies):
    """One push, or eight at once sharing the 450 GB/s port: latency + all bytes / bandwidth."""
    c = fast_sm_cluster(1, 2)
    t = SimBackend().run(transfer_schedule(1, copies=copies), c).time_s
    expected = 1.5e-6 + ROWS * COLS * 2 / 450e9
    assert abs(t - expected) / expected < 0.01


def test_uncontended_network_transfer_is_latency_plus_bytes_over_bandwidth():
    c = fast_sm_cluster(2, 1)
    t = SimBackend().run(transfer_schedule(2), c).time_s
    expected = 3e-6 + ROWS * COLS * 2 / 25e9  # one message rides one 200 Gb/s NIC
    assert abs(t - expected) / expected < 0.01


def test_messages_stripe_over_the_nics_of_a_gpu():
    """Two half-size messages use both 200 Gb/s NICs: together they take what one 400 Gb/s link would."""
    c = fast_sm_cluster(2, 1)
    t = SimBackend().run(transfer_schedule(2, copies=2), c).time_s
    expected = 3e-6 + ROWS * COLS * 2 / 50e9
    assert abs(t - expected) / expected < 0.01


def test_one_sm_caps_an_nvlink_copy():
    c = Cluster("t", 1, 2, gpu=GpuSpec(sm_stream_gb_per_s=1e6),
                nvlink=NvlinkSpec(latency_us=0.0, sm_copy_gb_per_s=30.0, half_efficiency_bytes=0.0))
    t = SimBackend().run(transfer_schedule(1), c).time_s
    assert t == pytest.approx(ROWS * COLS * 2 / 30e9, rel=1e-6)


def test_same_seed_same_trace():
    c = Cluster("t", 2, 2)
    s = gemm_ar.build(Workload(m=512, n=512, k=64), c)
    a = SimBackend().run(s, c, trace=True)
    b = SimBackend().run(s, c, trace=True)
    assert a.spans == b.spans and a.events == b.events and a.time_s == b.time_s
    assert len([sp for sp in a.spans if sp[1] != 'proxy']) == len(s.tasks)


def test_deadlock_is_reported_not_hung():
    """With one SM, a task that waits for the task queued behind it can never run; validate() cannot
    see that (the dependency graph has no cycle), the simulator must."""
    sb = ScheduleBuilder("dl", "fused", world=1, gpus_per_node=1, num_sms=4)
    sb.buffer("X", 4, 4, kind=BufferKind.INPUT)
    sb.buffer("Y", 4, 4)
    sb.launch("k", {Role.INTRA: 1})
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "later"), 1),), label="first")
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 4, 0, 4),), writes=(Region("Y", 0, 0, 4, 0, 4),),
           signals=(Signal(0, "later"),), label="second")
    s = sb.build(0.0)
    s.validate()
    with pytest.raises(DeadlockError, match=r"rank 0 role intra task 0 \(nop 'first'.*waits for later\[0\]@0 >= 1, has 0"):
        SimBackend().run(s, Cluster("t", 1, 1))


def test_efa_srd_flag_costs_a_receiving_proxy_hop():
    ib = fast_sm_cluster(2, 1)
    efa = Cluster("t", 2, 1, transport="efa_srd", gpu=ib.gpu, nvlink=ib.nvlink,
                  nic=dataclasses.replace(ib.nic, srd_jitter_us=0.0),
                  proxy=dataclasses.replace(ib.proxy, per_command_us=0.7))
    s = transfer_schedule(2)
    t_ib = SimBackend().run(s, ib).time_s
    t_efa = SimBackend().run(s, efa).time_s
    assert t_efa == pytest.approx(t_ib + 2 * 0.7e-6, rel=1e-9)  # sender's post + receiver's flag


def test_same_trace_across_processes():
    """No iteration over hash-ordered containers: two interpreters with different hash seeds agree."""
    import os
    import subprocess
    import sys

    code = ("import hashlib; from mkernel import Cluster, Workload; from mkernel.builders import gemm_ar; "
            "from mkernel.sim import SimBackend; c = Cluster('t', 2, 4); "
            "s = gemm_ar.build(Workload(m=1024, n=1024, k=64), c); st = SimBackend().run(s, c, trace=True); "
            "print(st.events, hashlib.sha256(repr(st.spans).encode()).hexdigest())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1, outs


def test_a_controller_moves_sms_between_roles_at_task_boundaries():
    """One compute SM, one intra SM, four 8 MiB local copies on intra. Static: the copies run one
    after another. With a controller that hands intra the compute SM once compute has no work,
    two copies run at a time: about half the time."""
    from mkernel.sim.engine import Model

    sb = ScheduleBuilder("pool", "fused", world=1, gpus_per_node=1, num_sms=4)
    sb.buffer("X", ROWS, COLS, kind=BufferKind.INPUT)
    sb.buffer("Y", 4 * ROWS, COLS)
    sb.buffer("A", 128, 64, kind=BufferKind.INPUT)
    sb.buffer("B", 64, 256, kind=BufferKind.INPUT)
    sb.buffer("C", 128, 256)
    sb.launch("k", {Role.COMPUTE: 1, Role.INTRA: 1})
    sb.add(0, Role.COMPUTE, Op.GEMM, reads=(Region("A", 0, 0, 128, 0, 64), Region("B", 0, 0, 64, 0, 256)),
           writes=(Region("C", 0, 0, 128, 0, 256),))
    for i in range(4):
        sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, ROWS, 0, COLS),),
               writes=(Region("Y", 0, i * ROWS, (i + 1) * ROWS, 0, COLS),))
    s = sb.build(0.0)
    s.validate()
    c = Cluster("t", 1, 1)

    def run(controller):
        model = Model(s, c, None, controller=controller)
        model.run()
        return model.finish[0]

    def lend_idle_compute(rank, pool, now):
        if not pool.has_work(Role.COMPUTE):
            pool.retarget({Role.COMPUTE: 0, Role.INTRA: 2})

    static, moved = run(None), run(lend_idle_compute)
    copy_us = 2 * ROWS * COLS * 2 / 100e3  # read + write 8 MiB at one SM's 100 GB/s
    gemm_us = cost.gemm_us(s.tasks[0], {b.name: b.itemsize for b in s.buffers}, c)
    assert static == pytest.approx(4 * copy_us, rel=1e-9)
    # the compute SM finishes its tile, then takes copies 2 and 4 while the intra SM does 1 and 3
    assert moved == pytest.approx(gemm_us + 2 * copy_us, rel=1e-9)
