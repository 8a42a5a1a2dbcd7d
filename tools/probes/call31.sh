#!/usr/bin/env bash
# One device call (at most 9 minutes), for the next session: issue 32's last GPU checks, never run on a GPU before.
# `mkernel selftest` and calibrate's proxy path now run Triton kernels on the fused kernel's own protocol code
# (hw/measure/ring_kernels.py on hw/kernels/sync.py; the CUDA copy and CuPy are gone), and calibrate's GEMM figures
# time the fused kernel itself (gemm_ar at world 1). Steps: the runtime GPU tests (emulated 2x2 exchange first, while
# no process has touched CUDA), calibrate's GEMM test, `mkernel selftest` on the emulated 2x2, then
# `mkernel calibrate --only gpu proxy` (a raw file to compare with docs/results/data/cal-2026-11-29/calibration.json: the proxy
# figures may move, since the producer is now the fused kernel's; the GEMM figures, since the fused kernel is timed).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
gpu_step runtime 200 tests/hw/test_hw_gpu.py
gpu_step calgemm 120 tests/hw/test_calibrate_gemm.py
timeout 120 mkernel selftest --nodes 2 --gpus-per-node 2 > "$L/selftest.log" 2>&1; echo "selftest rc=$?" >> "$L/summary.txt"
timeout 200 mkernel calibrate --only gpu proxy --out "$L/h200.toml" --raw "$L/calibration.json" > "$L/calibrate.log" 2>&1
echo "calibrate rc=$?" >> "$L/summary.txt"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -10
grep -hE "PASS|FAIL" "$L/selftest.log" | cut -c1-200
cat "$L/summary.txt"
