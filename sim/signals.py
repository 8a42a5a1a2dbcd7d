"""The event engine's two small pieces: an event-counting environment and epoch-stamped signals."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import simpy

from mkernel.ir import Signal


UNSET = (-1, 0)  # (epoch, value) of a counter never written


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

    ``bump`` calls back every waiter whose count is reached; ``wait`` returns False when the count
    already holds, so the common case costs nothing. Counters are keyed by (rank, name, index)
    tuples, so the members of a group reach theirs without building a Signal each.
    """

    def __init__(self, env: simpy.Environment, epoch: int) -> None:
        self.env = env
        self.epoch = epoch
        self.values: dict[tuple, tuple[int, int]] = {}
        self.waiters: dict[tuple, list[tuple[int, Callable[[], None]]]] = defaultdict(list)

    def count(self, sig: Signal) -> int:
        return self.count_key((sig.rank, sig.name, sig.index))

    def count_key(self, key: tuple) -> int:
        epoch, value = self.values.get(key, UNSET)
        return value if epoch == self.epoch else 0

    def bump(self, sig: Signal, times: int = 1) -> None:
        self.bump_key((sig.rank, sig.name, sig.index), times)

    def bump_key(self, key: tuple, times: int = 1) -> None:
        self.bump_keys(((key, times),))

    def bump_keys(self, bumps) -> None:
        """Each (key, times) of ``bumps``, in order (one call for a run's bumps: the hottest code of
        a run, so count_key is inlined)."""
        values, epoch, waiters = self.values, self.epoch, self.waiters
        for key, times in bumps:
            e, value = values.get(key, UNSET)
            value = (value if e == epoch else 0) + times
            values[key] = (epoch, value)
            waiting = waiters.get(key)
            if waiting:
                still = []
                for need, call in waiting:
                    if need <= value:
                        call()
                    else:
                        still.append((need, call))
                waiters[key] = still

    def wait_key(self, key: tuple, need: int, call: Callable[[], None]) -> bool:
        """Whether ``key`` has yet to reach ``need``; if so, ``call()`` is made when it does (from
        the bump, so it should only schedule work)."""
        if self.count_key(key) >= need:
            return False
        self.waiters[key].append((need, call))
        return True
