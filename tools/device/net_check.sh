#!/usr/bin/env bash
# Issue 28 on the H200 (one device call; no NIC there): the transports compiled against that image's
# rdma-core 50, mkernel doctor, the harness and libfabric tests, and netcheck between four processes
# as 2 nodes x 2 over libfabric (host memory; then GPU memory, which that libfabric cannot register:
# it has no CUDA HMEM, so that run must FAIL with the provider's reason, not hang).
# Usage: carry .whl/ as tools/device/device_setup.sh says, and Debian 12's libfabric-dev .deb in .deb/
# (`apt-get download libfabric-dev`, 0.9 MB: the image has libfabric 1.17's library but not its
# headers); then on the GPU machine, from the repo root: OUT=/some/dir tools/device/net_check.sh
set -uo pipefail
. "$(dirname "$0")/device_setup.sh"
status=0
python3 -c "from mkernel.hw.runtime import native; print('native library built with', sorted(native.features()))" \
  2>&1 | tee "$OUT/features.txt"
python3 -m mkernel doctor 2>&1 | tee "$OUT/doctor.txt"
timeout 600 python3 -m pytest -q tests/hw/test_transport_build.py tests/hw/test_transport_verbs.py tests/hw/test_transport_ofi.py \
  tests/hw/test_hw_transports.py 2>&1 | tee "$OUT/tests.log" | tail -5 || status=1
for provider in "tcp;ofi_rxm" shm; do
  timeout 300 torchrun --nproc-per-node 4 -m mkernel.hw.measure.netcheck --transport ofi --provider "$provider" \
    --gpus-per-node 2 --memory host 2>&1 | grep -v "^W" | tee "$OUT/netcheck-host-${provider%%;*}.log" | tail -5 \
    || status=1
done
# expected FAIL (exit 1 or 2) with "FI_HMEM" or a registration error named: the image's libfabric has no CUDA HMEM
timeout 300 torchrun --nproc-per-node 4 -m mkernel.hw.measure.netcheck --transport ofi --provider shm --gpus-per-node 2 \
  --memory cuda 2>&1 | grep -v "^W" | tee "$OUT/netcheck-cuda-shm.log" | tail -5
exit $status
