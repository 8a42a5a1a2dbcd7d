#!/usr/bin/env bash
# One device call (about 7 minutes): issue 34's bf16 training on the emulated 2x2 for the three model kinds
# call18 did not reach (mlp passed there), one pytest per kind, run side by side: each is bound by
# compiling its executors on the CPU (16 cores here), not by the GPU.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
for kind in mlp-ar attention attention-causal; do
  gpu_step "train-$kind" 420 tests/hw/test_train.py -k "bf16 and emulated and $kind]" &
done
wait
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
