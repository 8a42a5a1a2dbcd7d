#!/usr/bin/env bash
# One device call (about 8 minutes): issue 34's training tests on the H200, the fused backward on the
# emulated 2x2 and 20 bf16 steps per model kind on it (not yet run there), with the auto data path.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
step() {  # step NAME SECONDS PYTEST-ARGS...
  local name=$1 secs=$2; shift 2; local t0=$SECONDS
  timeout "$secs" python3 -m pytest -v -p no:cacheprovider -m gpu --durations=0 "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  printf '%-10s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "$(grep -Eo '[0-9]+ (passed|failed|skipped|error)' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
step grads22 150 tests/hw/test_train.py -k "backward and emulated"
step train22 330 tests/hw/test_train.py -k "bf16 and emulated"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
