#!/usr/bin/env bash
# One device call (about 8 minutes): the host time of every op's eager fused call beside torch's
# (issue 26), then bf16 training on the emulated 2x2 cluster alone with room to finish (issue 34).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
timeout 80 python3 tools/probes/host_path.py --out "$OUT/host_path.json" 2>&1 | grep -v "^W" > "$OUT/host_path.log"
t0=$SECONDS; timeout 330 python3 -m pytest -v -p no:cacheprovider -m gpu --durations=0 tests/hw/test_train.py \
  -k "bf16 and emulated" > "$OUT/train.log" 2>&1; echo "train rc=$? $((SECONDS - t0))s"
grep -E "PASS|FAIL|Error|passed|failed|s call" "$OUT/train.log" | cut -c1-220 | tail -12
cut -c1-110 "$OUT/host_path.log" | tail -24
