#!/bin/bash
# every row again once the machine went quiet: main 6d629c8 then the branch's final code (after both merges)
set -u
out=/tmp/ss/post2; bench=/tmp/ss/m2/tools/bench/bench_sim_speed.py
(cd /tmp/ss/main && . .venv/bin/activate && uptime && python $bench --timeout 1200 --out $out/bench-main.json; uptime) > $out/bench-main.txt 2>&1
(cd /tmp/ss/m2 && export PATH=/tmp/ss/m2/.venv/bin:$PATH && uptime && python $bench --timeout 1200 --before $out/bench-main.json --out $out/bench-branch.json; uptime) > $out/bench-branch.txt 2>&1
echo done > $out/done
