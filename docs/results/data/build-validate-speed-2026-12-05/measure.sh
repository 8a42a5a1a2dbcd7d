#!/bin/bash
# 2026-12-05, issue 30's every-node row, build + validate(): main e19ece3 (a `git archive` in $BASE, run with
# PYTHONPATH=$BASE and a symlink $BASE/mkernel/sim -> ../sim, as the editable install maps it) and the branch
# (this checkout), alternately, ROUNDS rounds: phases.py (build, validate and its parts) and the CLI command
# under /usr/bin/time. The load average is logged before each run.
set -u
BASE=${BASE:-/tmp/bv/base}; OUT=${OUT:-/tmp/bv/measure}; ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd); branch=$(cd "$here/../../../.." && pwd)
mkdir -p $OUT
for round in $(seq 1 $ROUNDS); do
  for code in main branch; do
    if [ $code = main ]; then dir=$BASE; export PYTHONPATH=$BASE; else dir=$branch; unset PYTHONPATH; fi
    cd $dir
    echo "== round $round $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $(python -c 'import mkernel; print(mkernel.__file__)')" >> $OUT/log.txt
    python $here/phases.py > $OUT/phases-$code-$round.json
    echo "   cli $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
    /usr/bin/time -f "%U user %S sys %e wall %M KB" -o $OUT/cli-$code-$round.time python -m mkernel run scenarios/paper-ib-2x8.toml \
      --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse --json $OUT/cli-$code-$round.json > /dev/null
  done
done
unset PYTHONPATH
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
