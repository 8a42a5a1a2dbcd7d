#!/usr/bin/env bash
# One device call for the adaptive SM partition on hw (issue 7): install offline, the controller's GPU
# tests and the static kernels' regression tests (emulated ones first, from processes that have not
# touched CUDA before MPS starts), then tools/studies/hw_controller.py on the emulated cluster, then the proxy's
# injected faults under the fused kernels (tests/hw/test_hw_faults.py, issue 10).
# Usage: here, `git rev-parse --short HEAD > .commit`; carry .commit and .whl; on the GPU machine:
#   OUT=/dir [TESTS_S=300] [CONFIGS=op:size,...] [CTL_S=240] [FAULTS_S=150] tools/device/controller_check.sh
# (a step with limit 0 is skipped)
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
status=0
if [ "${TESTS_S:-300}" -gt 0 ]; then
  timeout "${TESTS_S:-300}" python3 -m pytest -q -m gpu tests/hw/test_hw_controller.py tests/hw/test_hw_fused.py \
    -k "emulated_2x2 and not cli" 2>&1 | tee "$OUT/test_emulated.log" | tail -4 || status=1
  timeout 120 python3 -m pytest -q -m gpu tests/hw/test_hw_controller.py tests/hw/test_hw_fused.py \
    -k "not emulated and not nvlink" 2>&1 | tee "$OUT/test_gpu.log" | tail -4 || status=1
fi
if [ "${CTL_S:-240}" -gt 0 ]; then
  timeout "${CTL_S:-240}" python3 tools/studies/hw_controller.py --out "$OUT/ctl" ${CONFIGS:+--configs "$CONFIGS"} 2>&1 \
    | tee "$OUT/ctl.log" | tail -12 || status=1
fi
if [ "${FAULTS_S:-150}" -gt 0 ]; then
  timeout "${FAULTS_S:-150}" python3 -m pytest -q -m gpu tests/hw/test_hw_faults.py 2>&1 | tee "$OUT/test_faults.log" \
    | tail -4 || status=1
fi
exit $status
