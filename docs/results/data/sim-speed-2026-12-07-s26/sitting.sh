#!/bin/bash
# sitting.sh OUT ROUNDS [LOAD]: the every-node row (`python -m mkernel run scenarios/paper-ib-2x8.toml --kernel gemm_ar
# --m 32768 --n 32768 --k 2048 --no-collapse`) under /usr/bin/time, alternating main (/work/main, its compiled core)
# with base copies run on PYTHONPATH, their cores compiled in place: /work/b26 (1cb2ef5, this session's start),
# /work/b25 (2b37b92), /work/b24 (eec5549) and /work/b23 (the twenty-fifth, twenty-fourth and twenty-third sessions'
# starts), so that the figures those sessions quoted for their code can be set against main's in one sitting.
# TAGS: which, in order (default "main b25 b24 b23"). LOAD=spin: a pure-Python busy loop holds the other core for
# the sitting. Appends "round tag user sys wall" lines and the load to OUT.
out=$1; rounds=$2; py=/work/main/.venv/bin/python; unset PYTHONDONTWRITEBYTECODE
row="run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse"
if [ "$3" = spin ]; then $py -c "while True: pass" & spin=$!; sleep 0.5; fi
for i in $(seq $rounds); do
  for tag in ${TAGS:-main b25 b24 b23}; do
    if [ $tag = main ]; then cd /work/main; cmd="$py"; else cd /work/$tag; cmd="env PYTHONPATH=/work/$tag $py"; fi
    /usr/bin/time -f "$i $tag %U %S %e" -a -o $out $cmd -m mkernel $row > /dev/null
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
done
[ -n "$spin" ] && kill $spin
true
