#!/usr/bin/env bash
# One device call (about 8 minutes): the GPU regression after the knobs/rendezvous change (world-1 fused
# cases, D = 128 attention, the emulated 2x2 cluster, every inter-node algorithm on emulated 4x1 and 2x2),
# then the GEMM tile probe (tools/probes/gemm_tiles.py) against torch.matmul.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee "$OUT/gpu.txt"
echo "== fused tests"; timeout 330 python3 -m pytest -q -p no:cacheprovider tests/hw/test_hw_fused.py \
  -k "test_world_1 or head_dim_128 or test_emulated_2x2 or inter_node_algorithm" > "$OUT/fused.log" 2>&1; echo rc=$?
grep -E "passed|failed|FAILED|Error" "$OUT/fused.log" | tail -12 | cut -c1-200
echo "== tiles"; timeout 200 python3 tools/probes/gemm_tiles.py --out "$OUT/tiles.json" > "$OUT/tiles.log" 2>&1; echo rc=$?
grep -E "==|Error" "$OUT/tiles.log" | cut -c1-160
