"""What an NVLink task (COPY/REDUCE/GATHER) costs a run of the engine (:meth:`Model._nvlink`), worked
out once per shape.

A rank's thousands of copies and reductions differ in where their regions sit, not in what they
cost: the cost is a function of the op, the rank, the accumulate flag, the gather's row count and,
per region, its buffer, rank and shape. :func:`shared` keys plans by exactly that, so the engine
plans a few dozen shapes however many tasks there are (the model keeps them in ``_nv_plans``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mkernel import cost
from mkernel.ir import Task

if TYPE_CHECKING:
    from .engine import Model


def shared(m: Model, task: Task) -> tuple:
    """:func:`plan` of ``task``, shared by every task it is the same function of."""
    key = (task.op, task.rank, task.accumulate, len(task.index), len(task.reads),  # (then each region's)
           *[(r.buffer, r.rank, r.row1 - r.row0, r.col1 - r.col0) for r in task.reads + task.writes])
    return m._nv_plans.get(key) or m._nv_plans.setdefault(key, plan(m, task))


def plan(m: Model, task: Task) -> tuple:
    """An NVLink task's run cost in model ``m``: whether it touches a peer, its local streaming time
    (before any injected slowdown), its step time, its flows' plan (None without peer transfers),
    the fixed cost merged into its end (a quiet run's peer task) and its round trip after the flow
    (before any stress). Each is a function of what :func:`shared` keys plans by and of the model's
    settings."""
    transfers = cost.remote_transfers(task, m.itemsize)
    local_us = cost.local_bytes(task, m.itemsize) / m.sm_stream
    flows = None
    if transfers:
        half = m.c.nvlink.half_efficiency_bytes
        legs = []
        home = m.home  # a folded run's peer ports are the base's: the flows on them are its images
        for src, dst, b in transfers:
            legs += [(m.nv_out[home[src]], b, b + half), (m.nv_in[home[dst]], b, b + half)]
        flows = m.flows.plan_legs(sum(b + half for _, _, b in transfers), legs, m.sm_copy)
    paid, step_us = cost.touches_peer(task), cost.step_us(task, m.c)
    tail = m.c.gpu.fused_peer_task_us if paid else 0.0  # the fused kernel's fixed cost of a peer task
    return paid, local_us, step_us, flows, tail if m.quiet else 0.0, m.c.nvlink.latency_us + step_us
