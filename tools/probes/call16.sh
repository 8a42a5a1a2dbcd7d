#!/usr/bin/env bash
# One device call (about 7 minutes), after call15: bulk.LINE_MIN at 4 KiB; the attention cases of
# the forced data paths on the emulated 2x2 (call15 ran out of time there), every op on auto on the
# emulated 2x2, and the 2x2 over libfabric's shm provider with a host heap (the bulk path reading and
# writing host-mapped memory) (issue 27).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
if ls .deb/libfabric-dev_*.deb >/dev/null 2>&1 && [ ! -f /usr/include/rdma/fabric.h ]; then
  dpkg -x .deb/libfabric-dev_*.deb /tmp/libfabric-dev && mkdir -p /usr/local/include \
    && cp -r /tmp/libfabric-dev/usr/include/rdma /usr/local/include/
fi
step() {  # step NAME SECONDS PYTEST-ARGS...
  local name=$1 secs=$2; shift 2; local t0=$SECONDS
  timeout "$secs" python3 -m pytest -v -p no:cacheprovider -m gpu --durations=0 "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  printf '%-10s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "$(grep -Eo '[0-9]+ (passed|failed|skipped|error)' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
step paths22a 120 tests/hw/test_hw_fused.py -k "each_data_path and emulated_2x2 and ring_attention"
step auto22 170 tests/hw/test_hw_fused.py -k "test_emulated_2x2 and not ofi and not loopback and not hundred"
step ofihost 150 tests/hw/test_hw_fused.py -k "ofi_with_a_host_heap and shm"
grep -hE "FAILED|ERROR|Timeout|Error" "$OUT"/*.log | cut -c1-240 | head -20
cat "$OUT/summary.txt"
