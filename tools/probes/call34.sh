#!/usr/bin/env bash
# One device call (at most 9.5 minutes), 2026-12-05 (seventh session): the GPU checks still owed after ring credit
# merged (docs/results/2026-12-05-ring-credit-gpu.md: ~40 data-path and push cases were never reached because each
# compiles its own kernel, 15-20 s, one after another). Steps: the proxy probe's warps table (does the old cliff
# follow blocks or polling threads? ring credit should make both flat), calibrate's proxy section (the simulator's
# proxy terms, on whichever card the call got), then every world-1 GPU test at once under pytest-xdist (8 workers:
# compiling is the bottleneck, and world-1 kernels do not share the GPU's SMs with a spinning peer), then the
# emulated fault tests and the emulated push kernels one by one (MPS wants a process tree of its own and the emulated ranks share the SMs).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$L/gpu.txt"
timeout 70 python3 tools/probes/proxy_probe.py --warps > "$L/probe_warps.log" 2>&1; echo "probe-warps rc=$?" >> "$L/summary.txt"
timeout 80 mkernel calibrate --only proxy --out "$OUT_SAVE/proxy.toml" --raw "$OUT_SAVE/proxy.json" > "$L/calibrate.log" 2>&1
echo "calibrate rc=$?" >> "$L/summary.txt"
python3 -m pytest --collect-only -q -m gpu tests/hw 2>/dev/null | grep :: \
  | grep -vE "emulated|2x2|1x4|real_nvlink|test_cli_hw|test_hw_controller|test_hw_faults" > "$L/world1.txt"
gpu_step world1 200 -n 8 $(cat "$L/world1.txt")
gpu_step faults 100 tests/hw/test_hw_faults.py -k "fatal or without_check"
gpu_step push 100 tests/hw/test_hw_fused.py -k "push_is_exact and emulated_2x2"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -12
cut -c1-160 "$L/probe_warps.log" | tail -12
grep -E "^proxy\.|^nic\." "$L/calibrate.log"
cat "$L/gpu.txt" "$L/summary.txt"
