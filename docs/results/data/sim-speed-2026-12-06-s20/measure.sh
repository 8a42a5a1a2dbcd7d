#!/bin/bash
# measure.sh OUT ROUNDS FINAL BASE: the every-node row as `python -m mkernel run` under /usr/bin/time, alternating
# compiled (FINAL's install, its compiled core), python (the same install, -X mkernel-pure) and base (BASE: a copy
# of 71524a0 with mkernel/{sim,hw,scenarios} linked to its folders, run on PYTHONPATH). PY: the venv's python
# (FINAL is its editable install). Appends "round tag user sys wall" lines, and the load after each round, to OUT.
# TAGS: the runs of a round and their order (default "compiled python base"; "final" is compiled under that name,
# as the twenty-second session ran it: TAGS="final base").
out=$1; rounds=$2; final=$3; base=$4; py=${PY:-python}; unset PYTHONDONTWRITEBYTECODE
row="run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse"
for i in $(seq $rounds); do
  for tag in ${TAGS:-compiled python base}; do
    case $tag in
      compiled|final) cd $final; cmd="$py";;
      python) cd $final; cmd="$py -X mkernel-pure";;
      base) cd $base; cmd="env PYTHONPATH=$base $py";;
    esac
    /usr/bin/time -f "$i $tag %U %S %e" -a -o $out $cmd -m mkernel $row > /dev/null
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
done
