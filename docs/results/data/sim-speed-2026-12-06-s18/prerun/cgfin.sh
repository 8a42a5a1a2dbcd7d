#!/bin/bash
# usage: cgfin.sh TREE TAG : callgrind of fin_ir.py without and with the verdict (their difference: LoggedTracker.finish)
tree=$1; tag=$2
source /work/main/.venv/bin/activate; unset PYTHONDONTWRITEBYTECODE; export PYTHONPATH=$tree; cd $tree
python /tmp/s18/fin_ir.py /tmp/s18/finlog.pkl finish > /dev/null 2>&1
for mode in setup finish; do
  arg=""; [ $mode = finish ] && arg=finish
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/s18/cgfin-$tag-$mode.out python /tmp/s18/fin_ir.py /tmp/s18/finlog.pkl $arg > /tmp/s18/cgfin-$tag-$mode.log 2>&1
  echo "$tag $mode $(grep Collected /tmp/s18/cgfin-$tag-$mode.log)"
done
