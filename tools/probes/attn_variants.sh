#!/usr/bin/env bash
# One device call: the fused attention tile's variants (tools/probes/variants/) through the public op.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
run() { local tag=$1; shift; timeout 150 python3 tools/probes/attn_fused.py --tag "$tag" --out "$OUT/$tag.json" "$@" 2>&1 \
  | grep -v "^W" > "$OUT/$tag.log"; echo "== $tag rc=$?"; grep -E "ratio|Error" "$OUT/$tag.log" | tail -8; }
run cur --bkv 64,128 --seqs 3072,6144 --causal 0,1
run nomerge --bkv 64,128 --seqs 3072 --causal 0 --variant tools/probes/variants/tiles_nomerge.py
run old --bkv 64 --seqs 3072 --causal 0,1 --variant tools/probes/variants/tiles_old.py
