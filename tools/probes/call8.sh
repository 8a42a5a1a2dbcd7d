#!/usr/bin/env bash
# One device call (about 7 minutes): the attention tile without a lock on one-merge tiles, through the
# public op against the default SDPA (D = 128 at every S of the issue, D = 64 at two), then the
# attention GPU tests (world 1, D = 128, emulated 2x2 with ordered and unordered loopback).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
echo "== attention D=128"; timeout 210 python3 tools/probes/attn_fused.py --bkv 64 --tag nolock1 --seqs 768,1536,3072,6144,12288 \
  --out "$OUT/attn128.json" 2>&1 | grep -v "^W" > "$OUT/attn128.log"; echo rc=$?; grep -E "ratio|Error" "$OUT/attn128.log" | cut -c1-150
echo "== attention D=64"; timeout 70 python3 tools/probes/attn_fused.py --bkv 128 --dims 64 --tag nolock1 --seqs 768,12288 \
  --out "$OUT/attn64.json" 2>&1 | grep -v "^W" > "$OUT/attn64.log"; echo rc=$?; grep -E "ratio|Error" "$OUT/attn64.log" | cut -c1-150
echo "== tests"; timeout 190 python3 -m pytest -v -p no:cacheprovider tests/hw/test_hw_fused.py \
  -k "(test_world_1 and ring) or head_dim_128 or (test_emulated_2x2 and ring)" > "$OUT/tests.log" 2>&1; echo rc=$?
grep -E "PASS|FAIL|passed|failed" "$OUT/tests.log" | sed 's/tests.hw.test_hw_fused.py:://' | cut -c1-120 | tail -14
