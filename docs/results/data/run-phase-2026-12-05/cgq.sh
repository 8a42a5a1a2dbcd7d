#!/bin/bash
# cgq.sh TAG [M] [TREE]: callgrind instructions (Ir) of the tracked fused run alone (cgrun.py's second dump) at M
# (default 8192), with the worktree's code, or with TREE (a git archive under /tmp/rp/TREE, mkernel/{sim,hw,scenarios}
# symlinked as the editable install maps them: /tmp/rp/base = main 80ff7c8, /tmp/rp/s1 = df21a87). Prints TAG, M, the
# Ir, the simulated fused us and the events.
tag=$1; M=${2:-8192}; here=/work/wt-simspeed; py=$here/.venv/bin/python
if [ -n "${3:-}" ]; then export PYTHONPATH=/tmp/rp/$3; cd /tmp/rp/$3; else unset PYTHONPATH; cd $here; fi
rm -f /tmp/rp/cg/$tag-$M.*
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/rp/cg/$tag-$M.%p $py $here/docs/results/data/run-phase-2026-12-05/cgrun.py $M > /tmp/rp/cg/$tag-$M.log 2>&1
f=$(ls /tmp/rp/cg/$tag-$M.*.2); echo "$tag M=$M $(grep -h '^totals:' $f) $(grep -v '^==' /tmp/rp/cg/$tag-$M.log | tail -1)"
