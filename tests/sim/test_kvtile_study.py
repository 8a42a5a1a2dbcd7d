"""tools/studies/kvtile_lockstep.py's what-if NVLink model (round trips overlapped with the copy) still plugs
into the engine: it calls the model's steps as the engine does (a timer's step is ``Model._copied``, called
with the model), and changes the simulated time."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mkernel import Cluster, Workload
from mkernel.builders import get
from mkernel.sim import SimBackend, engine

STUDY = Path(__file__).resolve().parents[2] / "tools" / "studies" / "kvtile_lockstep.py"


@pytest.mark.python_core
def test_the_overlap_what_if_runs_in_the_engine(monkeypatch):
    spec = importlib.util.spec_from_file_location("kvtile_lockstep", STUDY)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    w = Workload(kernel="ring_attention", m=256, n=16, k=64)
    c = Cluster("c", 1, 4)
    s = get("ring_attention").build(w, c)
    plain = SimBackend().run(s, c, hazards=False).time_s
    monkeypatch.setattr(engine.Model, "_nvlink", study._overlapped_nvlink)
    what_if = SimBackend().run(s, c, hazards=False).time_s
    assert 0 < what_if < plain  # (its round trips hide behind the transfer)
