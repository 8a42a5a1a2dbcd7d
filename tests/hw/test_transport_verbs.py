"""verbs_rc and verbs_srd with no NIC: the real proxy and transport code against a fake verbs
provider at the ABI boundary (tests/hw/native/fake_verbs.c), which moves the bytes, delivers in order
on RC and in a seeded shuffled order on SRD, returns completions with immediates, and injects
error completions.

Every op's real ring commands (2 x 2, the call barriers included) go through four ranks' proxies,
call after call; the oracle (tests/harness/transport_net.py) reads the order writes landed in and checks no
flag was visible before its data and no SIGNAL before a write posted ahead of it.
"""
from __future__ import annotations

import ctypes
import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

from mkernel.errors import BackendUnavailable
from mkernel.hw.lowering import ring
from mkernel.hw.runtime import native, netboot
from mkernel.hw.runtime.proxy import HostRing, Proxy, ProxyError

from harness.cases import SHAPES
from harness.transport_net import DictStore, Layout, Memory, Streams, commands, data_mismatches, flagged, \
    mesh_streams, op_streams, order_violations, wait_until

pytestmark = pytest.mark.skipif("verbs" not in native.features(),
                                reason="the native library was built without infiniband/verbs.h (libibverbs-dev; "
                                       ".ci/run installs it)")

CAPS_WRITE, CAPS_UNSOLICITED = 1 << 3, 1 << 4
REM_ACCESS_ERR = 10
HARNESS = Path(__file__).with_name("native") / "fake_verbs.c"


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    """The harness, built like the library (warnings are errors) and loaded."""
    digest = hashlib.sha256(HARNESS.read_bytes() + (native.CSRC / "mk_verbs.h").read_bytes()).hexdigest()[:12]
    out = tmp_path_factory.mktemp("fake_verbs") / f"libfakeverbs-{digest}.so"
    cmd = native.compile_command(native.compiler(), out, [HARNESS], ["MK_HAVE_VERBS"], None)
    import subprocess

    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lib = ctypes.CDLL(str(out))
    lib.mk_fake_verbs_api.restype = ctypes.c_void_p
    lib.mk_fake_verbs_reset.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int]
    lib.mk_fake_verbs_fail.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_int]
    lib.mk_fake_verbs_fail_registration.argtypes = [ctypes.c_int]
    lib.mk_fake_verbs_log.restype = ctypes.c_size_t
    lib.mk_fake_verbs_log.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    return lib


def landed(fake) -> np.ndarray:
    buf = (ctypes.c_uint64 * (5 * 65536))()
    n = fake.mk_fake_verbs_log(buf, 65536)
    return np.frombuffer(buf, np.uint64, count=5 * n).reshape(n, 5).astype(np.int64)


class Net:
    """``world`` ranks in host memory over the fake verbs: an endpoint per rank (bootstrapped
    through a store, on threads), its proxy and its ring."""

    def __init__(self, fake, name: str, layout: Layout, *, world: int = 4, gpn: int = 2, seed: int = 0,
                 caps: int = CAPS_WRITE, publish: str = "store", plant: int = ring.PLANT_NONE, per_poll: int = 4,
                 cuda: bool = False, sq_depth: int = 64, rq_depth: int = 32):
        fake.mk_fake_verbs_reset(seed + 1, caps, per_poll)
        self.fake, self.name, self.world = fake, name, world
        self.mems = {r: Memory(layout, r, seed) for r in range(world)}
        store, results, errors = DictStore(), {}, []
        kind = "efa" if name == "verbs_srd" else "rc"

        def open_rank(r):
            try:
                opts = netboot.NetOptions(device=f"fake_{kind}{r}", publish=publish, timeout_s=5.0, sq_depth=sq_depth,
                                          rq_depth=rq_depth)
                results[r] = netboot.open_network(name, store=store, tag="t", rank=r, world=world, gpus_per_node=gpn,
                                                  n_flags=layout.n_flags, region=self.mems[r].region(0 if cuda else None),
                                                  options=opts, verbs_api=fake.mk_fake_verbs_api(), plant=plant)
            except Exception as exc:  # noqa: BLE001 - re-raised below, on the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=open_rank, args=(r,)) for r in range(world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        if errors:
            for ep, _ in results.values():
                ep.close()
            raise errors[0]
        self.endpoints = {r: results[r][0] for r in range(world)}
        self.rings = {r: HostRing(64) for r in range(world)}
        self.proxies = {r: Proxy(rank=r, nranks=world, ring_ptr=self.rings[r].ring_ptr, ctl_ptr=self.rings[r].ctl_ptr,
                                 capacity=64, regions=results[r][1], transport=self.endpoints[r]).start()
                        for r in range(world)}

    @property
    def bases(self) -> dict[int, int]:
        return {r: m.buf.ctypes.data for r, m in self.mems.items()}

    def call(self, streams: Streams, epoch: int, timeout_s: float = 10.0) -> np.ndarray:
        """Fresh heaps, every rank's commands pushed (ranks interleaved), then the flags awaited;
        returns the landed-write log of this call."""
        rng = np.random.default_rng(epoch)
        for m in self.mems.values():
            m.buf[m.layout.recv_off:] = rng.integers(0, 256, m.buf.size - m.layout.recv_off, dtype=np.uint8)
            m.initial = m.buf.copy()
        self.fake.mk_fake_verbs_clear_log()
        queues = {r: commands(streams.commands[r], epoch) for r in range(self.world)}
        while any(queues.values()):
            for r, q in queues.items():
                if q:
                    self.rings[r].push(q.pop(0), timeout_s=timeout_s)
        assert wait_until(lambda: flagged(self.mems, streams, epoch), timeout_s), self.status()
        return landed(self.fake)

    def status(self) -> str:
        for p in self.proxies.values():
            p.check()
        return "flags not all set, no proxy error"

    def close(self, check: bool = True) -> None:
        errors = []
        for p in self.proxies.values():
            try:
                p.stop(timeout_s=5.0 if check else 1.0)
            except ProxyError as exc:
                errors.append(exc)
            finally:
                p.close()
        if check and errors:
            raise errors[0]


def layout_of(s: Streams) -> Layout:
    return Layout(s.n_flags, s.heap_bytes, 0)


# -- every op's protocol, in every order the harness produces -------------------------------------

@pytest.mark.parametrize("kernel", sorted(SHAPES))
@pytest.mark.parametrize("name,publish", [("verbs_rc", "store"), ("verbs_srd", "loopback")], ids=["rc", "srd"])
def test_every_op_lands_each_flag_after_its_data_call_after_call(fake, kernel, name, publish):
    for seed in range(3):
        streams = op_streams(kernel, seed=seed)
        net = Net(fake, name, layout_of(streams), seed=seed, publish=publish)
        try:
            for epoch in (1, 2):
                log = net.call(streams, epoch)
                assert order_violations(log, streams, net.mems[0].layout, net.bases) == [], (seed, epoch)
                assert data_mismatches(net.mems, streams) == [], (seed, epoch)
        finally:
            net.close()


def test_srd_with_store_publishing_and_unsolicited_write_recv_is_exact(fake):
    streams = mesh_streams(24, signal_every=4)
    for caps in (CAPS_WRITE, CAPS_WRITE | CAPS_UNSOLICITED):
        net = Net(fake, "verbs_srd", layout_of(streams), caps=caps, publish="store", rq_depth=8)
        try:
            assert fake_unsolicited(net) == bool(caps & CAPS_UNSOLICITED)
            for epoch in (1, 2, 3):
                net.call(streams, epoch)
                assert data_mismatches(net.mems, streams) == []
        finally:
            net.close()


def fake_unsolicited(net: Net) -> bool:
    return bool(native.load().mk_srd_unsolicited(net.proxies[0]._lib.mk_proxy_transport(net.proxies[0]._p)))


def test_srd_really_reorders_and_rc_keeps_each_qps_order(fake):
    """The harness must shuffle SRD (else the order tests prove nothing) and keep RC's order."""
    streams = mesh_streams(32)

    def data_order(name):
        net = Net(fake, name, layout_of(streams), seed=5)
        try:
            log = net.call(streams, 1)
        finally:
            net.close()
        return [(s, d, a) for s, d, a, n, _ in log.tolist() if n == 64]

    posted = lambda order, s, d: [a for src, dst, a in order if (src, dst) == (s, d)]  # noqa: E731
    rc, srd = data_order("verbs_rc"), data_order("verbs_srd")
    assert all(posted(rc, s, d) == sorted(posted(rc, s, d)) for s in range(4) for d in range(4))
    assert any(posted(srd, s, d) != sorted(posted(srd, s, d)) for s in range(4) for d in range(4))


def test_a_planted_flag_write_on_srd_is_caught(fake):
    """The naive SRD design (the flag as its own RDMA write after the data, as on RC): SRD lands
    some flag before its data, and the checker sees it; the real protocol never does."""
    streams = mesh_streams(32)
    caught = []
    for seed in range(3):
        net = Net(fake, "verbs_srd", layout_of(streams), seed=seed, plant=ring.PLANT_FLAG_WRITE)
        try:
            caught += order_violations(net.call(streams, 1), streams, net.mems[0].layout, net.bases)
        finally:
            net.close()
    assert any("landed before data" in v for v in caught)


# -- errors reach the caller with their names -------------------------------------------------------

@pytest.mark.parametrize("name", ["verbs_rc", "verbs_srd"])
def test_an_error_completion_names_rank_peer_chunk_epoch_and_status(fake, name):
    """The 6th PUT rank 0 posts (all to rank 2) fails with a remote access error: its proxy fails
    with the rank, the peer, the chunk, the epoch and the status, and sets the abort word."""
    streams = mesh_streams(8)
    net = Net(fake, name, layout_of(streams))
    nth = 5 * (2 if name == "verbs_rc" else 1)  # RC: data and flag writes; SRD: one write with immediate
    fake.mk_fake_verbs_fail(0, nth, REM_ACCESS_ERR)
    cmds = [c for c in commands(streams.commands[0], 3) if c.dst_rank == 2]
    bad = cmds[5]
    try:
        for cmd in cmds:
            net.rings[0].push(cmd)
    except ProxyError as exc:  # the proxy may fail before the last push: the producer sees the abort
        assert "the proxy aborted (code 7: transport failure)" in str(exc)
    what = f"RDMA write of chunk {bad.chunk}'s data" if name == "verbs_rc" else f"RDMA write of chunk {bad.chunk}"
    with pytest.raises(ProxyError, match=rf"proxy rank 0: transport failure at ring slot \d+ \(dst_rank {bad.dst_rank}, "
                                         rf"chunk {bad.chunk}, epoch 3\): transport {name} failed \(proxy of rank 0\): "
                                         rf"rank 0 -> rank {bad.dst_rank}: {what} \(epoch 3\) completed with "
                                         rf"'remote access error' \(status 10"):
        assert wait_until(lambda: net.proxies[0].error().code != 0, 10.0)
        net.proxies[0].check()
    assert ring.ERRORS[int(net.rings[0].ctl[ring.CTL_ABORT])] == "transport failure"
    net.close(check=False)


def test_a_command_outside_the_peers_registration_is_refused_before_posting(fake):
    """A proxy whose bounds were wider than what the peer registered: the transport checks the
    command against the registration and refuses it; nothing is posted."""
    import dataclasses

    fake.mk_fake_verbs_reset(1, CAPS_WRITE, 4)
    lay = Layout(8, 4096, 0)
    mems = {r: Memory(lay, r, 0) for r in (0, 1)}
    eps = {r: netboot.Endpoint("verbs_rc", rank=r, world=2, n_flags=8, region=mems[r].region(), peers=[1 - r],
                               options=netboot.NetOptions(device=f"fake_rc{r}"), verbs_api=fake.mk_fake_verbs_api())
           for r in (0, 1)}
    heads = {r: eps[r].connect(1 - r, eps[1 - r].address()) for r in (0, 1)}
    regions = netboot.peer_regions(mems[0].region(), 0, 2, 8, {1: heads[0]})
    wide = dataclasses.replace(regions, dst=(regions.dst[0], (regions.dst[1][0], regions.dst[1][1] + 4096)))
    hr = HostRing(8)
    p = Proxy(rank=0, nranks=2, ring_ptr=hr.ring_ptr, ctl_ptr=hr.ctl_ptr, capacity=8, regions=wide,
              transport=eps[0]).start()
    hr.push(ring.Command(ring.PUT, 1, 3, 64, 0, lay.recv_bytes + 64, 1))  # inside the wide bounds only
    with pytest.raises(ProxyError, match=r"\(dst_rank 1, chunk 3, epoch 1\): transport verbs_rc failed to post to rank "
                                         r"1: destination \[0x[0-9a-f]+, \+64\) outside rank 1's registered region"):
        p.stop()
    p.close()
    eps[1].close()
    assert landed(fake).size == 0 and (mems[1].buf == mems[1].initial).all()


# -- setup: capabilities, registration, bootstrap --------------------------------------------------

def _one(fake, name, device, caps=CAPS_WRITE, cuda=False):
    fake.mk_fake_verbs_reset(1, caps, 4)
    mem = Memory(Layout(8, 4096, 0), 0, 0)
    return netboot.Endpoint(name, rank=0, world=2, n_flags=8, region=mem.region(0 if cuda else None), peers=[1],
                            options=netboot.NetOptions(device=device), verbs_api=fake.mk_fake_verbs_api())


def test_srd_needs_rdma_write_and_an_efa_device(fake):
    with pytest.raises(BackendUnavailable, match=r"fake_efa0 offers no RDMA write \(efadv device_caps 0 lack bit 3.*"
                                                 r"rdma-core < 46"):
        _one(fake, "verbs_srd", "fake_efa0", caps=0)
    with pytest.raises(BackendUnavailable, match="fake_rc0 is not an EFA device"):
        _one(fake, "verbs_srd", "fake_rc0")
    with pytest.raises(BackendUnavailable, match="RDMA device mlx5_9 not found; this host has fake_rc0, fake_rc1"):
        _one(fake, "verbs_rc", "mlx5_9")


def test_gpu_memory_falls_back_from_dmabuf_to_peer_memory_and_names_both_failures(fake):
    """Host memory given as CUDA memory: the dmabuf export fails (no CUDA driver here, or not device
    memory), the peer-memory registration succeeds; with that refused too, both reasons are named."""
    _one(fake, "verbs_rc", "fake_rc0", cuda=True).close()
    fake.mk_fake_verbs_reset(1, CAPS_WRITE, 4)
    fake.mk_fake_verbs_fail_registration(1)
    mem = Memory(Layout(8, 8192, 0), 0, 0)
    with pytest.raises(BackendUnavailable, match=r"registering \d+ bytes of GPU memory failed: dmabuf: .+; peer memory "
                                                 r"\(ibv_reg_mr, needs the nvidia_peermem module\): Bad address"):
        netboot.Endpoint("verbs_rc", rank=0, world=2, n_flags=8, region=mem.region(0), peers=[1],
                         verbs_api=fake.mk_fake_verbs_api())
    fake.mk_fake_verbs_fail_registration(0)


def test_the_real_libibverbs_with_no_device_says_so():
    mem = Memory(Layout(8, 4096, 0), 0, 0)
    with pytest.raises(BackendUnavailable, match=r"cannot open transport verbs_rc: verbs_rc: no RDMA device|"
                                                 r"needs libibverbs.so.1"):
        netboot.Endpoint("verbs_rc", rank=0, world=2, n_flags=8, region=mem.region(), peers=[1])


def test_a_peer_that_never_publishes_is_a_bounded_error_naming_it(fake):
    fake.mk_fake_verbs_reset(1, CAPS_WRITE, 4)
    mem = Memory(Layout(8, 4096, 0), 0, 0)
    with pytest.raises(ProxyError, match=r"rank 0: rank 1's verbs_rc address \(store key 'mkernel/net/x/addr/1'\) did "
                                         r"not arrive within 0.2 s"):
        netboot.open_network("verbs_rc", store=DictStore(), tag="x", rank=0, world=2, gpus_per_node=1, n_flags=8,
                             region=mem.region(), options=netboot.NetOptions(device="fake_rc0", timeout_s=0.2),
                             verbs_api=fake.mk_fake_verbs_api())


def test_peers_that_chose_different_transports_get_one_clear_error(fake):
    fake.mk_fake_verbs_reset(1, CAPS_WRITE, 4)
    mems = [Memory(Layout(8, 4096, 0), r, 0) for r in range(2)]
    rc = netboot.Endpoint("verbs_rc", rank=0, world=2, n_flags=8, region=mems[0].region(), peers=[1],
                          options=netboot.NetOptions(device="fake_rc0"), verbs_api=fake.mk_fake_verbs_api())
    srd = netboot.Endpoint("verbs_srd", rank=1, world=2, n_flags=8, region=mems[1].region(), peers=[0],
                           options=netboot.NetOptions(device="fake_efa1"), verbs_api=fake.mk_fake_verbs_api())
    with pytest.raises(ProxyError, match=r"rank 0: verbs_rc cannot connect to rank 1: rank 1's address is not a kind-1 "
                                         r"mkernel address"):
        rc.connect(1, srd.address())
    rc.close()
    srd.close()


# -- the receiver's epoch window -------------------------------------------------------------------

def test_a_fast_forward_needs_the_receivers_rebased_and_then_lands_exact_epochs(fake):
    """The immediate carries the epoch's low bits; a jump past the window (fast_forward to 2^40)
    publishes a wrong epoch unless the receivers are rebased, as Executor.fast_forward must do."""
    streams = mesh_streams(4)
    top = 1 << 40
    for rebase in (False, True):
        net = Net(fake, "verbs_srd", layout_of(streams))
        try:
            for m in net.mems.values():
                m.flags[:] = top  # what fast_forward leaves
            if rebase:
                for p in net.proxies.values():
                    p.rebase(top)
            if rebase:
                net.call(streams, top + 1)
            else:
                with pytest.raises(AssertionError):
                    net.call(streams, top + 1, timeout_s=0.5)
                assert {int(f) for m in net.mems.values() for f in m.flags[:16]} - {top} == {1}
        finally:
            net.close()
