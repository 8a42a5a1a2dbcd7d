"""The backend protocol is honest: both backends take every option it names and declare their
capabilities, so the runner reads those and never tests a backend's name."""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from mkernel import runner
from mkernel.backend import Backend, Capabilities
from mkernel.hw import HwBackend
from mkernel.sim import SimBackend


def _options(fn) -> dict[str, object]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}


@pytest.mark.parametrize("cls", [SimBackend, HwBackend])
def test_every_backend_takes_the_protocols_options_with_its_defaults(cls):
    theirs, ours = _options(cls.run), _options(Backend.run)
    assert {n: theirs.get(n, "missing") for n in ours} == ours
    assert not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.run).parameters.values())
    assert isinstance(cls.caps, Capabilities) and cls.rtol > 0
    for name in ("supports", "cluster_for", "folds_locals"):
        assert callable(getattr(cls, name)), name


def test_the_two_backends_differ_in_what_they_declare():
    sim, hw = dataclasses.asdict(SimBackend.caps), dataclasses.asdict(HwBackend.caps)
    assert sim["predicts"] and not hw["predicts"] and hw["always_data"] and not sim["always_data"]
    assert sim["where"] != hw["where"]


def test_the_runner_never_tests_a_backends_name():
    source = Path(runner.__file__).read_text()
    assert not re.findall(r"backend\"?\]?\s*[!=]=", source)
