#!/bin/bash
# cg.sh TREE TAG: callgrind Ir of the whole every-node row (s18's row_nobar.py never: the CLI's main, the bar never
# shown) on the worktree TREE (PYTHONPATH=TREE, run from TREE), PYTHONHASHSEED=0, bytecode warm (one plain run first).
# Writes /tmp/h22f-TAG.out and .log; summary.sh prints the total and the flows/maxmin functions' inclusive Ir.
tree=$1; tag=$2; py=/work/main/.venv/bin/python; unset PYTHONDONTWRITEBYTECODE
row=/work/main/docs/results/data/sim-speed-2026-12-06-s18/row_nobar.py
cd $tree && export PYTHONPATH=$tree
$py -c "import mkernel.sim as s; print(s.native.state, s.__file__)"
$py $row never > /dev/null
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/h22f-$tag.out $py $row never > /tmp/h22f-$tag.log 2>&1
"$(dirname "$0")"/summary.sh $tag
