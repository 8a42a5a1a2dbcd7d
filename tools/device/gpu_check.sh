#!/usr/bin/env bash
# One device call: install mkernel offline, run the GPU tests and the proxy benchmark, keep logs.
# Usage: here, `git rev-parse --short HEAD > .commit` (ignored by git; name it in the device call's
# carry), then on the GPU machine, from the repo root: OUT=/some/dir tools/device/gpu_check.sh
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
# the emulated cluster first, from a process that has not touched CUDA before MPS starts
timeout 300 python3 -m pytest -q -x tests/hw/test_hw_gpu.py -k emulated 2>&1 | tee "$OUT/test_emulated.log" | tail -5 || status=1
timeout 300 python3 -m pytest -q tests/hw/test_hw_gpu.py tests/hw/test_hw_proxy.py tests/hw/test_hw_compile.py -k "not emulated" 2>&1 | tee "$OUT/test_gpu.log" | tail -5 || status=1
timeout 300 python3 tools/bench/bench_proxy.py --out "$OUT/bench_proxy.json" 2>&1 | tee "$OUT/bench_proxy.log" | tail -8 || status=1
exit $status
