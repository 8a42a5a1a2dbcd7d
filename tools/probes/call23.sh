#!/usr/bin/env bash
# One device call (at most 9.5 minutes), 2026-12-04: issue 26's GEMM and attention diagnostics, then the GPU checks
# of main that no device call has run yet (the box path after the review's fences, the per-SM ceiling probe).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
timeout 170 python3 tools/probes/gemm_streamk.py --out "$OUT/streamk.json" > "$OUT/streamk.log" 2>&1; echo "streamk rc=$?" >> "$OUT/summary.txt"
timeout 120 python3 tools/probes/attn_ws.py --seqs 768,1536,3072,12288 --dims 128,64 --out "$OUT/attn_ws.json" > "$OUT/attn_ws.log" 2>&1; echo "attn_ws rc=$?" >> "$OUT/summary.txt"
gpu_step bulk 50 tests/hw/test_hw_bulk_tensor.py tests/hw/test_hw_bulk.py
gpu_step boxed 90 tests/hw/test_hw_fused.py -k "box_copies_inside"
timeout 45 python3 tools/probes/sm_ceiling.py --sms 1,4,16 --blocks-per-sm 1,2 --mib 512 --reps 3 --out "$OUT/ceiling.json" > "$OUT/ceiling.log" 2>&1; echo "ceiling rc=$?" >> "$OUT/summary.txt"
grep -hE "FAILED|ERROR|Timeout|Error|timeout waiting" "$OUT"/*.log | cut -c1-200 | head -12
grep -E "^(flat|streamk|sk-pad|flat-pad|flat-div|--)" "$OUT/streamk.log" | cut -c1-110
grep -E "SDPA|ws-w4-kv128-st2|plain-w8-kv128" "$OUT/attn_ws.log" | cut -c1-110
tail -4 "$OUT/ceiling.log"
cat "$OUT/gpu.txt" "$OUT/summary.txt"
