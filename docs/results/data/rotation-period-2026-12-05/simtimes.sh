#!/bin/bash
# The reference grid (all 45 points of grid-2026-12-02-reference) and the scale-out sample (scaling-2026-12-02,
# --sample 40 --seed 30) rerun with tools/studies/check_sim_times.py on main (a checkout at BASE, see callgrind.sh)
# and on the code at HEAD_DIR (a checkout of the commit measured, linked as BASE is; default this checkout), then diffed with --tol 0 (the fewer-entries probe's simtimes.sh without its knob).
set -u
BASE=${BASE:-/tmp/wt-rotper-base}; OUT=${OUT:-/tmp/rotper/simtimes}; HEAD_DIR=${HEAD_DIR:-}
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd); py=$root/.venv/bin/python
mkdir -p $OUT
for set in ref scaling; do
  if [ $set = ref ]; then args="docs/results/grid-2026-12-02-reference"; else args="docs/results/scaling-2026-12-02 --sample 40 --seed 30"; fi
  echo "== $set main $(date -u +%H:%M:%S)" >> $OUT/log.txt
  (cd $BASE && PYTHONPATH=$BASE $py tools/studies/check_sim_times.py committed $args --tol 0 --out $OUT/$set-main.json > $OUT/$set-main.txt 2>&1)
  echo "== $set branch $(date -u +%H:%M:%S)" >> $OUT/log.txt
  (cd ${HEAD_DIR:-$root} && PYTHONPATH=$HEAD_DIR $py tools/studies/check_sim_times.py committed $args --tol 0 --out $OUT/$set-branch.json > $OUT/$set-branch.txt 2>&1)
  $py $root/tools/studies/check_sim_times.py diff $OUT/$set-main.json $OUT/$set-branch.json --tol 0 > $OUT/diff-$set.txt 2>&1
done
echo "== done $(date -u +%H:%M:%S)" >> $OUT/log.txt
