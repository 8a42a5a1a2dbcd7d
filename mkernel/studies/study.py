"""The scale-out study (docs/scaling.md): its sweep grid and its plots.

``mkernel sweep --grid scaling --workers 2 --out DIR`` runs :func:`grid` and draws :func:`plots`
into DIR. The grid holds each op's per-GPU work fixed as nodes grow where the op allows it, so what
changes with scale is the communication:

- GEMM+AllReduce and GEMM+ReduceScatter: M = N, K_local fixed per GPU (the row-parallel layer of a
  fixed model and batch);
- AllGather+GEMM: M tokens sharded over the ranks, N_local = 1024 and K = 4096 per GPU;
- Ring Attention: S tokens per GPU (the whole sequence grows with the GPUs), 2 head groups, D = 128,
  non-causal; causal (the zigzag split, node-symmetric on several nodes since its tiles' counters
  are paired: builders/ring_attention.py) is an option at every node count (:func:`symmetric_points`);
- MoE Dispatch+GEMM: tokens per GPU fixed, H = 7168, I = 2048, top-8, experts = max(2, 256 / world)
  per GPU, shifted uniform routing (node-symmetric, :mod:`mkernel.routing`); shifted Zipf routing
  (one Zipf draw for node 0, shifted node by node: node-symmetric) is an option at every node
  count, and Zipf drawn per rank, which is simulated whole, one up to 16 nodes.

Shapes are rounded up to what the op can split over the world. Options ride on the clusters of
:mod:`mkernel.studies.scaleout`: forwarding (ring / direct) for AllGather+GEMM, Zipf-skewed routing for MoE,
IBGDA against the proxy, proxy batch 1 against 8, SRD against RC on the same NICs, fence
notification on SRD, chunk size for the GEMM collectives, and NCCL's flat ring as the baseline of
the GEMM ops instead of the hierarchical one.
"""
from __future__ import annotations

from pathlib import Path

from ..builders._rail import ALGORITHMS
from ..problems import KERNELS
from .scaleout import NODES
from .sweep import Point

SIZES = {"gemm_ar": (2048, 4096, 8192), "gemm_rs": (2048, 4096, 8192), "ag_gemm": (4096, 8192, 16384),
         "ring_attention": (512, 1024, 2048), "moe_dispatch_gemm": (128, 256, 1024)}  # MoE: tokens per GPU
BASE = "ib-400g-rail"  # the reference cluster every option is compared on
CLUSTERS = ["ib-400g-rail", "ib-800g-rail", "efa-400g-rail", "efa-800g-rail", "ib-400g-2to1", "efa-400g-2to1"]
GB200 = ("gb200-nvl72-800g", (2, 4, 8))  # scaleout/gb200-nvl72-800g-{domains}x72
ALGORITHM_CLUSTERS = (BASE, "efa-400g-rail", "ib-400g-2to1")  # where each inter-node algorithm is forced
SKEW_NODES = (2, 4, 8, 16)  # Zipf routing is drawn per rank: not node-symmetric, simulated whole
SYMMETRIC_OPTIONS = {"ring_attention": ("causal", 1), "moe_dispatch_gemm": ("routing", "zipf_shifted")}
SYMMETRIC_CLUSTERS = (BASE, "efa-400g-rail")  # where those node-symmetric variants run to 64 nodes


def shape(kernel: str, size: int, world: int) -> dict:
    """The workload of one point (see the module docstring)."""
    def up(x: int) -> int:
        return -(-x // world) * world

    if kernel in ("gemm_ar", "gemm_rs"):
        return dict(m=up(size), n=size, k=size // 16)
    if kernel == "ag_gemm":
        return dict(m=up(size), n=1024, k=4096)
    if kernel == "ring_attention":
        return dict(m=size, n=2, k=128, tile_m=size // 2)
    return dict(m=size * world, n=2048, k=7168, experts=world * max(2, 256 // world), routing="shifted")


def _points(cluster: str, nodes: int, gpus: int, kernels, options=(), sizes=slice(None)) -> list[Point]:
    return [Point(f"scaleout/{cluster}-{nodes}x{gpus}", kernel, size,
                  tuple(shape(kernel, size, nodes * gpus).items()), tuple(options))
            for kernel in kernels for size in SIZES[kernel][sizes]]


def grid(kernels=KERNELS) -> list[Point]:
    """The study's points (about 1500 with every op): every op and size on six clusters, and each
    option against the base cluster at the two smaller sizes."""
    ks = [k for k in KERNELS if k in kernels]
    gemms = [k for k in ("gemm_ar", "gemm_rs") if k in ks]
    small = slice(0, 2)
    pts: list[Point] = []
    for nodes in NODES:
        for cluster in CLUSTERS:
            pts += _points(cluster, nodes, 8, ks)
        if "moe_dispatch_gemm" in ks and nodes in SKEW_NODES:
            for cluster in (BASE, "efa-400g-rail", "ib-800g-rail", "ib-400g-2to1"):
                pts += _points(cluster, nodes, 8, ["moe_dispatch_gemm"], [("routing", "zipf")], small)
        for cluster in (BASE, "ib-800g-rail"):
            pts += _points(cluster, nodes, 8, ks, [("transport", "ibgda")], small)
        pts += _points(BASE, nodes, 8, ks, [("transport", "efa_srd")], small)
        for cluster in (BASE, "efa-400g-rail"):
            pts += _points(cluster, nodes, 8, ks, [("proxy.batch", 1)], small)
        pts += _points("efa-400g-rail", nodes, 8, ks, [("notify", "fence")], small)
        for tiles in (1, 16):
            pts += _points(BASE, nodes, 8, gemms, [("chunk_tiles", tiles)], small)
        pts += _points(BASE, nodes, 8, [k for k in ("ag_gemm", "gemm_rs", "gemm_ar") if k in ks],
                       [("baseline", "ring")], small)
    pts += algorithm_points([k for k in ks if k in ALGORITHMS])
    pts += symmetric_points([k for k in ks if k in SYMMETRIC_OPTIONS])
    for domains in GB200[1]:  # a 72-GPU node is simulated whole: the smallest size keeps it affordable
        pts += _points(GB200[0], domains, 72, ks, sizes=slice(0, 1))
    return pts


def algorithm_points(kernels=("gemm_ar", "ag_gemm"), clusters=ALGORITHM_CLUSTERS, sizes=slice(None)) -> list[Point]:
    """Each inter-node algorithm of the GEMM ops that have a choice, forced (``internode=...``), at
    every node count and size on ``clusters``; the plain points of the same cluster are ``auto``."""
    return [p for nodes in NODES for cluster in clusters for kernel in kernels if len(ALGORITHMS[kernel]) > 1
            for alg in ALGORITHMS[kernel] for p in _points(cluster, nodes, 8, [kernel], [("internode", alg)], sizes)]


def symmetric_points(kernels=tuple(SYMMETRIC_OPTIONS), clusters=SYMMETRIC_CLUSTERS, sizes=slice(None)) -> list[Point]:
    """Causal attention and shifted-Zipf MoE (:data:`SYMMETRIC_OPTIONS`) at every node count and
    size on ``clusters``: node-symmetric, so collapsed to one node like the plain points."""
    return [p for nodes in NODES for cluster in clusters for kernel in kernels
            for p in _points(cluster, nodes, 8, [kernel], [SYMMETRIC_OPTIONS[kernel]], sizes)]


def auto_points(clusters=SYMMETRIC_CLUSTERS) -> list[Point]:
    """Every op and size at every node count on ``clusters`` (with causal attention and shifted-Zipf
    MoE), each as ``auto`` runs it (Workload.schedule: the fused schedule or the baseline, by the cost
    model) and with the fused schedule forced, so a table can show what ``auto`` gave up or saved
    (docs/results/2026-12-03-auto.md)."""
    plain = [p for nodes in NODES for cluster in clusters for p in _points(cluster, nodes, 8, KERNELS)]
    points = plain + symmetric_points(clusters=clusters)
    return [Point(p.testbed, p.kernel, p.size, p.shape, p.options + (("schedule", schedule),))
            for schedule in ("auto", "fused") for p in points]


# -- tables ---------------------------------------------------------------------------------------
def symmetric_summary(rows: list[dict]) -> str:
    """Per op of :data:`SYMMETRIC_OPTIONS`, cluster and size: speedup over the baseline against node
    count, of the option's points and of the plain points beside them (fused and baseline us in
    each cell, so a ratio can be read back to its times)."""
    rows = _annotate(rows)
    nodes = sorted({r["nodes"] for r in rows if r["gpus_per_node"] == 8 and r["nodes"] > 1})
    out = ["| op | size | cluster | run | " + " | ".join(f"{n} nodes" for n in nodes) + " |",
           "|---|---|---|---|" + "---|" * len(nodes)]
    for kernel, (key, value) in SYMMETRIC_OPTIONS.items():
        for cluster in CLUSTERS:
            for size in SIZES[kernel]:
                for opt in (f"{key}={value}", ""):
                    at = {r["nodes"]: r for r in rows if r["kernel"] == kernel and r["cluster"] == cluster
                          and r["size"] == size and r["options"] == opt and r["gpus_per_node"] == 8}
                    cells = [f"{at[n]['speedup']:.2f} ({at[n]['fused_us']:.0f} / {at[n]['baseline_us']:.0f})"
                             if n in at else "-" for n in nodes]
                    if any(n in at for n in nodes):
                        out.append(f"| {kernel} | {size} | {cluster} | {opt or 'plain'} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def algorithms_summary(rows: list[dict]) -> str:
    """Per op with a choice, cluster and size: speedup over the baseline of each inter-node algorithm
    and of ``auto`` (the plain point) against node count, auto's pick named in its row."""
    rows = _annotate(rows)
    nodes = sorted({r["nodes"] for r in rows if r["gpus_per_node"] == 8 and r["nodes"] > 1})
    out = ["| op | size | cluster | algorithm | " + " | ".join(f"{n} nodes" for n in nodes) + " |",
           "|---|---|---|---|" + "---|" * len(nodes)]
    for kernel in (k for k in KERNELS if len(ALGORITHMS.get(k, ())) > 1):
        for cluster in CLUSTERS:
            for idx in range(len(SIZES[kernel])):
                size = SIZES[kernel][idx]
                at = {(r["options"], r["nodes"]): r for r in rows if r["kernel"] == kernel and r["cluster"] == cluster
                      and r["size"] == size and r["gpus_per_node"] == 8}
                if not at:
                    continue
                for alg in (*ALGORITHMS[kernel], "auto"):
                    opt = "" if alg == "auto" else f"internode={alg}"
                    cells = []
                    for n in nodes:
                        r = at.get((opt, n))
                        pick = f" ({r['internode']})" if r is not None and alg == "auto" and r.get("internode") else ""
                        cells.append(f"{r['speedup']:.2f}{pick}" if r is not None else "-")
                    if any(c != "-" for c in cells):
                        out.append(f"| {kernel} | {size} | {cluster} | {alg} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def summary(rows: list[dict]) -> str:
    """Markdown tables of the study: speedup against nodes per cluster (each op at its largest and
    smallest size), and each option's fused-time ratio against nodes (middle size)."""
    rows = _annotate(rows)
    nodes = sorted({r["nodes"] for r in rows if r["gpus_per_node"] == 8})
    out = []
    for idx, name in ((2, "largest"), (0, "smallest")):
        out += [f"### Fused speedup over the baseline, {name} size", "",
                "| op | size | cluster | " + " | ".join(f"{n} nodes" for n in nodes) + " |",
                "|---|---|---|" + "---|" * len(nodes)]
        for kernel in KERNELS:
            for cluster in CLUSTERS:
                pts = {r["nodes"]: r for r in _select(rows, kernel, cluster, size_index=idx)}
                if pts:
                    size = next(iter(pts.values()))["size"]
                    out.append(f"| {kernel} | {size} | {cluster} | " +
                               " | ".join(f"{pts[n]['speedup']:.2f}" if n in pts else "-" for n in nodes) + " |")
        out.append("")
    out += ["### Fused time with an option / without it (middle size)", "",
            "| op | option | " + " | ".join(f"{n} nodes" for n in nodes) + " |", "|---|---|" + "---|" * len(nodes)]
    for kernel in KERNELS:
        for opt, cluster, label, only in OPTION_CASES:
            if only is not None and kernel not in only:
                continue
            ref = {r["nodes"]: r["fused_us"] for r in _select(rows, kernel, cluster if opt else BASE, size_index=1)}
            pts = {r["nodes"]: r["fused_us"] / ref[r["nodes"]] for r in _select(rows, kernel, cluster, opt, 1)
                   if r["nodes"] in ref}
            if pts:
                out.append(f"| {kernel} | {label} | " + " | ".join(f"{pts[n]:.2f}" if n in pts else "-"
                                                                   for n in nodes) + " |")
    gb = sorted((r for r in rows if r["cluster"].startswith("gb200")), key=lambda r: (r["kernel"], r["gpus"]))
    out += ["", "### GB200-class what-if (72-GPU NVLink domains, smallest size)", "",
            "| op | GPUs | fused us | speedup | same GPUs on ib-800g-rail: fused us |", "|---|---|---|---|---|"]
    for r in gb:
        near = [x for x in _select(rows, r["kernel"], "ib-800g-rail", size_index=0) if x["gpus"] >= r["gpus"]]
        other = f"{near[0]['fused_us']:.0f} ({near[0]['gpus']} GPUs)" if near else "-"
        out.append(f"| {r['kernel']} | {r['gpus']} | {r['fused_us']:.0f} | {r['speedup']:.2f} | {other} |")
    return "\n".join(out) + "\n"


def _annotate(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        if "error" in r:
            continue
        r = dict(r, gpus=r["nodes"] * r["gpus_per_node"],
                 cluster=r["testbed"].removeprefix("scaleout/").rsplit("-", 1)[0])
        out.append(r)
    return out


# -- plots ----------------------------------------------------------------------------------------
def plots(rows: list[dict], out: Path) -> list[Path]:
    """Every figure of docs/scaling.md from the sweep's rows; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = _annotate(rows)
    kernels = [k for k in KERNELS if any(r["kernel"] == k for r in rows)]
    figures = [_speedup(plt, rows, kernels), _exposed(plt, rows, kernels), _tiers(plt, rows, kernels),
               _options(plt, rows, kernels)]
    paths = []
    for name, fig in figures:
        if fig is None:
            continue
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _select(rows, kernel, cluster, options="", size_index=2):
    sizes = sorted({r["size"] for r in rows if r["kernel"] == kernel})
    size = sizes[min(size_index, len(sizes) - 1)] if sizes else None
    return sorted((r for r in rows if r["kernel"] == kernel and r["cluster"] == cluster and r["options"] == options
                   and r["size"] == size), key=lambda r: r["gpus"])


def _panels(plt, kernels, title):
    fig, axes = plt.subplots(1, len(kernels), figsize=(3.6 * len(kernels), 3.3), squeeze=False)
    fig.suptitle(title, fontsize=10)
    for ax, kernel in zip(axes[0], kernels):
        ax.set_title(kernel, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.grid(alpha=0.3)
    return fig, axes[0]


def _finish(fig, ax):
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=7)
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))
    return fig


def _speedup(plt, rows, kernels):
    fig, axes = _panels(plt, kernels, "Fused speedup over the NCCL-style baseline against cluster size (larger size)")
    for ax, kernel in zip(axes, kernels):
        for i, cluster in enumerate(CLUSTERS):
            pts = _select(rows, kernel, cluster)
            ax.plot([r["gpus"] for r in pts], [r["speedup"] for r in pts], "o-" if "rail" in cluster else "x--",
                    color=f"C{i // 2}", ms=3, label=cluster)
        gb = sorted((r for r in rows if r["kernel"] == kernel and r["cluster"].startswith("gb200")),
                    key=lambda r: r["gpus"])
        ax.plot([r["gpus"] for r in gb], [r["speedup"] for r in gb], "*-", color="C5",
                label="gb200-nvl72-800g (smallest size)")
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_yscale("log", base=2)
        ax.set_ylabel("baseline time / fused time")
    return "speedup_vs_gpus", _finish(fig, axes[0])


def _exposed(plt, rows, kernels):
    fig, axes = _panels(plt, kernels, f"Exposed communication: share of the fused run not covered by compute ({BASE})")
    for ax, kernel in zip(axes, kernels):
        for idx, style in ((0, "o:"), (1, "o--"), (2, "o-")):
            pts = [r for r in _select(rows, kernel, BASE, size_index=idx) if r.get("exposed_comm_us") is not None]
            ax.plot([r["gpus"] for r in pts], [r["exposed_comm_us"] / r["fused_us"] for r in pts], style, ms=3,
                    color="C0", label=f"fused, size {('small', 'middle', 'large')[idx]}")
        ax.set_ylim(0, 1)
        ax.set_ylabel("exposed comm / fused time")
    return "exposed_comm", _finish(fig, axes[0])


def _tiers(plt, rows, kernels):
    fig, axes = _panels(plt, kernels, f"Bytes per GPU per tier, fused ({BASE}, larger size)")
    for ax, kernel in zip(axes, kernels):
        pts = _select(rows, kernel, BASE)
        for key, color in (("nvlink_bytes_per_gpu", "C0"), ("network_bytes_per_gpu", "C1"),
                           ("host_bytes_per_gpu", "C2")):
            ax.plot([r["gpus"] for r in pts], [max(r[key], 1.0) / 2**20 for r in pts], "o-", color=color, ms=3,
                    label=key.removesuffix("_bytes_per_gpu"))
        ax.set_yscale("log")
        ax.set_ylabel("MiB per GPU")
    return "bytes_per_tier", _finish(fig, axes[0])


def _options(plt, rows, kernels):
    """Fused time with an option over fused time without it, on the same cluster."""
    fig, axes = _panels(plt, kernels, "Fused time with an option / fused time without it (middle size)")
    for ax, kernel in zip(axes, kernels):
        for i, (opt, cluster, label, only) in enumerate(OPTION_CASES):
            if only is not None and kernel not in only:
                continue  # the reference: the same cluster without the option, or the base cluster
            ref = {r["gpus"]: r["fused_us"] for r in _select(rows, kernel, cluster if opt else BASE, size_index=1)}
            pts = [r for r in _select(rows, kernel, cluster, opt, size_index=1) if r["gpus"] in ref]
            ax.plot([r["gpus"] for r in pts], [r["fused_us"] / ref[r["gpus"]] for r in pts], "o-", ms=3,
                    color=f"C{i}", label=label)
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_yscale("log", base=2)
        ax.set_ylabel("time ratio")
    fig.legend(*_all_handles(axes), loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.14, 1, 0.95))
    return "options_vs_gpus", fig


OPTION_CASES = [  # (option, cluster, label, ops it applies to): the option against the same cluster without it;
    ("internode=ring", BASE, "AG+GEMM ring forwarding / auto", {"ag_gemm"}),
    ("internode=twoshot", BASE, "GEMM+AR twoshot / auto", {"gemm_ar"}),
    ("internode=direct", BASE, "direct / auto", {"gemm_ar", "ag_gemm"}),
    ("routing=zipf", BASE, "MoE Zipf routing / shifted uniform", {"moe_dispatch_gemm"}),
    ("routing=zipf_shifted", BASE, "MoE shifted Zipf / shifted uniform", {"moe_dispatch_gemm"}),
    ("causal=1", BASE, "causal / non-causal attention", {"ring_attention"}),
    ("transport=ibgda", BASE, "IBGDA / host proxy", None),
    ("proxy.batch=1", BASE, "proxy batch 1 / batch 8", None),
    ("transport=efa_srd", BASE, "SRD / RC (same NICs)", None),
    ("notify=fence", "efa-400g-rail", "SRD fence notify / imm", None),
    ("chunk_tiles=1", BASE, "chunk 1 tile / 4", {"gemm_ar", "gemm_rs"}),
    ("chunk_tiles=16", BASE, "chunk 16 tiles / 4", {"gemm_ar", "gemm_rs"}),
    ("", "ib-400g-2to1", "2:1 spine / rail", None),
    ("", "ib-800g-rail", "800 / 400 Gb/s", None),
    ("", "efa-400g-rail", "EFA 400 / IB 400", None)]


def _all_handles(axes):
    seen = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    return list(seen.values()), list(seen)
