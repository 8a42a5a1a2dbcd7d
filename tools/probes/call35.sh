#!/usr/bin/env bash
# One device call (at most 9.5 minutes), after call34.sh: the emulated-cluster GPU tests still owed after ring
# credit (docs/results/2026-12-05-ring-credit-gpu.md), one at a time (the emulated ranks share the SMs under MPS,
# and a persistent kernel needs every block resident: two clusters at once could starve each other). In order of
# what ring credit touched most: the push kernels (every PUT goes through sync._push), the inter-node algorithms,
# then the controller's adaptive runs. Each step is bounded; what a step leaves unrun is named in its log.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$L/gpu.txt"
gpu_step push 230 tests/hw/test_hw_fused.py -k "(push_is_exact and emulated_2x2) or push_under_the_grouped"
gpu_step internode 170 tests/hw/test_hw_fused.py -k "every_inter_node_algorithm"
gpu_step controller 120 tests/hw/test_hw_controller.py -k "adaptive and not hundred"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -12
grep -hE "PASSED|FAILED|SKIPPED" "$L"/*.log | grep -oE "::[a-z_0-9]+\[[^]]*\] [A-Z]+" | cut -c1-120
cat "$L/gpu.txt" "$L/summary.txt"
