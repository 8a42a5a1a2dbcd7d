#!/bin/bash
# The every-node row in-process with each phase timed (phases.py: the lead's /work/notes/phases.py, copied unchanged),
# main (BASE, as in ab.sh) against the branch, alternating, ROUNDS rounds; HAZ on|off.
set -u
ROUNDS=${ROUNDS:-2}; HAZ=${HAZ:-on}; BASE=${BASE:-/tmp/bf/base}; here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
py=$root/.venv/bin/python
for i in $(seq $ROUNDS); do
  for tree in $BASE $root; do
    (cd $tree && echo "$([ $tree = $BASE ] && echo main || echo branch) $(PYTHONPATH=$tree $py $here/phases.py $HAZ)")
  done
done
