#!/bin/bash
# main (a git archive at $BASE, PYTHONPATH at it) and this branch, alternately, ROUNDS rounds: the CLI command under
# /usr/bin/time, then phases.py (the same command in-process, each phase's CPU); the load logged.
set -u
BASE=${BASE:-/tmp/evph/base}; OUT=${OUT:-/tmp/evph/measure}; ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd); branch=${BRANCH:-$(cd "$here/../../../.." && pwd)}
py=$branch/.venv/bin/python
mkdir -p $OUT
for round in $(seq 1 $ROUNDS); do
  for code in main branch; do
    if [ $code = main ]; then dir=$BASE; export PYTHONPATH=$BASE; else dir=$branch; unset PYTHONPATH; fi
    cd $dir
    echo "== round $round $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $($py -c 'import mkernel.sim; print(mkernel.sim.__file__)')" >> $OUT/log.txt
    /usr/bin/time -f "%U user %S sys %e wall %M KB" -o $OUT/cli-$code-$round.time $py -m mkernel run scenarios/paper-ib-2x8.toml \
      --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse --json $OUT/cli-$code-$round.json > /dev/null
    $py $here/phases.py > $OUT/phases-$code-$round.txt
  done
done
unset PYTHONPATH
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
