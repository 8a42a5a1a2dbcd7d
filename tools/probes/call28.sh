#!/usr/bin/env bash
# One device call (at most 9 minutes), for the next session: issue 34's two emulated 2x2 training kinds that did not
# finish in call25 (its 110 s step bound was below the harness's 120 s barrier bound, so they reported nothing),
# each with 170 s so a stuck rank names its flag and epoch; then MoE's emulated 2x2 case that call26's bound cut, and
# issue 31's inter-node algorithms on the emulated 2x2 (only the 4x1 ran, 2026-12-02).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
for kind in mlp-ar attention-causal; do
  gpu_step "train-$kind" 170 tests/hw/test_train.py -k "bf16 and emulated and $kind]"
done
gpu_step moe2x2 100 tests/hw/test_hw_fused.py -k "test_emulated_2x2 and moe and not unordered and not ofi"
gpu_step internode2x2 100 tests/hw/test_hw_fused.py -k "every_inter_node_algorithm and emulated_2x2"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED" "$L"/*.log | cut -c1-300 | head -10
cat "$L/summary.txt"
