#!/bin/bash
# item-5 reruns on the H200 proxy terms (2026-12-06, session 13)
cd /work/main
P=/root/.pyenv/versions/3.11.7/bin/python
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
s=$(date +%s); /usr/bin/time -v $P tools/studies/paper_check.py --out docs/results/grid-2026-12-06-s13-paper --workers 2 > /work/notes/s13/paper.log 2>&1; echo "paper $(( $(date +%s) - s )) s" >> /work/notes/s13/reruns.txt
s=$(date +%s); /usr/bin/time -v $P -m mkernel sweep --grid scaling --workers 2 --out docs/results/scaling-2026-12-06-s13 > /work/notes/s13/scaling.log 2>&1; echo "scaling rc=$? $(( $(date +%s) - s )) s" >> /work/notes/s13/reruns.txt
s=$(date +%s); $P -c "from pathlib import Path; from mkernel.studies import study, sweep; from mkernel.problems import KERNELS; from mkernel.studies.scaleout import NODES; sweep.run_grid([p for cl in study.CLUSTERS for n in NODES for p in study._points(cl, n, 8, KERNELS, [('kernels', 'reference')])], Path('docs/results/scaling-2026-12-06-s13-reference'), workers=2)" > /work/notes/s13/scaling-ref.log 2>&1; echo "scaling-ref rc=$? $(( $(date +%s) - s )) s" >> /work/notes/s13/reruns.txt
