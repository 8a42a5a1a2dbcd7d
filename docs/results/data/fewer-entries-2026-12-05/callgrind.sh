#!/bin/bash
# cgphases.py under callgrind, the settings KNOBS (default "off on"; in parallel), at M (32768: the row). Prints per
# setting the instructions (Ir) of each phase dump and the run's simulated fused us, events and entries. The note's
# counts (check/callgrind.txt) came from KNOBS="off on", then "every", "every8" and "chunk", each started alone.
set -u
M=${M:-32768}; OUT=${OUT:-/tmp/fecg}; here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
py=$root/.venv/bin/python; mkdir -p $OUT; cd $root
for knob in ${KNOBS:-off on}; do
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$OUT/cg-$knob-$M.%p \
    $py $here/cgphases.py $knob $M > $OUT/cg-$knob-$M.log 2>&1 &
done
wait
for knob in ${KNOBS:-off on}; do
  echo "knob $knob M $M: $(grep -v '^==' $OUT/cg-$knob-$M.log | tail -1)"
  for part in 1 2 3 4; do
    f=$(ls $OUT/cg-$knob-$M.*.$part); echo "  dump $part $(grep -h '^totals:' $f)"
  done
done
