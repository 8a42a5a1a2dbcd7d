#!/usr/bin/env bash
# One device call (about 9 minutes): attention tasks of 128 vs 256 query rows, the training GPU
# tests and bench (world 1), then the bulk-copy tests and per-SM benchmark (tools/device/bulk_check.sh).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
a() { local tag=$1; shift; timeout 170 python3 tools/probes/attn_fused.py --bkv 64 --tag "$tag" --out "$OUT/$tag.json" "$@" \
  2>&1 | grep -v "^W" > "$OUT/$tag.log"; echo "== $tag rc=$?"; grep -E "ratio|Error" "$OUT/$tag.log" | cut -c1-150; }
a tile256 --tile-m 256 --seqs 3072,6144,12288
a tile128 --tile-m 128 --seqs 768,12288 --dims 128,64
echo "== train tests"; timeout 200 python3 -m pytest -q -rs tests/hw/test_train.py -m gpu > "$OUT/train.log" 2>&1; echo rc=$?; tail -4 "$OUT/train.log"
echo "== train bench"; timeout 100 python3 tools/bench/bench_train.py --graphs --out "$OUT/train-w1.json" > "$OUT/bench_train.log" 2>&1; echo rc=$?; tail -6 "$OUT/bench_train.log"
OUT=$OUT/bulk TAIL=30 timeout 280 tools/device/bulk_check.sh 2>&1 | tail -34
