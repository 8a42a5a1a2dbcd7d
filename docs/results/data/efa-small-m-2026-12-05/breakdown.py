"""Breakdown of the paper check's EFA points: fused (compute / exposed comm) and baseline (GEMM + NCCL call)."""
import json, subprocess, sys, tempfile, re
from pathlib import Path
from mkernel import nccl
from mkernel.scenario import load_scenario

SCN = Path("scenarios/paper-efa-2x8.toml")
POINTS = [("ag_gemm", m) for m in (4096, 8192, 16384)] + [("gemm_rs", m) for m in (2048, 4096, 8192, 16384)] + \
         [("gemm_ar", m) for m in (2048, 4096, 8192)]

def shape(kernel, m):
    return (m, m // 16, m) if kernel == "ag_gemm" else (m, m, m // 16)

def coll(kernel, m, n, k, world):
    if kernel == "ag_gemm":
        return "all_gather", world * (m // world) * k * 2
    return ("reduce_scatter" if kernel == "gemm_rs" else "all_reduce"), m * n * 2

def run(scn, kernel, m):
    mm, n, k = shape(kernel, m)
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run(["mkernel", "run", str(scn), "--kernel", kernel, "--m", str(mm), "--n", str(n), "--k", str(k),
                        "--kernels", "reference", "--collapse", "--json", f.name], check=True, capture_output=True)
        return json.load(open(f.name))

def main(scn=SCN, label=""):
    sc = load_scenario(str(scn))
    fab = nccl.fabric_of(sc.cluster)
    print(f"# {scn} {label}")
    print("| op | M | fused us (compute / exposed comm / proxy queue) | net bytes/GPU | baseline us | GEMM us | NCCL call | NCCL us (algo/proto) | LL128 ring us | speedup | speedup if LL128 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kernel, m in POINTS:
        d = run(scn, kernel, m)
        mm, n, k = shape(kernel, m)
        c, nb = coll(kernel, mm, n, k, fab.world)
        e = nccl.estimate(c, nb, fab)
        l = nccl.estimate_algo(c, nb, fab, "ring", "LL128") if c != "all_reduce" else e
        b = d["baseline"]["time_s"] * 1e6
        fused = d["time_s"] * 1e6
        bd = d["breakdown"]
        gemm = b - e.time_us
        print(f"| {kernel} | {m} | {fused:.0f} ({bd['compute']:.0f} / {bd['exposed_communication']:.0f} / {bd['proxy_queueing']:.1f}) "
              f"| {d['bytes_per_gpu']['network']/1e6:.2f} MB | {b:.0f} | {gemm:.0f} | {c} {nb/2**20:.0f} MiB | {e.time_us:.0f} ({e.algo}/{e.proto}) "
              f"| {l.time_us:.0f} | {b/fused:.2f}x | {(gemm + min(l.time_us, e.time_us))/fused:.2f}x |")

if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else SCN, " ".join(sys.argv[2:]))
