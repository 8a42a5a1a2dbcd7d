#!/usr/bin/env bash
# The fused ops on the emulated 2x2 cluster through `mkernel run --backend hw` (4 ranks under MPS, 33 SMs
# each, loopback transport between the two "nodes"), one JSON per op for `mkernel accuracy --runs`.
# Usage: OUT=/dir tools/device/emulated_runs.sh   (each run also checks its outputs against numpy)
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
mkdir -p "$OUT/runs"
status=0
one() { local name=$1; shift; echo "== $name"; timeout 150 mkernel run --backend hw --nodes 2 --gpus-per-node 2 "$@" \
  --json "$OUT/runs/$name.json" >"$OUT/runs/$name.log" 2>&1 || status=1; tail -3 "$OUT/runs/$name.log"; }
one gemm_ar --kernel gemm_ar --m 4096 --n 4096 --k 1024
one gemm_rs --kernel gemm_rs --m 4096 --n 4096 --k 1024
one ag_gemm --kernel ag_gemm --m 4096 --n 1024 --k 4096
one ring_attention --kernel ring_attention --seq 1024
exit $status
