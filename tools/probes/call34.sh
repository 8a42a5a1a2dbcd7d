#!/usr/bin/env bash
# One device call, 2026-12-05 (seventh session): the GPU checks still owed after ring credit merged
# (docs/results/2026-12-05-ring-credit-gpu.md: ~40 data-path and push cases were never reached because each compiles
# its own kernel, 15-20 s, one after another). Device starts kept failing this session, so the steps run in order of
# worth and each is cut to what is left of CALL_S seconds (default 560; pass the run's limit minus a margin):
# every world-1 GPU test at once under pytest-xdist (8 workers: compiling is the bottleneck, and world-1 kernels do
# not share SMs with a spinning peer); the emulated fault tests and push kernels one by one (MPS wants a process
# tree of its own, and a persistent kernel needs every block resident); calibrate's proxy section (the simulator's
# proxy terms, on whichever card came); the proxy probe's warps table. Each step's summary line prints as it ends.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
L="$OUT/logs"; mkdir -p "$L"; OUT_SAVE=$OUT; OUT=$L; END=$((SECONDS + ${CALL_S:-560} - 20))
left() { local s=$1 r=$((END - SECONDS)); [ "$r" -lt "$s" ] && s=$r; [ "$s" -lt 20 ] && s=0; echo $s; }
step() { local name=$1 s; s=$(left "$2"); shift 2; [ "$s" -eq 0 ] && { echo "$name not run" >> "$L/summary.txt"; return; }
         gpu_step "$name" "$s" "$@"; tail -1 "$L/summary.txt"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$L/gpu.txt"
python3 -m pytest --collect-only -q -m gpu tests/hw 2>/dev/null | grep :: \
  | grep -vE "emulated|2x2|1x4|real_nvlink|test_cli_hw|test_hw_controller|test_hw_faults" > "$L/world1.txt"
step world1 200 -n 8 $(cat "$L/world1.txt")
step faults 100 tests/hw/test_hw_faults.py -k "fatal or without_check"
step push 100 tests/hw/test_hw_fused.py -k "push_is_exact and emulated_2x2"
s=$(left 80); [ "$s" -gt 0 ] && { timeout "$s" mkernel calibrate --only proxy --out "$OUT_SAVE/proxy.toml" \
  --raw "$OUT_SAVE/proxy.json" > "$L/calibrate.log" 2>&1; echo "calibrate rc=$?" | tee -a "$L/summary.txt"; }
s=$(left 70); [ "$s" -gt 0 ] && { timeout "$s" python3 tools/probes/proxy_probe.py --warps > "$L/probe_warps.log" 2>&1
  echo "probe-warps rc=$?" | tee -a "$L/summary.txt"; }
OUT=$OUT_SAVE; tar czf "$OUT/logs.tgz" -C "$L" .
grep -hE "rank [0-9].*(timeout|epoch)|DeviceWaitError|FAILED|Error" "$L"/*.log | cut -c1-300 | head -12
cut -c1-160 "$L/probe_warps.log" 2>/dev/null | tail -12
grep -E "^proxy\.|^nic\." "$L/calibrate.log" 2>/dev/null
cat "$L/summary.txt"
