#!/usr/bin/env bash
# One device call (about 5 minutes): the soak of the public ops (tools/studies/soak.py) at world 1 and
# on the emulated 2x2 cluster, every output checked against float64, memory, files and threads sampled.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
timeout 330 python3 tools/studies/soak.py --calls 10000 --minutes 2.5 --out "$OUT/soak.json" 2>&1 | grep -v "^W" > "$OUT/soak.log"
echo rc=$?; grep -E "PASS|FAIL|over|rror" "$OUT/soak.log" | cut -c1-260 | tail -12
