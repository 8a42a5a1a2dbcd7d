#!/bin/bash
# 2026-12-05: the reference grid (all 45 points) and the scale-out sample (--sample 40 --seed 30) rerun on main (the
# `git archive` in /tmp/en5/base, as measure.sh) and on the branch, then diffed; outputs copied to check/ (run 12:02-12:14 UTC).
cd /tmp/en5/base && PYTHONPATH=/tmp/en5/base /work/wt-auto31/.venv/bin/python tools/studies/check_sim_times.py committed docs/results/grid-2026-12-02-reference --tol 0 --out /tmp/en5/ref-main.json > /tmp/en5/ref-main.txt 2>&1
cd /work/wt-auto31 && /work/wt-auto31/.venv/bin/python tools/studies/check_sim_times.py committed docs/results/grid-2026-12-02-reference --tol 0 --out /tmp/en5/ref-branch.json > /tmp/en5/ref-branch.txt 2>&1
cd /tmp/en5/base && PYTHONPATH=/tmp/en5/base /work/wt-auto31/.venv/bin/python tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 --out /tmp/en5/scaling-main.json > /tmp/en5/scaling-main.txt 2>&1
cd /work/wt-auto31 && /work/wt-auto31/.venv/bin/python tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-02 --sample 40 --seed 30 --tol 0 --out /tmp/en5/scaling-branch.json > /tmp/en5/scaling-branch.txt 2>&1
/work/wt-auto31/.venv/bin/python tools/studies/check_sim_times.py diff /tmp/en5/ref-main.json /tmp/en5/ref-branch.json --tol 0 > /tmp/en5/diff-ref.txt 2>&1
/work/wt-auto31/.venv/bin/python tools/studies/check_sim_times.py diff /tmp/en5/scaling-main.json /tmp/en5/scaling-branch.json --tol 0 > /tmp/en5/diff-scaling.txt 2>&1
echo done > /tmp/en5/simtimes.done
