#!/bin/bash
# CPU seconds (process time) of the row's phases, main (BASE: git archive of main 80ff7c8) and the worktree alternating,
# the order swapped every round: phases.py on|off (the lead's wrapper: 'engine run' = both runs of the row, fused and
# baseline; 'on' = hazards tracked, the row's default). ROUNDS rounds (default 3). Output: OUT/phases-CODE-MODE-ROUND.txt
set -u
BASE=${BASE:-/tmp/rp/base}; OUT=${OUT:-/tmp/rp/measure}; br=/work/wt-simspeed; py=$br/.venv/bin/python
here=$br/docs/results/data/run-phase-2026-12-05; mkdir -p $OUT
for round in $(seq 1 ${ROUNDS:-3}); do
  order="main branch"; [ $((round % 2)) = 0 ] && order="branch main"
  for mode in on off; do
    for code in $order; do
      if [ $code = main ]; then export PYTHONPATH=$BASE; cd $BASE; else unset PYTHONPATH; cd $br; fi
      echo "$(date -u +%T) round $round $mode $code load $(cut -d' ' -f1 /proc/loadavg)" >> $OUT/log.txt
      $py $here/../build-phase-2026-12-05/phases.py $mode > $OUT/phases-$code-$mode-$round.txt 2>&1
    done
  done
done
unset PYTHONPATH; cd $br
for f in $OUT/phases-*.txt; do echo "$(basename $f .txt) $(tail -1 $f)"; done
