. tools/device/device_setup.sh
for a in "direct 6144" "wrapper 6144" "direct 4096"; do timeout 60 python3 tools/probes/attn_crash_probe.py $a > $OUT/probe_${a// /_}.log 2>&1; echo "== $a rc=$?"; grep -E "ok|Error|error" $OUT/probe_${a// /_}.log | tail -4; done
STEPS="" 
timeout 300 python3 -m pytest -q tests/hw/test_hw_fused.py -k "test_emulated_2x2 and not hundred and not unordered" > $OUT/emulated.log 2>&1; echo "== emulated rc=$?"; tail -5 $OUT/emulated.log
