#!/bin/bash
# usage: cg.sh TREE TAG [modes]: callgrind of ph.py per mode (none/setup/all); set-up = setup-none, verdict = all-setup
tree=$1; tag=$2; shift 2; modes=${@:-none setup all}; here=$(cd "$(dirname "$0")" && pwd)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPATH=$tree; cd $tree
${PY:-python} $here/ph.py $here/log.pkl all > /dev/null 2>&1
for mode in $modes; do
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$here/cg-$tag-$mode.out ${PY:-python} $here/ph.py $here/log.pkl $mode > $here/cg-$tag-$mode.log 2>&1
  echo "$tag $mode $(grep Collected $here/cg-$tag-$mode.log)"
done
