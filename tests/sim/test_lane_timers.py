"""A lane's pending timers (sim/runs.py ``Timer``, kept on the lane by ``Dispatch._later``): runs of one
lane that ask for the same step at the same time share one timer, so they go on together (their SMs
take their next work together, in one call), and the step runs once for them, when due.

Checked on every-node runs of four ops (in MoE's, a run's timer is often not its lane's newest, so
the scan must look past it): after each ``_later``, the lane holds no two timers of one step and time, the run
sits in the one of its step and time, every timer holds runs of its lane only, and some timers
were shared; each due timer has left its lane before its step runs, and runs that step once.
"""
from __future__ import annotations

import collections
import dataclasses

import pytest

from mkernel import builders
from mkernel.problems import DEFAULT_SHAPES
from mkernel.scenario import load_scenario
from mkernel.sim import dispatch
from mkernel.sim.engine import Model


@pytest.mark.python_core
@pytest.mark.parametrize("kernel", ["gemm_ar", "gemm_rs", "ag_gemm", "moe_dispatch_gemm"])
def test_runs_of_one_lane_step_and_time_share_one_timer(monkeypatch, kernel):
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=2, gpus_per_node=4)
    shape = {**DEFAULT_SHAPES[kernel], "m": 2048} if kernel == "moe_dispatch_gemm" else {"m": 4096, "n": 4096, "k": 256}
    s = builders.get(kernel).build(dataclasses.replace(sc.workload, kernel=kernel, **shape), c, grouped=True)
    later, due = dispatch.Dispatch._later, dispatch.Dispatch._due
    seen = collections.Counter()  # timers by how many runs they held when due

    def checked_later(self, delay, then, run):
        later(self, delay, then, run)
        at = self.env.now + delay
        timers = run.lane.timers
        keys = [(id(t.then), t.at) for t in timers]
        assert len(keys) == len(set(keys)), keys
        mine = [t for t in timers if t.then is then and t.at == at]
        assert len(mine) == 1 and run in mine[0].runs
        assert all(r.lane is run.lane for t in timers for r in t.runs)

    def checked_due(self, timer):
        lane = timer.runs[0].lane
        assert timer in lane.timers
        calls = []
        then = timer.then
        timer.then = lambda model, runs: calls.append(len(runs)) or then(model, runs)
        due(self, timer)
        assert timer not in lane.timers and calls == [len(timer.runs)]
        seen[len(timer.runs)] += 1

    monkeypatch.setattr(dispatch.Dispatch, "_later", checked_later)
    monkeypatch.setattr(dispatch.Dispatch, "_due", checked_due)
    model = Model(s, c, None)
    model.run()
    assert sum(seen.values()) > 0 and max(seen) > 1, seen  # some timers carried several runs
