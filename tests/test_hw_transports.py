"""Choosing a transport: unknown names and missing RDMA pieces fail at once with what is missing."""
from __future__ import annotations

import sys
import types

import pytest

from mkernel.errors import BackendUnavailable, InputError
from mkernel.hw import transports


def test_unknown_transport_lists_the_allowed_ones():
    with pytest.raises(InputError, match="transport 'nccl' is not one of: loopback, verbs_rc, verbs_srd, fake"):
        transports.resolve("nccl")


def test_loopback_maps_to_the_native_copy_engine_transport_with_its_shaping():
    name, opts = transports.resolve("loopback", transports.Shaping(50.0, 5.0, unordered=True, streams=4, seed=3))
    assert name == "cuda"
    assert opts == dict(seed=3, unordered=True, gbytes_per_s=50.0, latency_us=5.0, streams=4)
    assert transports.resolve("loopback")[1]["streams"] == 1  # RC order: one queue


@pytest.mark.skipif("pyverbs" in sys.modules or __import__("importlib").util.find_spec("pyverbs") is not None,
                    reason="pyverbs is installed here")
@pytest.mark.parametrize("name", ["verbs_rc", "verbs_srd"])
def test_verbs_without_pyverbs_names_the_package(name):
    with pytest.raises(BackendUnavailable, match=f"transport '{name}' needs pyverbs, which is not installed"):
        transports.resolve(name)


@pytest.fixture
def fake_pyverbs(monkeypatch):
    pkg = types.ModuleType("pyverbs")
    pkg.__path__ = []
    monkeypatch.setitem(sys.modules, "pyverbs", pkg)
    monkeypatch.setitem(sys.modules, "pyverbs.device", types.ModuleType("pyverbs.device"))


def test_verbs_without_a_device_names_the_sysfs_folder(fake_pyverbs, tmp_path):
    with pytest.raises(BackendUnavailable, match=r"needs an RDMA device, and .*ib lists none on this host"):
        transports.require_verbs("verbs_rc", sysfs=tmp_path / "ib")


def test_srd_needs_an_efa_device(fake_pyverbs, tmp_path):
    (tmp_path / "mlx5_0").mkdir()
    with pytest.raises(BackendUnavailable, match="needs an EFA device; this host has mlx5_0"):
        transports.require_verbs("verbs_srd", sysfs=tmp_path)
