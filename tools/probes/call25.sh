#!/usr/bin/env bash
# One device call (at most 9.5 minutes), 2026-12-04: the GEMM table's tile-loop variants at world 1 (call24 ran
# them without a process group), then issue 34's three emulated 2x2 training kinds with the bounded barrier.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"
for v in table prefetch nosignal; do
  timeout 80 python3 tools/probes/gemm_rows.py --variant $v --out "$L/rows_$v.json" > "$L/rows_$v.log" 2>&1
  echo "rows-$v rc=$?" >> "$OUT/summary.txt"
done
OUT_SAVE=$OUT; OUT=$L
for kind in mlp-ar attention attention-causal; do
  gpu_step "train-$kind" 110 tests/hw/test_train.py -k "bf16 and emulated and $kind]"
done
OUT=$OUT_SAVE; cat "$L/summary.txt" >> "$OUT/summary.txt" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "FAILED|Error|Timeout|timeout waiting|rank [0-9]" "$L"/*.log | cut -c1-220 | head -16
grep -hE "^(table|prefetch|nosignal) " "$L"/rows_*.log
cat "$OUT/summary.txt"
