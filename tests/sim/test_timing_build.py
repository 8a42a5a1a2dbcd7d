"""Timing builds (issue 30): a baseline built for a simulated timing run leaves out the tasks of its
library launches (``library_tasks=False``), which such a run times as the call and never runs.

For every op and variant on small clusters (tests/harness/golden_schedules.py), a timing build is the
full build less exactly those launches' tasks, ids renumbered; it simulates the full build's times;
and validate still rejects what would make leaving them out inexact.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness import golden_schedules as golden
from mkernel import builders
from mkernel.errors import BackendUnavailable, ScheduleError
from mkernel.ir import Wait

CASES = list(golden.cases())


def _baselines(w, c, first: int, **kw):
    """The baseline (and the paper's, where the op has one) of one case, grouped, with ``kw``."""
    module = builders.get(w.kernel)
    fold = {"first_nodes": first} if first else {}
    out = [module.build_baseline(w, c, grouped=True, **fold, **kw)]
    if hasattr(module, "build_paper_baseline"):
        out.append(module.build_paper_baseline(w, c, grouped=True, **fold, **kw))
    return out


def _without_ids(tasks) -> list:
    return [dataclasses.replace(t, id=0) for t in tasks]


@pytest.mark.parametrize("name,w,c,first", CASES, ids=[case[0] for case in CASES])
def test_a_timing_build_is_the_full_build_less_its_library_launches_tasks(name, w, c, first):
    for full, timing in zip(_baselines(w, c, first), _baselines(w, c, first, library_tasks=False)):
        library = tuple(i for i, launch in enumerate(full.launches) if launch.library is not None)
        assert timing.elided == library and full.elided == ()
        assert timing.launches == full.launches and timing.buffers == full.buffers
        assert [t.id for t in timing.tasks] == list(range(len(timing.tasks)))
        assert _without_ids(timing.tasks) == _without_ids(t for t in full.tasks if t.launch not in library)
        full.validate(races=not first)
        timing.validate(races=not first)


SIM_CASES = [case for case in CASES if "/2x4/" in case[0] or "/3x2/" in case[0] or "/leaf" in case[0]]


@pytest.mark.parametrize("name,w,c,first", SIM_CASES, ids=[case[0] for case in SIM_CASES])
def test_a_timing_build_simulates_the_full_builds_times(name, w, c, first):
    """Collapsed, and for full builds tracked too (the hazard tracker sees the other launches alone)."""
    from mkernel.sim import SimBackend

    for full, timing in zip(_baselines(w, c, first), _baselines(w, c, first, library_tasks=False)):
        for collapse in (True, False) if not first else (True,):
            a, b = SimBackend().run(full, c, collapse=collapse), SimBackend().run(timing, c, collapse=collapse)
            assert b.time_s == a.time_s and b.per_rank_s == a.per_rank_s, (full.variant, collapse)
            assert b.bytes_total == a.bytes_total and b.hazards == a.hazards == ()


def _ag_gemm_2x2():
    _, w, c, _ = next(case for case in CASES if case[0].startswith("ag_gemm/2x2/baseline=hierarchical"))
    return w, c


def test_a_wait_on_a_library_launchs_signal_from_another_launch_is_rejected():
    """A timing build could not keep such a wait (its signal's bumps are left out), so every full
    build is held to it: here a GEMM of the launch after the all-gather waits on the own-shard copy."""
    w, c = _ag_gemm_2x2()
    s = builders.get("ag_gemm").build_baseline(w, c, grouped=True)
    copy = next(t for t in s.tasks if t.launch == 0 and t.signals)
    gemm = next(t for t in s.tasks if t.launch == 1 and t.rank == copy.rank)
    tasks = list(s.tasks)
    tasks[gemm.id] = dataclasses.replace(gemm, waits=(Wait(copy.signals[0], 1),))
    with pytest.raises(ScheduleError, match=rf"task {gemm.id} .*which a library launch's task bumps"):
        dataclasses.replace(s, tasks=tuple(tasks)).validate()
    dataclasses.replace(s, launches=tuple(dataclasses.replace(ln, library=None) for ln in s.launches),
                        tasks=tuple(tasks)).validate()  # no library call: an ordinary wait


def test_a_timing_build_rejects_tasks_in_a_left_out_launch_and_a_launch_that_is_no_call():
    w, c = _ag_gemm_2x2()
    module = builders.get("ag_gemm")
    full, timing = module.build_baseline(w, c, grouped=True), module.build_baseline(w, c, grouped=True,
                                                                                    library_tasks=False)
    with pytest.raises(ScheduleError, match="whose tasks this timing build leaves out"):
        dataclasses.replace(full, elided=timing.elided).validate()
    with pytest.raises(ScheduleError, match="launch 1 is listed as a library call .* no library launch"):
        dataclasses.replace(timing, elided=(1,)).validate()


def test_a_data_run_refuses_a_timing_build():
    from mkernel.sim import SimBackend

    w, c = _ag_gemm_2x2()
    module = builders.get("ag_gemm")
    timing = module.build_baseline(w, c, library_tasks=False)
    inputs = module.make_inputs(w, c, np.random.default_rng(0))
    with pytest.raises(BackendUnavailable, match="timing build"):
        SimBackend().run(timing, c, inputs=inputs)
