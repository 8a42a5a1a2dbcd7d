#!/bin/bash
# The fused build of the every-node row, main against the branch, alternating, ROUNDS rounds of one fresh process
# each (one.py: the process time of the first build in the process, as a run makes it). BASE: a `git archive` of
# main 80ff7c8 (git -C <checkout> archive 80ff7c8 | tar -x -C $BASE). Run from the checkout root, venv active.
set -u
ROUNDS=${ROUNDS:-6}; BASE=${BASE:-/tmp/bf/base}; here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
py=$root/.venv/bin/python
for i in $(seq $ROUNDS); do
  for tree in $BASE $root; do
    (cd $tree && echo "$([ $tree = $BASE ] && echo main || echo branch) $(PYTHONPATH=$tree $py $here/one.py)")
  done
done
