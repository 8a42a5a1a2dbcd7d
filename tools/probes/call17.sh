#!/usr/bin/env bash
# One device call (about 8 minutes): issue 34's training tests on the H200, the fused backward on the
# emulated 2x2 and 20 bf16 steps per model kind on it (not yet run there), with the auto data path.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
gpu_step grads22 150 tests/hw/test_train.py -k "backward and emulated"
gpu_step train22 330 tests/hw/test_train.py -k "bf16 and emulated"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
