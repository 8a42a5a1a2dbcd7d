#!/bin/bash
# main's half of the 2026-12-04 post-merge measurement: bench then the 0.5% check slices
set -u
main=/tmp/ss/main; branch=/work/wt-simspeed; out=/tmp/ss/post
mkdir -p $out
bench=$branch/tools/bench/bench_sim_speed.py
check=$branch/tools/studies/check_sim_times.py
cd $main && . .venv/bin/activate
(uptime; python $bench --timeout 1200 --out $out/bench-main.json; uptime) > $out/bench-main.txt 2>&1
(python $check committed $branch/docs/results/grid-2026-12-02-reference --out $out/ref-main.json
 python $check committed $branch/docs/results/scaling-2026-12-02 --out $out/scaling-main.json) > $out/check-main.txt 2>&1
echo done > $out/main.done
