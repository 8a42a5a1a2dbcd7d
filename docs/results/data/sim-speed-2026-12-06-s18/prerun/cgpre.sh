#!/bin/bash
# usage: cgpre.sh TREE TAG : callgrind of the every-node row before its run (build, validate, Model set-up:
# prerun.py, here, stops at Model.run); out files in $OUT (default /tmp)
tree=$1; tag=$2; here=$(cd "$(dirname "$0")" && pwd); out=${OUT:-/tmp}
source /work/main/.venv/bin/activate; unset PYTHONDONTWRITEBYTECODE; export PYTHONPATH=$tree; cd $tree
python $here/prerun.py > /dev/null 2>&1
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$out/cgpre-$tag.out python $here/prerun.py > $out/cgpre-$tag.log 2>&1
echo "$tag $(grep Collected $out/cgpre-$tag.log)"
