#!/bin/bash
# the reference grid, both profiles, on main (new proxy terms) and on base c09f340 (before), after reruns.sh
while pgrep -f reruns.sh > /dev/null; do sleep 10; done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for tree in main base; do
  if [ $tree = main ]; then P=/root/.pyenv/versions/3.11.7/bin/python; D=/work/main/docs/results/grid-2026-12-06-s13; else P=/work/base/.venv/bin/python; D=/work/main/docs/results/data/gpu-checks-2026-12-06-s13/grid-before-c09f340; fi
  for prof in measured reference; do
    cd /work/$tree; s=$(date +%s)
    $P -c "from pathlib import Path; from mkernel.studies import paper_check, sweep; sweep.run_grid(paper_check.points([], kernels='$prof', pairs={(k, t) for k in ('ag_gemm','gemm_rs','gemm_ar','ring_attention','moe_dispatch_gemm') for t in ('paper-ib-2x8','paper-efa-2x8')}), Path('$D-$prof'), workers=2)" > /work/notes/s13/grid-$tree-$prof.log 2>&1
    echo "grid $tree $prof rc=$? $(( $(date +%s) - s )) s" >> /work/notes/s13/reruns.txt
  done
done
