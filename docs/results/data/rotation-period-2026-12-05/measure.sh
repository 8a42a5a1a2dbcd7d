#!/bin/bash
# The every-node row, main (a checkout at BASE, see callgrind.sh) and this checkout alternately, ROUNDS rounds:
# phases.py (the session's /work/notes/phases.py, as build-phase-2026-12-05 keeps it: each phase's CPU s
# in-process, hazards on), then
# the CLI command in its own process (user+sys CPU s from /usr/bin/time). The load is logged before each run.
# Output: $OUT/log.txt, $OUT/{phases,cli}-{main,branch}-N.txt.
set -u
BASE=${BASE:-/tmp/wt-rotper-base}; here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
OUT=${OUT:-$here/measure}; ROUNDS=${ROUNDS:-3}; py=$root/.venv/bin/python
mkdir -p $OUT
run() {  # code dir pythonpath
  local code=$1 dir=$2 pp=$3 round=$4
  echo "== round $round $code phases $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
  (cd $dir && PYTHONPATH=$pp $py $here/../build-phase-2026-12-05/phases.py on > $OUT/phases-$code-$round.txt 2>&1)
  echo "== round $round $code cli $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
  (cd $dir && PYTHONPATH=$pp /usr/bin/time -f "%U %S" -o $OUT/cli-$code-$round.txt $py -m mkernel run \
    scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > $OUT/cli-$code-$round.out 2>&1)
}
for round in $(seq 1 $ROUNDS); do
  run main $BASE $BASE $round
  run branch $root "" $round
done
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
