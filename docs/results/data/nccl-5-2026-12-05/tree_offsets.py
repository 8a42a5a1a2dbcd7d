"""nccl-5: every tree/LL128 point of the p5 all_reduce curves: measured time, the model's, the model's path latency
(NCCL's base + its path with the EFA hop terms), and the model's bytes term.  python .../tree_offsets.py"""
import math
from mkernel import nccl, nccl_tuner as tu
from mkernel.studies import nccl_check as nc

for c in nc.load():
    if c.id not in ("p5-ar-2n", "p5-ar-scale"):
        continue
    for nodes, nbytes, bus in c.points:
        f = c.fabric(nodes)
        e = nccl.estimate(c.coll, nbytes, f)
        if nbytes < nc.MIN_BYTES or (e.algo, e.proto) != ("tree", "LL128"):
            continue
        t = f.t()
        lat_net = tu.NET_HOP_US["tree"][1] + t.net_hop_us + t.net_message_us
        path = tu.BASE_US["tree"][1] + 2 * 7 * tu.NVLINK_HOP_US["tree"][1] + 2 * max(1, math.ceil(math.log2(nodes))) * lat_net
        meas = nbytes / (bus / nccl.bus_factor(c.coll, f.world) * 1e3)
        print(f"{c.id:12s} {nodes:2d} nodes {nbytes / 2**20:5g} MiB  measured {meas:6.0f} us  model {e.time_us:6.0f}"
              f" (path {path:4.0f} + bytes {e.time_us - path:5.0f}, chunk {nccl._tree_chunk(nbytes, f, 'LL128'):6.0f} B,"
              f" NCCL's correction {tu.tree_correction('LL128', nbytes):.1f})  measured - model {meas - e.time_us:+5.0f} us")
