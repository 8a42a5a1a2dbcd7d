#!/usr/bin/env bash
# One device call (about 9 minutes): issue 27's 2-D box path (hw/kernels/bulk_tensor.py) checked on the H200
# (its GPU tests, the 1-D bulk tests, the fused kernel's box copies on the emulated 2x2), then the per-SM
# benchmark of register, 1-D bulk and box copies, reduces and accumulates, torch's D2D copy the baseline in
# the same run, then every op at world 1 on the default (auto) path.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
gpu_step bulk 100 tests/hw/test_hw_bulk_tensor.py tests/hw/test_hw_bulk.py
timeout 200 python3 tools/bench/bench_bulk.py --scale 4 --sms 1,4,16,32 --reps 3 \
  --only copy-tile,copy-tile16,copy-rows,reduce-8,accumulate-8 --paths register,bulk,tensor \
  --out "$OUT/bench_tensor.json" > "$OUT/bench_tensor.log" 2>&1; echo "bench rc=$?" >> "$OUT/summary.txt"
gpu_step boxed22 150 tests/hw/test_hw_fused.py -k "box_copies_inside"
gpu_step world1 100 tests/hw/test_hw_fused.py -k "test_world_1"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
sed -n '/^GB\/s/,$p' "$OUT/bench_tensor.log"
cat "$OUT/summary.txt"
