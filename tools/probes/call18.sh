#!/usr/bin/env bash
# One device call (about 9 minutes): issue 33's hw CLI cases (the MoE run, the refusal of default expert sizes,
# the deadline) and issue 34's training on the emulated 2x2 (the fused backward, 20 bf16 steps per model kind).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
gpu_step cli 80 tests/hw/test_cli_hw.py -k "moe or refused or deadline"
gpu_step grads22 140 tests/hw/test_train.py -k "backward and emulated"
gpu_step train22 300 tests/hw/test_train.py -k "bf16 and emulated"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
