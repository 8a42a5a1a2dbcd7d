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
from typing import TYPE_CHECKING, Any

import simpy

from .environment import CountingEnvironment

if TYPE_CHECKING:
    from .network import Message, Network


class Ring:
    """A bounded FIFO of commands in pinned host memory; a full ring makes the GPU wait.

    Its commands are the network's messages (``dst``: the connection's peer; ``queued``: when
    the command was written)."""

    def __init__(self, env: CountingEnvironment, depth: int) -> None:
        self.env = env
        self.depth = depth
        self.items: deque[Message] = deque()
        self.nonempty_us = 0.0  # time with at least one command waiting for the proxy
        self._since = 0.0
        self.blocked: deque[tuple[simpy.Event, Message]] = deque()  # (event, item) of puts waiting for a credit
        self.reader: Callable[[Any], None] | None = None  # the proxy's call, while it waits for a command

    def put(self, item: Message) -> simpy.Event | None:
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

    def take(self, dst: int, limit: int) -> list[Message]:
        """Remove and return up to ``limit`` commands for peer ``dst``, freeing their credits."""
        taken: list[Message] = []
        kept: deque[Message] = deque()
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
        self.waiting: deque[tuple[Callable[[Any], None], Any]] = deque()  # the requests not yet granted, in order

    def request(self, granted: Callable[[Any], None], arg: Any = None) -> None:
        """Ask for the thread; ``granted(arg)`` is called where the request's event would be processed."""
        self.waiting.append((granted, arg))
        self._grant(None)

    def release(self) -> None:
        """Free the thread (at once); the first waiting request gets it when the release is processed."""
        self.busy = False
        if self.waiting:
            self.env.call_later(0.0, self._grant)

    def _grant(self, _arg: object) -> None:
        if self.waiting and not self.busy:
            self.busy = True
            granted, arg = self.waiting.popleft()
            self.env.call_later(0.0, granted, arg)


class Proxy:
    """One rank's proxy thread: waits for a command, polls, batches per connection, posts.

    Each method is one step of the loop, called where the process would resume; ``batch`` is
    the batch being posted, ``left`` the connections this pass still has to post."""

    def __init__(self, net: Network, rank: int) -> None:
        self.net, self.rank = net, rank
        self.env = net.env
        self.ring, self.host = net.rings[rank], net.host[rank]
        px, f = net.c.proxy, net.m.inject.f  # (their terms read once: each read of a spec's field is a generic lookup)
        self.batch_size: int = px.batch
        self.window_us: float = px.batch_window_us
        self.per_command_us: float = px.per_command_us
        self.doorbell_us: float = px.doorbell_us
        self.max_outstanding: int = px.max_outstanding
        self.stalls = rank == f.stall_rank and f.stall_us > 0  # (Injector.stall: None for any other rank)
        self.left: deque[int] = deque()
        self.batch: list[Message] = []
        self.at = 0  # the next command of ``batch`` to launch
        self.since = 0.0  # when the fence of this batch began

    def top(self, _arg: object = None) -> None:
        """The loop's head: wait for a command, then poll."""
        if not self.ring.items:
            self.ring.reader = self._polling
            return
        self._polling(None)

    def _polling(self, _arg: object) -> None:
        self.env.call_later(self.net.next_poll() - self.env.now, self._polled)

    def _polled(self, _arg: object) -> None:
        stall = self.net.m.inject.stall(self.rank, self.env.now) if self.stalls else None
        if stall is not None:  # an injected stall: a finite pause, or for good (ends in a deadlock error)
            if not math.isinf(stall):
                self.env.call_later(stall, self._look)
            return
        self._look(None)

    def _look(self, _arg: object) -> None:
        """Wait the batch window if the first connection's batch is not full, then post."""
        items = self.ring.items
        first = items[0].dst
        if sum(1 for it in items if it.dst == first) < self.batch_size and self.window_us > 0:
            self.env.call_later(self.window_us, self._post_all)
            return
        self._post_all(None)

    def _post_all(self, _arg: object) -> None:
        peers: dict[int, None] = {}  # (each peer once, in order of its first command)
        for it in self.ring.items:
            peers[it.dst] = None
        self.left = deque(peers)
        self._next_batch()

    def _next_batch(self) -> None:
        if not self.left:
            self.top()
            return
        self.batch = self.ring.take(self.left.popleft(), self.batch_size)
        self.host.request(self._granted)

    def _granted(self, _arg: object) -> None:
        net, now = self.net, self.env.now
        for item in self.batch:
            net.ring_wait_us += now - item.queued
        self.env.call_later(self.per_command_us * len(self.batch) + self.doorbell_us, net.posting, (self._posted, now))

    def _posted(self, start: float) -> None:
        net, now = self.net, self.env.now
        net.proxy_busy_us += now - start
        net.batches += 1
        net.doorbells += 1
        net.commands += len(self.batch)
        net.m.proxy_spans.append((self.rank, start, now, len(self.batch)))
        self.host.release()
        self.at = 0
        self._launching(None)

    def _launching(self, _arg: object) -> None:
        """Hand the batch's writes to the NIC, waiting for completions while ``max_outstanding`` are in flight."""
        net, batch, rank = self.net, self.batch, self.rank
        while self.at < len(batch):
            if net.outstanding[rank] >= self.max_outstanding:
                net.when_drained(rank, self._drained)
                return
            net.launch(batch[self.at])
            self.at += 1
        if net.fence:
            self.since = self.env.now
            self._fencing(None)
            return
        self._next_batch()

    def _drained(self, _arg: object) -> None:
        self.net.posting((self._launching, None))

    def _fencing(self, _arg: object) -> None:
        """Block until every write to the batch's peer has completed, then post its flag writes."""
        net, rank = self.net, self.rank
        peer = net.pair(rank, self.batch[0].dst)
        if net.to_peer.get(peer, 0) > 0:
            net.when_drained(peer, self._fencing)
            return
        waited = self.env.now - self.since
        net.fences += 1
        net.fence_wait_us += waited
        net.fence_wait[rank] += waited
        self.env.call_later(self.per_command_us + self.doorbell_us, net.posting, (self._fenced, None))

    def _fenced(self, _arg: object) -> None:
        for item in self.batch:
            self.net.start_flag(item)
        self._next_batch()
