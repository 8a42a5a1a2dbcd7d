"""The backend protocol is honest: both backends take every option it names and declare their
capabilities, so the runner reads those and never tests a backend's name."""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from mkernel import cli_run, runner
from mkernel.backend import Backend, Capabilities
from mkernel.errors import InputError
from mkernel.hw.runtime.proxy import ProxyFaults
from mkernel.hw import HwBackend
from mkernel.sim import SimBackend
from mkernel.sim.faults import Faults


def _options(fn) -> dict[str, object]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}


@pytest.mark.parametrize("cls", [SimBackend, HwBackend])
def test_every_backend_takes_the_protocols_options_with_its_defaults(cls):
    theirs, ours = _options(cls.run), _options(Backend.run)
    assert {n: theirs.get(n, "missing") for n in ours} == ours
    assert not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.run).parameters.values())
    assert isinstance(cls.caps, Capabilities) and cls.rtol > 0
    assert _options(cls.options) == _options(Backend.options)
    for name in ("supports", "cluster_for", "folds_locals", "options"):
        assert callable(getattr(cls, name)), name


def test_the_two_backends_differ_in_what_they_declare():
    sim, hw = dataclasses.asdict(SimBackend.caps), dataclasses.asdict(HwBackend.caps)
    assert sim["predicts"] and not hw["predicts"] and hw["always_data"] and not sim["always_data"]
    assert sim["where"] != hw["where"]


def test_the_runner_and_the_run_command_never_test_a_backends_name():
    for source in (Path(runner.__file__).read_text(), inspect.getsource(cli_run.run)):
        assert not re.findall(r"backend\"?\]?\s*[!=]=", source)


def test_each_backend_parses_its_own_command_line_options():
    """The run command hands --transport, --heap and --faults to the backend it runs on: each
    parses what it takes into its own kind and refuses what does not apply, before any launch."""
    sim, hw = SimBackend(), HwBackend()
    assert sim.options() == {} and hw.options() == {}
    assert sim.options(transport="ofi") == {}  # the simulator times the scenario's NIC protocol
    with pytest.raises(InputError, match="--heap applies to --backend hw"):
        sim.options(heap="host")
    got = sim.options(faults="drop=0.25,seed=3")["faults"]
    assert isinstance(got, Faults) and (got.drop, got.seed) == (0.25, 3)
    with pytest.raises(InputError, match="--faults item 'die_after=5'"):
        sim.options(faults="die_after=5")
    got = hw.options(transport="auto", heap="host", faults="reorder=1,seed=4")
    assert (got["transport"], got["heap"]) == ("loopback", "host")
    assert isinstance(got["faults"], ProxyFaults) and got["faults"].reorder and got["faults"].seed == 4
    with pytest.raises(InputError, match="--transport 'rdma'"):
        hw.options(transport="rdma")
