"""Every published point against the model (mkernel.studies.nccl_check.point_errors), one line each:
curve, nodes, MiB, measured busbw, predicted busbw, error, algorithm/protocol. Run on two commits and diff."""
from mkernel.studies import nccl_check

for curve in nccl_check.load():
    for p in nccl_check.point_errors(curve):
        print(f"{p.curve:18s} {p.nodes:3d} {p.nbytes / (1 << 20):8g} {p.measured:8.2f} {p.predicted:8.2f} "
              f"{p.error:+7.1%} {p.algo}/{p.proto}")
