#!/bin/bash
# merged main against 80ff7c8 (a worktree at /work/wt-rspush with its own venv): the reference grid (45 points) and
# the scale-out sample (40, seed 30), check_sim_times --tol 0 on each, then diffed (0 changed is the pass)
set -u
OUT=${OUT:-/tmp/s9check}
for side in base main; do
  if [ $side = main ]; then d=/work/main; else d=/work/wt-rspush; fi
  cd $d; py=$d/.venv/bin/python; tool=$d/tools/studies/check_sim_times.py
  $py -c 'import mkernel.sim.engine as e; print(e.__file__)' > $OUT/which-$side.txt
  $py $tool committed /work/main/docs/results/grid-2026-12-02-reference --tol 0 --out $OUT/ref-$side.json > $OUT/ref-$side.txt 2>&1
  $py $tool committed /work/main/docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 --out $OUT/scaling-$side.json > $OUT/scaling-$side.txt 2>&1
done
cd /work/main; py=/work/main/.venv/bin/python; tool=tools/studies/check_sim_times.py
$py $tool diff $OUT/ref-base.json $OUT/ref-main.json --tol 0 > $OUT/diff-ref.txt 2>&1
$py $tool diff $OUT/scaling-base.json $OUT/scaling-main.json --tol 0 > $OUT/diff-scaling.txt 2>&1
tail -n 1 $OUT/diff-ref.txt $OUT/diff-scaling.txt
