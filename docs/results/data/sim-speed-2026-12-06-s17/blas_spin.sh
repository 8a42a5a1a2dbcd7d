#!/usr/bin/env bash
# numpy's idle OpenBLAS worker spins after numpy loads: CPU of `import numpy` then 0.3 s of busy Python on the
# main thread, with OpenBLAS's default idle timeout and with the command's (OPENBLAS_THREAD_TIMEOUT=4), three
# times each, alternating. User CPU above the 0.3 s (+ ~0.06 s of the import itself) is the idle worker's.
# Then `mkernel run` (the default scenario), with the variable unset and set by hand, on a checkout that does
# not set it itself (pass its root as $1; default: the base worktree of this session). The every-node row: full_ab.sh.
set -u
base=${1:-/work/base16}
loop='import numpy, time
t = time.time()
while time.time() - t < 0.3: pass'
for i in 1 2 3; do
  for e in "" "OPENBLAS_THREAD_TIMEOUT=4"; do
    printf '%-28s import+0.3s  ' "[${e:-default}]"; env -u OPENBLAS_THREAD_TIMEOUT $e /usr/bin/time -f "%U user %S sys %e wall" python -c "$loop"
  done
done
for i in 1 2 3; do
  for e in "" "OPENBLAS_THREAD_TIMEOUT=4"; do
    printf '%-28s default     ' "[${e:-default}]"
    (cd "$base" && env -u OPENBLAS_THREAD_TIMEOUT $e PYTHONPATH="$base" /usr/bin/time -f "%U user %S sys %e wall" \
      python -m mkernel run 2>&1 | tail -1)
  done
done
