#!/bin/bash
# Instructions (callgrind Ir: the same on a loaded machine) of the row's tracked fused run alone, on the tree $1
# (a `git archive` with symlinks, as measure.sh's main; run with PYTHONPATH at it). M: the problem size (32768: the row).
# Prints: tree, instructions, simulated fused us, events.
t=$1; tag=$(basename $t)-$RANDOM; M=${M:-32768}; here=$(cd "$(dirname "$0")" && pwd)
py=$(cd "$here/../../../.." && pwd)/.venv/bin/python; FLAGS=${FLAGS:-/tmp}; export FLAGS
rm -f $FLAGS/flag-$tag-*
(cd $t && PYTHONHASHSEED=0 PYTHONPATH=$t valgrind --tool=callgrind --instr-atstart=no \
  --callgrind-out-file=$FLAGS/cg-$tag.out $py $here/callgrind_run.py $M $tag > $FLAGS/cg-$tag.log 2>&1) &
for _ in $(seq 1 3000); do [ -e $FLAGS/flag-$tag-start ] && break; sleep 0.2; done
callgrind_control -i on $(pgrep -f "cg-$tag.out" | head -1) > /dev/null 2>&1
touch $FLAGS/flag-$tag-go
wait
echo "$(basename $t) $(grep -h 'Collected' $FLAGS/cg-$tag.log | awk '{print $4}') $(grep -v '^==' $FLAGS/cg-$tag.log | tail -1)"
