#!/usr/bin/env bash
# One device call (at most 6 minutes) on one H200: the GPU tests of main after issue 30's grouped tasks (the hw
# lowering expands them; the hw tables and the GPU behaviour must not change), never run yet (2026-12-05: one call
# found no machine, the next lost it). The emulated-cluster tests first (MPS needs a process tree that has not
# touched CUDA), then world 1. Its calibration step ran separately that day (docs/results/2026-12-05-device-
# calibrate-proxy.md) and is gone from here: calibrate's proxy section crawls until branch ring-credit lands.
# call33.sh (on ring-credit) runs these tests too: use this one only if that branch is not merged. They include the
# first GPU run of the 2026-12-05 fused MoE builder (docs/results/2026-12-05-moe-paper.md; interpreter-checked only).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
gpu_step emulated 200 tests/hw/test_hw_fused.py tests/hw/test_hw_api.py tests/hw/test_hw_gpu.py -k "emulated or 2x2 or cli"
gpu_step world1 150 tests/hw/test_hw_fused.py tests/hw/test_hw_api.py tests/hw/test_hw_gemm.py -k "not emulated and not 2x2 and not cli"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -12
cat "$L/summary.txt"
