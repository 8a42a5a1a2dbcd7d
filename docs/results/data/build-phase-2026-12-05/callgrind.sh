#!/bin/bash
# cgbuild.py under callgrind on main (BASE, as in ab.sh) and on the branch, one after the other; prints each build's Ir.
set -u
BASE=${BASE:-/tmp/bf/base}; OUT=${OUT:-/tmp/bpcg}; here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
py=$root/.venv/bin/python; mkdir -p $OUT
for tree in $BASE $root; do
  tag=$([ $tree = $BASE ] && echo main || echo branch)
  (cd $tree && PYTHONHASHSEED=0 PYTHONPATH=$tree valgrind --tool=callgrind --callgrind-out-file=$OUT/cg-$tag.%p \
    $py $here/cgbuild.py > $OUT/cg-$tag.log 2>&1)
  echo "$tag: entries $(grep -v '^==' $OUT/cg-$tag.log | tail -1), build $(grep -h '^totals:' $(ls $OUT/cg-$tag.*.2))"
done
