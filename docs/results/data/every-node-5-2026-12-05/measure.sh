#!/bin/bash
# 2026-12-05, issue 30's every-node row: main (a `git archive` in $BASE, run with PYTHONPATH=$BASE and symlinks
# $BASE/mkernel/{sim,hw,scenarios} -> ../{sim,hw,scenarios}, as the editable install maps them) and this branch,
# alternately, the order swapped every round: the CLI command under /usr/bin/time, then runphase.py; ROUNDS rounds;
# the load logged.
set -u
BASE=${BASE:-/tmp/en5/base}; OUT=${OUT:-/tmp/en5/measure}; ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd); branch=$(cd "$here/../../../.." && pwd)
py=$branch/.venv/bin/python
mkdir -p $OUT
one() {
  code=$1; round=$2
  if [ $code = main ]; then dir=$BASE; export PYTHONPATH=$BASE; else dir=$branch; unset PYTHONPATH; fi
  cd $dir
  echo "== round $round $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $($py -c 'import mkernel.sim; print(mkernel.sim.__file__)')" >> $OUT/log.txt
  /usr/bin/time -f "%U user %S sys %e wall %M KB" -o $OUT/cli-$code-$round.time $py -m mkernel run scenarios/paper-ib-2x8.toml \
    --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse --json $OUT/cli-$code-$round.json > /dev/null
  $py $here/runphase.py > $OUT/run-$code-$round.txt
  unset PYTHONPATH
}
for round in $(seq 1 $ROUNDS); do
  if [ $((round % 2)) = 1 ]; then one main $round; one branch $round; else one branch $round; one main $round; fi
done
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
