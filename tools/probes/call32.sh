#!/usr/bin/env bash
# One device call (at most 9.5 minutes) on one H200, 2026-12-05:
#   1. the emulated-cluster GPU tests first (MPS needs a process tree that has not touched CUDA), then the
#      world-1 GPU tests: issue 30's grouped tasks are expanded by the hw lowering, and these are the first GPU
#      runs of main since (the hw tables and the GPU behaviour must not change);
#   2. `mkernel calibrate` in full, one run: cuBLAS, torch's default SDPA and our kernels timed together, so the
#      reference kernel profile's attention rate comes from one calibration run (issue 29, item 2).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
gpu_step emulated 200 tests/hw/test_hw_fused.py tests/hw/test_hw_api.py tests/hw/test_hw_gpu.py -k "emulated or 2x2 or cli"
gpu_step world1 150 tests/hw/test_hw_fused.py tests/hw/test_hw_api.py tests/hw/test_hw_gemm.py -k "not emulated and not 2x2 and not cli"
timeout 175 mkernel calibrate --out "$OUT_SAVE/h200.toml" --raw "$OUT_SAVE/calibration.json" > "$L/calibrate.log" 2>&1
echo "calibrate rc=$?" >> "$L/summary.txt"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -12
tail -5 "$L/calibrate.log" | cut -c1-200
cat "$L/summary.txt"
