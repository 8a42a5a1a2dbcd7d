#!/bin/bash
# usage: simtimes.sh TREE OUTDIR -> the reference grid and the scaling sample at --tol 0 on TREE, cpu columns
# stripped and lines sorted (OUTDIR/ref.txt, OUTDIR/scaling.txt): compare two trees' files with diff
t=$1; o=$2; mkdir -p $o
strip() { sed -E 's/; cpu [^)]*$//; s/cpu [0-9.]+ (\(sim wall\) )?-> [0-9.]+ s//' | grep -E "MOVED|^\[|points" | sort; }
(cd $t && .venv/bin/python tools/studies/check_sim_times.py committed docs/results/grid-2026-12-02-reference --tol 0) 2>&1 | strip > $o/ref.txt
(cd $t && .venv/bin/python tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0) 2>&1 | strip > $o/scaling.txt
