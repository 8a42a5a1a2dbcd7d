"""The hw runtime on a real GPU: epochs and flags, bounded waits, the ring and proxy end to end, a bad
command from the device, and the emulated 2x2 cluster. Marked gpu; skipped with the reason elsewhere.
The proxy's latency and throughput figures live in tools/bench/bench_proxy.py, not here."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_epochs_survive_more_than_2_16_calls_without_zeroing():
    from mkernel.hw.measure import selftest

    r = selftest.check_epochs(n_epochs=70_000)
    assert r["error"] is None
    assert r["mismatches"] == 0
    assert r["final_epoch"] == 70_000 and r["flags"] == [70_000] * 4


def test_bounded_wait_names_rank_role_flag_and_epoch():
    from mkernel.hw.measure import selftest

    r = selftest.check_timeout(timeout_s=0.002)
    t = r["timeout"]["failure"]
    assert (t.code, t.rank, t.role, t.what, t.index, t.epoch, t.observed, t.expected) == (
        8, 3, "recv", "flag", 5, 42, 0, 42)
    assert "rank 3, recv role: timeout waiting on flag 5 in epoch 42" in r["timeout"]["error"]
    a = r["abort"]["failure"]
    assert a.code == 9 and r["abort"]["wall_s"] < 5  # gave up on abort, long before its 10 s timeout


def test_ring_call_captured_in_a_cuda_graph_replays_as_fresh_calls():
    from mkernel.hw.measure import selftest

    r = selftest.check_graph(replays=200)
    assert r["error"] is None and r["proxy"]["error"] is None
    assert r["final_epoch"] == 201 and r["flags_ok"] and r["data_ok"]
    assert r["proxy"]["commands"] == 128 * 201


@pytest.mark.parametrize("shaped", [False, True], ids=["rc", "srd-shaped"])
def test_ring_and_proxy_end_to_end(shaped):
    from mkernel.hw.measure import selftest
    from mkernel.hw.runtime.transports import Shaping

    shaping = Shaping(gbytes_per_s=50.0, latency_us=5.0, unordered=True, seed=7) if shaped else None
    r = selftest.stream(n_blocks=16, chunks_per_block=64, chunk_bytes=4096, epochs=3, shaping=shaping,
                        capacity=256)
    assert r["error"] is None
    assert r["mismatches"] == 0
    assert r["final_epoch"] == 3
    assert r["proxy"]["commands"] == 16 * 64 * 3


def test_bad_device_command_reaches_the_caller_and_releases_the_waiter():
    from mkernel.hw.measure import selftest

    r = selftest.roundtrip(n=4, nbytes=1 << 20, buf_bytes=256)  # larger than the registered buffers
    assert r["completed"] == 0
    assert "rank 0, send role: aborted waiting on flag 0" in r["error"]
    assert "source range outside the send buffer at ring slot 0" in r["proxy"]["error"]
    assert r["proxy"]["commands"] == 0


def test_emulated_2x2_cluster_exchange_with_epoch_reuse():
    from mkernel.hw.measure import selftest

    results = selftest.check_exchange(nodes=2, gpn=2, shard_bytes=1 << 18, chunk_bytes=16 << 10, epochs=100)
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    for r in results:
        assert r["error"] is None, r
        assert r["mismatches"] == 0
        assert r["final_epoch"] == 100
        assert r["multicast_ptr"] == 0
        assert r["proxy"]["commands"] == 16 * 1 * 100  # 16 chunks to the one rail peer, every epoch


def test_roundtrip_through_the_fused_kernels_producer_completes_every_command():
    """The proxy's calibration path (roundtrip and stream), now on sync._push / sync._wait: every
    command comes back, with the proxy thread's own flag writes and with PUTs through the copy engine."""
    from mkernel.hw.measure import selftest

    for kw in ({"host_flags": True}, {"nbytes": 64}):
        r = selftest.roundtrip(n=500, **kw)
        assert r["error"] is None and r["proxy"]["error"] is None, r
        assert r["completed"] == 500 and r["proxy"]["commands"] == 500
        assert 0 < r["p50_us"] < 1000
    s = selftest.stream(n_blocks=1, chunks_per_block=256, signal_only=True)
    assert s["error"] is None and s["proxy"]["commands"] == 256 * 3 and s["push_s_per_block"] > 0


def test_mkernel_selftest_passes_every_row_on_the_emulated_2x2():
    """`mkernel selftest` as README's users run it (its own process: the exchange starts MPS before
    the process touches CUDA)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "mkernel", "selftest", "--nodes", "2", "--gpus-per-node", "2"],
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS") == 4 and "FAIL" not in proc.stdout, proc.stdout
