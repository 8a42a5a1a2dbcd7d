#!/bin/bash
# The reference grid (all 45 points of grid-2026-12-02-reference) and the scale-out sample (scaling-2026-12-02,
# --sample 40 --seed 30) rerun with tools/studies/check_sim_times.py on main (a `git archive` of c4aaec6 at $BASE,
# PYTHONPATH at it, mkernel/{sim,hw,scenarios} symlinked as the editable install maps them) and on this branch with
# the probe knob on (gemm_ar.ROW_GROUPS = True, set before the tool's main runs; SET and TAG name another setting, e.g.
# SET="g.CHUNK_WAITS = True" TAG=chunk), then diffed with --tol 0. Main's reruns are kept and not redone (their files).
set -u
BASE=${BASE:-/tmp/fe-main}; OUT=${OUT:-/tmp/fe-simtimes}; SET=${SET:-g.ROW_GROUPS = True}; TAG=${TAG:-on}
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd); py=$root/.venv/bin/python
mkdir -p $OUT
on() {  # check_sim_times.py ARGS... with the knob on
  $py -c "import runpy, sys; import mkernel.builders.gemm_ar as g; $SET; \
sys.argv = ['check_sim_times.py'] + sys.argv[1:]; runpy.run_path('tools/studies/check_sim_times.py', run_name='__main__')" "$@"
}
for set in ref scaling; do
  if [ $set = ref ]; then args="docs/results/grid-2026-12-02-reference"; else args="docs/results/scaling-2026-12-02 --sample 40 --seed 30"; fi
  if [ ! -e $OUT/$set-main.json ]; then
    echo "== $set main $(date -u +%H:%M:%S)" >> $OUT/log.txt
    (cd $BASE && PYTHONPATH=$BASE $py tools/studies/check_sim_times.py committed $args --tol 0 --out $OUT/$set-main.json > $OUT/$set-main.txt 2>&1)
  fi
  echo "== $set $TAG $(date -u +%H:%M:%S)" >> $OUT/log.txt
  (cd $root && on committed $args --tol 0 --out $OUT/$set-$TAG.json > $OUT/$set-$TAG.txt 2>&1)
  $py $root/tools/studies/check_sim_times.py diff $OUT/$set-main.json $OUT/$set-$TAG.json --tol 0 > $OUT/diff-$set-$TAG.txt 2>&1
done
echo "== done $(date -u +%H:%M:%S)" >> $OUT/log.txt
