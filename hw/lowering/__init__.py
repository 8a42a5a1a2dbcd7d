"""Lowering: a fused schedule becomes the tables one rank's persistent kernel walks, and the device
contract those tables follow.

``lower`` (schedule -> role tables) and ``plan`` (placement, ring commands, epoch targets, the flat
int64 arrays) write the tables; ``layout`` names every table column and error-block field, ``ring``
mirrors the device protocol's constants and the proxy's C structures (``runtime/csrc/mk_ring.h``, the
protocol's one specification);
``interp`` runs the tables on numpy, so the lowering is checked on a CPU. Nothing here needs a GPU,
and nothing here imports another layer of :mod:`mkernel.hw`.
"""
