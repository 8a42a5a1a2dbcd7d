#!/bin/bash
# alternate the every-node row: main (merged) vs the base worktree (562f442 here; 80ff7c8 in the ninth session's run),
# ROUNDS rounds (3 here); CPU time (user+sys) via /usr/bin/time
for i in $(seq ${ROUNDS:-3}); do
  for side in main base; do
    if [ $side = main ]; then d=/work/main; else d=/work/wt-rspush; fi
    cd $d && . .venv/bin/activate
    /usr/bin/time -f "$side round$i cpu %U+%S wall %e" mkernel run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /tmp/row-$side-$i.txt 2>/tmp/row-$side-$i.err
    tail -1 /tmp/row-$side-$i.err
    deactivate
  done
done
