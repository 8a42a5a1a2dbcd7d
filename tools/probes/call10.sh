#!/usr/bin/env bash
# One device call (about 3 minutes): the CLI's hw path on the emulated 2x2 cluster (tests/hw/test_cli_hw.py).
set -uo pipefail
. "$(dirname "$0")/../device/device_setup.sh"
timeout 190 python3 -m pytest -v -p no:cacheprovider tests/hw/test_cli_hw.py > "$OUT/cli_hw.log" 2>&1; echo rc=$?
grep -E "PASS|FAIL|passed|failed|Error" "$OUT/cli_hw.log" | sed 's/tests.hw.test_cli_hw.py:://' | cut -c1-140 | tail -12
