#!/bin/bash
# usage: cgp.sh TREE TAG PART...  -> Ir between cg_toggle calls (each part alone, one callgrind run each)
T=$1; TAG=$2; shift 2
cd $T
for p in "$@"; do
  PYTHONHASHSEED=0 PYTHONPATH=$T valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/tmp/cgp19v-$TAG-$p.out ${PY:-python} $(cd "$(dirname "$0")" && pwd)/cgpart.py $p 2>&1 | grep -o "Collected : [0-9]*" | awk -v p=$p -v t=$TAG '{printf "%s %-9s %6.1f M\n", t, p, $3/1e6}'
done
