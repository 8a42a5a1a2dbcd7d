#!/bin/bash
# usage: ab.sh ROUNDS ARGS...  -> CPU s (user+sys) of `python -m mkernel ARGS` on main and base, alternated
n=$1; shift
for i in $(seq 1 $n); do
  for side in main base; do
    if [ $side = main ]; then d=/work/main; py=/root/.pyenv/versions/3.11.7/bin/python; else d=/work/base; py=/work/base/.venv/bin/python; fi
    (cd $d && /usr/bin/time -o /tmp/ab.t -f "%U %S" $py -m mkernel "$@" > /dev/null 2>&1)
    echo "$side $i $(awk '{print $1+$2}' /tmp/ab.t)"
  done
done
