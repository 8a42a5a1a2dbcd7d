#!/usr/bin/env bash
# One device call (at most 9.5 minutes), 2026-12-04: the GPU tests after the GEMM table's grid segments (world 1,
# the emulated 2x2 GEMM ops), then issue 26's benchmark through the public ops: GEMMs, attention, MoE.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
gpu_step fused 130 tests/hw/test_hw_fused.py -k "test_world_1 or (test_emulated_2x2 and gemm and not unordered and not ofi)"
OUT=$OUT_SAVE
for only in gemm attn moe; do
  timeout 170 python3 tools/bench/bench_api.py --only $only --out "$L/bench_$only.json" > "$L/bench_$only.log" 2>&1
  echo "bench-$only rc=$?" >> "$OUT/summary.txt"
done
cat "$L/summary.txt" >> "$OUT/summary.txt" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "FAILED|Error|Timeout" "$L"/*.log | cut -c1-200 | head -8
grep -hE "^(gemm_ar|attention|moe)" "$L"/bench_*.log | cut -c1-150
cat "$OUT/summary.txt"
