#!/usr/bin/env bash
# One device call (about 8 minutes): the GEMM grid through the public op after the coalesced tile
# signals (bench_api --only gemm), the host-time profile, the attention tile's lock ablated at world 1
# beside the standalone ceiling at S = 768, and the inter-node algorithms on the emulated 4x1 cluster.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
echo "== gemm"; timeout 200 python3 tools/bench/bench_api.py --only gemm --out "$OUT/gemm.json" > "$OUT/gemm.log" 2>&1
echo rc=$?; grep -E "^gemm_ar" "$OUT/gemm.log" | cut -c1-150
echo "== profile"; timeout 60 python3 tools/bench/bench_api.py --only profile --out "$OUT/profile.json" > "$OUT/profile.log" 2>&1
echo rc=$?
echo "== attention"; for v in "" "--variant tools/probes/variants/tiles_nolock.py --tag nolock"; do
  timeout 80 python3 tools/probes/attn_fused.py --bkv 64 --seqs 768,3072 --causal 0 $v --out "$OUT/attn${v:+_nolock}.json" 2>&1 \
    | grep -v "^W" > "$OUT/attn${v:+_nolock}.log"; echo rc=$?; grep -E "ratio|Error" "$OUT/attn${v:+_nolock}.log" | cut -c1-170; done
timeout 60 python3 tools/probes/attn_ceiling.py --seqs 768,3072 --out "$OUT/ceiling.json" > "$OUT/ceiling.log" 2>&1; echo rc=$?
grep -vE "^W" "$OUT/ceiling.log" | tail -12 | cut -c1-150
echo "== inter-node 4x1"; timeout 150 python3 -m pytest -v -p no:cacheprovider tests/hw/test_hw_fused.py \
  -k "inter_node_algorithm and 4x1" > "$OUT/internode.log" 2>&1; echo rc=$?; grep -E "PASS|FAIL|Error|passed|failed" "$OUT/internode.log" | cut -c1-160 | tail -12
