#!/bin/bash
# measure.sh OUT ROUNDS FINAL BASE: the every-node row as `python -m mkernel run` under /usr/bin/time, alternating
# final (FINAL's install, its compiled core) and base (BASE: a copy of f58bcd4, mkernel/{sim,hw,scenarios} linked to
# its folders, its core compiled in place, run on PYTHONPATH). PY: the venv's python. Appends "round tag user sys
# wall" lines, and the load after each round, to OUT.
out=$1; rounds=$2; final=$3; base=$4; py=${PY:-python}; unset PYTHONDONTWRITEBYTECODE
row="run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse"
for i in $(seq $rounds); do
  for tag in final base; do
    case $tag in
      final) cd $final; cmd="$py";;
      base) cd $base; cmd="env PYTHONPATH=$base $py";;
    esac
    /usr/bin/time -f "$i $tag %U %S %e" -a -o $out $cmd -m mkernel $row > /dev/null
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
done
