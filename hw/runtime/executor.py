"""Run a fused schedule on this rank's GPU: one call after another, in order, with every error seen.

:class:`Executor` is built once per (schedule, rank) and called many times. A call:

1. waits (a one-block kernel) until every peer finished the previous call, when this rank stages
   inputs into the symmetric heap, so nothing a peer may still be reading is overwritten;
2. stages the inputs that peers read into the heap (one copy each; inputs only this rank reads are
   used in place);
3. launches the fused kernel (:mod:`fused`), which starts with a barrier across the ranks and
   tells peers when it is done;
4. returns the outputs: fresh tensors for bound outputs, copies of heap outputs.

Everything that does not change between calls is built once, in two parts: the kernel's
(:class:`~mkernel.hw.runtime.fused_launch.FusedLaunch`: the device tables, the counters the kernel
keeps, its whole argument list) and the buffers' (:class:`~mkernel.hw.runtime.binding.Bindings`:
heap views, scratch, the static address table). A call checks its tensors and binds them into the
address table, the GEMM descriptors and the kernel's packed parameter block (all cached by address:
a call that reuses its tensors is one ``cuLaunchKernel``); this module is the call itself:
its order on the streams, the staging, and the errors.

Everything is enqueued on the current stream; nothing synchronises the host, except with the
loopback transport between nodes (the emulated cluster): there a call returns once its kernel has
finished (``ctx.inflight_calls`` of them may stay queued, 0 by default), since that proxy's copies
stall while the host blocks in CUDA, and a kernel waiting for them with it (:mod:`context`). Two
calls never overlap on the GPU (they share flags, claim counters and the epoch): a call on another
stream than the last one first waits for the last one's event.

:meth:`check` synchronises and raises the first device, proxy or wait error, naming rank, role,
flag, epoch and the schedule task. Without it an error still surfaces: a failed proxy raises at the
next call, and the fused kernel's last block stores the error block's first word to pinned host
memory, so the next call raises once the call that recorded a device error has finished (an event
query, no host wait, no extra launch). A timed-out call's outputs are wrong, so it must never pass
unnoticed (the torch ops had returned them silently).
"""
from __future__ import annotations

import collections

from mkernel.cluster import Cluster
from mkernel.controller import Balance
from mkernel.errors import InputError, MkernelError
from mkernel.ir import Schedule

from ..lowering.layout import Wait
from ..lowering.plan import Plan, build
from .binding import Bindings
from .fused_launch import FusedLaunch
from .state import DeviceWaitError


class Executor:
    """One rank's fused op, sized once. ``ctx`` is a :class:`~mkernel.hw.context.Context` whose heap
    (receive area) holds at least the plan's shared buffers and whose flags number at least the
    plan's; :meth:`context_sizes` says how big."""

    def __init__(self, schedule: Schedule, ctx, *, controller: Balance | None = None, cluster: Cluster | None = None):
        """``controller``: run the compute and intra roles under this adaptive SM partition (the
        simulator's policy, :mod:`mkernel.controller`), with task work estimated by the simulator's
        cost model for ``cluster`` (the cluster the schedule was built for); None: static roles.
        The device waits' timeout and the copy steps' rows are the context's (``ctx.knobs``)."""
        import torch

        self.schedule = schedule
        if controller is not None and cluster is None:
            raise InputError("an adaptive Executor needs the cluster its schedule was built for (task work estimates)")
        work = None
        if controller is not None:
            from mkernel.cost import sm_work_us

            itemsize = {b.name: b.itemsize for b in schedule.buffers}

            def estimate(task) -> float:
                return sm_work_us(task, itemsize, cluster)
            work = estimate
        self.plan: Plan = build(schedule, ctx.rank, work)[0]
        self.controller = controller
        self.ctx = ctx
        p = self.plan
        if ctx.world != schedule.world or ctx.gpus_per_node != schedule.gpus_per_node:
            raise InputError(f"context is {ctx.world} ranks x {ctx.gpus_per_node} per node; the schedule is "
                             f"{schedule.world} x {schedule.gpus_per_node}")
        if ctx.executor is not None:  # a second executor would start at epoch 0 over the first's flag counts
            raise InputError(f"context of rank {ctx.rank} already serves a {ctx.executor} executor; its flags hold "
                             f"that executor's epochs, so each executor needs a context of its own")
        if ctx.layout.recv_bytes < p.placement.heap_bytes or ctx.layout.n_flags < p.n_flags:
            raise InputError(f"context too small for {schedule.kernel}: heap {ctx.layout.recv_bytes} B and "
                             f"{ctx.layout.n_flags} flags; the plan needs {p.placement.heap_bytes} B and "
                             f"{p.n_flags} flags")
        ctx.executor = schedule.kernel
        self.device = ctx.device
        self.binding = Bindings(schedule, p, ctx)
        self.kernel = FusedLaunch(p, ctx, a2_buf=self.binding.a2_buf, head_dim=self.binding.head_dim,
                                  controller=controller, kernel=schedule.kernel)
        self.inputs, self.outputs = self.binding.inputs, self.binding.outputs
        self.epoch, self.blocks, self.errors = self.kernel.epoch, self.kernel.blocks, self.kernel.errors
        self.calls = 0  # calls launched (captures included, graph replays not): the epoch to guard
        self._last = None  # the raw stream of the last call: one call's launches never overlap the next's
        self._queued = collections.deque()  # events of calls still queued, with a loopback proxy (ctx.inflight_calls)
        if ctx.inflight_calls is not None and not torch.cuda.is_current_stream_capturing():
            # The loopback proxy's copies are CUDA driver calls on this process's context. Loading a
            # module (this executor's first launches compile and load its kernels) holds the context
            # lock until the GPU drains, and a running persistent kernel that waits on this proxy then
            # never drains: a deadlock until its timeout (the pattern of mscclpp#516, torchcomms#2334).
            # So the first launches find no call of this process in flight.
            torch.cuda.synchronize(self.device)

    @staticmethod
    def context_sizes(schedule: Schedule) -> dict:
        """Heap bytes and flag count a Context needs for ``schedule`` (every rank alike)."""
        p = build(schedule, 0)[0]
        return {"recv_bytes": max(256, p.placement.heap_bytes), "n_flags": p.n_flags}

    def __call__(self, inputs: dict, out: dict | None = None, *, poison: bool = False) -> dict:
        """Run one call. ``inputs``: buffer name -> this rank's tensor (the buffer's shape and dtype,
        contiguous, on this GPU). Returns buffer name -> output tensor. ``poison`` fills every
        output with NaN first (tests: an element the kernel does not write shows up)."""
        import torch

        p, dev, binding, kernel = self.plan, self.device, self.binding, self.kernel
        binding.check(inputs)
        if self.calls >= p.last_epoch:
            raise MkernelError(f"rank {p.rank}, {self.schedule.kernel}: call {self.calls + 1} is past the last epoch "
                               f"{p.last_epoch} (this plan's flags would overflow 64 bits); build a new executor on a new context")
        out = {} if out is None else dict(out)
        bound, key = binding.bind(inputs, out)
        capturing = torch.cuda.is_current_stream_capturing()
        stream = torch._C._cuda_getCurrentRawStream(dev.index)
        if not capturing:
            # an earlier call's error raises here, before this call's kernels (no host wait)
            if self.ctx.proxy is not None:
                self.ctx.proxy.check()
            if kernel.failed_word[0]:
                self.check()
            if self._last is not None and self._last != stream:  # calls stay ordered when the caller switches streams
                done = torch.cuda.Event()
                done.record(torch.cuda.ExternalStream(self._last, device=dev))
                torch.cuda.current_stream(dev).wait_event(done)
        heap_outputs, views = binding.heap_outputs, binding.heap_views
        if binding.stage or (poison and heap_outputs):
            if not kernel.enter.cached(stream, ()):  # every peer has finished the last call: what it read
                kernel.enter(stream, key=())  # may be overwritten
            for name in binding.stage:
                views[name].copy_(inputs[name])
        if poison:
            for name in self.outputs:
                (views[name] if name in heap_outputs else bound[name]).fill_(float("nan"))
        if self.ctx.proxy is not None:
            self.ctx.proxy.kick()  # an idle proxy naps; this call's commands are coming (hw/proxy.py)
        if capturing or not kernel.launch.cached(stream, key):  # a capture pins its address table (Bindings)
            kernel.launch(stream, key=key, **binding.arguments(bound, key, capturing))
        self.calls += 1
        for name in heap_outputs:
            out[name] = views[name].clone()
        if not capturing:
            self._last = stream
            if self.ctx.inflight_calls is not None:  # a loopback proxy: calls queue boundedly (hw/context.py)
                done = torch.cuda.Event()
                done.record()
                self._queued.append(done)
                while len(self._queued) > self.ctx.inflight_calls:
                    self._queued.popleft().synchronize()
        return out

    def trajectory(self) -> list[tuple[float, int]]:
        """The last call's intra-block targets: (us since the kernel started, target), the initial
        split first. Synchronises; adaptive executors only."""
        return self.kernel.trajectory()

    def fast_forward(self, epoch: int) -> None:
        """Put this rank's flags and epoch where ``epoch`` calls leave them, so the next call is
        ``epoch + 1``: tests of the top of the epoch range (:attr:`Plan.last_epoch`) without 2^50
        calls. Every rank must do it with no call in flight, between two barriers of the group."""
        import torch

        p = self.plan
        if not 0 <= epoch <= p.last_epoch:
            raise InputError(f"fast_forward({epoch}): epochs run from 0 to {p.last_epoch}")
        torch.cuda.synchronize(self.device)
        flags = self.ctx.flags
        for wait in p.waits.tolist():
            flags[wait[Wait.SLOT]] = epoch * wait[Wait.BUMPS]
        flags[p.arrive0:p.arrive0 + 2 * p.world] = epoch  # the arrival and exit flags of every peer
        flags[p.go] = epoch
        self.epoch.fill_(epoch)
        self.calls = epoch
        torch.cuda.synchronize(self.device)
        if self.ctx.proxy is not None:  # a receiving proxy rebuilds epochs near the last it published
            self.ctx.proxy.rebase(epoch)

    def check(self) -> None:
        """Synchronise; raise the first proxy or device error, naming the schedule task and its flag."""
        import torch

        torch.cuda.synchronize(self.device)
        if self.ctx.proxy is not None:
            self.ctx.proxy.check()
        failure = self.errors.read()
        if failure is not None:
            task = self.errors.task()
            what = self.schedule.tasks[task].describe() if 0 <= task < len(self.schedule.tasks) else "the call barrier"
            name = self.plan.flag_name(failure.index) if failure.what == "flag" else None
            raise DeviceWaitError(f"{failure} in {what}" + (f" ({name})" if name else ""))
