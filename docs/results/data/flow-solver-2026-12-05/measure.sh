#!/bin/bash
# How the numbers in docs/results/2026-12-05-flow-solver.md were taken (paths as on the 2-core VM).
# base: `git archive 4f49cff` in /tmp/fs/base (mkernel/sim, hw, scenarios symlinked to its sim/, hw/,
# scenarios/, as the editable install maps them); branch: `git archive 999b9ae` in /tmp/fs/br-999b9ae, the same.
PY=/work/wt-simspeed/.venv/bin/python
B=/tmp/fs/br-999b9ae; H=999b9ae
for code in base br-999b9ae; do  # the simulated-times checks, each code on its own archive
  cd /tmp/fs/$code
  PYTHONPATH=/tmp/fs/$code $PY tools/studies/check_sim_times.py committed docs/results/grid-2026-12-02-reference --out /tmp/fs/$code-ref.json
  PYTHONPATH=/tmp/fs/$code $PY tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-02 --sample 40 --seed 30 --out /tmp/fs/$code-scal.json
done
# each point alone, base then branch, alternating (point.py prints wall, CPU, load, simulated times)
G=scaleout/gb200-nvl72-800g
for k in $G-2x72/moe_dispatch_gemm/128 $G-4x72/moe_dispatch_gemm/128 $G-8x72/moe_dispatch_gemm/128 \
         scaleout/ib-400g-rail-64x8/moe_dispatch_gemm/1024 scaleout/efa-400g-rail-16x8/moe_dispatch_gemm/1024 \
         $G-2x72/ag_gemm/4096 $G-2x72/gemm_rs/2048 $G-2x72/gemm_ar/2048 $G-2x72/ring_attention/512; do
  (cd /tmp/fs/base && TAG=base PYTHONPATH=/tmp/fs/base $PY /work/wt-simspeed/docs/results/data/flow-solver-2026-12-05/point.py $k)
  (cd $B && TAG=$H PYTHONPATH=$B $PY /work/wt-simspeed/docs/results/data/flow-solver-2026-12-05/point.py $k)
done
