#!/bin/bash
# Reruns on the median proxy terms (2026-12-06, session 14), one after another on one worker (the 2-core VM is
# shared): the paper check, the reference grid with both kernel profiles, the scale-out study with both, the auto
# study (in place: its results.jsonl emptied first, every one of its 504 rows rerun) and its estimates.
# Run from the repository root: bash docs/results/data/proxy-median-2026-12-06-s14/reruns.sh LOGDIR
set -u
P=$PWD/.venv/bin/python
L=${1:?log folder}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { local name=$1; shift; local s=$(date +%s); nice -n 10 "$@" > "$L/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - s )) s" >> "$L/reruns.txt"; }
step paper $P tools/studies/paper_check.py --out docs/results/grid-2026-12-06-s14-paper --workers 1
for prof in measured reference; do
  step grid-$prof $P -c "from pathlib import Path; from mkernel.studies import paper_check, sweep; sweep.run_grid(paper_check.points([], kernels='$prof', pairs={(k, t) for k in ('ag_gemm','gemm_rs','gemm_ar','ring_attention','moe_dispatch_gemm') for t in ('paper-ib-2x8','paper-efa-2x8')}), Path('docs/results/grid-2026-12-06-s14-$prof'), workers=1)"
done
step scaling $P -m mkernel sweep --grid scaling --workers 1 --out docs/results/scaling-2026-12-06-s14
step scaling-ref $P -c "from pathlib import Path; from mkernel.studies import study, sweep; from mkernel.problems import KERNELS; from mkernel.studies.scaleout import NODES; sweep.run_grid([p for cl in study.CLUSTERS for n in NODES for p in study._points(cl, n, 8, KERNELS, [('kernels', 'reference')])], Path('docs/results/scaling-2026-12-06-s14-reference'), workers=1)"
: > docs/results/auto-2026-12-04/results.jsonl
step auto $P -c "from pathlib import Path; from mkernel.studies import study, sweep; sweep.run_grid(study.auto_points(), Path('docs/results/auto-2026-12-04'), workers=1)"
step auto-estimate $P tools/studies/auto_holdout.py --estimate
