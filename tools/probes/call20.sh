#!/usr/bin/env bash
# One device call (about 6 minutes): issue 27's 2-D box path (hw/kernels/bulk_tensor.py) checked on the H200
# (its GPU tests and the 1-D bulk tests beside them), then the per-SM benchmark of register, 1-D bulk and
# box copies, reduces and accumulates, with torch's D2D copy as the baseline in the same run.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
gpu_step bulk 150 tests/hw/test_hw_bulk_tensor.py tests/hw/test_hw_bulk.py
timeout 330 python3 tools/bench/bench_bulk.py --scale 4 --sms 1,2,4,8,16,32 --reps 3 \
  --only copy-tile,copy-tile16,copy-w1k,copy-rows,reduce-2,reduce-8,accumulate-8 --paths register,bulk,tensor \
  --out "$OUT/bench_tensor.json" > "$OUT/bench_tensor.log" 2>&1; echo "bench rc=$?" >> "$OUT/summary.txt"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
sed -n '/^GB\/s/,$p' "$OUT/bench_tensor.log"
cat "$OUT/summary.txt"
