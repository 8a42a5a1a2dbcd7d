#!/bin/bash
# the branch's half of the 2026-12-04 post-merge measurement: bench then the 0.5% check slices
set -u
branch=/work/wt-simspeed; out=/tmp/ss/post
bench=$branch/tools/bench/bench_sim_speed.py
check=$branch/tools/studies/check_sim_times.py
cd $branch && . .venv/bin/activate
(uptime; python $bench --timeout 1200 --out $out/bench-branch.json; uptime) > $out/bench-branch.txt 2>&1
(python $check committed $branch/docs/results/grid-2026-12-02-reference --out $out/ref-branch.json
 python $check committed $branch/docs/results/scaling-2026-12-02 --out $out/scaling-branch.json) > $out/check-branch.txt 2>&1
echo done > $out/branch.done
