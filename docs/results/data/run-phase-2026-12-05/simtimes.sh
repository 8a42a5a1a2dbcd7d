#!/bin/bash
# reference grid (45 points) and the scale-out sample (40, seed 30) with main (BASE: a git archive of main 80ff7c8) and
# with the worktree at its current commit, check_sim_times --tol 0, then diffed (0 changed at all is the pass).
set -u
BASE=${BASE:-/tmp/rp/base}; OUT=${OUT:-/tmp/rp/check}; br=/work/wt-simspeed; py=$br/.venv/bin/python
tool=$br/tools/studies/check_sim_times.py
for code in ${CODES:-main branch}; do
  if [ $code = main ]; then export PYTHONPATH=$BASE; cd $BASE; else unset PYTHONPATH; cd $br; fi
  $py -c 'import mkernel.sim.engine as e; print(e.__file__)' > $OUT/which-$code.txt
  $py $tool committed $br/docs/results/grid-2026-12-02-reference --tol 0 --out $OUT/ref-$code.json > $OUT/ref-$code.txt 2>&1
  [ -n "${SCALING:-}" ] && $py $tool committed $br/docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 \
    --out $OUT/scaling-$code.json > $OUT/scaling-$code.txt 2>&1
done
unset PYTHONPATH; cd $br
$py $tool diff $OUT/ref-main.json $OUT/ref-branch.json --tol 0 > $OUT/diff-ref.txt 2>&1
[ -n "${SCALING:-}" ] && $py $tool diff $OUT/scaling-main.json $OUT/scaling-branch.json --tol 0 > $OUT/diff-scaling.txt 2>&1
tail -n 1 $OUT/diff-ref.txt $OUT/diff-scaling.txt 2>/dev/null
