"""The device code of the fused ops (Triton, sm_90a): ``fused`` the persistent kernel that walks a
rank's plan, ``tiles`` its data ops, ``bulk`` its bulk-copy data path, ``sync`` its bounded waits,
error record, ring producer and barriers, and ``gemm`` the standalone compute-role GEMM.

Kernels read the tables of :mod:`mkernel.hw.lowering` and nothing above it.
"""
