#!/usr/bin/env bash
# One device call for issue 10 and issue 6's open defect, each step with its own limit (0 skips it):
# the fused kernels' GPU tests, the torch ops' bad-input tests (world 1 and 2 emulated ranks), the heap-offset probe
# (docs/results/data/reliability-hw-2026-12-01/heap_probe.py), the proxy's faults under the fused kernels (tests/hw/test_hw_faults.py), and
# the long run (tools/studies/long_run.py, LONG_CALLS calls on the emulated 2x2 cluster).
# Usage: here, `git rev-parse --short HEAD > .commit`; carry .commit and .whl; on the GPU machine:
#   OUT=/dir [FUSED_S=0 FUSED_K='world_1 or emulated_2x2'] [BAD_S=120 API_K=bad_arguments] [PROBE_S=150] [PADS=0,2.5,4.5] [CASES=gemm_ar] [SIZES=24576,32768 K=2048] [MIX_S=0 MIX_CONFIGS=all,pair] [FAULTS_S=420] [LONG_S=0]
#   [PYTEST_EXTRA=--runxfail: an expected failure's own error shown] [LONG_CALLS=10000 LONG_CASES=gemm_ar,gemm_rs LONG_NODES=2 LONG_GPN=2 LONG_SMS=132 LONG_SYNC=0] [FAULTS_K=fatal] tools/device/reliability_check.sh
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
status=0
step() {  # name, limit, command...: at the limit, rank processes dump their stacks (SIGUSR1), then all stop
  local name=$1 limit=$2; shift 2
  [ "$limit" -gt 0 ] || return 0
  echo "== $name (limit $limit s)"
  setsid "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$! t=0
  while kill -0 "$pid" 2>/dev/null && [ "$t" -lt "$limit" ]; do sleep 1; t=$((t + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    echo "   limit reached: rank stacks in $name.log"
    pkill -USR1 -f multiprocessing.spawn; sleep 3; kill -KILL -- "-$pid"; wait "$pid"; status=1
    pkill -f nvidia-cuda-mps; sleep 1  # a launcher killed mid-run leaves its MPS daemon behind
  else
    wait "$pid" || { echo "   exit $?"; status=1; }
  fi
  echo "   ${t} s"; tail -6 "$OUT/$name.log"
}
step fused "${FUSED_S:-0}" python3 -m pytest -q -s -rxX ${PYTEST_EXTRA:-} -m gpu tests/hw/test_hw_fused.py -k "${FUSED_K:-world_1 or emulated_2x2}"
step mix "${MIX_S:-0}" python3 docs/results/data/reliability-hw-2026-12-01/mix_probe.py ${MIX_CONFIGS:+--configs "$MIX_CONFIGS"}
step bad "${BAD_S:-120}" python3 -m pytest -q -s -rxX ${PYTEST_EXTRA:-} -m gpu tests/hw/test_hw_api.py -k "${API_K:-bad_arguments}"
step long "${LONG_S:-0}" python3 tools/studies/long_run.py --calls "${LONG_CALLS:-10000}" --out "$OUT/long_run.json" \
  --nodes "${LONG_NODES:-2}" --gpn "${LONG_GPN:-2}" --sms "${LONG_SMS:-132}" --sync-every "${LONG_SYNC:-0}" ${LONG_CASES:+--cases "$LONG_CASES"}
step probe "${PROBE_S:-150}" python3 docs/results/data/reliability-hw-2026-12-01/heap_probe.py --pads "${PADS:-0,2.5,4.5}" --cases "${CASES:-gemm_ar}" \
  ${SIZES:+--sizes "$SIZES" --k "${K:-2048}" --calls "${CALLS:-2}"}
step faults "${FAULTS_S:-420}" python3 -m pytest -q -s -rxX ${PYTEST_EXTRA:-} -m gpu tests/hw/test_hw_faults.py ${FAULTS_K:+-k "$FAULTS_K"}
exit $status
