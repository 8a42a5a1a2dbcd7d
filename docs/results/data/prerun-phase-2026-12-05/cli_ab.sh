#!/bin/bash
# The every-node row through the CLI, main's checkout and this branch's alternating, ROUNDS times:
# user s, system s, wall s, peak RSS. usage: MAIN=/work/main BRANCH=/work/wt-auto31 ROUNDS=5 cli_ab.sh
ROW="run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse"
for i in $(seq ${ROUNDS:-5}); do
  for tree in "$MAIN" "$BRANCH"; do
    (cd "$tree" && /usr/bin/time -f "$(basename "$tree") %U user %S sys %e wall %M KB" .venv/bin/mkernel $ROW > /dev/null)
  done
done
