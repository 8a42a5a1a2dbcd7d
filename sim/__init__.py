"""mkernel.sim: the SimPy backend. It models SM roles, HBM, NVLink ports, NICs and the host proxy.

Installed as ``mkernel.sim`` from the top-level ``sim/`` folder. Needs simpy and numpy only.
"""
from .backend import SimBackend

__all__ = ["SimBackend"]
