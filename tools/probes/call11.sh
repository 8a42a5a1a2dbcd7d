#!/usr/bin/env bash
# One device call (about 9 minutes): the GPU regression after the hw/ layout move (issue 32), the
# emulated-2x2 training test with the call-barrier bound (issue 34), the CLI hw tests the last session
# did not reach (issue 33), then the fused tests at world 1 and on the emulated clusters; first the
# host-time phases of an eager fused call with packed launches (issue 26).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
timeout 60 python3 tools/probes/host_path.py --out "$OUT/host_path.json" 2>&1 | grep -v "^W" > "$OUT/host_path.log"
gpu_step train 150 tests/hw/test_train.py
gpu_step cli 110 tests/hw/test_cli_hw.py -k "moe or refused or deadline"
gpu_step gemm 60 tests/hw/test_hw_gemm.py tests/hw/test_hw_gpu.py
gpu_step api 60 tests/hw/test_hw_api.py
gpu_step fused1 200 tests/hw/test_hw_fused.py -k "test_world_1 or inter_node or (test_emulated_2x2 and not unordered and not hundred)"
grep -hE "FAILED|ERROR|Timeout" "$OUT"/*.log | cut -c1-200 | head -20
cat "$OUT/host_path.log" | cut -c1-110 | tail -18
cat "$OUT/summary.txt"
