#!/bin/bash
# The every-node row in one process per run (phases_knob.py: each phase's CPU s), the probe knob's settings (KNOBS,
# default "off on") alternately, ROUNDS rounds, in this checkout; the load logged. Output: $OUT/phases-{off,on}-N.txt, $OUT/log.txt.
set -u
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
OUT=${OUT:-$here/measure}; ROUNDS=${ROUNDS:-3}; py=$root/.venv/bin/python
mkdir -p $OUT; cd $root
for round in $(seq 1 $ROUNDS); do
  for knob in ${KNOBS:-off on}; do
    echo "== round $round $knob $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
    $py $here/phases_knob.py $knob $OUT/row-$knob-$round.json > $OUT/phases-$knob-$round.txt
  done
done
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
