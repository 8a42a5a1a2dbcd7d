#!/usr/bin/env bash
# One device call (about 7 minutes), after call15: bulk.LINE_MIN at 4 KiB; the attention cases of
# the forced data paths on the emulated 2x2 (call15 ran out of time there), every op on auto on the
# emulated 2x2, and the 2x2 over libfabric's shm provider with a host heap (the bulk path reading and
# writing host-mapped memory) (issue 27).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
gpu_step paths22a 120 tests/hw/test_hw_fused.py -k "each_data_path and emulated_2x2 and ring_attention"
gpu_step auto22 170 tests/hw/test_hw_fused.py -k "test_emulated_2x2 and not ofi and not loopback and not hundred"
gpu_step ofihost 150 tests/hw/test_hw_fused.py -k "ofi_with_a_host_heap and shm"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
