#!/usr/bin/env bash
# One device call (at most 9 minutes), for the next session: GEMM+RS's push variant (node_reduce = push, issue 27 item 2;
# docs/results/2026-12-04-rs-push.md), never run on a GPU before: its GPU tests (world 1, emulated 1x4 and 2x2, odd and
# boxed shapes, each data path: the bulk reduce-adds into the owner, 1-D and boxes), then pull and push timed side by
# side by `mkernel run --backend hw` on the emulated 2x2 (one GPU under MPS: it shows that both run and are checked
# against the oracle; which is faster needs real NVLink, tools/device/multi_gpu.sh's correct step runs the push on it).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
gpu_step push 330 tests/hw/test_hw_fused.py -k "gemm_rs_push"
node_reduce_runs gemm_rs 90
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED" "$L"/*.log | cut -c1-300 | head -10
grep -hE "fused time|baseline time|error|correct" "$L"/run_*.log | cut -c1-150
cat "$L/summary.txt"
