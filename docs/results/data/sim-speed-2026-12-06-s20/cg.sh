#!/bin/bash
# cg.sh TAG FINAL BASE: callgrind Ir of the whole every-node row (s18's row_nobar.py never: the CLI's main, the bar
# never shown), PYTHONHASHSEED=0, bytecode warm; TAG compiled | python (FINAL, -X mkernel-pure) | base (BASE on
# PYTHONPATH, as measure.sh). PY: the venv's python. Prints TAG and the instructions. ROW_END=entry: the row ends as
# the mkernel process does (row_nobar.py's entry: no interpreter shutdown; the twenty-third session's counts).
tag=$1; final=$2; base=$3; py=${PY:-python}; unset PYTHONDONTWRITEBYTECODE
row=$(cd "$(dirname "$0")/../sim-speed-2026-12-06-s18" && pwd)/row_nobar.py
case $tag in
  compiled) cd $final; cmd="$py";;
  python) cd $final; cmd="$py -X mkernel-pure";;
  base) cd $base; cmd="env PYTHONPATH=$base $py";;
esac
$cmd $row never $ROW_END > /dev/null
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg20-$tag.out $cmd $row never $ROW_END > /tmp/cg20-$tag.log 2>&1
echo "$tag $(grep -h 'Collected' /tmp/cg20-$tag.log | awk '{print $4}')"
