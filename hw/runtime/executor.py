"""Run a fused schedule on this rank's GPU: the plan's tables on the device, the heap, the launch.

:class:`Executor` is built once per (schedule, rank) and called many times. A call:

1. waits (a one-block kernel) until every peer finished the previous call, when this rank stages
   inputs into the symmetric heap, so nothing a peer may still be reading is overwritten;
2. stages the inputs that peers read into the heap (one copy each; inputs only this rank reads are
   used in place);
3. launches the fused kernel (:mod:`fused`), which starts with a barrier across the ranks and
   tells peers when it is done;
4. returns the outputs: fresh tensors for bound outputs, copies of heap outputs.

Everything that does not change between calls is built once (the device tables, the heap views,
the kernel's whole argument list: :class:`~mkernel.hw.launch.Launch`); a call checks its
tensors, fills in the address table and the GEMM descriptors (both cached by address) and
launches. Everything is enqueued on the current stream; nothing synchronises the host, except with the
loopback transport between nodes (the emulated cluster): there a call returns once its kernel has
finished (``ctx.inflight_calls`` of them may stay queued, 0 by default), since that proxy's copies
stall while the host blocks in CUDA, and a kernel waiting for them with it (:mod:`context`). Two calls never
overlap on the GPU (they share flags, claim counters and the epoch): a call on another stream than
the last one first waits for the last one's event. :meth:`check`
synchronises and raises the first device, proxy or wait error, naming rank, role, flag, epoch and
the schedule task. Without it an error still surfaces: a failed proxy raises at the next call, and
the fused kernel's last block stores the error block's first word to pinned host memory, so the
next call raises once the call that recorded a device error has finished (an event query, no host
wait, no extra launch).
A timed-out call's outputs are wrong, so it must never pass unnoticed (the torch ops had returned
them silently).
"""
from __future__ import annotations

import collections
import math

import numpy as np

from mkernel.cluster import Cluster
from mkernel.controller import Balance, split
from mkernel.errors import InputError, MkernelError
from mkernel.ir import BufferKind, Schedule

from ..kernels import fused
from ..lowering.plan import Plan, build
from .launch import CACHED_CALLS, Addresses, Descriptors, Launch
from .state import ErrorBlock

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


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
        dev = ctx.device
        self.device = dev

        def t(a):
            a = a if a.size else np.zeros((1, max(1, a.shape[1] if a.ndim == 2 else 1)), np.int64)
            return torch.from_numpy(np.ascontiguousarray(a)).to(dev)

        self.tables = {name: t(getattr(p, name)) for name in ("tasks", "regions", "waits", "signals", "aux",
                                                               "gemm_tiles", "segments")}
        self.claims = torch.zeros(4, dtype=torch.int64, device=dev)
        self.epoch = torch.zeros(1, dtype=torch.int64, device=dev)
        self.calls = 0  # calls launched (captures included, graph replays not): the epoch to guard
        self.done = torch.zeros(1, dtype=torch.int32, device=dev)
        self.locks = torch.zeros(max(1, 4 * p.n_locks), dtype=torch.int64, device=dev)
        self.errors = ErrorBlock(dev)
        self.timeout_ns = ctx.knobs.timeout_ns
        self.buffers = {b.name: b for b in schedule.buffers}
        # heap buffers: a view of this rank's copy, and every rank's address in the bases table
        heap = ctx.recv
        self.heap_views = {}
        bases = np.zeros(len(p.buffers) * p.world, dtype=np.int64)
        recv_ptrs = ctx.recv_ptrs.cpu().numpy()
        for bid, name in enumerate(p.buffers):
            if name in p.placement.heap:
                off, b = p.placement.heap[name], self.buffers[name]
                nbytes = b.rows * b.cols * b.itemsize
                self.heap_views[name] = heap[off:off + nbytes].view(_dtype(b.dtype)).view(b.rows, b.cols)
                bases[bid * p.world: (bid + 1) * p.world] = recv_ptrs + off
        self.addresses = Addresses(bases, p.rank, p.world, dev)
        # plan-owned scratch that no peer touches: allocated once
        self.scratch = {name: torch.empty(self.buffers[name].rows, self.buffers[name].cols,
                                          dtype=_dtype(self.buffers[name].dtype), device=dev)
                        for name in p.placement.bound if self.buffers[name].kind is BufferKind.SCRATCH}
        self.inputs = tuple(b.name for b in schedule.buffers if b.kind is BufferKind.INPUT)
        self.outputs = tuple(b.name for b in schedule.buffers if b.kind is BufferKind.OUTPUT)
        # what a call checks and binds, in buffer-id order: (id, name, kind, shape, dtype)
        self._inputs = tuple((name, (self.buffers[name].rows, self.buffers[name].cols), _dtype(self.buffers[name].dtype))
                             for name in self.inputs)
        self._bound = tuple((p.buffers.index(name), name, self.buffers[name].kind,
                             (self.buffers[name].rows, self.buffers[name].cols), _dtype(self.buffers[name].dtype))
                            for name in p.placement.bound)
        self._no_ptrs = (0,) * len(p.buffers)
        self.stage = tuple(n for n in self.inputs if n in p.placement.heap)
        ops = p.ops | ({"put"} if ctx.nodes > 1 else set())
        head_dim = next((self.buffers[n].cols for n in ("Q",) if n in self.buffers), 64)
        self.gemm_ab = p.gemm_operands
        a2_buf = p.buffers.index(self.gemm_ab[0][1]) if self.gemm_ab and len(self.gemm_ab[0]) > 1 else -1
        self.meta = fused.constexprs(frozenset(ops), head_dim, barrier=p.world > 1,
                                     copy_rows=ctx.knobs.copy_rows, adaptive=controller is not None)
        self.blocks, self.steer = self._initial_split()
        self.state = torch.zeros(fused.STATE_WORDS, dtype=torch.int64, device=dev)
        self.state[int(fused.CTRL)], self.state[int(fused.WORK)] = self.steer[:2]  # as every call ends (fused._reset)
        self.log = torch.zeros(2 * fused.LOG_ENTRIES if controller else 2, dtype=torch.int64, device=dev)
        self._dummy = torch.zeros(256, 256, dtype=torch.bfloat16, device=dev)  # descriptors' stand-in
        self._a_descs = Descriptors((self.meta["BM"], self.meta["BK"]))
        self._b_descs = Descriptors((self.meta["BK"], self.meta["BN"]))
        self._c_descs = Descriptors((self.meta["BM"], self.meta["BN"]))
        self._gemm_c = p.gemm_c
        self._call_descs: collections.OrderedDict[tuple[int, ...], dict] = collections.OrderedDict()
        self._last = None  # the raw stream of the last call: one call's launches never overlap the next's
        self._queued = collections.deque()  # events of calls still queued, with a loopback proxy (ctx.inflight_calls)
        # the error word: the kernel's last block stores it here, and a call reads it with no CUDA call
        self._failed = torch.zeros(1, dtype=torch.int64).pin_memory()
        self._failed_word = self._failed.numpy()
        # a GEMM table runs in a fixed-role kernel only: adaptive blocks claim every task
        n_seg, n_gemm = (0, 0) if controller is not None else (len(p.segments), len(p.gemm_tiles))
        ring, err = ctx.ring, self.errors.words
        self._err32 = err.view(torch.int32)
        self.launch = Launch(fused.fused_kernel, p.grid, dict(
            **self.tables, flag_bases=ctx.flag_ptrs, claims=self.claims, epoch_ptr=self.epoch, done_ptr=self.done,
            locks=self.locks, a2_buf=a2_buf, records=ring.ring_ptr, ctl=ring.ctl_ptr, head=ring.head,
            capacity=ring.capacity, err32=self._err32, err64=err, err_host=self._failed.data_ptr(), rank=p.rank,
            world=p.world, gpn=p.gpus_per_node, arrive0=p.arrive0, exit0=p.exit0, go=p.go,
            timeout_ns=self.timeout_ns, barrier_timeout_ns=ctx.knobs.barrier_timeout_ns, sm_scale=1.0 / math.sqrt(head_dim),
            **dict(zip(("n0", "n1", "n2", "n3"), p.role_tasks)), **dict(zip(("b0", "b1", "b2", "b3"), self.blocks)),
            n_seg=n_seg, n_gemm=n_gemm, state=self.state, log=self.log,
            **dict(zip(("ctrl0", "work", "min_sms", "hysteresis", "link_sms"), self.steer)), **self.meta),
            options={"num_warps": fused.NUM_WARPS, "num_stages": fused.NUM_STAGES},
            per_call=("bases", "a_host", "a2_host", "b_host", "c_host"))
        self.enter = Launch(fused.enter_kernel, 1, dict(
            flag_bases=ctx.flag_ptrs, epoch_ptr=self.epoch, rank=p.rank, world=p.world, exit0=p.exit0,
            timeout_ns=ctx.knobs.barrier_timeout_ns, err32=self._err32, err64=err, ctl=ring.ctl_ptr), options={},
            per_call=())
        if ctx.inflight_calls is not None and not torch.cuda.is_current_stream_capturing():
            # The loopback proxy's copies are CUDA driver calls on this process's context. Loading a
            # module (this executor's first launches compile and load its kernels) holds the context
            # lock until the GPU drains, and a running persistent kernel that waits on this proxy then
            # never drains: a deadlock until its timeout (the pattern of mscclpp#516, torchcomms#2334).
            # So the first launches find no call of this process in flight.
            torch.cuda.synchronize(dev)

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

        p, dev = self.plan, self.device
        for name, want, dt in self._inputs:
            x = inputs.get(name)
            if x is None or x.shape != want or x.dtype != dt or x.get_device() != dev.index or not x.is_contiguous():
                got = "nothing" if x is None else f"{tuple(x.shape)} {x.dtype} on {x.device}" + (
                    "" if x.is_contiguous() else ", not contiguous")
                raise InputError(f"{self.schedule.kernel} input {name}: expected a contiguous {want} {dt} tensor "
                                 f"on {dev}, got {got}")
        if self.calls >= p.last_epoch:
            raise MkernelError(f"rank {p.rank}, {self.schedule.kernel}: call {self.calls + 1} is past the last epoch "
                               f"{p.last_epoch} (this plan's flags would overflow 64 bits); build a new executor on a new context")
        out = {} if out is None else dict(out)
        bound, ptrs = {}, list(self._no_ptrs)
        for bid, name, kind, shape, dt in self._bound:
            if kind is BufferKind.INPUT:
                t = inputs[name]
            elif kind is BufferKind.OUTPUT:
                t = out.get(name)
                if t is None:
                    t = out[name] = torch.empty(shape, device=dev, dtype=dt)
            else:
                t = self.scratch[name]
            bound[name] = t
            ptrs[bid] = t.data_ptr()
        capturing = torch.cuda.is_current_stream_capturing()
        stream = torch._C._cuda_getCurrentRawStream(dev.index)
        if not capturing:
            # an earlier call's error raises here, before this call's kernels (no host wait)
            if self.ctx.proxy is not None:
                self.ctx.proxy.check()
            if self._failed_word[0]:
                self.check()
            if self._last is not None and self._last != stream:  # calls stay ordered when the caller switches streams
                done = torch.cuda.Event()
                done.record(torch.cuda.ExternalStream(self._last, device=dev))
                torch.cuda.current_stream(dev).wait_event(done)
        heap_outputs = [n for n in self.outputs if n in self.heap_views]
        if self.stage or (poison and heap_outputs):
            self.enter(stream)
            for name in self.stage:
                self.heap_views[name].copy_(inputs[name])
        if poison:
            for name in self.outputs:
                (self.heap_views[name] if name in heap_outputs else bound[name]).fill_(float("nan"))
        if self.ctx.proxy is not None:
            self.ctx.proxy.kick()  # an idle proxy naps; this call's commands are coming (hw/proxy.py)
        key = tuple(ptrs)  # the bound tensors' addresses fix the address table and every descriptor
        descs = self._call_descs.get(key)
        if descs is None:
            if len(self._call_descs) >= CACHED_CALLS:
                self._call_descs.popitem(last=False)
            descs = self._call_descs[key] = self._descriptors(bound)
        self.launch(stream, bases=self.addresses(key, capturing), **descs)
        self.calls += 1
        for name in heap_outputs:
            out[name] = self.heap_views[name].clone()
        if not capturing:
            self._last = stream
            if self.ctx.inflight_calls is not None:  # a loopback proxy: calls queue boundedly (hw/context.py)
                done = torch.cuda.Event()
                done.record()
                self._queued.append(done)
                while len(self._queued) > self.ctx.inflight_calls:
                    self._queued.popleft().synchronize()
        return out

    def _initial_split(self) -> tuple[tuple[int, int, int, int], tuple[int, ...]]:
        """Blocks per role at the start, and the controller's kernel arguments: the initial control
        and work words (:mod:`fused`), then the policy's parameters. Adaptive: the policy's split of
        the movable blocks for the whole work, as the simulator's controller makes at the start."""
        b = self.plan.blocks
        if self.controller is None:
            return b, (0, 0, 0, 0, 0)
        pol, tasks = self.controller, self.plan.tasks
        first = (0, self.plan.role_tasks[0], sum(self.plan.role_tasks[:2]))
        w0, w1 = (sum(fused.work_units(int(ns)) for ns in tasks[first[r]:first[r + 1], 15]) for r in (0, 1))
        movable = b[0] + b[1]
        if movable > int(fused.FIELD) or max(w0, w1) >= 2**31:
            raise InputError(f"{self.schedule.kernel}: {movable} movable SMs and work {w0}, {w1} (x "
                             f"{int(fused.UNIT_NS)} ns) do not fit the controller's fields (255 SMs, 2^31 units)")
        intra = split(movable, w0, w1, b[1], 0, 0, pol.min_sms, pol.hysteresis, pol.link_sms)
        return (movable - intra, intra, b[2], b[3]), (fused.control_word(intra, movable - intra, intra),
                                                      w0 | w1 << 32, pol.min_sms, pol.hysteresis, pol.link_sms)

    def trajectory(self) -> list[tuple[float, int]]:
        """The last call's intra-block targets: (us since the kernel started, target), the initial
        split first. Synchronises; adaptive executors only."""
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

    def _descriptors(self, bound: dict) -> dict:
        """Host TMA descriptors of the GEMM operands: A, the second A (A again where there is none),
        B, and the GEMM table's C; stand-ins for a kernel without GEMMs (or without a table)."""
        a = a2 = b = c = self._dummy
        if self.gemm_ab is not None:
            a_names, b_name = self.gemm_ab  # one A or two: the second A is A itself where there is one
            a, a2, b = (bound.get(n, self.heap_views.get(n)) for n in (a_names[0], a_names[-1], b_name))
        if self._gemm_c is not None:
            c = bound.get(self._gemm_c, self.heap_views.get(self._gemm_c))
        return {"a_host": self._a_descs(a), "a2_host": self._a_descs(a2), "b_host": self._b_descs(b),
                "c_host": self._c_descs(c)}

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
        for slot, _count, bumps in p.waits.tolist():
            flags[slot] = epoch * bumps
        flags[p.arrive0:p.arrive0 + 2 * p.world] = epoch  # the arrival and exit flags of every peer
        flags[p.go] = epoch
        self.epoch.fill_(epoch)
        self.calls = epoch
        torch.cuda.synchronize(self.device)

    def check(self) -> None:
        """Synchronise; raise the first proxy or device error, naming the schedule task and its flag."""
        import torch

        torch.cuda.synchronize(self.device)
        if self.ctx.proxy is not None:
            self.ctx.proxy.check()
        failure = self.errors.read()
        if failure is not None:
            from .state import DeviceWaitError

            task = self.errors.task()
            what = self.schedule.tasks[task].describe() if 0 <= task < len(self.schedule.tasks) else "the call barrier"
            slot = failure.index
            name = self.plan.slot_names[slot] if failure.what == "flag" and slot < len(self.plan.slot_names) else None
            raise DeviceWaitError(f"{failure} in {what}" + (f" (signal {name})" if name else ""))
