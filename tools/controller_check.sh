#!/usr/bin/env bash
# One device call for the adaptive SM partition on hw (issue 7): install offline, the controller's GPU
# tests and the static kernels' regression tests (emulated ones first, from processes that have not
# touched CUDA before MPS starts), then tools/hw_controller.py on the emulated cluster.
# Usage: here, `git rev-parse --short HEAD > .commit`; carry .commit and .whl; on the GPU machine:
#   OUT=/dir [TESTS_S=300] [CONFIGS=op:size,...] [CTL_S=240] tools/controller_check.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/mkernel-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
status=0
if [ "${TESTS_S:-300}" -gt 0 ]; then
  timeout "${TESTS_S:-300}" python3 -m pytest -q -m gpu tests/test_hw_controller.py tests/test_hw_fused.py \
    -k "emulated_2x2 and not cli" 2>&1 | tee "$OUT/test_emulated.log" | tail -4 || status=1
  timeout 120 python3 -m pytest -q -m gpu tests/test_hw_controller.py tests/test_hw_fused.py \
    -k "not emulated and not nvlink" 2>&1 | tee "$OUT/test_gpu.log" | tail -4 || status=1
fi
if [ "${CTL_S:-240}" -gt 0 ]; then
  timeout "${CTL_S:-240}" python3 tools/hw_controller.py --out "$OUT/ctl" ${CONFIGS:+--configs "$CONFIGS"} 2>&1 \
    | tee "$OUT/ctl.log" | tail -12 || status=1
fi
exit $status
