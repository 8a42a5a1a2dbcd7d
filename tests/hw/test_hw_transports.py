"""Choosing a transport: unknown names and missing pieces fail at once with what is missing; the NIC
of each GPU by PCIe distance; the transport ``auto`` picks; ``mkernel doctor``."""
from __future__ import annotations

import os

import pytest

from mkernel.errors import BackendUnavailable, InputError
from mkernel.hw.runtime import nics, transports


def test_unknown_transport_lists_the_allowed_ones():
    with pytest.raises(InputError, match="transport 'nccl' is not one of: auto, loopback, verbs_rc, verbs_srd, ofi, fake"):
        transports.resolve("nccl")


def test_loopback_maps_to_the_native_copy_engine_transport_with_its_shaping():
    name, opts = transports.resolve("loopback", transports.Shaping(50.0, 5.0, unordered=True, streams=4, seed=3))
    assert name == "cuda"
    assert opts == dict(seed=3, unordered=True, gbytes_per_s=50.0, latency_us=5.0, streams=4)
    assert transports.resolve("loopback")[1]["streams"] == 1  # RC order: one queue


def test_every_network_transport_has_a_simulator_model():
    from mkernel.cluster import TRANSPORTS as SIM

    assert set(transports.SIM_MODEL) == set(transports.NETWORK)
    assert set(transports.SIM_MODEL.values()) <= set(SIM)


# -- a fake sysfs: two GPUs and two NICs behind two PCIe switches, and one NIC on the other socket ------

def _dev(root, chain):
    d = root / "devices" / chain[0]
    for bdf in chain[1:]:
        d = d / bdf
    d.mkdir(parents=True, exist_ok=True)
    (root / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
    link = root / "bus" / "pci" / "devices" / chain[-1]
    if not link.exists():
        os.symlink(d, link)
    return d


def _nic(root, name, chain, driver="mlx5_core", state="4: ACTIVE", link_layer="InfiniBand", gids=()):
    dev = _dev(root, chain)
    drv = root / "bus" / "pci" / "drivers" / driver
    drv.mkdir(parents=True, exist_ok=True)
    if not (dev / "driver").exists():
        os.symlink(drv, dev / "driver")
    ib = root / "class" / "infiniband" / name
    (ib / "ports" / "1" / "gids").mkdir(parents=True)
    (ib / "ports" / "1" / "gid_attrs" / "types").mkdir(parents=True)
    os.symlink(dev, ib / "device")
    (ib / "ports" / "1" / "state").write_text(state + "\n")
    (ib / "ports" / "1" / "link_layer").write_text(link_layer + "\n")
    (ib / "ports" / "1" / "lid").write_text("0x1a\n")
    for i, (gid, kind) in enumerate(gids):
        (ib / "ports" / "1" / "gids" / str(i)).write_text(gid + "\n")
        (ib / "ports" / "1" / "gid_attrs" / "types" / str(i)).write_text(kind + "\n")


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / "sys"
    sw0, sw1 = ["pci0000:00", "0000:00:01.0", "0000:01:00.0"], ["pci0000:00", "0000:00:02.0", "0000:05:00.0"]
    _dev(root, sw0 + ["0000:02:00.0"])  # GPU 0 behind switch 0
    _dev(root, sw1 + ["0000:06:00.0"])  # GPU 1 behind switch 1
    _nic(root, "mlx5_1", sw1 + ["0000:07:00.0"], gids=[("fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1")])
    _nic(root, "mlx5_0", sw0 + ["0000:03:00.0"])
    _nic(root, "mlx5_9", ["pci0000:80", "0000:80:01.0", "0000:81:00.0"])  # the other socket
    return root


GPUS = ["0000:02:00.0", "0000:06:00.0"]


def test_each_gpu_gets_the_nic_behind_its_own_switch(sysfs):
    found = nics.nics(sysfs)
    assert [n.name for n in found] == ["mlx5_0", "mlx5_1", "mlx5_9"]
    assert found[0].driver == "mlx5_core" and found[0].pci == "0000:03:00.0" and found[0].active
    assert found[1].ports[0].gids[0].kind == "IB/RoCE v1" and found[1].ports[0].lid == 0x1A
    assert nics.choose(GPUS, found, sysfs=sysfs) == {0: ("mlx5_0", 2), 1: ("mlx5_1", 2)}


def test_nearest_beats_least_used_ties_go_to_the_least_used_and_the_map_wins(sysfs, tmp_path):
    found = [n for n in nics.nics(sysfs) if n.name != "mlx5_1"]
    assert nics.choose(GPUS, found, sysfs=sysfs) == {0: ("mlx5_0", 2), 1: ("mlx5_0", 6)}  # not mlx5_9 (9 hops)
    root, sw = tmp_path / "tie", ["pci0000:00", "0000:00:01.0", "0000:01:00.0"]
    _dev(root, sw + ["0000:02:00.0"])
    _dev(root, sw + ["0000:04:00.0"])
    _nic(root, "mlx5_a", sw + ["0000:03:00.0"])
    _nic(root, "mlx5_b", sw + ["0000:05:00.0"])
    assert nics.choose(["0000:02:00.0", "0000:04:00.0"], nics.nics(root), sysfs=root) == {0: ("mlx5_a", 2),
                                                                                        1: ("mlx5_b", 2)}
    assert nics.choose(GPUS, nics.nics(sysfs), {1: "mlx5_9"}, sysfs)[1] == ("mlx5_9", None)
    with pytest.raises(InputError, match="GPU 0 -> mlx5_7, which is not an RDMA device here"):
        nics.choose(GPUS, nics.nics(sysfs), {0: "mlx5_7"}, sysfs)
    assert nics.parse_nic_map(" 0=mlx5_0, 1=mlx5_1") == {0: "mlx5_0", 1: "mlx5_1"}
    with pytest.raises(InputError, match="expected GPU=NIC"):
        nics.parse_nic_map("gpu0:mlx5_0")


def test_the_pcie_distance_counts_hops_through_the_common_ancestor():
    a = ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0")
    assert nics.distance(a, a) == 0
    assert nics.distance(a, ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:03:00.0")) == 2  # one switch
    assert nics.distance(a, ("pci0000:00", "0000:00:02.0", "0000:05:00.0")) == 5  # one host bridge
    assert nics.distance(a, ("pci0000:80", "0000:80:01.0")) == 4 + 2 + 2  # another host bridge


def test_roce_uses_its_roce_v2_ipv4_gid():
    gids = (nics.Gid(0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1"),
            nics.Gid(1, "fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"),
            nics.Gid(3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"))
    assert nics.roce_gid_index(nics.Port(1, "ACTIVE", "Ethernet", 0, gids)) == 3
    assert nics.roce_gid_index(nics.Port(1, "ACTIVE", "InfiniBand", 1, gids)) == -1


# -- what each transport needs ------------------------------------------------------------------

def _needs_verbs_headers() -> None:
    from mkernel.hw.runtime import native

    if "verbs" not in native.features():
        pytest.skip("the native library was built without infiniband/verbs.h (libibverbs-dev, which .ci/run installs)")


def test_verbs_without_a_device_says_no_rdma_device(tmp_path):
    _needs_verbs_headers()
    for name in ("verbs_rc", "verbs_srd"):
        why = transports.unusable(name, sysfs=tmp_path)
        assert why is not None and "needs an RDMA device" in why and "no RDMA device" in why
        with pytest.raises(BackendUnavailable, match=f"transport '{name}'"):
            transports.require(name, sysfs=tmp_path)


def test_srd_needs_an_efa_device_and_rc_an_active_ib_port(sysfs, tmp_path):
    from mkernel.hw.runtime import native

    if "verbs" not in native.features() or transports.loadable("libibverbs.so.1"):
        pytest.skip("needs libibverbs (rdma-core) and its headers, which .ci/run installs")
    assert "needs an EFA device; this host has mlx5_0, mlx5_1, mlx5_9" in transports.unusable("verbs_srd", sysfs)
    assert transports.unusable("verbs_rc", sysfs) is None
    down = tmp_path / "down"
    _nic(down, "mlx5_0", ["pci0000:00", "0000:00:01.0"], state="1: DOWN")
    assert "needs an InfiniBand or RoCE device with an active port" in transports.unusable("verbs_rc", down)


def test_auto_picks_by_what_the_host_has(sysfs, tmp_path):
    from mkernel.hw.runtime import native

    name, why = transports.auto(tmp_path)
    assert name in ("loopback", "ofi") and why
    if "verbs" in native.features() and not transports.loadable("libibverbs.so.1"):
        assert transports.auto(sysfs)[0] == "verbs_rc"


# -- mkernel doctor ------------------------------------------------------------------------------

def test_doctor_on_a_host_with_no_rdma_device_says_so_and_picks_a_transport(tmp_path, capsys):
    from mkernel.hw.measure import doctor

    lines, ok = doctor.report(sysfs=tmp_path)
    text = "\n".join(lines)
    assert ok and "RDMA devices: no RDMA device" in text
    for what in ("libibverbs.so.1:", "libfabric.so.1:", "dmabuf:", "libfabric providers", "pyverbs:", "GPUs:",
                 "transport auto would pick: ", "verbs_rc: not usable", "verbs_srd: not usable", "ofi: "):
        assert what in text, what
    lines, ok = doctor.report(sysfs=tmp_path, require="verbs_rc")
    _needs_verbs_headers()  # (without them the verdict names the missing headers, before any device)
    assert not ok and lines[-1].startswith("FAIL: verbs_rc: transport 'verbs_rc' needs an RDMA device")


def test_doctor_lists_devices_ports_and_gids(sysfs):
    from mkernel.hw.measure import doctor

    text = "\n".join(doctor.report(sysfs=sysfs)[0])
    assert "RDMA devices: 3" in text and "mlx5_1: driver mlx5_core, PCI 0000:07:00.0" in text
    assert "port 1: ACTIVE, link layer InfiniBand, LID 0x1a" in text
    assert "GID 0: fe80:0000:0000:0000:0000:0000:0000:0001 IB/RoCE v1" in text


def test_the_doctor_command_exits_0_and_require_exits_1_when_unusable(capsys):
    from mkernel.cli import main

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "transport auto would pick:" in out
    if not nics.nics():
        assert "no RDMA device" in out
        assert main(["doctor", "--require", "verbs_srd"]) == 1
        assert "FAIL: verbs_srd" in capsys.readouterr().out
