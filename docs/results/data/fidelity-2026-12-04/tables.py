"""The tables of docs/results/2026-12-04-fidelity.md from the grids' rows (run from the repository root).

    python docs/results/data/fidelity-2026-12-04/tables.py grid   # the reference grid, both profiles
    python docs/results/data/fidelity-2026-12-04/tables.py efa    # the EFA what-if (p5 -> p5en terms)
    python docs/results/data/fidelity-2026-12-04/tables.py scaling   # the study's headline, before / now, both profiles
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path("docs/results")
OPS = ("ag_gemm", "gemm_ar", "gemm_rs", "moe_dispatch_gemm", "ring_attention")


def rows(folder: str) -> list[dict]:
    return [json.loads(line) for line in (RESULTS / folder / "results.jsonl").read_text().splitlines()]


def grid() -> None:
    """Per point: the baselines and fused times under both profiles (this run), the 2026-12-02 speedup."""
    meas = {(r["testbed"], r["kernel"], r["size"]): r for r in rows("grid-2026-12-04-measured")}
    ref = {(r["testbed"], r["kernel"], r["size"]): r for r in rows("grid-2026-12-04-reference")}
    old = {(r["testbed"], r["kernel"], r["size"]): r for r in rows("grid-2026-12-02-reference")}
    print("| testbed | op | size | baseline us (meas / ref) | paper's baseline us (ref) | fused us (meas / ref) "
          "| paper speedup meas | paper speedup ref | ref on 2026-12-02 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(ref, key=lambda k: (k[0], OPS.index(k[1]), k[2])):
        m, r, o = meas[key], ref[key], old.get(key)
        before = f"{o['paper_speedup']:.2f}" if o else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {m['baseline_us']:.0f} / {r['baseline_us']:.0f} | "
              f"{r['paper_baseline_us']:.0f} ({r['paper_baseline']}) | {m['fused_us']:.0f} / {r['fused_us']:.0f} | "
              f"{m['paper_speedup']:.2f} | {r['paper_speedup']:.2f} | {before} |")


def efa() -> None:
    """The EFA GEMM ops' speedups with the baseline's collective re-timed under other EFA terms (the fused
    time and the GEMM unchanged): NCCL's Intel per-step floor (half AMD's, getNetOverhead), and the hop
    cut by the plugin's reported latency difference (75 us on p5 -> 35 on p5en)."""
    from mkernel import nccl
    from mkernel.scenario import load_scenario

    f = nccl.fabric_of(load_scenario("paper-efa-2x8").cluster)
    t = f.t()
    alts = {"committed terms": f,
            f"ring_step_us {t.ring_step_us / 2:g} (Intel)": nccl.with_terms(f, ring_step_us=t.ring_step_us / 2),
            f"and net_hop_us {t.net_hop_us - 40:g}": nccl.with_terms(f, ring_step_us=t.ring_step_us / 2,
                                                                    net_hop_us=t.net_hop_us - 40)}
    coll = {"gemm_rs": "reduce_scatter", "gemm_ar": "all_reduce", "ag_gemm": "all_gather"}
    print("| op | M | fused us | " + " | ".join(alts) + " |")
    print("|---|---|---|" + "---|" * len(alts))
    for r in sorted(rows("grid-2026-12-04-reference"), key=lambda r: (r["kernel"], r["size"])):
        if r["testbed"] != "paper-efa-2x8" or r["kernel"] not in coll:
            continue
        nbytes = 2 * r["m"] * (r["k"] if r["kernel"] == "ag_gemm" else r["n"])
        gemm = r["baseline_us"] - nccl.estimate(coll[r["kernel"]], nbytes, f).time_us
        cells = []
        for fx in alts.values():
            e = nccl.estimate(coll[r["kernel"]], nbytes, fx)
            cells.append(f"{(gemm + e.time_us) / r['fused_us']:.2f}x ({e.time_us:.0f} us, {e.algo}/{e.proto})")
        print(f"| {r['kernel']} | {r['size']} | {r['fused_us']:.0f} | " + " | ".join(cells) + " |")


def _by_point(folder: str, options: str = "") -> dict:
    return {(r["testbed"].split("/")[-1], r["kernel"], r["size"]): r for r in rows(folder)
            if r.get("options", "") == options and "error" not in r}


def scaling() -> None:
    """Largest size of each op, 2-64 nodes, on the three clusters of docs/scaling.md's headline: before
    (algorithms-2026-12-02: measured, the old NCCL model, auto inter-node algorithm) and now, both
    profiles (MoE: against our baseline; the last row of each cluster: MoE against the paper's)."""
    from mkernel.studies.scaleout import NODES
    from mkernel.studies.study import SIZES

    before = _by_point("algorithms-2026-12-02")
    meas = _by_point("scaling-2026-12-04")
    ref = _by_point("scaling-2026-12-04-reference", "kernels=reference")
    for cluster in ("ib-400g-rail", "efa-400g-rail", "ib-400g-2to1"):
        print(f"\n**{cluster}** (largest size; before = 2026-12-02, old NCCL model, measured; now: measured / reference)\n")
        print("| op | size | run | " + " | ".join(f"{n} nodes" for n in NODES) + " |")
        print("|---|---|---|" + "---|" * len(NODES))
        lines = [(op, op, "speedup") for op in OPS] + [("moe (paper's baseline)", "moe_dispatch_gemm", "paper_speedup")]
        for name, op, key in lines:
            size = SIZES[op][-1]
            for run, table in (("before", before), ("measured", meas), ("reference", ref)):
                cells = [table.get((f"{cluster}-{n}x8", op, size)) for n in NODES]
                print(f"| {name} | {size} | {run} | " + " | ".join(f"{c[key]:.2f}" if c else "-" for c in cells) + " |")

    print("\n**Every size, 2-64 nodes** (speedup range; points below 1.0 of 18), plain points of the six "
          "rail / 2:1 clusters where both profiles ran\n")
    print("| cluster | op | before | measured | reference |")
    print("|---|---|---|---|---|")
    for cluster in ("ib-400g-rail", "ib-800g-rail", "efa-400g-rail", "efa-800g-rail", "ib-400g-2to1", "efa-400g-2to1"):
        for op in OPS:
            cells = []
            for table in (before, meas, ref):
                v = [r["speedup"] for (tb, k, _), r in table.items() if k == op and tb.startswith(cluster + "-")
                     and tb.endswith("x8")]
                cells.append(f"{min(v):.2f}-{max(v):.2f} ({sum(x < 1.0 for x in v)} < 1 of {len(v)})" if v else "-")
            print(f"| {cluster} | {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    {"grid": grid, "efa": efa, "scaling": scaling}[sys.argv[1]]()
