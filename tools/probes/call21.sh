#!/usr/bin/env bash
# One device call (about 8 minutes): the fused kernel's box reduces (auto and bulk, emulated 2x2) after the
# auto policy change, then issue 34's bf16 training on the emulated 2x2 for the three model kinds call18 did
# not reach (mlp passed there), one pytest per kind side by side (each is bound by compiling on the CPU).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
gpu_step boxed22 140 tests/hw/test_hw_fused.py -k "box_copies_inside"
for kind in mlp-ar attention attention-causal; do
  gpu_step "train-$kind" 330 tests/hw/test_train.py -k "bf16 and emulated and $kind]" &
done
wait
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
