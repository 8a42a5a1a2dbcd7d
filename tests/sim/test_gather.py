"""The GATHER op (rows picked by an index list, for MoE dispatch): validation, data, bytes."""
from __future__ import annotations

import numpy as np
import pytest

from mkernel import BufferKind, Cluster, Op, Region, Role, ScheduleBuilder, ScheduleError, Signal, Wait
from mkernel.report import static_bytes
from mkernel.sim import SimBackend

INDEX = (5, 0, 5, 2)  # a row may be picked twice (a token routed to two experts on one GPU)


def staged_gather(wait: bool):
    """Rank 1 stages its X into S and signals rank 0, which gathers rows of it (one node, 2 GPUs)."""
    sb = ScheduleBuilder("gather", "fused", world=2, gpus_per_node=2, num_sms=4)
    sb.buffer("X", 6, 8, kind=BufferKind.INPUT)
    sb.buffer("S", 6, 8)
    sb.buffer("OUT", 4, 8, kind=BufferKind.OUTPUT, writes_per_element=1)
    sb.launch("k", {Role.COMPUTE: 1, Role.INTRA: 1})
    sb.add(1, Role.COMPUTE, Op.COPY, reads=(Region("X", 1, 0, 6, 0, 8),), writes=(Region("S", 1, 0, 6, 0, 8),),
           signals=(Signal(0, "staged"),), label="stage")
    for r in range(2):
        sb.add(r, Role.INTRA, Op.GATHER, reads=(Region("S" if r == 0 else "X", 1, 0, 6, 0, 8),),
               writes=(Region("OUT", r, 0, 4, 0, 8),), index=INDEX, label=f"gather {r}",
               waits=(Wait(Signal(0, "staged"), 1),) if wait and r == 0 else ())
    return sb.build(0.0)


def test_a_gather_must_wait_for_the_rows_it_reads():
    staged_gather(wait=True).validate()
    with pytest.raises(ScheduleError, match=r"race: task 0 \(copy 'stage'.*task 1 \(gather 'gather 0'"):
        staged_gather(wait=False).validate()


def test_gather_data_and_bytes():
    sb = ScheduleBuilder("gather", "fused", world=2, gpus_per_node=2, num_sms=4)
    sb.buffer("X", 6, 8, kind=BufferKind.INPUT)
    sb.buffer("OUT", 4, 8, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.INTRA: 1})
    for r in range(2):
        sb.add(r, Role.INTRA, Op.GATHER, reads=(Region("X", 1 - r, 0, 6, 0, 8),), writes=(Region("OUT", r, 0, 4, 0, 8),),
               index=INDEX, label=f"gather {r}")
    s = sb.build(0.0)
    s.validate()
    x = [np.arange(48, dtype=np.float32).reshape(6, 8) + 100 * r for r in range(2)]
    out = SimBackend().run(s, Cluster("t", 1, 2), inputs={"X": x}).outputs["OUT"]
    for r in range(2):
        assert (out[r] == x[1 - r][list(INDEX)]).all()
    assert static_bytes(s)["nvlink"] == [4 * 8 * 2.0, 4 * 8 * 2.0]  # only the 4 gathered rows cross


@pytest.mark.parametrize("index,cols,message", [
    ((5, 0, 5), 8, "index must name one row per written row"),
    ((5, 0, 6, 2), 8, "gather index names a row outside 0..5"),
    (INDEX, 4, "columns must match"),
])
def test_malformed_gathers_are_refused(index, cols, message):
    sb = ScheduleBuilder("gather", "fused", world=1, gpus_per_node=1, num_sms=2)
    sb.buffer("X", 6, 8, kind=BufferKind.INPUT)
    sb.buffer("OUT", 4, 4 if cols == 4 else 8, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.INTRA: 1})
    sb.add(0, Role.INTRA, Op.GATHER, reads=(Region("X", 0, 0, 6, 0, 8),), writes=(Region("OUT", 0, 0, 4, 0, cols),),
           index=index)
    with pytest.raises(ScheduleError, match=message):
        sb.build(0.0).validate()


def test_gather_across_nodes_is_refused():
    sb = ScheduleBuilder("gather", "fused", world=2, gpus_per_node=1, num_sms=2)
    sb.buffer("X", 6, 8, kind=BufferKind.INPUT)
    sb.buffer("OUT", 4, 8, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.INTRA: 1})
    for r in range(2):
        sb.add(r, Role.INTRA, Op.GATHER, reads=(Region("X", 1 - r, 0, 6, 0, 8),),
               writes=(Region("OUT", r, 0, 4, 0, 8),), index=INDEX)
    with pytest.raises(ScheduleError, match="peer loads and stores reach only ranks of the same node"):
        sb.build(0.0).validate()
