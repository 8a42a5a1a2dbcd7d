#!/usr/bin/env bash
# One device call (at most 9.5 minutes), for the next session (2026-12-04's last call was refused: no machine lent):
# the GEMM table's row loads against coordinates from the tile index in place of the row loop (gemm_rows.py arith),
# MoE at T = 16384 (its fused call timed out waiting in call26), then the GEMM benchmark on the committed row loop.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"
for v in table arith; do
  timeout 80 python3 tools/probes/gemm_rows.py --variant $v --out "$L/rows_$v.json" > "$L/rows_$v.log" 2>&1
  echo "rows-$v rc=$?" >> "$OUT/summary.txt"
done
timeout 170 python3 tools/bench/bench_api.py --only moe --out "$L/bench_moe.json" > "$L/bench_moe.log" 2>&1
echo "bench-moe rc=$?" >> "$OUT/summary.txt"
timeout 160 python3 tools/bench/bench_api.py --only gemm --out "$L/bench_gemm.json" > "$L/bench_gemm.log" 2>&1
echo "bench-gemm rc=$?" >> "$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "DeviceWaitError|Error" "$L"/bench_moe.log | cut -c1-300 | head -4
grep -hE "^(table|arith) " "$L"/rows_*.log
grep -hE "^(gemm_ar|moe)" "$L"/bench_*.log | cut -c1-150
cat "$OUT/summary.txt"
