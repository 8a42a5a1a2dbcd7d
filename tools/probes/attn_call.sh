#!/usr/bin/env bash
# One device call (about 6 minutes): the Triton attention ceiling against the default SDPA, the
# fused tile through the public op at the same shapes, and the causal illegal-instruction probe
# (plain, then under compute-sanitizer memcheck where it crashes). Logs under $OUT.
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
echo "== ceiling"; timeout 240 python3 tools/probes/attn_ceiling.py --seqs 3072,6144 --out "$OUT/ceiling.json" \
  > "$OUT/ceiling.log" 2>&1; echo "rc=$?"; grep -v "^$" "$OUT/ceiling.log" | tail -30
for a in "direct 3072 causal" "direct 6144 causal"; do
  n=probe_${a// /_}; timeout 90 python3 tools/probes/attn_crash_probe.py $a > "$OUT/$n.log" 2>&1
  rc=$?; echo "== $a rc=$rc"; grep -E "ok|Error|error" "$OUT/$n.log" | tail -3
  if [ $rc -ne 0 ] && [ ! -f "$OUT/memcheck.log" ] && command -v compute-sanitizer >/dev/null; then
    timeout 200 compute-sanitizer --tool memcheck --print-limit 20 python3 tools/probes/attn_crash_probe.py $a \
      > "$OUT/memcheck.log" 2>&1; echo "== memcheck rc=$?"; grep -E "=====|ok|Error" "$OUT/memcheck.log" | head -24
  fi
done
