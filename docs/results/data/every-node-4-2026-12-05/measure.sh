#!/bin/bash
# 2026-12-05, issue 30's every-node row: main (a `git archive` in $BASE, run with PYTHONPATH=$BASE and symlinks
# $BASE/mkernel/{sim,hw,scenarios} -> ../{sim,hw,scenarios}, as the editable install maps them) and this branch,
# alternately: the CLI command under /usr/bin/time, then parts.py (each part alone), ROUNDS rounds; the load logged.
set -u
BASE=${BASE:-/tmp/en4/base}; OUT=${OUT:-/tmp/en4/measure}; ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd); branch=$(cd "$here/../../../.." && pwd)
py=$branch/.venv/bin/python
mkdir -p $OUT
for round in $(seq 1 $ROUNDS); do
  for code in main branch; do
    if [ $code = main ]; then dir=$BASE; export PYTHONPATH=$BASE; else dir=$branch; unset PYTHONPATH; fi
    cd $dir
    echo "== round $round $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $($py -c 'import mkernel.sim; print(mkernel.sim.__file__)')" >> $OUT/log.txt
    /usr/bin/time -f "%U user %S sys %e wall %M KB" -o $OUT/cli-$code-$round.time $py -m mkernel run scenarios/paper-ib-2x8.toml \
      --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse --json $OUT/cli-$code-$round.json > /dev/null
    $py $here/parts.py > $OUT/parts-$code-$round.json
  done
done
unset PYTHONPATH
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
