#!/bin/bash
# usage: ab.sh WT ROUNDS -> the row in process (phases.py on), base and WT alternated, ROUNDS rounds each
wt=$1; n=${2:-3}
for i in $(seq 1 $n); do
  echo "base $i $(cd /work/base && .venv/bin/python docs/results/data/build-phase-2026-12-05/phases.py on)"
  echo "blk  $i $(cd $wt && .venv/bin/python docs/results/data/build-phase-2026-12-05/phases.py on)"
done
