"""The host side of the proxy path: the command ring, the proxy thread, and the host it runs on.

:class:`Proxy` is the loop :mod:`mkernel.sim.network` describes (poll, a bounded batch window,
batches per connection, the outstanding cap, fences), written as plain calls scheduled on the
environment instead of a SimPy process: one call where the process would resume, pushed when
and where the process's own event would be pushed (a timeout for a number it waits, a granted
request, a drained completion), so every event of a run keeps its place in the event order. A
call is a tuple in the queue; a process's step is a generator resumed through an event object,
and a run of the 2 x 8 GEMM+AR makes about 11 of them per network put.

:class:`Host` is a one-thread host (the proxy's, and a receiving proxy's for ``imm``) with
``simpy.Resource``'s grant order: a request is granted when it is first in line and the thread
is free, checked when a request arrives and when a release is processed; a release frees the
thread at once and is processed as an event of its own. That event does something only when
requests wait at the release, so it is scheduled only then.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import simpy

from .environment import CountingEnvironment


class Ring:
    """A bounded FIFO of commands in pinned host memory; a full ring makes the GPU wait.

    Its commands are the network's messages (``dst``: the connection's peer; ``queued``: when
    the command was written)."""

    def __init__(self, env: CountingEnvironment, depth: int) -> None:
        self.env = env
        self.depth = depth
        self.items: deque = deque()
        self.nonempty_us = 0.0  # time with at least one command waiting for the proxy
        self._since = 0.0
        self.blocked: deque = deque()  # (event, item) of puts waiting for a credit
        self.reader: Callable | None = None  # the proxy's call, while it waits for a command

    def put(self, item) -> simpy.Event | None:
        """Append ``item``; returns an event to wait on when the ring is full, else None."""
        if len(self.items) < self.depth:
            if not self.items:
                self._since = self.env.now
            self.items.append(item)
            if self.reader is not None:  # where the waiting proxy's event would be triggered
                reader, self.reader = self.reader, None
                self.env.call_later(0.0, reader)
            return None
        event = self.env.event()
        self.blocked.append((event, item))
        return event

    def take(self, dst: int, limit: int) -> list:
        """Remove and return up to ``limit`` commands for peer ``dst``, freeing their credits."""
        taken: list = []
        kept: deque = deque()
        for item in self.items:
            if len(taken) < limit and item.dst == dst:
                taken.append(item)
            else:
                kept.append(item)
        self.items = kept
        while self.blocked and len(self.items) < self.depth:
            event, item = self.blocked.popleft()
            self.items.append(item)
            event.succeed()
        if taken and not self.items:
            self.nonempty_us += self.env.now - self._since
        return taken


class Host:
    """One host thread that one caller at a time holds (see the module: ``simpy.Resource(capacity=1)``'s
    order, without its events where they do nothing)."""

    __slots__ = ("env", "busy", "waiting")

    def __init__(self, env: CountingEnvironment) -> None:
        self.env = env
        self.busy = False
        self.waiting: deque = deque()  # calls of the requests not yet granted, in arrival order

    def request(self, granted: Callable, arg=None) -> None:
        """Ask for the thread; ``granted(arg)`` is called where the request's event would be processed."""
        self.waiting.append((granted, arg))
        self._grant(None)

    def release(self) -> None:
        """Free the thread (at once); the first waiting request gets it when the release is processed."""
        self.busy = False
        if self.waiting:
            self.env.call_later(0.0, self._grant)

    def _grant(self, _arg) -> None:
        if self.waiting and not self.busy:
            self.busy = True
            granted, arg = self.waiting.popleft()
            self.env.call_later(0.0, granted, arg)


class Proxy:
    """One rank's proxy thread: waits for a command, polls, batches per connection, posts.

    Each method is one step of the loop, called where the process would resume; ``batch`` is
    the batch being posted, ``left`` the connections this pass still has to post."""

    def __init__(self, net, rank: int) -> None:
        self.net, self.rank = net, rank
        self.env, self.px = net.env, net.c.proxy
        self.ring, self.host = net.rings[rank], net.host[rank]
        self.left: deque = deque()
        self.batch: list = []
        self.at = 0  # the next command of ``batch`` to launch
        self.since = 0.0  # when the fence of this batch began

    def top(self, _arg=None) -> None:
        """The loop's head: wait for a command, then poll."""
        if not self.ring.items:
            self.ring.reader = self._polling
            return
        self._polling(None)

    def _polling(self, _arg) -> None:
        self.env.call_later(self.net.next_poll() - self.env.now, self._polled)

    def _polled(self, _arg) -> None:
        stall = self.net.m.inject.stall(self.rank, self.env.now)
        if stall is not None:  # an injected stall: a finite pause, or for good (ends in a deadlock error)
            if not math.isinf(stall):
                self.env.call_later(stall, self._look)
            return
        self._look(None)

    def _look(self, _arg) -> None:
        """Wait the batch window if the first connection's batch is not full, then post."""
        px, items = self.px, self.ring.items
        first = items[0].dst
        if sum(1 for it in items if it.dst == first) < px.batch and px.batch_window_us > 0:
            self.env.call_later(px.batch_window_us, self._post_all)
            return
        self._post_all(None)

    def _post_all(self, _arg) -> None:
        self.left = deque(dict.fromkeys(it.dst for it in self.ring.items))
        self._next_batch()

    def _next_batch(self) -> None:
        if not self.left:
            self.top()
            return
        self.batch = self.ring.take(self.left.popleft(), self.px.batch)
        self.host.request(self._granted)

    def _granted(self, _arg) -> None:
        px, metrics, now = self.px, self.net.metrics, self.env.now
        for item in self.batch:
            metrics["ring_wait_us"] += now - item.queued
        self.env.call_later(px.per_command_us * len(self.batch) + px.doorbell_us, self.net.posting, (self._posted, now))

    def _posted(self, start: float) -> None:
        metrics, now = self.net.metrics, self.env.now
        metrics["proxy_busy_us"] += now - start
        metrics["batches"] += 1
        metrics["doorbells"] += 1
        metrics["commands"] += len(self.batch)
        self.net.m.proxy_spans.append((self.rank, start, now, len(self.batch)))
        self.host.release()
        self.at = 0
        self._launching(None)

    def _launching(self, _arg) -> None:
        """Hand the batch's writes to the NIC, waiting for completions while ``max_outstanding`` are in flight."""
        net, batch, rank = self.net, self.batch, self.rank
        while self.at < len(batch):
            if net.outstanding[rank] >= self.px.max_outstanding:
                net.when_drained(rank, self._drained)
                return
            net.launch(batch[self.at])
            self.at += 1
        if net.c.notify_mode == "fence":
            self.since = self.env.now
            self._fencing(None)
            return
        self._next_batch()

    def _drained(self, _arg) -> None:
        self.net.posting((self._launching, None))

    def _fencing(self, _arg) -> None:
        """Block until every write to the batch's peer has completed, then post its flag writes."""
        net, px, rank = self.net, self.px, self.rank
        peer = (rank, self.batch[0].dst)
        if net.to_peer.get(peer, 0) > 0:
            net.when_drained(peer, self._fencing)
            return
        waited = self.env.now - self.since
        net.metrics["fences"] += 1
        net.metrics["fence_wait_us"] += waited
        net.fence_wait[rank] += waited
        self.env.call_later(px.per_command_us + px.doorbell_us, net.posting, (self._fenced, None))

    def _fenced(self, _arg) -> None:
        for item in self.batch:
            self.net.start_flag(item)
        self._next_batch()
