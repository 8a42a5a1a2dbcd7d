#!/bin/bash
# full_ab.sh BASE FINAL [N]: the every-node row, N times on each tree, alternating; CPU (user+sys) and wall per run
for i in $(seq 1 ${3:-5}); do
  for t in $1 $2; do
    (cd $t && /usr/bin/time -f "$(basename $t) %U %S %e" env PYTHONPATH=$t python -m mkernel run scenarios/paper-ib-2x8.toml \
      --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /dev/null) 2>&1 | tail -1
  done
done
