"""nccl-5 (docs/results/2026-12-05-nccl-5.md): candidate mechanisms as patches of mkernel.nccl, each judged with the
committed terms and refitted (`nccl_check.fit`, EFA only).  python docs/results/data/nccl-5-2026-12-05/variants.py [NAME...]"""
import math, sys
from mkernel import nccl, nccl_tuner as tuner
from mkernel.studies import nccl_check as nc

curves = nc.load()
ORIG_TREE = nccl._tree


def tree_variant(no_corr=False, ring_hop=False, msg_once=False, credit=False):
    """_tree with one of its latency / rate terms changed (the body is nccl._tree's)."""
    def _tree(nbytes, f, proto):
        g, nodes, t = f.gpus_per_node, f.nodes, f.t()
        p = nccl.PROTOCOLS.index(proto)
        more = 0 if nodes <= 2 else 1
        per_channel = tuner.TREE_LL128_PER_CHANNEL[more] if proto == "LL128" else tuner.TREE_PER_CHANNEL[more]
        cap = tuner.graph(f)[0] * per_channel / 2
        if proto == "LL":
            cap = min(cap, tuner.ll_max_bus(f) / 2)
        if proto != "Simple":
            cap = min(cap, nccl.TREE_BCAST_SHARE * nccl._cap(proto, f))
        net = nccl._node_net(f, t) / (1.0 if nodes == 2 else 2.0) * nccl.PAYLOAD[proto]
        chunk = nccl._tree_chunk(nbytes, f, proto)
        net *= chunk / (chunk + t.net_message_us * net * 1e3 / nccl.channels(f))
        nvl = f.nvlink_gb_per_s / 2 * nccl.PAYLOAD[proto] if g > 1 else math.inf
        rate = min(nvl, net, cap) * (1.0 if no_corr and proto != "Simple" else tuner.tree_correction(proto, nbytes))
        hop = tuner.NET_HOP_US["ring" if ring_hop else "tree"][p]
        lat_net = hop + t.net_hop_us * (2 if proto == "Simple" else 1) + (0.0 if msg_once else t.net_message_us)
        path = 2 * (g - 1) * tuner.NVLINK_HOP_US["tree"][p] + 2 * max(1, math.ceil(math.log2(nodes))) * lat_net
        move = nbytes / (rate * 1e3)
        if credit and nodes > 1:  # a network connection's 8 slots: chunk k waits for chunk k-8's credit to cross back
            nch = nccl.channels(f)
            n_chunks = math.ceil(nbytes / nch / chunk)
            rtt = 2 * lat_net + chunk / (net * 1e3 / nch) + chunk / (min(nvl, net, cap) * 1e3 / nch)
            move = max(move, max(0, n_chunks - nccl.NCCL_STEPS) * rtt / nccl.NCCL_STEPS)
        return tuner.BASE_US["tree"][p] + path + move
    return _tree


VARIANTS = {
    "A committed": {},
    "B tree LL/LL128 without NCCL's correction in the time": dict(tree=tree_variant(no_corr=True)),
    "C tree hop at NCCL's ring hop constant": dict(tree=tree_variant(ring_hop=True)),
    "D tree hop without the per-message cost in its latency": dict(tree=tree_variant(msg_once=True)),
    "E tree network slots: a chunk waits for the credit of the chunk 8 before it": dict(tree=tree_variant(credit=True)),
}
CURVES = ("p5-ar-2n", "p5-ag-scale", "p5-ar-scale", "p5-a2a-scale")
for name, v in VARIANTS.items():
    if sys.argv[1:] and not any(name.startswith(a) for a in sys.argv[1:]):
        continue
    nccl._tree = v.get("tree", ORIG_TREE)
    for label, terms in (("committed terms", None), ("refit", "fit")):
        if terms:
            terms = {"efa": nc.fit("efa", curves)}
        s = nc.split(curves, terms)
        rows = {r["curve"]: r for r in nc.summary(curves, terms)}
        met = sum(r["goal_met"] for r in rows.values())
        t = (terms or {}).get("efa")
        tt = (f" [eff {t.net_efficiency:.3f} msg {t.net_message_us:g} hop {t.net_hop_us:g} nvls {t.nvls_efficiency:.3f}]"
              if t else "")
        print(f"| {name} | {label}{tt} | {s['fitted'][1]:.1%} | {s['held out'][1]:.1%} | {met} | " + " | ".join(
            f"{rows[c]['mean_abs_error']:.1%} / {rows[c]['worst'].error:+.1%}" for c in CURVES) + " |", flush=True)
nccl._tree = ORIG_TREE
