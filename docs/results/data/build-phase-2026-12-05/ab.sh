#!/bin/bash
# main against the branch, alternating, ROUNDS rounds of one fresh process each, running RUN (default one.py: the
# process time of the row's first fused build in the process, as a run makes it; RUN="phases.py on": the whole row
# in-process with each phase timed, the lead's /work/notes/phases.py copied unchanged). BASE: a `git archive` of main
# 80ff7c8 (git -C <checkout> archive 80ff7c8 | tar -x -C $BASE). Run from the checkout root.
set -u
ROUNDS=${ROUNDS:-6}; RUN=${RUN:-one.py}; BASE=${BASE:-/tmp/bf/base}
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd); py=$root/.venv/bin/python
for i in $(seq $ROUNDS); do
  for tree in $BASE $root; do
    (cd $tree && echo "$([ $tree = $BASE ] && echo main || echo branch) $(PYTHONPATH=$tree $py $here/$RUN)")
  done
done
