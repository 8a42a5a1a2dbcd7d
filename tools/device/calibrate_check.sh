#!/usr/bin/env bash
# One device call for issue 8 on one H200 (about 6 minutes): install offline, then
#   1. mkernel calibrate (profile + raw measurements),
#   2. mkernel bench at world 1 (first BENCH_SIZES sizes of the GEMM ops and attention, default 3; MoE's first),
#   3. with EMU_SIZES=N, first: mkernel bench on the emulated 2x2 cluster (first N sizes). Off by default:
#      the torch ops hung there until calls on that cluster returned finished (2026-12-01, 716b5e0);
#      not rerun since. tools/device/emulated_runs.sh times that cluster through the executor.
# Usage: here `git rev-parse --short HEAD > .commit` (carry it); there OUT=/dir tools/device/calibrate_check.sh
# Then here: mkernel accuracy --calibration OUT/calibration.json --bench OUT/world1/bench.json --runs ...
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
status=0
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout -s ABRT "$limit" "$@" >"$OUT/$name.log" 2>&1 || status=1; tail -${TAIL:-25} "$OUT/$name.log"; }
if [ "${EMU_SIZES:-0}" != 0 ]; then  # first: MPS needs a process tree that has not touched CUDA
  step emulated 170 mkernel bench --emulate 2x2 --sizes "$EMU_SIZES" --iters 10 --out "$OUT/emulated"
fi
step calibrate 170 mkernel calibrate --out "$OUT/h200.toml" --raw "$OUT/calibration.json"
step world1 200 mkernel bench --kernels ag_gemm gemm_rs gemm_ar ring_attention --sizes "${BENCH_SIZES:-3}" --out "$OUT/world1"
step world1_moe 120 mkernel bench --kernels moe_dispatch_gemm --sizes 1 --iters 5 --out "$OUT/world1_moe"
exit $status
