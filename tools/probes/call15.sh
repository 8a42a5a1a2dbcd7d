#!/usr/bin/env bash
# One device call (about 9 minutes): the fused kernel's copy and gather steps on the bulk path
# (HwKnobs.data_path, issue 27): the bulk GPU tests after the reduce moved to bulk_reduce.py, the
# line-width crossover that sets bulk.LINE_MIN, then every op at world 1 and on the emulated 2x2
# on auto (the default) and forced onto each path.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
gpu_step bulk 80 tests/hw/test_hw_bulk.py
t0=$SECONDS
timeout 70 python3 tools/bench/bench_bulk.py --scale 4 --sms 1,2,8,16,32 --reps 3 --out "$OUT/lines.json" \
  --only copy-tile,copy-w1k,copy-w2k,copy-rows,gather-16 --lag 2 --paths register,bulk > "$OUT/lines.log" 2>&1
printf '%-10s rc=%-3s %4ss  bench lines\n' lines $? $((SECONDS - t0)) >> "$OUT/summary.txt"
gpu_step world1 150 tests/hw/test_hw_fused.py -k "test_world_1"
gpu_step paths1 130 tests/hw/test_hw_fused.py -k "each_data_path and world_1"
gpu_step paths22 160 tests/hw/test_hw_fused.py -k "each_data_path and emulated_2x2"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
sed -n '/^GB\/s/,$p' "$OUT/lines.log" | cut -c1-120
cat "$OUT/summary.txt"
