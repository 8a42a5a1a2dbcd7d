#!/bin/bash
# 2026-12-05: simulated times of main (a `git archive` in $BASE, its mkernel/sim a symlink to its sim/) and this
# branch on the reference grid (all 45 points) and the scale-out study's seeded sample (40 points, seed 30):
# each code's rerun against the committed rows, then the two reruns against each other (check_sim_times.py diff).
set -u
. $(pwd)/.venv/bin/activate
BASE=${BASE:-/tmp/evnet/base}; OUT=${OUT:-docs/results/data/network-events-2026-12-05/check}
branch=$(pwd); tool=$branch/tools/studies/check_sim_times.py; mkdir -p $OUT
for code in ${CODES:-main branch}; do
  if [ $code = main ]; then export PYTHONPATH=$BASE; cd $BASE; else unset PYTHONPATH; cd $branch; fi
  python -c 'import mkernel.sim.engine as e; print(e.__file__)'
  python $tool committed $branch/docs/results/grid-2026-12-02-reference --tol 0 --out $branch/$OUT/ref-$code.json > $branch/$OUT/ref-$code.txt 2>&1
  python $tool committed $branch/docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 \
    --out $branch/$OUT/scaling-$code.json > $branch/$OUT/scaling-$code.txt 2>&1
done
unset PYTHONPATH; cd $branch
python $tool diff $OUT/ref-main.json $OUT/ref-branch.json --tol 0 > $OUT/diff-ref.txt 2>&1
python $tool diff $OUT/scaling-main.json $OUT/scaling-branch.json --tol 0 > $OUT/diff-scaling.txt 2>&1
tail -n 1 $OUT/diff-ref.txt $OUT/diff-scaling.txt
