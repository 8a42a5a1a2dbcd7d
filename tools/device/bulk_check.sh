#!/usr/bin/env bash
# One device call for the bulk-copy steps (issue 27, about 4 minutes on one H200): install offline,
# then the GPU and compile tests of hw/kernels/bulk.py, then the per-SM data-movement benchmark.
# Usage: here `git rev-parse --short HEAD > .commit` (carry it); there OUT=/dir tools/device/bulk_check.sh
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
status=0
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" >"$OUT/$name.log" 2>&1 || status=1; tail -${TAIL:-4} "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
step tests 240 python3 -m pytest -q -rs tests/hw/test_hw_bulk.py
TAIL=24 step bench 300 python3 tools/bench/bench_bulk.py --out "$OUT/bench_bulk.json"
exit $status
