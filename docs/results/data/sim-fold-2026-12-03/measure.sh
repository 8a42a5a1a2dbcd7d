#!/bin/bash
# usage: measure.sh OUT ROW...  : main and the branch, row by row in turn (so both see the same load):
# the `mkernel run` rows of runrows.sh, then refused.py's cases. Main is `git archive main` in
# /tmp/mainTree with mkernel/{sim,hw,scenarios} linked to its top-level folders.
out=$1; shift
here=$(cd $(dirname $0) && pwd)
branch=$(cd $here/../../../.. && pwd)
main=/tmp/mainTree
for row in "$@"; do
  for tree in main branch; do
    dir=$([ $tree = main ] && echo $main || echo $branch)
    case $row in
      refused-*) echo "$tree $(cd $dir && PYTHONPATH=$dir timeout 300 $branch/.venv/bin/python $here/refused.py ${row#refused-} | tee -a $out/$tree-refused.jsonl | python3 -c 'import sys, json; print([(d["variant"], d["cpu_s"], str(d["ranks_folded"])[:60]) for d in map(json.loads, sys.stdin)])')";;
      *) echo "$tree $(bash $here/runrows.sh $dir $out/$tree $row)";;
    esac
  done
done
