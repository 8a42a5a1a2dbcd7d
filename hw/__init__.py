"""mkernel.hw: the GPU backend (persistent kernels, symmetric buffers, command ring, host proxy).

Installed as ``mkernel.hw`` from the top-level ``hw/`` folder. :class:`HwBackend` runs a fused
schedule as one persistent kernel per rank (:mod:`fused`, walking the rank's :mod:`plan`), on the
GPUs at hand, emulating nodes (several ranks per GPU under MPS) when ranks outnumber GPUs. The
baseline variant of an op runs as its torch fallback (collectives + matmul, :mod:`api`).
"""
from __future__ import annotations

import importlib.util
import time

from mkernel.backend import Capabilities, RunStats
from mkernel.cluster import Cluster
from mkernel.errors import BackendUnavailable
from mkernel.ir import Schedule
from mkernel.reference import BF16_RTOL

__all__ = ["HwBackend", "unavailable"]


def unavailable() -> str | None:
    """Why the hw backend cannot run on this machine (no torch, no Triton, no GPU), or None."""
    try:
        import torch
    except ImportError:
        return "the hw backend needs torch (pip install 'mkernel[hw]' on a machine with an NVIDIA GPU)"
    if not torch.cuda.is_available():
        return "the hw backend needs a CUDA GPU, and none is visible on this machine"
    if importlib.util.find_spec("triton") is None:  # the fused kernel is Triton
        return "the hw backend needs Triton (pip install 'mkernel[hw]')"
    return None


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


class HwBackend:
    name = "hw"
    caps = Capabilities(where="on the GPUs", predicts=False, grouped=False, models_library=False,
                        always_data=True, samples=False, collapses=False, proxy_metrics=False,
                        own_trajectory=True, faults_in_proxy=True)
    rtol = BF16_RTOL

    def cluster_for(self, cluster: Cluster) -> Cluster:
        """The cluster as this machine runs it: when ranks outnumber GPUs, each rank's SM budget
        is its share of one GPU, and schedules are built for that budget (persistent grids must
        all be resident at once)."""
        if unavailable():
            return cluster  # supports() says why it cannot run here
        per_gpu = -(-cluster.world // max(1, _gpus()))
        if per_gpu == 1:
            return cluster
        return cluster.with_sms(cluster.gpu.sms // per_gpu)

    def options(self, *, transport: str | None = None, heap: str | None = None,
                faults: str | None = None) -> dict:
        """The fused run's transport between nodes (checked against this host, ``auto`` resolved:
        :func:`~mkernel.hw.runtime.transports.check_hw_run`), its heap, and the faults its proxies
        inject (:class:`~mkernel.hw.runtime.proxy.ProxyFaults`), each as given or left out."""
        out: dict = {}
        if transport is not None:
            from .runtime.transports import check_hw_run

            out["transport"] = check_hw_run(transport)
        if heap is not None:
            out["heap"] = heap
        if faults:
            from .runtime.proxy import ProxyFaults

            out["faults"] = ProxyFaults.parse(faults)
        return out

    def folds_locals(self, cluster: Cluster) -> bool:
        """Never: the hw backend runs every rank."""
        return False

    def supports(self, schedule: Schedule, cluster: Cluster) -> str | None:
        return unavailable()

    def run(self, schedule: Schedule, cluster: Cluster, *, inputs=None, seed: int = 0, trace: bool = False,
            workload=None, collapse: bool = False, faults=None, controller=None, progress=None, sample=None,
            hazards: bool | None = None, transport: str = "loopback", heap: str = "device",
            timed: int = 10, regions=None) -> RunStats:
        """The fused schedule on the GPUs, or (a multi-launch baseline) the op's torch fallback,
        on ``inputs`` (every rank's arrays); returns outputs and the slowest rank's median time.
        ``controller`` (a :class:`mkernel.controller.Balance`) runs the fused kernel's compute and
        intra roles under the adaptive SM partition; metrics["trajectory"] then has each rank's.
        ``faults`` (:class:`~mkernel.hw.runtime.proxy.ProxyFaults`): what the fused run's proxies inject;
        ``transport`` and ``heap``: the fused run's Context's (:class:`~mkernel.hw.runtime.context.Context`).
        ``progress``, ``hazards`` and ``regions`` are the simulator's (a GPU run has no use for them); ``sample`` is
        refused: the GPUs compute every element, and so the oracle checks every one."""
        from mkernel.report import static_bytes

        from . import rank
        from .runtime.emulate import EMULATION_NOTE, launch

        if collapse:
            raise BackendUnavailable("the hw backend runs every rank: collapse is a simulator option")
        if sample is not None:
            raise BackendUnavailable("the hw backend checks every element: sampled data is a simulator option")
        reason = unavailable()
        if reason:
            raise BackendUnavailable(reason)
        if inputs is None:
            raise BackendUnavailable("the hw backend runs on data: pass inputs (the CLI always does)")
        t0 = time.perf_counter()
        gpn = cluster.gpus_per_node
        own = [({name: per[r] for name, per in inputs.items()},) for r in range(schedule.world)]  # each its own
        if len(schedule.launches) == 1:
            results = launch(rank.schedule_rank, schedule.world, args=(schedule, gpn, timed, controller, cluster,
                                                                      faults, transport, heap), rank_args=own)
        else:
            results = launch(rank.fallback_rank, schedule.world, args=(workload, gpn, timed), rank_args=own)
        outputs = {name: [r["outputs"][name] for r in results] for name in results[0]["outputs"]}
        per_rank = tuple(r["time_s"] for r in results)
        sent = static_bytes(schedule)
        emulated = schedule.world > _gpus()
        return RunStats(time_s=max(per_rank), per_rank_s=per_rank,
                        bytes_total={k: float(sum(v)) for k, v in sent.items()},
                        bytes_per_gpu={k: float(max(v)) for k, v in sent.items()}, wall_s=time.perf_counter() - t0,
                        outputs=outputs, metrics={"note": EMULATION_NOTE if emulated else "measured on the GPUs",
                                                  "emulated": emulated,
                                                  "trajectory": {r["rank"]: r.get("trajectory") for r in results}})
