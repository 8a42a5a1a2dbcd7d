"""`mkernel accuracy`: the simulator's error against what the GPU measured, config by config.

Inputs are the raw measurements of `mkernel calibrate` and the JSON of one or more `mkernel bench`
runs. For each measured configuration this builds the same schedule, runs it on the sim backend
with the hardware profile, and compares times. Groups:

- ``compute-role``: our GEMM on 8..132 SMs, 128x128 and 128x256 tiles (calibrate's ``gemm_sms``):
  a GEMM-only schedule with that tile and compute budget on one GPU;
- ``proxy``: loopback SIGNAL commands from 64 send blocks at each proxy batch limit: a PUT-only
  schedule between two one-GPU nodes. In-sample: the proxy terms were fitted on these points, so
  this group checks that the sim's ring/proxy model reproduces the fitted law, not a prediction;
- ``world-1``: the fused ops of a world-1 bench run (CUDA-graph times: the GPU's, without the host's
  per-call cost) on one H200;
- ``emulated``: fused runs of ``mkernel run --backend hw --json`` on ranks sharing the GPU under MPS,
  each with its SM budget and a share of HBM, the loopback transport between "nodes".

Reported: per-config error (predicted / measured - 1), MAPE, p90 of |error|, Spearman rank
correlation of predicted against measured times, and the same per group, so the dominant error
term is visible.
"""
from __future__ import annotations

import dataclasses
import math
import statistics

from ..cluster import Cluster
from ..ir import BufferKind, Op, Region, Role, Signal
from ..problems import Workload
from ..errors import InputError
from ..scenario import SPECS, load_profile
from ..schedule_builder import ScheduleBuilder


def gemm_schedule(m: int, n: int, k: int, bm: int, bn: int, sms: int, variant: str = "kernel"):
    """C = A @ B as bm x bn tiles on ``sms`` compute SMs of one GPU (tile order: row-major), as the
    fused kernel runs it (``variant`` "fused": its per-call and per-tile costs) or as a standalone
    kernel ("kernel": none)."""
    sb = ScheduleBuilder("gemm", variant, 1, 1, sms)
    sb.buffer("A", m, k, kind=BufferKind.INPUT)
    sb.buffer("B", k, n, kind=BufferKind.INPUT)
    sb.buffer("C", m, n, kind=BufferKind.OUTPUT)
    sb.launch("gemm", {Role.COMPUTE: sms})
    for r0 in range(0, m, bm):
        for c0 in range(0, n, bn):
            r1, c1 = min(m, r0 + bm), min(n, c0 + bn)
            sb.add(0, Role.COMPUTE, Op.GEMM, reads=(Region("A", 0, r0, r1, 0, k), Region("B", 0, 0, k, c0, c1)),
                   writes=(Region("C", 0, r0, r1, c0, c1),))
    return sb.build(2.0 * m * n * k)


def put_schedule(blocks: int, per_block: int, nbytes: int):
    """``blocks`` send SMs on rank 0 each putting ``per_block`` messages of ``nbytes`` to rank 1."""
    cols = max(1, nbytes // 2)
    n = blocks * per_block
    sb = ScheduleBuilder("puts", "kernel", 2, 1, blocks)
    sb.buffer("S", n, cols, kind=BufferKind.INPUT)
    sb.buffer("R", n, cols, kind=BufferKind.SCRATCH)
    sb.launch("puts", {Role.SEND: blocks})
    for i in range(n):
        sb.add(0, Role.SEND, Op.PUT, reads=(Region("S", 0, i, i + 1, 0, cols),),
               writes=(Region("R", 1, i, i + 1, 0, cols),), signals=(Signal(1, "arrived", i),), chunk=i)
    return sb.build(0.0)


def profile_cluster(profile: str, nodes: int, gpus_per_node: int, emulated: bool = False, gpus: int = 1) -> Cluster:
    """The cluster a measurement ran on, from a hardware profile. ``emulated``: the ranks share
    ``gpus`` GPUs under MPS, so each has its share of SMs and HBM, and a "peer" copy within a node is
    an HBM-to-HBM copy on the same GPU (the NVLink port becomes that HBM share, one SM copies at the
    stream rate); the network is the profile's loopback transport."""
    tables = load_profile(profile, "mkernel accuracy --profile")
    c = Cluster(f"{profile}-{nodes}x{gpus_per_node}", nodes, gpus_per_node,
                **{key: cls(**tables[key]) for key, cls in SPECS.items()})
    if not emulated:
        return c
    share = -(-nodes * gpus_per_node // gpus)
    # a "peer" step is a load from this GPU's own HBM: the local round trip, at the stream rate
    gpu = dataclasses.replace(c.gpu, sms=c.gpu.sms // share, hbm_gb_per_s=c.gpu.hbm_gb_per_s / share,
                              fused_sm_copy_gb_per_s=0.0, fused_peer_step_us=c.gpu.fused_local_step_us)
    nvlink = dataclasses.replace(c.nvlink, bw_gb_per_s=gpu.hbm_gb_per_s / 2, sm_copy_gb_per_s=gpu.sm_stream_gb_per_s)
    return dataclasses.replace(c, gpu=gpu, nvlink=nvlink)


def _sim_us(schedule, cluster: Cluster) -> float:
    from ..sim.backend import SimBackend

    return SimBackend().run(schedule, cluster, collapse=True).time_s * 1e6


def compute_cases(raw: dict, cluster: Cluster) -> list[dict]:
    rows = []
    for r in raw["gemm_sms"]:
        # calibrate times the fused kernel's GEMM (kernel = "fused"); raw files before 2026-12-04 the standalone one
        s = gemm_schedule(r["m"], r["n"], r["k"], r["bm"], r["bn"], r["sms"],
                          "fused" if r.get("kernel") == "fused" else "kernel")
        rows.append({"group": "compute-role", "config": f"gemm {r['m']}x{r['n']}x{r['k']} tile {r['bm']}x{r['bn']} "
                                                        f"on {r['sms']} SMs ({r['waves']} waves)",
                     "measured_us": r["us"], "predicted_us": _sim_us(s, cluster)})
    return rows


def proxy_cases(raw: dict, cluster: Cluster) -> list[dict]:
    rows, blocks, per_block = [], 64, 256
    two = dataclasses.replace(cluster, name="loopback", nodes=2, gpus_per_node=1)
    for r in raw["proxy"]["batches"]:
        c = dataclasses.replace(two, proxy=dataclasses.replace(two.proxy, batch=r["batch"]))
        predicted = _sim_us(put_schedule(blocks, per_block, 64), c)
        rows.append({"group": "proxy", "config": f"{blocks * per_block} SIGNALs, batch {r['batch']}",
                     "measured_us": blocks * per_block / r["cmds_per_s"] * 1e6, "predicted_us": predicted})
    return rows


def bench_cases(bench: dict, cluster: Cluster) -> list[dict]:
    """The fused op of every bench row, simulated on ``cluster`` (nodes and GPUs as the bench ran)."""
    from .. import builders

    group = "emulated" if bench.get("emulated") else f"world-{bench['world']}"
    rows = []
    for r in bench["rows"]:
        shape = dict(r["shape"])
        if r["kernel"] == "ring_attention":
            shape["tile_m"] = 128  # the torch op's tile
        w = Workload(kernel=r["kernel"], **shape)
        rows.append({"group": group, "config": f"{r['kernel']} size {r['size']} on {bench['mode']}",
                     "measured_us": (r["impls"]["fused"].get("graph_s") or r["impls"]["fused"]["s"]) * 1e6,
                     "predicted_us": _sim_us(builders.get(w.kernel).build(w, cluster), cluster)})
    return rows


def splits_cases(splits: dict, cluster: Cluster) -> list[dict]:
    """Every static split of ``tools/studies/hw_splits.py`` (real NVLink, one node), simulated with the same
    intra-SM budget; ``curve`` groups the points of one op so the report can say whether the
    simulator orders the splits as the GPU does."""
    from .. import builders

    rows = []
    for r in splits["rows"]:
        for n, x in r["splits"].items():
            w = Workload(kernel=r["kernel"], **dict(r["shape"]), sms=((Role.INTRA, int(n)),))
            rows.append({"group": f"splits world-{splits['world']}", "curve": f"{r['kernel']} size {r['size']}",
                         "config": f"{r['kernel']} size {r['size']}, {n} intra SMs, world {splits['world']} NVLink",
                         "measured_us": x["s"] * 1e6,
                         "predicted_us": _sim_us(builders.get(w.kernel).build(w, cluster), cluster)})
    return rows


def check_splits(where: str, sp: dict) -> None:
    """Refuse, naming the file, what is not a splits.json of tools/studies/hw_splits.py."""
    if not isinstance(sp, dict) or not {"rows", "world"} <= set(sp):
        raise InputError(f"{where}: not a splits.json of tools/studies/hw_splits.py (needs rows, world)")


def curves(rows: list[dict]) -> list[dict]:
    """Per op of a splits run: the rank correlation of predicted and measured times over its splits,
    and whether the simulator's best split is the GPU's (and what the simulator's pick costs there)."""
    out = []
    for name in dict.fromkeys(r["curve"] for r in rows if "curve" in r):
        pts = [r for r in rows if r.get("curve") == name]
        best_hw = min(pts, key=lambda r: r["measured_us"])
        best_sim = min(pts, key=lambda r: r["predicted_us"])
        out.append({"curve": name, "spearman": spearman([r["predicted_us"] for r in pts],
                                                         [r["measured_us"] for r in pts]),
                    "best_measured": best_hw["config"], "best_predicted": best_sim["config"],
                    "sim_pick_over_best": best_sim["measured_us"] / best_hw["measured_us"]})
    return out


def fit_overheads(bench: dict, cluster: Cluster) -> tuple[float, float]:
    """The fused kernel's per-call and per-tile costs (us), least squares over a world-1 bench's
    short-K GEMM ops (gemm_ar, gemm_rs), where they show most: measured time minus the time
    simulated without them = call + tile x (GEMM tiles per compute SM)."""
    from .. import builders

    g = dataclasses.replace(cluster.gpu, fused_call_us=0.0, fused_tile_us=0.0)
    base = dataclasses.replace(cluster, gpu=g)
    xs, ys = [], []
    for r in bench["rows"]:
        if r["kernel"] not in ("gemm_ar", "gemm_rs"):
            continue
        w = Workload(kernel=r["kernel"], **dict(r["shape"]))
        s = builders.get(w.kernel).build(w, base)
        per_sm = math.ceil(sum(t.op is Op.GEMM for t in s.tasks) / s.launches[0].budget(Role.COMPUTE))
        xs.append(per_sm)
        ys.append((r["impls"]["fused"].get("graph_s") or r["impls"]["fused"]["s"]) * 1e6 - _sim_us(s, base))
    if len(set(xs)) < 2:
        raise InputError("fitting the fused kernel's overheads needs a world-1 bench with gemm_ar or gemm_rs at "
                         "two or more sizes")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    task = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return max(0.0, my - task * mx), max(0.0, task)


PEER_RATES = (16.0, 25.0, 40.0, 55.0)  # GB/s per SM tried by fit_peer_costs


def fit_peer_costs(splits: dict, cluster: Cluster, rates: tuple[float, ...] = PEER_RATES) -> dict[str, float]:
    """The fused kernel's copy terms from a splits run on real NVLink: ``gpu.fused_sm_copy_gb_per_s``
    (one SM's rate while its loads stream), ``gpu.fused_peer_step_us`` and ``fused_local_step_us``
    (the load round trip each step of a task waits, peer or own HBM) and ``gpu.fused_peer_task_us``
    (fixed cost per peer task). For each rate of ``rates`` the three costs are linear: simulated
    time without them + their counts per intra SM on the busiest rank x the costs = measured,
    solved by non-negative least squares of the relative error (the points span two orders of
    magnitude, and absolute errors would let the slowest splits decide); the rate whose fit leaves
    the least error wins. Why these terms: large copies (ag_gemm's 2 MiB) run faster per SM than
    the calibrated store rate, 64-KiB tiles pay a per-task cost, and 16-row gathers move a quarter
    step per round trip (2026-11-30-nvlink.md, 2026-12-01-validation.md)."""
    import numpy as np

    from .. import builders
    from ..cost import steps, touches_peer

    best = None
    for rate in rates:
        g = dataclasses.replace(cluster.gpu, fused_peer_task_us=0.0, fused_peer_step_us=0.0, fused_local_step_us=0.0,
                                fused_sm_copy_gb_per_s=rate)
        base = dataclasses.replace(cluster, gpu=g)
        xs, ys = [], []
        for r in splits["rows"]:
            for n, x in r["splits"].items():
                w = Workload(kernel=r["kernel"], **dict(r["shape"]), sms=((Role.INTRA, int(n)),))
                s = builders.get(w.kernel).build(w, base)
                counts = np.zeros((s.world, 3))  # peer steps, local steps, peer tasks
                for t in s.tasks:
                    if t.role is Role.INTRA and (k := steps(t, base)):
                        peer = touches_peer(t)
                        counts[t.rank] += (k, 0, 1) if peer else (0, k, 0)
                measured = x["s"] * 1e6
                busiest = counts[counts[:, 0] + counts[:, 1] == (counts[:, 0] + counts[:, 1]).max()][0]
                xs.append(np.ceil(busiest / int(n)) / measured)
                ys.append(1.0 - _sim_us(s, base) / measured)
        if not np.any(xs):
            raise InputError("fitting the copy costs needs a splits run with intra-node communication tasks")
        coef, err = _nonnegative_lsq(np.array(xs), np.array(ys))
        if best is None or err < best[0]:
            best = (err, rate, coef)
    _, rate, (peer_step, local_step, peer_task) = best
    return {"gpu.fused_sm_copy_gb_per_s": rate, "gpu.fused_peer_step_us": float(peer_step),
            "gpu.fused_local_step_us": float(local_step), "gpu.fused_peer_task_us": float(peer_task)}


def _nonnegative_lsq(a, y) -> tuple:
    """min |y - a c|^2 over c >= 0, for a few columns: the best feasible unconstrained solution over
    every subset of them (the others held at 0). Returns (c, residual sum of squares)."""
    import itertools

    import numpy as np

    best = (np.zeros(a.shape[1]), float(y @ y))
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            sub, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
            if (sub >= 0).all():
                c = np.zeros(a.shape[1])
                c[list(cols)] = sub
                r = y - a @ c
                if r @ r < best[1]:
                    best = (c, float(r @ r))
    return best


def run_cases(results: list[dict], cluster: Cluster) -> list[dict]:
    """Fused runs of ``mkernel run --backend hw --json`` (result schema), simulated on ``cluster``."""
    from .. import builders

    rows = []
    for r in results:
        sh = r["shape"]
        w = Workload(kernel=r["kernel"], m=sh["m"], n=sh["n"], k=sh["k"], tile_m=sh["tile_m"], tile_n=sh["tile_n"],
                     chunk_tiles=sh["chunk_tiles"])
        rows.append({"group": "emulated", "config": f"{r['kernel']} m={w.m} n={w.n} k={w.k} on emulated "
                                                    f"{cluster.nodes}x{cluster.gpus_per_node}",
                     "measured_us": r["time_s"] * 1e6, "predicted_us": _sim_us(builders.get(w.kernel).build(w, cluster),
                                                                               cluster)})
    return rows


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    for rank, i in enumerate(order):
        out[i] = float(rank)
    return out


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else None


def summarise(rows: list[dict]) -> dict:
    """Error per row, and MAPE / p90 / rank correlation overall and per group."""
    for r in rows:
        r["error"] = r["predicted_us"] / r["measured_us"] - 1.0

    def stats(rs: list[dict]) -> dict:
        errs = sorted(abs(r["error"]) for r in rs)
        p90 = errs[min(len(errs) - 1, math.ceil(0.9 * len(errs)) - 1)]
        return {"configs": len(rs), "mape": statistics.fmean(errs), "p90": p90,
                "mean_signed": statistics.fmean(r["error"] for r in rs),
                "spearman": spearman([r["predicted_us"] for r in rs], [r["measured_us"] for r in rs])}

    groups = {g: stats([r for r in rows if r["group"] == g]) for g in dict.fromkeys(r["group"] for r in rows)}
    worst = max(groups, key=lambda g: groups[g]["mape"] * groups[g]["configs"])
    return {"overall": stats(rows), "groups": groups, "dominant_group": worst, "rows": rows}


def measure_error(profile: str, calibration: tuple[str, dict], benches: list[tuple[str, dict]] = (),
                  runs: list[tuple[str, dict]] = (), splits: list[tuple[str, dict]] = ()) -> dict:
    """Every case of a calibration run, bench runs, emulated hw runs and static-split runs (each given
    as (source, data), the source naming it in errors), simulated with ``profile``; the
    :func:`summarise` report, with the split curves' order (:func:`curves`)."""
    where, raw = calibration
    for key in ("gemm_sms", "proxy"):
        if key not in raw:
            raise InputError(f"{where}: no key {key!r}; pass the --raw output of `mkernel calibrate`")
    one = profile_cluster(profile, 1, 1)
    rows = compute_cases(raw, one) + proxy_cases(raw, one)
    for where, bench in benches:
        if not {"rows", "world", "nodes", "gpus_per_node"} <= set(bench):
            raise InputError(f"{where}: not a bench.json of `mkernel bench` (needs rows, world, nodes, gpus_per_node)")
        cluster = profile_cluster(profile, bench["nodes"], bench["gpus_per_node"], emulated=bench.get("emulated", False))
        rows += bench_cases(bench, cluster)
    for where, r in runs:
        if r.get("backend") != "hw" or "time_s" not in r:
            raise InputError(f"{where}: not a result of `mkernel run --backend hw --json`")
        cluster = profile_cluster(profile, r["cluster"]["nodes"], r["cluster"]["gpus_per_node"], emulated=True)
        rows += run_cases([r], cluster)
    for where, sp in splits:
        check_splits(where, sp)
        rows += splits_cases(sp, profile_cluster(profile, 1, sp["world"]))
    return {**summarise(rows), "curves": curves(rows)}
