#!/bin/bash
# Simulated times, pure Python against the mypyc tree (check_sim_times --tol 0): the reference grid (45 points)
# and the scale-out sample (40, seed 30); "0 changed at all" is the pass.
# usage (repository root, venv active): MYPYC_TREE=/tmp/mypyc-tree OUT=/tmp/st docs/results/data/compiled-2026-12-05/simtimes.sh
mkdir -p $OUT; tool=tools/studies/check_sim_times.py
for cfg in pure: mypyc:$MYPYC_TREE; do
  name=${cfg%%:*}; pp=${cfg#*:}
  PYTHONPATH=$pp python $tool committed docs/results/grid-2026-12-02-reference --tol 0 --out $OUT/ref-$name.json > $OUT/ref-$name.txt 2>&1
  PYTHONPATH=$pp python $tool committed docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 --out $OUT/scaling-$name.json > $OUT/scaling-$name.txt 2>&1
done
python $tool diff $OUT/ref-pure.json $OUT/ref-mypyc.json --tol 0 > $OUT/diff-ref.txt 2>&1
python $tool diff $OUT/scaling-pure.json $OUT/scaling-mypyc.json --tol 0 > $OUT/diff-scaling.txt 2>&1
tail -n 1 $OUT/diff-ref.txt $OUT/diff-scaling.txt
