#!/bin/bash
# reference grid (45) and scale-out sample (40, seed 30), main ($BASE) and the worktree at its current commit, --tol 0, diffed
set -u
BASE=/tmp/ad/base; OUT=/tmp/ad/check; br=/work/wt-simspeed; py=$br/.venv/bin/python; tool=$br/tools/studies/check_sim_times.py
for code in ${CODES:-main branch}; do
  if [ $code = main ]; then export PYTHONPATH=$BASE; cd $BASE; else unset PYTHONPATH; cd $br; fi
  $py -c 'import mkernel.sim.engine as e; print(e.__file__)' > $OUT/which-$code.txt
  $py $tool committed $br/docs/results/grid-2026-12-02-reference --tol 0 --out $OUT/ref-$code.json > $OUT/ref-$code.txt 2>&1
  $py $tool committed $br/docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 --out $OUT/scaling-$code.json > $OUT/scaling-$code.txt 2>&1
done
unset PYTHONPATH; cd $br
$py $tool diff $OUT/ref-main.json $OUT/ref-branch.json --tol 0 > $OUT/diff-ref.txt 2>&1
$py $tool diff $OUT/scaling-main.json $OUT/scaling-branch.json --tol 0 > $OUT/diff-scaling.txt 2>&1
tail -n 1 $OUT/diff-ref.txt $OUT/diff-scaling.txt > $OUT/done.txt
