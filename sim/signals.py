"""The event engine's two small pieces: an event-counting environment and epoch-stamped signals."""
from __future__ import annotations

from collections import defaultdict

import simpy

from mkernel.ir import Signal


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def step(self) -> None:
        self.events += 1
        super().step()


class SignalBoard:
    """Epoch-stamped counters: a value counts only if it was written in the current epoch.

    ``bump`` releases every waiter whose count is reached; ``wait`` returns None when the count
    already holds, so the common case costs no event.
    """

    def __init__(self, env: simpy.Environment, epoch: int) -> None:
        self.env = env
        self.epoch = epoch
        self.values: dict[Signal, tuple[int, int]] = {}
        self.waiters: dict[Signal, list[tuple[int, simpy.Event]]] = defaultdict(list)

    def count(self, sig: Signal) -> int:
        epoch, value = self.values.get(sig, (-1, 0))
        return value if epoch == self.epoch else 0

    def bump(self, sig: Signal) -> None:
        value = self.count(sig) + 1
        self.values[sig] = (self.epoch, value)
        waiting = self.waiters.get(sig)
        if waiting:
            still = []
            for need, event in waiting:
                if need <= value:
                    event.succeed()
                else:
                    still.append((need, event))
            self.waiters[sig] = still

    def wait(self, sig: Signal, need: int) -> simpy.Event | None:
        """An event that fires when ``sig`` reaches ``need``; None if it already has."""
        if self.count(sig) >= need:
            return None
        event = self.env.event()
        self.waiters[sig].append((need, event))
        return event
