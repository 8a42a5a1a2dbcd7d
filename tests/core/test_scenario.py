"""Scenario files: the bundled ones load; every kind of mistake gets one error naming file and key."""
from __future__ import annotations

import pytest

from mkernel import ScenarioError, load_scenario
from mkernel.scenario import bundled_scenarios

GOOD = """
name = "t"
[cluster]
nodes = 2
gpus_per_node = 2
transport = "ib_rc"
[cluster.nic]
count = 1
gbit_per_s = 400.0
latency_us = 2.0
[workload]
kernel = "gemm_ar"
m = 256
n = 256
k = 64
[workload.sms]
intra = 8
"""


def write(tmp_path, text: str):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def test_bundled_scenarios_load():
    names = bundled_scenarios()
    assert {"default", "paper-ib-2x8", "paper-efa-2x8", "h200-1x1"} <= set(names)
    ib, efa = load_scenario("paper-ib-2x8"), load_scenario("paper-efa-2x8")
    assert (ib.cluster.world, ib.cluster.transport, ib.cluster.nic.gb_per_s) == (16, "ib_rc", 50.0)
    assert (efa.cluster.transport, efa.cluster.nic.count, efa.cluster.nic.gb_per_s) == ("efa_srd", 2, 50.0)
    assert load_scenario("h200-1x1").cluster.world == 1
    assert load_scenario(None).name == "default"


def test_good_file_parses(tmp_path):
    sc = load_scenario(write(tmp_path, GOOD))
    assert (sc.cluster.nodes, sc.workload.m, sc.workload.sm_override(__import__("mkernel").Role.INTRA)) == (2, 256, 8)


@pytest.mark.parametrize("old,new,key,allowed", [
    # unknown keys, at each level
    ('name = "t"', 'name = "t"\ncolour = "red"', "colour", "allowed here"),
    ("nodes = 2", "nodes = 2\nnode_count = 2", "cluster.node_count", "allowed here"),
    ("count = 1", "count = 1\nspeed = 3", "cluster.nic.speed", "allowed here"),
    ("m = 256", "m = 256\nmm = 1", "workload.mm", "allowed here"),
    ("intra = 8", "intra = 8\nproxy = 1", "workload.sms.proxy", "allowed here"),
    # missing fields
    ("nodes = 2", "", "cluster.nodes", "missing"),
    ('kernel = "gemm_ar"', "", "workload.kernel", "missing"),
    ("k = 64", "", "workload.k", "missing"),
    # wrong types
    ("nodes = 2", 'nodes = "2"', "cluster.nodes", "must be an integer"),
    ("nodes = 2", "nodes = true", "cluster.nodes", "must be an integer"),
    ("gbit_per_s = 400.0", 'gbit_per_s = "fast"', "cluster.nic.gbit_per_s", "must be a number"),
    ('transport = "ib_rc"', "transport = 3", "cluster.transport", "must be a str"),
    # impossible values
    ("nodes = 2", "nodes = 0", "cluster.nodes", "integer >= 1"),
    ("gbit_per_s = 400.0", "gbit_per_s = -400.0", "cluster.nic.gbit_per_s", "> 0"),
    ("latency_us = 2.0", "latency_us = -1.0", "cluster.nic.latency_us", ">= 0"),
    ('transport = "ib_rc"', 'transport = "udp"', "cluster.transport", "allowed: ib_rc, efa_srd"),
    ('kernel = "gemm_ar"', 'kernel = "conv"', "workload.kernel", "allowed: ag_gemm"),
    ("m = 256", "m = 2", "m", "must be >= 4"),  # the op cannot split 2 rows over 4 ranks
    ("intra = 8", "intra = 140", "compute", "no compute SMs"),
])
def test_bad_files_get_one_clear_error(tmp_path, old, new, key, allowed):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    message = str(err.value)
    assert message.startswith(path + ":"), message
    assert key in message and allowed in message, message
    assert "\n" not in message


def test_not_toml(tmp_path):
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(write(tmp_path, "[cluster\nnodes = 1"))


def test_missing_file():
    with pytest.raises(Exception, match="neither a file nor a bundled scenario"):
        load_scenario("/nonexistent/x.toml")
