#!/usr/bin/env bash
# One device call (at most 9.5 minutes), for the next session: GEMM+AR's push variant (node_reduce = push, issue 27 item 2;
# docs/results/2026-12-04-ar-push.md), never run on a GPU before: its GPU tests (world 1, emulated 1x4 and 2x2, odd and
# boxed shapes, each data path; the grouped inter-node algorithms on the emulated 2x2), then pull and push timed side
# by side by `mkernel run --backend hw` on the emulated 2x2 (one GPU under MPS: it shows that both run and are checked
# against the oracle; which is faster needs real NVLink, tools/device/multi_gpu.sh's correct step runs the push on it).
# Run after call29.sh (GEMM+RS's push): the bulk reduce-add these build on is first exercised there.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
gpu_step ar_push 300 tests/hw/test_hw_fused.py -k "gemm_ar_push_is_exact"
gpu_step ar_grouped 90 tests/hw/test_hw_fused.py -k "gemm_ar_push_under_the_grouped"
node_reduce_runs gemm_ar 75
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED" "$L"/*.log | cut -c1-300 | head -10
grep -hE "fused time|baseline time|error|correct" "$L"/run_*.log | cut -c1-150
cat "$L/summary.txt"
