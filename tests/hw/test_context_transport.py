"""The hw Context's transport between nodes, on CPU: which transport a context takes (``auto`` by the
doctor's rule), each unusable or contradictory choice refused with one error before anything is
allocated, every rank agreeing, the node-local group a network transport's buffer spans, the
Executor's fast-forward rebasing a receiving proxy; then the whole network wiring for real between
four processes (2 nodes x 2) over libfabric, with host stand-ins where the Context needs CUDA.
The GPU run of every op over ``ofi`` is in tests/hw/test_hw_fused.py."""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import socket
from types import SimpleNamespace

import pytest

from mkernel.errors import BackendUnavailable, InputError
from mkernel.hw.runtime import context, transports

torch = pytest.importorskip("torch", reason="the Context's process groups are torch.distributed's")


@pytest.fixture
def no_nic(monkeypatch, tmp_path):
    """This host as one with no RDMA device (an empty sysfs), whatever it really has."""
    real = transports.unusable
    monkeypatch.setattr(transports, "unusable", lambda name, sysfs=None: real(name, tmp_path))


def test_one_node_has_no_transport_and_only_checks_the_name(no_nic):
    assert context.choose("verbs_rc", None, 1, "device") == (None, None, {})  # nothing to reach
    assert context.choose("auto", None, 1, "host") == (None, None, {})
    with pytest.raises(InputError, match="transport 'nccl' is not one of: auto, loopback, verbs_rc"):
        context.choose("nccl", None, 1, "device")
    with pytest.raises(InputError, match="heap='hbm' is not one of: device, host"):
        context.choose("loopback", None, 2, "hbm")


def test_an_unusable_network_transport_names_what_is_missing(no_nic):
    for name in ("verbs_rc", "verbs_srd"):
        with pytest.raises(BackendUnavailable, match=f"transport '{name}'"):
            context.choose(name, None, 2, "device")
    with pytest.raises(BackendUnavailable, match="needs an RDMA device.*no RDMA device"):
        context.choose("verbs_rc", None, 2, "device")


def test_auto_takes_the_doctors_pick(monkeypatch):
    monkeypatch.setattr(transports, "auto", lambda sysfs=None: ("loopback", "no RDMA device"))
    name, native, opts = context.choose("auto", None, 2, "device")
    assert (name, native, opts["streams"]) == ("loopback", "cuda", 1)
    monkeypatch.setattr(transports, "auto", lambda sysfs=None: ("ofi", "libfabric offers efa"))
    monkeypatch.setattr(transports, "unusable", lambda name, sysfs=None: None)
    assert context.choose("auto", None, 2, "host") == ("ofi", "ofi", {})


def test_contradictory_choices_are_refused(monkeypatch):
    from mkernel.hw.runtime.netboot import NetOptions

    with pytest.raises(InputError, match="heap='host' is for a network transport"):
        context.choose("loopback", None, 2, "host")
    with pytest.raises(InputError, match="net and nic_map configure a network transport"):
        context.choose("loopback", None, 2, "device", NetOptions(provider="shm"))
    monkeypatch.setattr(transports, "auto", lambda sysfs=None: ("loopback", "no RDMA device"))
    with pytest.raises(InputError, match="this context's is 'loopback' \\(what 'auto' picked here\\)"):
        context.choose("auto", None, 2, "device", nic_map={0: "mlx5_0"})
    monkeypatch.setattr(transports, "unusable", lambda name, sysfs=None: None)
    with pytest.raises(InputError, match="shaping applies to 'loopback' only"):
        context.choose("ofi", transports.Shaping(gbytes_per_s=50.0), 2, "device")


def test_a_context_refuses_before_it_touches_cuda(monkeypatch, no_nic):
    import torch.distributed as dist

    def no_cuda(*a, **k):
        raise AssertionError("the Context touched CUDA before refusing")

    monkeypatch.setattr(dist, "get_rank", lambda pg=None: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda pg=None: 4)
    monkeypatch.setattr(context, "current_device", no_cuda)
    monkeypatch.setattr(dist, "all_gather_object", no_cuda)
    with pytest.raises(BackendUnavailable, match="transport 'verbs_rc' needs an RDMA device"):
        context.Context(None, gpus_per_node=2, send_bytes=0, recv_bytes=256, n_flags=4, transport="verbs_rc")
    with pytest.raises(InputError, match="heap='host' is for a network transport"):
        context.Context(None, gpus_per_node=2, send_bytes=0, recv_bytes=256, n_flags=4, heap="host")


def test_ranks_that_chose_differently_get_one_error_naming_each_choice(monkeypatch):
    import torch.distributed as dist

    def gather(seen, obj, group=None):
        seen[:] = [("ofi", "device"), ("ofi", "device"), ("loopback", "device"), ("ofi", "device")]

    monkeypatch.setattr(dist, "get_world_size", lambda pg=None: 4)
    monkeypatch.setattr(dist, "all_gather_object", gather)
    with pytest.raises(InputError, match="rank 0: the ranks chose different transports.*rank 2: loopback \\(heap device\\)"):
        context.agree(None, 0, ("ofi", "device"))
    monkeypatch.setattr(dist, "all_gather_object", lambda seen, obj, group=None: seen.__setitem__(slice(None), [obj] * 4))
    context.agree(None, 0, ("ofi", "device"))


def test_the_node_group_is_that_nodes_ranks_made_once_by_them_alone(monkeypatch):
    import torch.distributed as dist

    made = []
    monkeypatch.setattr(dist, "get_global_rank", lambda pg, r: 10 + r)  # a subgroup of the world
    monkeypatch.setattr(dist, "new_group", lambda ranks, **kw: made.append((ranks, kw)) or f"group{len(made)}")
    monkeypatch.setattr(context, "_LOCAL_GROUPS", {})
    pg = SimpleNamespace(group_name="tp")
    assert context.node_group(pg, 1, 2) == "group1" and context.node_group(pg, 1, 2) == "group1"
    assert made == [([12, 13], {"use_local_synchronization": True})]


def test_fast_forward_rebases_the_receiving_proxy(monkeypatch):
    """Executor.fast_forward sets the flags, then tells the proxy the epoch it jumped to (a receiving
    proxy rebuilds 64-bit epochs from the immediate's low bits near the last it published)."""
    from mkernel import Cluster
    from mkernel.builders import get
    from mkernel.hw.lowering import plan
    from mkernel.hw.runtime.executor import Executor

    from harness.cases import workload

    p = plan.build(get("gemm_ar").build(workload("gemm_ar"), Cluster("t", 2, 2)), 0)[0]
    rebased = []
    proxy = SimpleNamespace(rebase=rebased.append)
    ex = SimpleNamespace(plan=p, ctx=SimpleNamespace(flags=torch.zeros(p.n_flags, dtype=torch.int64), proxy=proxy),
                         epoch=torch.zeros(1, dtype=torch.int64), device=None, calls=0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    Executor.fast_forward(ex, 1 << 40)
    assert rebased == [1 << 40] and ex.calls == 1 << 40 and int(ex.ctx.flags[p.go]) == 1 << 40


# -- the network wiring for real, between processes ---------------------------------------------------

def _offered(provider: str) -> bool:
    providers, why = transports.ofi_providers()
    return why is None and provider in providers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("provider", ["tcp;ofi_rxm", "shm"])
def test_a_network_context_registers_bootstraps_and_moves_chunks_between_nodes(provider):
    """Four ranks as 2 nodes x 2, each a Context with ``ofi`` between the nodes: the buffer spans the
    node-local group (pointers of this node's ranks, 0 for the other node's), the proxy is the
    network one, and every PUT lands in the other node's ranks with its flag, exactly."""
    if not _offered(provider):
        pytest.skip(f"libfabric here offers no {provider} (libfabric-dev, which .ci/run installs)")
    from harness.transport_net import collect, context_rank

    world, gpn = 4, 2
    ctx_mp = mp.get_context("spawn")
    out = ctx_mp.Queue()
    port = _free_port()
    procs = [ctx_mp.Process(target=context_rank, args=(r, world, gpn, port, provider, out)) for r in range(world)]
    reports = collect(procs, out, world, 90, join_s=10)
    for r, rep in sorted(reports.items()):
        assert rep["error"] is None, (r, rep["error"])
        node = r // gpn
        local = list(range(node * gpn, (node + 1) * gpn))
        assert rep["transport"] == "ofi" and rep["proxy"] == "ofi" and rep["node_group"] == local
        assert all(rep["flag_ptrs"][q] == 0 for q in range(world) if q not in local)  # nothing mapped between nodes
        assert all(rep["flag_ptrs"][q] != 0 for q in local)
        assert all(rep["recv_ptrs"][q] == rep["flag_ptrs"][q] + rep["recv_off"] for q in local)
        heap = rep["heap"].reshape(world, 64)
        for src in range(world):
            if src // gpn != node:  # landed from the other node, with its flag
                assert rep["flags"][src] == 1 and (heap[src] == 10 + src).all(), (r, src, heap[src][:4])
            elif src == r:
                assert (heap[src] == 10 + r).all()  # its own source bytes, untouched
            else:
                assert rep["flags"][src] == 0 and not heap[src].any()  # a node peer writes by peer stores only


def test_a_host_heap_file_maps_the_same_pages_in_every_mapping(tmp_path, monkeypatch):
    """hostheap's mapping of a node peer's file (with a stand-in for the CUDA driver's registration):
    the creator's file starts zeroed, a second mapping sees its bytes, and release unregisters each."""
    from mkernel.hw.runtime import hostheap

    unregistered = []

    class Driver:
        def register(self, host, nbytes, flags):
            return 0 if flags == hostheap.REGISTER_FLAGS and nbytes % 4096 == 0 else 1

        def device_pointer(self, dev, host, flags):
            dev._obj.value = host
            return 0

        def unregister(self, host):
            unregistered.append(host)

        def check(self, rc, what):
            assert rc == 0, what

    path = tmp_path / "heap"
    own = hostheap._Mapping(Driver(), path, 8192, create=True)
    peer = hostheap._Mapping(Driver(), path, 8192, create=False)
    own_view = (ctypes.c_uint8 * 8192).from_address(own.host)
    assert not any(own_view) and own.device == own.host and peer.host != own.host
    own_view[100] = 7
    assert (ctypes.c_uint8 * 8192).from_address(peer.host)[100] == 7
    del own_view
    own.release(), peer.release()
    assert unregistered == [own.host, peer.host]


# -- the CLI's hw path ------------------------------------------------------------------------------

def test_the_cli_refuses_an_unusable_transport_before_any_launch_and_launches_a_usable_one(monkeypatch, tmp_path,
                                                                                           capsys):
    from mkernel import runner
    from mkernel.cli import main

    launched = []

    def run(sc, **kw):
        launched.append(kw)
        raise BackendUnavailable("stopped by the test after the launch was asked for")

    monkeypatch.setattr(runner, "run", run)
    real = transports.unusable
    monkeypatch.setattr(transports, "unusable", lambda name, sysfs=None: real(name, tmp_path))
    assert main(["run", "--backend", "hw", "--nodes", "2", "--gpus-per-node", "2", "--transport", "verbs_rc"]) == 2
    assert "transport 'verbs_rc' needs an RDMA device" in capsys.readouterr().err and not launched
    assert main(["run", "--heap", "host"]) == 2
    assert "--heap applies to --backend hw" in capsys.readouterr().err and not launched
    monkeypatch.setattr(transports, "unusable", lambda name, sysfs=None: None)
    assert main(["run", "--backend", "hw", "--nodes", "2", "--gpus-per-node", "2", "--transport", "ofi",
                 "--heap", "host"]) == 2
    assert launched and launched[-1]["backend"] == "hw"
    assert (launched[-1]["transport"], launched[-1]["heap"]) == ("ofi", "host")
    assert "stopped by the test" in capsys.readouterr().err
