#!/usr/bin/env bash
# One device call for the fused ops (about 8 minutes): install offline, then
#   1. every emulated-cluster GPU test (first: from a process that has not touched CUDA before MPS),
#   2. the remaining GPU tests at world 1,
#   3. tools/bench/bench_fused.py (world 1 against torch),
#   4. tools/studies/long_run.py with LONG_CALLS calls (default 2000) on the emulated 2x2 cluster.
# Usage: here `git rev-parse --short HEAD > .commit` (carry it); there OUT=/dir tools/device/fused_check.sh
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
status=0
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" >"$OUT/$name.log" 2>&1 || status=1; tail -4 "$OUT/$name.log"; }
step emulated 240 python3 -m pytest -q tests/hw/test_hw_fused.py tests/hw/test_hw_api.py tests/hw/test_hw_gpu.py -k "emulated or 2x2 or cli"
step world1 180 python3 -m pytest -q tests/hw/test_hw_fused.py tests/hw/test_hw_api.py tests/hw/test_hw_gemm.py -k "not emulated and not 2x2 and not cli"
step bench 150 python3 tools/bench/bench_fused.py --out "$OUT/bench_fused.json"
step long_run 240 python3 tools/studies/long_run.py --calls "${LONG_CALLS:-2000}" --out "$OUT/long_run.json"
exit $status
