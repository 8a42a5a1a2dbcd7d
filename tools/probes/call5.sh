#!/usr/bin/env bash
# One device call (about 8 minutes): GPU regression after the hw/ move and the TMA attention tile
# (world-1 fused cases, D = 128 attention on world 1 and the emulated 2x2, the world-1 API tests),
# then the attention tile through the public op against the default SDPA.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
echo "== fused tests"; timeout 290 python3 -m pytest -q tests/hw/test_hw_fused.py \
  -k "test_world_1 or head_dim_128 or (test_emulated_2x2 and ring)" > "$OUT/fused.log" 2>&1; echo rc=$?; tail -3 "$OUT/fused.log"
echo "== api tests"; timeout 100 python3 -m pytest -q tests/hw/test_hw_api.py -k "world_1 or world1" > "$OUT/api.log" 2>&1
echo rc=$?; tail -3 "$OUT/api.log"
echo "== attention"; timeout 150 python3 tools/probes/attn_fused.py --bkv 64 --tag tma --seqs 768,3072,6144,12288 \
  --out "$OUT/tma.json" 2>&1 | grep -v "^W" > "$OUT/tma.log"; echo rc=$?; grep -E "ratio|Error" "$OUT/tma.log" | cut -c1-160
