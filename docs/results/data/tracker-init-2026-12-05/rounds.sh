#!/bin/bash
# Alternating base (/work/base, main 94a7317) and this branch, ROUNDS rounds each: the tracker's set-up alone
# (time_init.py: warm, GC paused, 3 builds, each listed) and inside the row's tracked run (time_run.py: set-up,
# finish(), the whole sim.run). Usage: bash rounds.sh [ROUNDS]  (from this branch's root)
D=$(cd "$(dirname "$0")" && pwd)
BR=$(cd "$D/../../../.." && pwd)
for r in $(seq 1 "${1:-3}"); do
  for who in base branch; do
    root=$([ $who = base ] && echo /work/base || echo "$BR")
    (cd "$root" && echo "round $r $who $(.venv/bin/python "$D/time_init.py" 3)")
  done
done
for r in $(seq 1 "${1:-3}"); do
  for who in base branch; do
    root=$([ $who = base ] && echo /work/base || echo "$BR")
    (cd "$root" && .venv/bin/python "$D/time_run.py" "round $r $who")
  done
done
