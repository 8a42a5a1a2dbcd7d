#!/usr/bin/env bash
# One device call (about 9 minutes): the host-time phases of an eager fused call with packed launches
# (issue 26), then the GPU tests call11 did not reach: the rest of the training tests (issue 34), the
# emulated-2x2 inter-node ring algorithms (issue 31), the API's bad-argument test on 2x2, and the
# controller and bulk tests after the hw/ layout move (issue 32).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
timeout 60 python3 tools/probes/host_path.py --out "$OUT/host_path.json" 2>&1 | grep -v "^W" > "$OUT/host_path.log"
gpu_step train 240 tests/hw/test_train.py -k "(bf16 and emulated) or under_cuda_graphs or bench_train"
gpu_step ring2x2 70 tests/hw/test_hw_fused.py -k "inter_node and ring and 2x2"
gpu_step api 50 tests/hw/test_hw_api.py -k "bad_arguments and emulated"
gpu_step bulk 50 tests/hw/test_hw_bulk.py
gpu_step control 100 tests/hw/test_hw_controller.py
grep -hE "FAILED|ERROR|Timeout" "$OUT"/*.log | cut -c1-200 | head -20
cut -c1-110 "$OUT/host_path.log" | tail -18
cat "$OUT/summary.txt"
