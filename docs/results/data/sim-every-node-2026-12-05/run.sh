#!/bin/bash
# 2026-12-05: main (bf6d2da, /tmp/hg-base) and the branch (/tmp/hg-final), alternately, two rounds:
# the bench rows full / uncollapsed / default, the every-node run without hazard tracking, and
# `python -m pytest -q tests/sim` (each checkout's own tests). Each checkout has its own venv.
set -u
out=${OUT:-/tmp/hg-measure}; mkdir -p $out
bench=/tmp/hg-final/tools/bench/bench_sim_speed.py
here=$(cd "$(dirname "$0")" && pwd)
for round in 1 2; do
  for code in main branch; do
    dir=/tmp/hg-base; [ $code = branch ] && dir=/tmp/hg-final
    cd $dir && . .venv/bin/activate
    echo "== round $round $code $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log.txt
    python $bench --only full uncollapsed default --timeout 600 --out $out/bench-$code-$round.json > $out/bench-$code-$round.txt 2>&1
    python $here/untracked.py > $out/untracked-$code-$round.json 2>> $out/log.txt
    /usr/bin/time -f "%U user %S sys %e wall" -o $out/pytest-$code-$round.time python -m pytest -q -p no:cacheprovider tests/sim > $out/pytest-$code-$round.txt 2>&1
    deactivate
  done
done
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log.txt
