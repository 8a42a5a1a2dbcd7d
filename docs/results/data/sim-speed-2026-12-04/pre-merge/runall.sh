#!/bin/bash
# Issue 30's table on main (a git archive of the base commit, its own venv) then on the branch, in
# one session; then the 0.5% check (both committed slices rerun on each code, then diffed).
# Usage: runall.sh MAIN_TREE BRANCH_TREE OUT_DIR   (each tree has .venv with the package installed)
set -u
main=$1; branch=$2; out=$3
bench=$branch/tools/bench/bench_sim_speed.py
check=$branch/tools/studies/check_sim_times.py
(cd "$main" && . .venv/bin/activate && uptime && python "$bench" --timeout 1200 --out "$out/bench-main.json") \
    > "$out/bench-main.txt" 2>&1
(cd "$branch" && . .venv/bin/activate && uptime && python "$bench" --timeout 1200 --before "$out/bench-main.json" \
    --out "$out/bench-branch.json") > "$out/bench-branch.txt" 2>&1
for tree in main branch; do
    dir=$main; [ $tree = branch ] && dir=$branch
    # (each exits 1 where points moved against the committed folders, which both codes do: main moved them)
    (cd "$dir" && . .venv/bin/activate
     python "$check" committed "$branch/docs/results/grid-2026-12-02-reference" --out "$out/ref-$tree.json"
     python "$check" committed "$branch/docs/results/scaling-2026-12-02" --out "$out/scaling-$tree.json") \
        > "$out/check-$tree.txt" 2>&1
done
cd "$branch" && . .venv/bin/activate
python "$check" diff "$out/ref-main.json" "$out/ref-branch.json" > "$out/diff-reference.txt" 2>&1
python "$check" diff "$out/scaling-main.json" "$out/scaling-branch.json" > "$out/diff-scaling.txt" 2>&1
