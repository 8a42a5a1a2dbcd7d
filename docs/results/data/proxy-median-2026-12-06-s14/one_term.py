"""Which proxy term moves the scale-out study's largest movers: each point on the profile's median terms
('new'), with the three terms the scenarios take from the profile set back to the thirteenth session's single
run ('all old'), and with one at a time set back (every scenario here sets its own doorbell, so it is left out).  python THIS   (from the repository root)"""
from mkernel.studies import study
from mkernel.studies.sweep import run_point

S13 = {"proxy.per_command_us": 0.7907, "proxy.gpu_enqueue_us": 1.4679, "proxy.poll_us": 1.6207}
CASES = [("efa-400g-rail", 16, "gemm_ar", 4096, ()), ("efa-400g-rail", 64, "ring_attention", 1024, ()),
         ("ib-400g-rail", 64, "gemm_rs", 2048, (("internode", "ring"),)),
         ("efa-400g-rail", 2, "ag_gemm", 8192, (("notify", "fence"),))]


def fused_us(cluster: str, nodes: int, kernel: str, size: int, options: tuple) -> float:
    point = next(p for p in study._points(cluster, nodes, 8, [kernel], options) if p.size == size)
    return run_point(point)["fused_us"]


for cluster, nodes, kernel, size, opts in CASES:
    one = {k.split(".")[1]: round(fused_us(cluster, nodes, kernel, size, opts + ((k, v),)), 1) for k, v in S13.items()}
    print(f"{cluster}-{nodes}x8 {kernel} {size} {dict(opts)}: new {fused_us(cluster, nodes, kernel, size, opts):.1f},"
          f" all old {fused_us(cluster, nodes, kernel, size, opts + tuple(S13.items())):.1f}, one old: {one}")
