#!/bin/bash
# summary.sh TAG: the whole row's instructions (callgrind's "Collected" in /tmp/h22f-TAG.log) and the inclusive
# instructions of every compiled function of sim/flows.py and sim/maxmin.py (/tmp/h22f-TAG.out), as cg.sh wrote them.
tag=$1; cd /tmp  # (from a folder without the C source: one entry a function, its whole inclusive count)
echo "$tag total $(grep -h 'Collected' /tmp/h22f-$tag.log | awk '{print $4}')"
callgrind_annotate --auto=no --threshold=100 --inclusive=yes /tmp/h22f-$tag.out | grep -E "CPyDef_(flows|maxmin)" \
  | grep "\[" | sed "s|/work/h22f/build/mkernel/sim/__native_core.c:||; s| \[.*||"
