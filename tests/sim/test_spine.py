"""The simulated spine against the share the MoE send rule and the NCCL model price it at.

``FabricSpec.crossing_share`` is a closed form (``cluster.spine_share``); the network the simulator
runs is links and max-min rates (sim/network.py, sim/flows.py). Here every GPU sends the same bytes
to every GPU of every other node, over every NIC, through the simulator's own paths, and the time the
spine-crossing messages take is measured: their rate, over the rate of a NIC shared fairly by all of
its messages, must be the closed form's share, below 1 where the spine is the bottleneck and 1 where
it is not. A formula that disagreed with the links would misprice the zero-copy rule.
"""
from __future__ import annotations

import dataclasses
import pytest

from mkernel.cluster import Cluster, FabricSpec, NicSpec
from mkernel.ir import Role
from mkernel import ScheduleBuilder
from mkernel.sim.engine import Model
from mkernel.sim.flows import FlowNet
from mkernel.sim.network import Network


def network(c: Cluster) -> Network:
    """The network of a run on ``c`` (of an empty schedule: the network reads the run's environment,
    cluster and faults)."""
    sb = ScheduleBuilder("t", "fused", world=c.world, gpus_per_node=c.gpus_per_node, num_sms=1)
    sb.launch("k", {Role.COMPUTE: 1})
    return Model(sb.build(0.0), c, None, track_hazards=False).net


@pytest.mark.parametrize("nodes,per_leaf,over,gpus,nics", [
    (4, 2, 2.0, 1, 1),  # share 3/4
    (8, 2, 2.0, 2, 2),  # 7/12, two rails of two NICs
    (8, 4, 3.0, 2, 1),  # 7/12
    (8, 4, 1.5, 1, 1),  # 7/6: the spine is not the bottleneck, share 1
    (6, 2, 1.0, 2, 1),  # non-blocking spine, share 1
])
def test_the_spine_gives_crossing_messages_the_closed_forms_share(nodes, per_leaf, over, gpus, nics):
    c = dataclasses.replace(Cluster("t", nodes, gpus), nic=NicSpec(count=nics),
                            fabric=FabricSpec(per_leaf, over))
    net = network(c)
    env = net.env
    flows, size, ends = FlowNet(env), 1e6, {}
    for src in range(c.world):
        for dst in range(c.world):
            if c.node_of(src) == c.node_of(dst):
                continue
            for i in range(nics):
                ev = flows.transfer(size, net._path(src, dst, dst, i))
                crosses = c.fabric.group_of(c.node_of(src)) != c.fabric.group_of(c.node_of(dst))
                ev.callbacks.append(lambda _e, k=crosses: ends.setdefault(k, []).append(env.now))
    env.run()
    nic_rate = c.nic.gbit_per_s / 8.0 * 1e3  # bytes per us of one NIC
    fair_us = size * (nodes - 1) * gpus / nic_rate  # a NIC shared by its (nodes - 1) x gpus messages
    measured_share = fair_us / max(ends[True])
    assert measured_share == pytest.approx(c.fabric.crossing_share(nodes), rel=1e-9)
    assert (measured_share < 1.0) == (over * (nodes - per_leaf) > nodes - 1)
