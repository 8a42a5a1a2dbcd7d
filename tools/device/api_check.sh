#!/usr/bin/env bash
# One device call for the public ops at world 1 (about 5-9 minutes): install offline, then
#   1. the world-1 GPU tests of the fused kernel (six cases, D = 128 attention, a graph replay),
#   2. the world-1 torch-API tests (fused path against float64, torch.compile, bad arguments),
#   3. tools/bench/bench_api.py (every op through the public API against torch: host us per call, graph time).
# STEPS picks steps (default "fused api bench"); BENCH_ARGS goes to the bench (e.g. "--quick").
# Usage: here `git rev-parse --short HEAD > .commit` (carry it); there OUT=/dir tools/device/api_check.sh
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" >"$OUT/$name.log" 2>&1 || status=1; tail -4 "$OUT/$name.log"; }
for s in ${STEPS:-fused api bench}; do
  case $s in
    fused) step fused 240 python3 -m pytest -q tests/hw/test_hw_fused.py -k "test_world_1 or graph_replay or (head_dim_128 and world_1)" ;;
    api) step api 180 python3 -m pytest -q tests/hw/test_hw_api.py -k "world_1 or world1" ;;
    bench) step bench 420 python3 tools/bench/bench_api.py --out "$OUT/bench_api.json" ${BENCH_ARGS:-} ;;
  esac
done
exit $status
