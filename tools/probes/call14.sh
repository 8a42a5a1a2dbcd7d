#!/usr/bin/env bash
# One device call (about 9 minutes): the bulk steps' GPU tests after the one-task, overlay and lag
# fixes, the per-SM benchmark for each refill lag and stage size (issue 27), then the GPU tests not
# yet run on the H200: the 2x2 over libfabric with a host heap (issue 28) and two controller tests (32).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
bench() {  # bench NAME SECONDS ARGS...
  local name=$1 secs=$2; shift 2; local t0=$SECONDS
  timeout "$secs" python3 tools/bench/bench_bulk.py --scale 4 --sms 1,2,8,16,32 --reps 3 --out "$OUT/$name.json" "$@" \
    > "$OUT/$name.log" 2>&1; local rc=$?
  printf '%-10s rc=%-3s %4ss  bench %s\n' "$name" "$rc" $((SECONDS - t0)) "$*" >> "$OUT/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
gpu_step bulk 90 tests/hw/test_hw_bulk.py
COPIES=copy-tile,copy-tile16,copy-rows,gather-16
bench lag0 80 --only $COPIES --lag 0
bench lag2 60 --only $COPIES --lag 2 --paths bulk,bulk@48K
bench lag4 60 --only $COPIES --lag 4 --paths bulk
bench sb32k 50 --only copy-rows,copy-tile,gather-16 --lag 2 --stage-bytes 32768 --paths bulk
bench red8k 80 --only reduce-2,reduce-4,reduce-8,accumulate-8 --reduce-bytes 8192
bench red4k 60 --only reduce-2,reduce-4,reduce-8 --reduce-bytes 4096 --paths bulk,bulk@48K
gpu_step ofi2x2 150 tests/hw/test_hw_fused.py -k "ofi_with_a_host_heap and shm"
gpu_step control 120 tests/hw/test_hw_controller.py -k "(adaptive and ring_attention_causal) or hundred_calls"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-200 | head -20
for f in "$OUT"/lag*.log "$OUT"/sb32k.log "$OUT"/red*.log; do echo "== $f"; sed -n '/^GB\/s/,$p' "$f" | cut -c1-120; done
cat "$OUT/summary.txt"
