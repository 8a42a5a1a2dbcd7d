"""The no-multicast environment: set once where a process enters mkernel, checked below that."""
from __future__ import annotations

import pytest

from mkernel.errors import BackendUnavailable
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
