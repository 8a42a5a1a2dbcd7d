"""Seeded fault injection in the simulator (issue 10): under every fault, each op either ends with
the right result or stops with a clear error that names the fault; never silent corruption."""
from __future__ import annotations

import dataclasses
import math

import pytest
from harness.cases import SHAPES, small_workload

from mkernel import Cluster, NicSpec, Scenario, run
from mkernel.errors import DeadlockError, InputError, TransportError
from mkernel.sim.faults import Faults, parse


def _scenario(kernel: str, nics: int = 1, transport: str = "ib_rc") -> Scenario:
    c = Cluster("faulty", 2, 2, transport=transport, nic=NicSpec(count=nics))
    return Scenario("faulty", c, small_workload(kernel))


SURVIVABLE = {
    "delay": Faults(seed=1, delay_us=5.0),
    "reorder": Faults(seed=2, reorder=0.5, reorder_us=15.0),
    "duplicate": Faults(seed=3, duplicate=0.7, reorder_us=4.0),
    "slow rank": Faults(slow_rank=1, slow_factor=3.0),
    "proxy stall": Faults(stall_rank=0, stall_at_us=0.0, stall_us=40.0),
    "nic down, one left": Faults(nic_down=(2, 0)),
    "drop, resent": Faults(seed=6, drop=0.3, retransmit_us=20.0),
}


@pytest.mark.parametrize("kernel", sorted(SHAPES))
@pytest.mark.parametrize("fault", sorted(SURVIVABLE))
def test_a_survivable_fault_leaves_the_result_correct(kernel, fault):
    f = SURVIVABLE[fault]
    sc = _scenario(kernel, nics=2 if f.nic_down else 1)
    clean, _ = run(sc, data=True, seed=5)
    result, stats = run(sc, data=True, seed=5, faults=f)
    assert result["correct"] is True and not result["hazards"], (fault, result["error"], result["hazards"])
    assert result["time_s"] >= clean["time_s"] * (1 - 1e-9)  # a fault never makes anything faster
    if fault == "duplicate":
        assert stats.metrics["faults"]["duplicated"] > 0


@pytest.mark.parametrize("kernel", sorted(SHAPES))
def test_a_message_dropped_past_the_retry_count_is_an_error_completion_naming_it(kernel):
    with pytest.raises(TransportError, match=r"rank \d+ -> rank \d+: .* was lost: 8 transmissions dropped") as err:
        run(_scenario(kernel), data=True, faults=Faults(seed=4, drop=1.0, retransmit_us=1.0))
    assert "error completion" in str(err.value) and "\n" not in str(err.value)


def test_drops_cost_the_ack_timer_of_the_transport():
    sc = _scenario("gemm_ar")
    clean, _ = run(sc)
    fast, _ = run(sc, faults=Faults(seed=2, drop=0.2, retransmit_us=10.0))
    rc, _ = run(sc, faults=Faults(seed=2, drop=0.2))  # RC's 67 ms ack timeout
    assert clean["time_s"] < fast["time_s"] < rc["time_s"] and rc["time_s"] > 0.067


@pytest.mark.parametrize("kernel", sorted(SHAPES))
@pytest.mark.parametrize("fault,names", [
    (Faults(stall_rank=1, stall_at_us=0.0, stall_us=math.inf), "the proxy of rank 1 stalled for good"),
    (Faults(nic_down=(3, 0)), "NIC 0 of rank 3 is down and the rank has no other"),
], ids=["stall-for-good", "only-nic-down"])
def test_a_fatal_fault_stops_with_an_error_that_names_it(kernel, fault, names):
    with pytest.raises(DeadlockError, match=names) as err:
        run(_scenario(kernel), data=True, faults=fault)
    assert "waits for" in str(err.value)  # and every waiting task is listed


def test_reordering_on_srd_with_a_bare_flag_is_caught_as_a_hazard():
    """The unsafe protocol (flag as its own message on an unordered transport) under extra
    reordering: the run reports hazards, it does not pass silently."""
    sc = _scenario("gemm_ar", transport="efa_srd")
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, notify="flag"))
    result, _ = run(sc, data=True, faults=Faults(seed=9, reorder=0.5, reorder_us=30.0))
    assert result["correct"] is False and result["hazards"]


def test_the_same_seed_replays_the_same_faulty_run():
    sc = _scenario("gemm_rs")
    f = Faults(seed=11, delay_us=3.0, reorder=0.3, duplicate=0.3)
    a, sa = run(sc, data=True, faults=f)
    b, sb = run(sc, data=True, faults=f)
    assert a["time_s"] == b["time_s"] and sa.metrics["faults"] == sb.metrics["faults"]


def test_fault_strings_parse_and_bad_ones_get_one_clear_error():
    assert parse("drop=0.25,seed=3,nic_down=2:1,stall_us=inf") == Faults(drop=0.25, seed=3, nic_down=(2, 1),
                                                                         stall_us=math.inf)
    for text, message in (("drop=2", "is a probability"), ("wobble=1", "key one of"),
                          ("nic_down=2", r"bad value for nic_down \(rank:nic\)"), ("delay_us=-1", "must be >= 0"),
                          ("slow_factor=0.5", "finite factor >= 1")):
        with pytest.raises(InputError, match=message):
            parse(text)
