#!/bin/bash
# CPU seconds of the every-node row in process (phases.py on), base and branch alternated, 3 rounds.
# usage: cpu.sh BASE_TREE BRANCH_TREE
for r in 1 2 3; do
  for t in "$1" "$2"; do
    echo "round $r $(basename $t): $(cd $t && .venv/bin/python docs/results/data/build-phase-2026-12-05/phases.py on)"
  done
done
