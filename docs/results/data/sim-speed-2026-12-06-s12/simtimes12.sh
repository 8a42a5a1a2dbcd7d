#!/bin/bash
# The reference grid (45 points) and the scale-out sample (--sample 40 --seed 30) on base (e184e08) and merged main,
# then the two reruns diffed at --tol 0.
O=/work/notes/st12; M=/root/.pyenv/versions/3.11.7/bin/python; B=/work/base/.venv/bin/python
for side in main base; do
  if [ $side = main ]; then d=/work/main; py=$M; else d=/work/base; py=$B; fi
  cd $d
  $py tools/studies/check_sim_times.py committed docs/results/grid-2026-12-02-reference --tol 0 --out $O/ref-$side.json > $O/ref-$side.txt 2>&1
  $py tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 --out $O/scaling-$side.json > $O/scaling-$side.txt 2>&1
done
cd /work/main
$M tools/studies/check_sim_times.py diff $O/ref-base.json $O/ref-main.json --tol 0 > $O/diff-ref.txt 2>&1
$M tools/studies/check_sim_times.py diff $O/scaling-base.json $O/scaling-main.json --tol 0 > $O/diff-scaling.txt 2>&1
tail -n 2 $O/diff-ref.txt $O/diff-scaling.txt
