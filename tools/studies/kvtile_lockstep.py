"""Why ring attention's fused time depends on kv_tile the way it does (docs/results/2026-12-03-kvtile.md).

Three measurements on paper-efa-2x8 with the reference kernel profile (n = 64 heads, k = 128,
tile_m = max(128, S // 4)):

- ``sweep``: fused and baseline times per kv_tile, on one node (``--nodes 1``) or collapsed.
- ``port``: how much of the run rank 0's NVLink egress carries a flow (one node, a trace run):
  identical copies run in lockstep and leave the port idle during their fixed tails.
- ``jitter``: the same one-node run with every NVLink round trip and compute tile scaled by a
  seeded factor in [1 - a, 1 + a]: does breaking the lockstep recover the port-bound time?
- ``overlap``: ``sweep`` under a what-if copy model (not the simulator's): a copy's round trips
  overlap its own transfer (its flow capped at bytes / (bytes / sm_copy + round trips), so an
  uncontended copy takes as long as today, a contended one only its share of the port), then the
  per-task cost.

    python tools/studies/kvtile_lockstep.py sweep --nodes 2 --seq 768,1536,3072
    python tools/studies/kvtile_lockstep.py port --seq 768 --kv 384,512
    python tools/studies/kvtile_lockstep.py jitter --seq 768 --kv 384,512 --amp 0.2
    python tools/studies/kvtile_lockstep.py overlap --nodes 2 --seq 1536
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys

from mkernel import cost, load_scenario
from mkernel.backend import get_backend
from mkernel.runner import build
from mkernel.sim import engine, flows, native

KV_TILES = (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072)


def scenario(seq: int, kv: int, nodes: int):
    sc = load_scenario("paper-efa-2x8")
    w = dataclasses.replace(sc.workload, kernel="ring_attention", m=seq, n=64, k=128, tile_m=max(128, seq // 4),
                            kv_tile=kv)
    return dataclasses.replace(sc, workload=w, cluster=dataclasses.replace(sc.cluster, kernels="reference",
                                                                           nodes=nodes))


def sweep(seqs: list[int], nodes: int) -> None:
    eng = get_backend("sim")
    for seq in seqs:
        for kv in (k for k in KV_TILES if k <= seq):
            s = scenario(seq, kv, nodes)
            f, b = build(s, folded=nodes > 1, grouped=True, timing=True)
            tf = eng.run(f, s.cluster, collapse=nodes > 1).time_s * 1e6
            tb = eng.run(b, s.cluster, collapse=nodes > 1).time_s * 1e6
            tiles = [min(seq, k0 + kv) - k0 for k0 in range(0, seq, kv)]
            print(f"{nodes}x8 S={seq} kv={kv} tiles={tiles}: fused {tf:.1f} us, baseline {tb:.1f} us, "
                  f"speedup {tb / tf:.3f}x", flush=True)


def port(seq: int, kvs: list[int]) -> None:
    eng, orig = get_backend("sim"), flows.FlowNet.transfer_legs
    for kv in kvs:
        log: list[tuple] = []

        def logged(self, size, legs, cap=float("inf"), count=1):
            done, t0, first = orig(self, size, legs, cap, count), self.env.now, legs[0][0]
            done.callbacks.append(lambda _ev: log.append((t0, self.env.now, first)))
            return done
        flows.FlowNet.transfer_legs = logged
        try:
            s = scenario(seq, kv, 1)
            st = eng.run(build(s, timing=True)[0], s.cluster, trace=True)
        finally:
            flows.FlowNet.transfer_legs = orig
        egress = log[0][2]  # rank 0's first copy starts first: its first leg is rank 0's egress
        busy, end = 0.0, 0.0
        for a, b in sorted((a, b) for a, b, link in log if link is egress):
            busy += max(0.0, b - max(a, end))
            end = max(end, b)
        copies = [sp[5] - sp[4] for sp in st.spans if sp[0] == 0 and sp[1] == "intra"]
        print(f"1x8 S={seq} kv={kv}: fused {st.time_s * 1e6:.1f} us; rank 0 egress carries a flow {busy:.0f} of "
              f"{end:.0f} us ({busy / end:.0%}); {len(copies)} copies, {sum(copies):.0f} SM-us, "
              f"{min(copies):.2f}-{max(copies):.2f} us each", flush=True)


def jitter(seq: int, kvs: list[int], amp: float) -> None:
    eng, orig = get_backend("sim"), engine.Model._stretch
    for kv in kvs:
        rng = random.Random(1)
        s = scenario(seq, kv, 1)
        f = build(s, timing=True)[0]
        t0 = eng.run(f, s.cluster, trace=True).time_s * 1e6
        engine.Model._stretch = lambda self, us: us * (1.0 + amp * rng.uniform(-1.0, 1.0))
        try:
            t1 = eng.run(f, s.cluster, trace=True).time_s * 1e6
        finally:
            engine.Model._stretch = orig
        print(f"1x8 S={seq} kv={kv}: deterministic {t0:.1f} us, jitter {amp:g}: {t1:.1f} us", flush=True)


def _overlapped_nvlink(self, run, slow: float) -> None:
    """What-if ``Model._nvlink`` for a timing run: round trips overlapped with the copy's transfer
    (``slow``, an injected slowdown, is 1 here: the study injects none)."""
    task = run.task if run.task.count == 1 or run.item.joins else run.member()
    run.paid = cost.touches_peer(task)
    transfers = cost.remote_transfers(task, self.itemsize)
    local_us = cost.local_bytes(task, self.itemsize) / self.sm_stream
    rtt = self.c.nvlink.latency_us + cost.step_us(task, self.c)
    merged = self.c.gpu.fused_peer_task_us if run.paid and self.quiet else 0.0  # as Model._nvlink
    if not transfers:
        self._until(self.env.now + local_us + cost.step_us(task, self.c), engine.Model._copied, run)
        return
    half, start, home = self.c.nvlink.half_efficiency_bytes, self.env.now, self.home
    legs = [leg for src, dst, b in transfers
            for leg in ((self.nv_out[home[src]], b, b + half), (self.nv_in[home[dst]], b, b + half))]
    size = sum(b + half for _, _, b in transfers)
    cap = size / (size / self.sm_copy + rtt)
    done = self.flows.transfer_legs(size, legs, cap, run.n)
    done.callbacks.append(lambda _ev: self._until(max(self.env.now, start + local_us) + merged, engine.Model._copied, run))


def overlap(seqs: list[int], nodes: int) -> None:
    orig = engine.Model._nvlink
    engine.Model._nvlink = _overlapped_nvlink
    try:
        sweep(seqs, nodes)
    finally:
        engine.Model._nvlink = orig


def main() -> None:
    if not native.state.startswith("python"):  # (it patches the core's classes: their Python source must run)
        os.execv(sys.executable, [sys.executable, "-X", native.PURE_OPTION, *sys.orig_argv[1:]])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("sweep", "port", "jitter", "overlap"))
    p.add_argument("--seq", default="768", help="sequence per GPU (comma list for sweep)")
    p.add_argument("--kv", default="384,512", help="kv_tile values (port, jitter)")
    p.add_argument("--nodes", type=int, default=1, help="sweep: 1 (one node) or 2 (collapsed)")
    p.add_argument("--amp", type=float, default=0.2, help="jitter: relative amplitude")
    a = p.parse_args()
    seqs, kvs = [int(x) for x in a.seq.split(",")], [int(x) for x in a.kv.split(",")]
    if a.what in ("sweep", "overlap"):
        (sweep if a.what == "sweep" else overlap)(seqs, a.nodes)
    elif a.what == "port":
        port(seqs[0], kvs)
    else:
        jitter(seqs[0], kvs, a.amp)


if __name__ == "__main__":
    main()
