#!/bin/bash
# 2026-12-05: main (a `git archive` in $BASE, its mkernel/sim a symlink to its sim/) and this branch, alternating,
# rounds FIRST..ROUNDS: the row's CLI command under /usr/bin/time (CPU = user + sys), then every-node-5's runphase.py (the tracked fused
# run alone, with the hazard grids timed apart). Output: $OUT/{cli,run}-<code>-<round>.txt and log.txt.
set -u
. $(pwd)/.venv/bin/activate
BASE=${BASE:-/tmp/evnet/base}; OUT=${OUT:-docs/results/data/network-events-2026-12-05/measure}; ROUNDS=${ROUNDS:-3}
branch=$(pwd); mkdir -p $OUT
for r in $(seq ${FIRST:-1} $ROUNDS); do
  for code in main branch; do
    if [ $code = main ]; then export PYTHONPATH=$BASE; cd $BASE; else unset PYTHONPATH; cd $branch; fi
    echo "round $r $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) $(python -c 'import mkernel.sim.engine as e; print(e.__file__)')" >> $branch/$OUT/log.txt
    /usr/bin/time -f "cpu %U + %S s, wall %e s, maxrss %M KB" -o $branch/$OUT/cli-$code-$r.txt \
      python -m mkernel run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse \
      --json $branch/$OUT/cli-$code-$r.json > /dev/null 2>&1
    python $branch/docs/results/data/every-node-5-2026-12-05/runphase.py > $branch/$OUT/run-$code-$r.txt 2>&1
  done
done
unset PYTHONPATH; cd $branch
for f in $OUT/cli-*.txt $OUT/run-*.txt; do echo "$f: $(cat $f)"; done
