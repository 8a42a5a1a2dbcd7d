#!/usr/bin/env bash
# One device call (about 9 minutes): the GPU regression after the hw/ layout move (issue 32), the
# emulated-2x2 training test with the call-barrier bound (issue 34), the CLI hw tests the last session
# did not reach (issue 33), then the fused tests at world 1 and on the emulated clusters; first the
# host-time phases of an eager fused call with packed launches (issue 26).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
step() {  # step NAME SECONDS PYTEST-ARGS...
  local name=$1 secs=$2; shift 2; local t0=$SECONDS
  timeout "$secs" python3 -m pytest -v -p no:cacheprovider -m gpu "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  printf '%-10s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "$(grep -Eo '[0-9]+ (passed|failed|skipped|error)' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
timeout 60 python3 tools/probes/host_path.py --out "$OUT/host_path.json" 2>&1 | grep -v "^W" > "$OUT/host_path.log"
step train 150 tests/hw/test_train.py
step cli 110 tests/hw/test_cli_hw.py -k "moe or refused or deadline"
step gemm 60 tests/hw/test_hw_gemm.py tests/hw/test_hw_gpu.py
step api 60 tests/hw/test_hw_api.py
step fused1 200 tests/hw/test_hw_fused.py -k "test_world_1 or inter_node or (test_emulated_2x2 and not unordered and not hundred)"
grep -hE "FAILED|ERROR|Timeout" "$OUT"/*.log | cut -c1-200 | head -20
cat "$OUT/host_path.log" | cut -c1-110 | tail -18
cat "$OUT/summary.txt"
