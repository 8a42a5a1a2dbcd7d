#!/bin/bash
# CPU seconds of the every-node row in process (phases.py on), base and this tree alternated: ROUNDS rounds.
# usage: ab.sh BASE WT [ROUNDS]   (run from anywhere; each tree runs its own venv)
base=$1; wt=$2; rounds=${3:-3}
for r in $(seq 1 $rounds); do
  for t in $base $wt; do
    echo "round $r $(basename $t) $(cd $t && .venv/bin/python docs/results/data/build-phase-2026-12-05/phases.py on 2>&1 | tail -1)"
  done
done
