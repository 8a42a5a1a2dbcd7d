#!/bin/bash
# final.sh BASE FINAL OUT: the session's closing measurements of the every-node row, base tree against final tree
# (each a copy of a checkout with mkernel/{sim,hw,scenarios} symlinked, run with PYTHONPATH at it; the venv's python).
# 1. callgrind of the whole row, both trees at once (s18's cgrow.sh: cli.main, progress bar never shown)
# 2. the row as the `mkernel` process (python -m mkernel: the console script's exit), 5 times each, alternating:
#    CPU user+sys and wall
set -u
base=$1; fin=$2; out=$3; here=$(cd "$(dirname "$0")" && pwd); py=${PY:-python}
s18=$here/../sim-speed-2026-12-06-s18
mkdir -p $out
(PY=$py bash $s18/cgrow.sh $base s19base > $out/cgrow-base.txt 2>&1 &)
PY=$py bash $s18/cgrow.sh $fin s19final > $out/cgrow-final.txt 2>&1
while pgrep -f "cgrow-s19base.out" > /dev/null; do sleep 5; done
cat $out/cgrow-base.txt $out/cgrow-final.txt
unset PYTHONDONTWRITEBYTECODE
for i in 1 2 3 4 5; do
  for t in $base $fin; do
    (cd $t && /usr/bin/time -f "$(basename $t) %U %S %e" env PYTHONPATH=$t $py -m mkernel run scenarios/paper-ib-2x8.toml \
      --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /dev/null) 2>&1 | tail -1
  done
done | tee $out/cpu-ab.txt
