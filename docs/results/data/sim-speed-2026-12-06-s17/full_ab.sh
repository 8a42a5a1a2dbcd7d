#!/usr/bin/env bash
# The every-node row, base (a worktree of 23d138e, $1) and this checkout ($2) alternately, five times each:
# CPU (user + sys) and wall of the whole command, as the bench's `full` row runs it (python -m mkernel).
set -u
base=${1:-/work/base16}; new=${2:-/work/main}
row="run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse"
for i in 1 2 3 4 5; do
  for tree in "$base" "$new"; do
    printf '%-14s ' "$(basename "$tree")"
    (cd "$tree" && env -u OPENBLAS_THREAD_TIMEOUT PYTHONPATH="$tree" /usr/bin/time -f "%U user %S sys %e wall" \
      python -m mkernel $row 2>&1 | tail -1)
  done
done
