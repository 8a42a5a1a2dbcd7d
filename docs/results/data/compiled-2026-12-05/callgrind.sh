#!/bin/bash
# Instruction counts (load-independent): the build alone and build + one every-node run, pure and compiled.
# usage (repository root, venv active): MYPYC_TREE=/tmp/mypyc-tree OUT=/tmp/vg docs/results/data/compiled-2026-12-05/callgrind.sh
mkdir -p $OUT; R=docs/results/data/sim-event-path-2026-12-05/runonly.py
for n in 0 1; do
  for cfg in pure: mypyc:$MYPYC_TREE; do
    name=${cfg%%:*}; pp=${cfg#*:}
    PYTHONPATH=$pp valgrind --tool=callgrind --callgrind-out-file=$OUT/$name-$n.out python $R $n > $OUT/$name-$n.log 2>&1
    callgrind_annotate --auto=no --threshold=100 $OUT/$name-$n.out > $OUT/$name-$n.annot
  done
done
grep -H Collected $OUT/*.log
