#!/bin/bash
# the simulator alone (sim_only.py), main then the branch, two rounds
set -u
out=${OUT:-/tmp/hg-measure}; here=$(cd "$(dirname "$0")" && pwd)
for round in 1 2; do
  for code in main branch; do
    dir=/tmp/hg-base; [ $code = branch ] && dir=/tmp/hg-final
    cd $dir && . .venv/bin/activate
    echo "== sim-only round $round $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log.txt
    python $here/sim_only.py > $out/sim-only-$code-$round.jsonl 2>> $out/log.txt
    deactivate
  done
done
echo "== sim-only done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log.txt
