"""Studies and measurements over results, not part of the IR: the reference grid and its sweeps
(``sweep``), the scale-out what-ifs (``scaleout``, ``study``), static SM split tables (``splits``),
hardware profiles fitted from `mkernel calibrate` (``profile``) and the simulator's error against
GPU measurements (``accuracy``). They run the backends through :mod:`mkernel.runner`.
"""
