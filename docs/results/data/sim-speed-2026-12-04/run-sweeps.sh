#!/bin/bash
# the sweep row alone, main and branch side by side (their rows in run-main/run-branch were stopped at 1200 s)
set -u
branch=/work/wt-simspeed; out=/tmp/ss/post; bench=$branch/tools/bench/bench_sim_speed.py
(cd /tmp/ss/main && . .venv/bin/activate && uptime && python $bench --only sweep --timeout 3600 --out $out/bench-main-sweep.json; uptime) > $out/bench-main-sweep.txt 2>&1 &
(cd $branch && . .venv/bin/activate && uptime && python $bench --only sweep --timeout 3600 --out $out/bench-branch-sweep.json; uptime) > $out/bench-branch-sweep.txt 2>&1 &
wait
