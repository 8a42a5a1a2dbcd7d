#!/usr/bin/env bash
# One device call (at most 9.5 minutes), 2026-12-04: where the fused GEMM table loses at K = 512 (variants of its
# tile loop, one process each), the per-SM ceiling pinned to SMs (the first version spread its blocks over more
# SMs than it named), and the GPU tests of the task-path GEMM change (32-bit coordinates, one call site).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"
for v in table prefetch nosignal; do
  timeout 100 python3 tools/probes/gemm_rows.py --variant $v --out "$L/rows_$v.json" > "$L/rows_$v.log" 2>&1
  echo "rows-$v rc=$?" >> "$OUT/summary.txt"
done
timeout 70 python3 tools/probes/sm_ceiling.py --sms 1,4,16 --blocks-per-sm 1,2,4,8 --mib 512 --reps 3 --out "$L/ceiling.json" > "$L/ceiling.log" 2>&1; echo "ceiling rc=$?" >> "$OUT/summary.txt"
OUT_SAVE=$OUT; OUT=$L
gpu_step fused1 150 tests/hw/test_hw_fused.py -k "test_world_1 or (test_emulated_2x2 and (ag_gemm or moe))"
OUT=$OUT_SAVE; cat "$L/summary.txt" >> "$OUT/summary.txt" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "FAILED|Error|Timeout|timeout waiting" "$L"/*.log | cut -c1-200 | head -12
grep -hE "^(table|prefetch|nosignal) " "$L"/rows_*.log
grep -E "x[1248] " "$L/ceiling.log" | cut -c1-80; tail -4 "$L/ceiling.log"
cat "$OUT/summary.txt"
