#!/usr/bin/env bash
# Issue 11 in one device call on a host with 2, 4 or 8 GPUs (it adapts to the count): install offline, then
#   topo:      nvidia-smi topology (how the GPUs are linked), kept with the results;
#   emulated:  (not in the default STEPS) the emulated 2x2 GPU tests (MPS, two ranks per GPU);
#   correct:   the five fused ops on real NVLink at world 2/4/8 (as many as the host has), on an emulated
#              2-node cluster (the GPUs in two halves, loopback shaped to 50 GB/s per GPU), and the
#              torch ops against their NCCL fallbacks: fresh inputs, poisoned outputs, ||out-ref||/||ref|| <= 1e-2;
#   calibrate: NVLink copy rate per SM, port bandwidth, per-message cost and latency (mkernel calibrate --only peer);
#   bench:     torchrun: mkernel bench on the reference grid's first BENCH_SIZES sizes (default 3) against
#              NCCL + matmul, torch async-TP, the ring and MoE baselines, the matmul ceiling;
#   splits:    tools/studies/hw_splits.py: static intra-SM budgets of the fused ops on real NVLink;
#   splits16:  (not in the default STEPS) the same for gemm_ar and gemm_rs with 16-row copy steps, as A/B;
#   ncclpair:  NCCL's all_gather / reduce_scatter / all_reduce alone, 8 MiB-2 GiB (tools/probes/nccl_pair.py):
#              issue 29's own-h200x2 curves, measured directly instead of as a difference of two medians.
# STEPS picks steps (default: all, in this order). Usage: here `git rev-parse --short HEAD > .commit`
# (carry it); there OUT=/dir tools/device/multi_gpu.sh. Everything lands in OUT/results.tgz (logs, bench/, splits.json,
# calibration.json, h200.toml): the device tool returns few files. Keep the step limits inside the call's.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
FINAL=${OUT:-/tmp/mkernel-out}; OUT=$(mktemp -d); mkdir -p "$FINAL"
trap 'tar czf "$FINAL/results.tgz" -C "$OUT" .' EXIT
STEPS=${STEPS:-topo ncclpair correct calibrate bench splits}
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
GPUS=$(python3 -c 'import torch; print(min(8, torch.cuda.device_count()))')
echo "GPUs: $GPUS  commit: $(cat .commit 2>/dev/null || git rev-parse --short HEAD)  steps: $STEPS"
status=0
DEADLINE=$((SECONDS + ${TOTAL_S:-560}))  # every step ends inside the device call, so the tarball is always written
step() { local name=$1 limit=$2; shift 2; local left=$((DEADLINE - SECONDS)); [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -lt 10 ] && { echo "== $name: skipped, no time left"; status=1; return; }
  echo "== $name ($(date +%T), ${limit}s)"; timeout -s ABRT "$limit" "$@" >"$OUT/$name.log" 2>&1 \
  || { local rc=$?; status=1; echo "   FAILED (rc $rc)"; }; tail -${TAIL:-12} "$OUT/$name.log"; }
for s in $STEPS; do case $s in
  topo) nvidia-smi topo -m >"$OUT/topo.log" 2>&1; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >>"$OUT/topo.log"
        head -6 "$OUT/topo.log" ;;
  emulated) step emulated "${EMULATED_S:-200}" python3 -m pytest -q -rs tests/hw/test_hw_fused.py \
             -k "test_emulated_2x2 and not hundred" ;;  # first: MPS wants a process tree that has not used CUDA
  correct) step correct "${CORRECT_S:-300}" python3 -m pytest -q -rs tests/hw/test_hw_fused.py tests/hw/test_hw_api.py \
             -k "real_nvlink or two_nodes ${CORRECT_MORE:-}" ;;
  calibrate) step calibrate 120 mkernel calibrate --only peer --out "$OUT/h200.toml" --raw "$OUT/calibration.json" ;;
  bench) step bench "${BENCH_S:-360}" torchrun --nproc-per-node "$GPUS" -m mkernel bench \
           --sizes "${BENCH_SIZES:-3}" --iters "${ITERS:-20}" --out "$OUT/bench" ${BENCH_KERNELS:+--kernels $BENCH_KERNELS} ;;
  splits) step splits "${SPLITS_S:-200}" torchrun --nproc-per-node "$GPUS" tools/studies/hw_splits.py --out "$OUT/splits.json" \
            --comm-sms "${COMM_SMS:-2,4,8,16,32,64}" ;;
  splits16) step splits16 "${SPLITS_S:-200}" torchrun --nproc-per-node "$GPUS" tools/studies/hw_splits.py --copy-rows 16 \
              --kernels gemm_ar gemm_rs --out "$OUT/splits16.json" ;;  # A/B: the fused kernel's copy step before 2026-11-30
  ncclpair) step ncclpair 90 torchrun --nproc-per-node 2 tools/probes/nccl_pair.py --out "$OUT/nccl_pair.json" ;;
esac; done
exit $status
