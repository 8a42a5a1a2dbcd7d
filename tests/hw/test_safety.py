"""The no-multicast environment: set once where a process enters mkernel, checked below that."""
from __future__ import annotations

import os

import pytest

from mkernel.errors import BackendUnavailable, InputError
from mkernel.hw.runtime import safety


def test_a_context_refuses_a_process_that_lets_multicast_on(monkeypatch):
    from mkernel.hw.runtime.context import Context

    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    with pytest.raises(BackendUnavailable, match="NCCL_NVLS_ENABLE=0"):
        Context(None, gpus_per_node=1, send_bytes=0, recv_bytes=0, n_flags=1)


def test_the_cli_sets_it_at_its_entry(monkeypatch):
    for key in safety.NO_MULTICAST_ENV:
        monkeypatch.delenv(key, raising=False)
    from mkernel.cli import main

    main(["scaleout", "--list"])
    safety.require_no_multicast()  # set by main, before any command ran


def test_each_entry_that_starts_its_own_group_gets_its_own_port_and_torchruns_stays():
    ports = {e: safety.apply_rendezvous(e, {})["MASTER_PORT"] for e in safety.PORT_OFFSET}
    assert len(set(ports.values())) == len(ports)  # two entries at once on one host do not collide
    assert all(int(p) > 29500 for p in ports.values())  # nor with a torchrun job on its default port
    assert safety.apply_rendezvous("bench", {})["MASTER_ADDR"] == safety.RENDEZVOUS_ADDR
    kept = safety.apply_rendezvous("bench", {"MASTER_ADDR": "head", "MASTER_PORT": "1234"})
    assert kept == {"MASTER_ADDR": "head", "MASTER_PORT": "1234"}
    with pytest.raises(InputError, match="not an entry"):
        safety.apply_rendezvous("nobody", {})


def test_bench_takes_torchruns_ranks_from_the_cli(monkeypatch):
    from mkernel.cli_measure import torchrun_ranks

    torchrun = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "head",
                "MASTER_PORT": "1234"}
    for key, value in torchrun.items():  # set through monkeypatch first, so that teardown restores each
        monkeypatch.setenv(key, value)
    assert torchrun_ranks() == (3, 8, 1, 2)
    assert (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]) == ("head", "1234")
    for key in torchrun:
        monkeypatch.delenv(key)
    assert torchrun_ranks() == (0, 1, 0, 1)
    assert os.environ["MASTER_PORT"] == str(safety.RENDEZVOUS_PORT + safety.PORT_OFFSET["bench"])
