#!/usr/bin/env bash
# One device call (at most 6 minutes), 2026-12-04: issue 26's GEMM benchmark on the committed row loop (the grid
# segments of call26 reverted), then issue 34's emulated 2x2 mlp-ar training kind with room for its bounded barrier
# (120 s) to report.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"
timeout 160 python3 tools/bench/bench_api.py --only gemm --out "$L/bench_gemm.json" > "$L/bench_gemm.log" 2>&1
echo "bench-gemm rc=$?" >> "$OUT/summary.txt"
OUT_SAVE=$OUT; OUT=$L
gpu_step train-mlp-ar 170 tests/hw/test_train.py -k "bf16 and emulated and mlp-ar]"
OUT=$OUT_SAVE; cat "$L/summary.txt" >> "$OUT/summary.txt" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "^gemm_ar" "$L"/bench_gemm.log | cut -c1-150
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|Error" "$L"/train-mlp-ar.log | cut -c1-300 | head -8
cat "$OUT/summary.txt"
