#!/usr/bin/env bash
# One device call for the fused ops: install offline, then the fused GPU tests (emulated 2x2 first,
# from a process that has not touched CUDA before MPS starts), logs under $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/mkernel-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
status=0
timeout ${T_EMU:-280} python3 -m pytest -q -x tests/test_hw_fused.py -k "${K_EMU:-emulated}" 2>&1 | tee "$OUT/fused_emulated.log" | tail -25 || status=1
timeout ${T_W1:-200} python3 -m pytest -q tests/test_hw_fused.py -k "${K_W1:-world_1}" 2>&1 | tee "$OUT/fused_world1.log" | tail -25 || status=1
exit $status
