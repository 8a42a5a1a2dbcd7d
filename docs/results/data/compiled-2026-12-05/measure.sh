#!/bin/bash
# The every-node row, alternating in one sitting: pure Python (this checkout) against the mypyc tree made by
# build_tree.sh; per phase in process (../build-phase-2026-12-05/phases.py, the session notes' phases.py) and the whole CLI row.
# usage (repository root, venv active): MYPYC_TREE=/tmp/mypyc-tree docs/results/data/compiled-2026-12-05/measure.sh
here=$(dirname "$0")
uptime
for round in 1 2 3 4; do
  for cfg in pure: mypyc:$MYPYC_TREE; do
    name=${cfg%%:*}; pp=${cfg#*:}
    echo -n "$round $name phases "; PYTHONPATH=$pp python $here/../build-phase-2026-12-05/phases.py on 2>&1 | tail -1
    echo -n "$round $name cli "; PYTHONPATH=$pp /usr/bin/time -f "%U user %S sys %e wall" mkernel run scenarios/paper-ib-2x8.toml \
      --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse 2>&1 >/dev/null | tail -1
  done
done
uptime
