#!/bin/bash
# usage: cgfin.sh TREE TAG : callgrind of fin_ir.py without and with the verdict (their difference: LoggedTracker.finish),
# on the log fin_dump.py pickled to $OUT/finlog.pkl (OUT default /tmp)
tree=$1; tag=$2; here=$(cd "$(dirname "$0")" && pwd); out=${OUT:-/tmp}
source /work/main/.venv/bin/activate; unset PYTHONDONTWRITEBYTECODE; export PYTHONPATH=$tree; cd $tree
python $here/fin_ir.py $out/finlog.pkl finish > /dev/null 2>&1
for mode in setup finish; do
  arg=""; [ $mode = finish ] && arg=finish
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$out/cgfin-$tag-$mode.out python $here/fin_ir.py $out/finlog.pkl $arg > $out/cgfin-$tag-$mode.log 2>&1
  echo "$tag $mode $(grep Collected $out/cgfin-$tag-$mode.log)"
done
