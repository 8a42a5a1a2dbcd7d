#!/bin/bash
# The fewer-entries probe's cgphases.py (its knob off: a no-op on this code and main's) under callgrind on main (a
# checkout at BASE, default /tmp/wt-rotper-base, its mkernel/sim, hw and scenarios linked to ../sim, ../hw,
# ../scenarios so that PYTHONPATH finds them) and on this checkout, in parallel.
# Prints per code the instructions (Ir) of each phase dump and the run's simulated fused us, events and entries.
# (check/callgrind.txt came from a copy of that script without its knob lines that also printed the mkernel path,
# since removed as a duplicate.)
set -u
BASE=${BASE:-/tmp/wt-rotper-base}; OUT=${OUT:-/tmp/rotper/cg}; here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd); py=$root/.venv/bin/python; mkdir -p $OUT
(cd $BASE && PYTHONPATH=$BASE PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$OUT/cg-main.%p \
  $py $here/../fewer-entries-2026-12-05/cgphases.py off > $OUT/cg-main.log 2>&1) &
(cd $root && PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$OUT/cg-branch.%p \
  $py $here/../fewer-entries-2026-12-05/cgphases.py off > $OUT/cg-branch.log 2>&1) &
wait
for code in main branch; do
  echo "$code: $(grep -v '^==' $OUT/cg-$code.log | tail -1)"
  for part in 1 2 3 4; do
    f=$(ls $OUT/cg-$code.*.$part); echo "  dump $part $(grep -h '^totals:' $f)"
  done
done
