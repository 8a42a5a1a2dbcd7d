"""mkernel.sim: the SimPy backend. It models SM roles, HBM, NVLink ports, NICs and the host proxy.

Installed as ``mkernel.sim`` from the top-level ``sim/`` folder. Needs simpy and numpy only. Its event
core runs compiled where the install built it (:mod:`mkernel.sim.native`), else as Python.
"""
from . import native

native.choose()  # (before any core module is imported)

from .backend import SimBackend  # noqa: E402

__all__ = ["SimBackend"]
