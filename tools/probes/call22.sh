#!/usr/bin/env bash
# One device call (at most 9.5 minutes), for the next session: issue 34's three emulated 2x2 training kinds that ran
# past 300 s (call18, call21), one after another, each with the call barrier bounded at 120 s in its ranks
# (tests/harness/training.py), so a run whose ranks fall out of step reports rank, flag and epoch instead of a
# timeout; then the box path's GPU tests again (the review's fence and test changes are not yet run on a GPU).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
for kind in mlp-ar attention attention-causal; do
  gpu_step "train-$kind" 120 tests/hw/test_train.py -k "bf16 and emulated and $kind]"
done
gpu_step bulk 50 tests/hw/test_hw_bulk_tensor.py tests/hw/test_hw_bulk.py
gpu_step boxed22 100 tests/hw/test_hw_fused.py -k "box_copies_inside"
timeout 60 python3 tools/probes/sm_ceiling.py --sms 1,4,16 --blocks-per-sm 1,2 --mib 512 --reps 3 --out "$OUT/ceiling.json" > "$OUT/ceiling.log" 2>&1; echo "ceiling rc=$?" >> "$OUT/summary.txt"
grep -hE "FAILED|ERROR|Timeout|Error|timeout waiting" "$OUT"/*.log | cut -c1-300 | head -20
tail -5 "$OUT/ceiling.log"
cat "$OUT/summary.txt"
