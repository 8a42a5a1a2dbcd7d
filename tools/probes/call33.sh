#!/usr/bin/env bash
# One device call (at most 9.5 minutes), for the next session, on branch ring-credit (not merged: never run on a GPU):
# sync._push waits for ring credit on a device copy of the tail, one elected thread reading the host's
# (docs/results/2026-12-05-device-calibrate-proxy.md: 64 blocks polling host memory took the proxy's driver
# calls from 2.6 us to 1.8 ms). Steps: the proxy probe (the 64 x 256 stream was 3.8k commands/s; the CuPy
# producer's design reached 0.5-1.1M), the runtime GPU tests (emulated 2x2 first: MPS wants a fresh process
# tree), the fused ops at world 1 and emulated 2x2 (the push is the fused kernel's), then calibrate's proxy
# section. Merge the branch only if every step passes and the probe's 64 x 256 rate recovers. The fused steps are
# also the first GPU run of main's 2026-12-05 fused MoE builder (per-chunk fan-out waits, zero-copy puts from X:
# docs/results/2026-12-05-moe-paper.md; checked on the CPU only, by the plan interpreter): a MoE failure there is
# the builder's, not ring-credit's (call32.sh on main runs the same fused tests without ring-credit).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L
timeout 100 python3 tools/probes/proxy_probe.py > "$L/probe.log" 2>&1; echo "probe rc=$?" >> "$L/summary.txt"
gpu_step runtime 150 tests/hw/test_hw_gpu.py
gpu_step emulated 150 tests/hw/test_hw_fused.py -k "emulated or 2x2"
gpu_step world1 100 tests/hw/test_hw_fused.py -k "not emulated and not 2x2 and not cli"
timeout 80 mkernel calibrate --only proxy --out "$OUT_SAVE/proxy.toml" --raw "$OUT_SAVE/proxy.json" > "$L/calibrate.log" 2>&1
echo "calibrate rc=$?" >> "$L/summary.txt"
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -10
cut -c1-200 "$L/probe.log"
grep -E "^proxy\.|^nic\." "$L/calibrate.log"
cat "$L/summary.txt"
