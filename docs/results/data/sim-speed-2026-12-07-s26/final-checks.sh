#!/bin/bash
# final-checks.sh: the exactness checks of the merged main (/work/main, its core compiled in place) against the
# session's base (/work/b26, 1cb2ef5): the every-node row's fingerprint and check_sim_times at --tol 0 on the
# reference grid and a scale-out sample. Writes fingerprint-final.txt, check_sim_times-reference.txt and
# check_sim_times-scaling.txt here. PY: the venv's python.
set -e
here=$(cd "$(dirname "$0")" && pwd); py=${PY:-/work/main/.venv/bin/python}; data=/work/main/docs/results/data
unset PYTHONDONTWRITEBYTECODE
cd /work/b26 && PYTHONPATH=/work/b26 $py $data/sim-speed-2026-12-06-s22/fingerprint.py /tmp/fp-b26.npz > /dev/null
cd /work/main && $py $data/sim-speed-2026-12-06-s22/fingerprint.py /tmp/fp-main.npz > /dev/null
$py $data/sim-speed-2026-12-06-s20/fingerprint_cmp_core.py /tmp/fp-b26.npz /tmp/fp-main.npz > $here/fingerprint-final.txt
$py tools/studies/check_sim_times.py committed docs/results/grid-2026-12-06-s14-reference --tol 0 \
  > $here/check_sim_times-reference.txt 2>&1
$py tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-06-s14 --sample 40 --seed 30 --tol 0 \
  > $here/check_sim_times-scaling.txt 2>&1
tail -1 $here/fingerprint-final.txt; tail -1 $here/check_sim_times-reference.txt; tail -1 $here/check_sim_times-scaling.txt
