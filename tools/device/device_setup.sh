# Sourced by the device-call scripts in tools/: the no-multicast environment, $OUT, and an offline
# install (carried wheels from .whl/ into /tmp/site, then this checkout in editable mode), libfabric's
# headers from a carried .deb, gpu_step (a bounded pytest step with one summary line) and node_reduce_runs.
# The wheels to carry (fetch them here with `pip download --no-deps -d .whl NAME==VERSION`): simpy 4.1.2 (the simulator,
# for tests that compare against it) and pytest-xdist 3.8.0 + execnet 2.1.1 (world-1 GPU tests run `-n 8`: compiling
# each case's kernel, not the GPU, bounds a serial run).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
OUT=${OUT:-/tmp/mkernel-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
# libfabric's headers from a carried .deb where the image lacks them (the ofi transport compiles against them)
if ls .deb/libfabric-dev_*.deb >/dev/null 2>&1 && [ ! -f /usr/include/rdma/fabric.h ]; then
  dpkg -x .deb/libfabric-dev_*.deb /tmp/libfabric-dev && mkdir -p /usr/local/include \
    && cp -r /tmp/libfabric-dev/usr/include/rdma /usr/local/include/ && echo "libfabric headers from .deb/"
fi
gpu_step() {  # gpu_step NAME SECONDS PYTEST-ARGS...: the GPU tests named, bounded, one summary line each
  local name=$1 secs=$2; shift 2; local t0=$SECONDS
  timeout "$secs" python3 -m pytest -v -p no:cacheprovider -m gpu --durations=0 "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  printf '%-10s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) \
    "$(grep -Eo '[0-9]+ (passed|failed|skipped|error)' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
node_reduce_runs() {  # node_reduce_runs KERNEL SECONDS: `mkernel run --backend hw` of pull then push on the emulated 2x2
  local kernel=$1 secs=$2 v
  for v in pull push; do
    timeout "$secs" mkernel run --backend hw --kernel "$kernel" --m 4096 --n 4096 --k 1024 --nodes 2 --gpus-per-node 2 \
      --node-reduce $v --json "$OUT/run_$v.json" > "$OUT/run_$v.log" 2>&1
    echo "run-$v rc=$?" >> "$OUT/summary.txt"
  done
}
