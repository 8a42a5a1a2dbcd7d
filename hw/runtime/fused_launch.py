"""The fused kernel's side of an :class:`~mkernel.hw.runtime.executor.Executor`, built once: the
plan's tables on the device, the counters the kernel keeps from call to call (claims, epoch,
finished blocks, attention locks, the controller's state and log), the error block, its compile-time
switches, the adaptive controller's starting split, and its two launches (the entry wait,
``sync.enter_kernel``, and ``fused.fused_kernel``) with every argument bound by name except the
per-call ones (:data:`PER_CALL`, which :class:`~mkernel.hw.runtime.binding.Bindings` supplies).

Nothing here changes between calls: the kernel bumps its own epoch and resets its own counters
(:mod:`~mkernel.hw.kernels.fused`), so a call only launches.
"""
from __future__ import annotations

import math

import numpy as np

from mkernel.controller import Balance, split
from mkernel.errors import InputError

from ..kernels import fused
from ..lowering.layout import LOCK_WIDTH, Task
from ..lowering.plan import Plan
from .launch import Launch
from .state import ErrorBlock

TABLES = ("tasks", "regions", "waits", "signals", "aux", "gemm_tiles", "segments")  # the plan's, by kernel argument
PER_CALL = ("bases", "maps", "a_host", "a2_host", "b_host", "c_host")  # address table, tensor maps, GEMM descriptors


class FusedLaunch:
    """One rank's fused kernel for ``plan`` on the context ``ctx``. ``a2_buf``: the buffer id of the
    second GEMM A operand (-1: none); ``head_dim``: the attention head's width (compiled in);
    ``controller``: the adaptive SM partition's policy, or None for static roles; ``kernel``: the
    op's name, for errors."""

    def __init__(self, plan: Plan, ctx, *, a2_buf: int, head_dim: int, controller: Balance | None, kernel: str):
        import torch

        p, dev = plan, ctx.device
        self.plan, self.controller, self.device = plan, controller, dev
        self.tables = {name: _on_device(getattr(p, name), dev) for name in TABLES}
        self.claims = torch.zeros(4, dtype=torch.int64, device=dev)
        self.epoch = torch.zeros(1, dtype=torch.int64, device=dev)
        self.done = torch.zeros(1, dtype=torch.int32, device=dev)
        self.locks = torch.zeros(max(1, LOCK_WIDTH * p.n_locks), dtype=torch.int64, device=dev)
        self.errors = ErrorBlock(dev)
        self.timeout_ns = ctx.knobs.timeout_ns
        ops = p.ops | ({"put"} if ctx.nodes > 1 else set())
        self.meta = fused.constexprs(frozenset(ops), head_dim, barrier=p.world > 1,
                                     copy_rows=ctx.knobs.copy_rows, adaptive=controller is not None,
                                     data_path=ctx.knobs.data_path)
        self.blocks, self.steer = initial_split(plan, controller, kernel)
        self.state = torch.zeros(fused.STATE_WORDS, dtype=torch.int64, device=dev)
        self.state[int(fused.CTRL)], self.state[int(fused.WORK)] = self.steer[:2]  # as every call ends (fused._reset)
        self.log = torch.zeros(2 * fused.LOG_ENTRIES if controller else 2, dtype=torch.int64, device=dev)
        # the error word: the kernel's last block stores it here, and a call reads it with no CUDA call
        self.failed = torch.zeros(1, dtype=torch.int64).pin_memory()
        self.failed_word = self.failed.numpy()
        # a GEMM table runs in a fixed-role kernel only: adaptive blocks claim every task
        n_seg, n_gemm = (0, 0) if controller is not None else (len(p.segments), len(p.gemm_tiles))
        ring, err = ctx.ring, self.errors.words
        err32 = err.view(torch.int32)
        self.launch = Launch(fused.fused_kernel, p.grid, dict(
            **self.tables, flag_bases=ctx.flag_ptrs, claims=self.claims, epoch_ptr=self.epoch, done_ptr=self.done,
            locks=self.locks, a2_buf=a2_buf, records=ring.ring_ptr, ctl=ring.ctl_ptr, head=ring.head,
            capacity=ring.capacity, err32=err32, err64=err, err_host=self.failed.data_ptr(), rank=p.rank,
            world=p.world, gpn=p.gpus_per_node, arrive0=p.arrive0, exit0=p.exit0, go=p.go,
            timeout_ns=self.timeout_ns, barrier_timeout_ns=ctx.knobs.barrier_timeout_ns,
            sm_scale=1.0 / math.sqrt(head_dim),
            **dict(zip(("n0", "n1", "n2", "n3"), p.role_tasks)), **dict(zip(("b0", "b1", "b2", "b3"), self.blocks)),
            n_seg=n_seg, n_gemm=n_gemm, state=self.state, log=self.log,
            **dict(zip(("ctrl0", "work", "min_sms", "hysteresis", "link_sms"), self.steer)), **self.meta),
            options={"num_warps": fused.NUM_WARPS, "num_stages": fused.NUM_STAGES}, per_call=PER_CALL)
        self.enter = Launch(fused.enter_kernel, 1, dict(
            flag_bases=ctx.flag_ptrs, epoch_ptr=self.epoch, rank=p.rank, world=p.world, exit0=p.exit0,
            timeout_ns=ctx.knobs.barrier_timeout_ns, err32=err32, err64=err, ctl=ring.ctl_ptr), options={},
            per_call=())

    def trajectory(self) -> list[tuple[float, int]]:
        """The last call's intra-block targets: (us since the kernel started, target), the initial
        split first. Synchronises; adaptive kernels only."""
        import torch

        if self.controller is None:
            raise InputError("trajectory(): this Executor runs static roles (no controller)")
        torch.cuda.synchronize(self.device)
        state, log = self.state.cpu().numpy(), self.log.cpu().numpy().reshape(-1, 2)
        first, last, start = (int(state[int(word)]) for word in (fused.FIRST, fused.LAST, fused.START))
        first = max(first, last - fused.LOG_ENTRIES)
        points = [(0.0, self.blocks[1])]
        for k in range(first, last):
            t, target = log[k % fused.LOG_ENTRIES]
            points.append(((int(t) - start) / 1e3, int(target)))
        return sorted(points)


def initial_split(plan: Plan, controller: Balance | None, kernel: str
                  ) -> tuple[tuple[int, int, int, int], tuple[int, ...]]:
    """Blocks per role at the start, and the controller's kernel arguments: the initial control
    and work words (:mod:`fused`), then the policy's parameters. Adaptive: the policy's split of
    the movable blocks for the whole work, as the simulator's controller makes at the start."""
    b = plan.blocks
    if controller is None:
        return b, (0, 0, 0, 0, 0)
    pol, tasks = controller, plan.tasks
    first = (0, plan.role_tasks[0], sum(plan.role_tasks[:2]))
    w0, w1 = (sum(fused.work_units(int(ns)) for ns in tasks[first[r]:first[r + 1], Task.WORK_NS]) for r in (0, 1))
    movable = b[0] + b[1]
    if movable > int(fused.FIELD) or max(w0, w1) >= 2**31:
        raise InputError(f"{kernel}: {movable} movable SMs and work {w0}, {w1} (x "
                         f"{int(fused.UNIT_NS)} ns) do not fit the controller's fields (255 SMs, 2^31 units)")
    intra = split(movable, w0, w1, b[1], 0, 0, pol.min_sms, pol.hysteresis, pol.link_sms)
    return (movable - intra, intra, b[2], b[3]), (fused.control_word(intra, movable - intra, intra),
                                                  w0 | w1 << 32, pol.min_sms, pol.hysteresis, pol.link_sms)


def _on_device(a: np.ndarray, device):
    """A plan table on the device (an empty one as one zero row: the kernel never reads it)."""
    import torch

    a = a if a.size else np.zeros((1, max(1, a.shape[1] if a.ndim == 2 else 1)), np.int64)
    return torch.from_numpy(np.ascontiguousarray(a)).to(device)
