"""Library calls in a simulated run: a baseline launch that stands for an NCCL collective or a
cuBLAS GEMM (``Launch.library``) lasts what the call's model says, not what its tasks would take.

The baselines' collectives are declared in the IR as rings of tasks (so a data run checks them
against the oracle), but NCCL does not run those rings: it picks an algorithm and a protocol per
size and spreads channels over every NIC (:mod:`mkernel.nccl`). So in a timing run (no data) such
a launch is one call: it starts when every simulated rank has reached it (a collective cannot end
before its last rank joins), lasts the model's time, and then every task of the launch counts as
done on every rank (its writes landed, its signals bumped), so later launches and the hazard
tracker see what the call produced. A data run executes the tasks instead (their data is the
point); :func:`mkernel.runner.run` times the baseline with a timing run beside it.

A ``gemm`` call is one dense GEMM on every SM: waves of 128 x 256 tiles at the cost model's
per-tile time (:func:`mkernel.sim.cost.gemm_us`), the speed of a cuBLAS call of that shape.
"""
from __future__ import annotations

import math

from mkernel import cost, nccl
from mkernel.ir import Library, Op, Region, Role, Task

from .signals import flat_keys

GEMM_TILE = (128, 256)  # cuBLAS's large-shape bf16 tile on the H200 class (h200-facts: 128x256x64)


def call_us(library: Library, c) -> float:
    """The modelled time of one library call on cluster ``c`` (the baseline variant's rates)."""
    if library.kind == "gemm":
        return gemm_call_us(*library.shape, c)
    return nccl.estimate(library.kind, library.nbytes, nccl.fabric_of(c)).time_us


def gemm_call_us(m: int, n: int, k: int, c) -> float:
    """A dense m x n x k bf16 GEMM on all of a GPU's SMs: full waves of tiles, the last one partial."""
    tm, tn = GEMM_TILE
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    task = Task(0, 0, Role.COMPUTE, Op.GEMM, reads=(Region("A", 0, 0, min(tm, m), 0, k), Region("B", 0, 0, k, 0, min(tn, n))),
                writes=(Region("C", 0, 0, min(tm, m), 0, min(tn, n)),))
    per_tile = cost.gemm_us(task, {"A": 2, "B": 2, "C": 2}, c, busy=min(tiles, c.gpu.sms))
    return math.ceil(tiles / c.gpu.sms) * per_tile


class LibraryCalls:
    """The library launches of one simulated run (timing runs only)."""

    def __init__(self, model) -> None:
        self.m = model
        self.calls: dict[int, list] = {}  # launch index -> [ranks arrived, done event]

    def enter(self, rank: int, li: int, library: Library):
        """Process step of ``rank`` reaching launch ``li``: wait for the call to end."""
        env = self.m.env
        state = self.calls.setdefault(li, [0, env.event()])
        state[0] += 1
        if state[0] == len(self.m.ranks):  # the last rank joined: the call runs now
            env.call_later(call_us(library, self.m.c), self._complete, (li, state[1]))
        yield state[1]

    def _complete(self, call: tuple) -> None:
        """The call ended: every task of the launch is done, a group as all its members (each bumps
        its own signals, and its writes land)."""
        li, done = call
        m = self.m
        for task in m.s.tasks:
            if task.launch == li:
                m.log.landed_writes(task)
                keys, times, repeat = flat_keys(task)
                m.board.bump_keys(keys, times, repeat)
        done.succeed()
