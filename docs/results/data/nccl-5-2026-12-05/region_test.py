"""nccl-5: aws-ofi-nccl v1.16.3's own point-in-region test (src/tuner/nccl_ofi_regions.cpp: `is_inside_region`,
`distance`, `intersect`; a ray from the point to (2 x TUNER_MAX_SIZE, 2 x TUNER_MAX_RANKS), an edge hit by distance
to a segment) ported line by line, against mkernel.nccl_tuner's horizontal ray casting, at every p5-ar-scale point
beyond 2 nodes (the tuner defers at 2 nodes or fewer).  python docs/results/data/nccl-5-2026-12-05/region_test.py"""
import math
from mkernel import nccl_tuner as tu
from mkernel.studies import nccl_check as nc

EPS = 1e-10


def sub(a, b): return (a[0] - b[0], a[1] - b[1])
def cross(a, b): return a[0] * b[1] - a[1] * b[0]


def intersect(x0, x1, y0, y1):
    """The file's `intersect`: 1 crossing, -1 none, 0 parallel or too close to y0 / y1; and the crossing point."""
    dx, dy = sub(x1, x0), sub(y1, y0)
    d = cross(dy, dx)
    if abs(d) < EPS:
        return 0, None
    a = (cross(x0, dx) - cross(y0, dx)) / d
    s = (y0[0] + a * dy[0], y0[1] + a * dy[1])
    if a < -EPS or a > 1 + EPS:
        return -1, s
    if a < EPS or a > 1 - EPS:
        return 0, s
    a = (cross(x0, dy) - cross(y0, dy)) / d
    return (-1 if a < 0 or a > 1 else 1), s


def distance(x, y0, y1):
    dy = sub(y1, y0)
    r, s = intersect(x, (x[0] + dy[1], x[1] - dy[0]), y0, y1)
    return math.inf if r == -1 or s is None else math.hypot(*sub(s, x))


def is_inside_region(pt, poly):
    n = len(poly)
    if any(distance(pt, poly[i], poly[(i + 1) % n]) < EPS for i in range(n)):
        return 0
    xs, ys = [p[0] for p in poly], [p[1] for p in poly]
    if not (min(xs) <= pt[0] <= max(xs) and min(ys) <= pt[1] <= max(ys)):
        return -1
    far = (2 * tu.MAX_SIZE, 2 * tu.MAX_RANKS)
    crosses = sum(intersect(pt, far, poly[i], poly[(i + 1) % n])[0] == 1 for i in range(n))
    return 1 if crosses & 1 else -1


def ofi_pick(nbytes, ranks):
    for a, p, poly in tu.REGIONS[("p5", "all_reduce")]:
        if is_inside_region((float(nbytes), float(ranks)), poly) >= 0:
            return a, p
    return None


curve = next(c for c in nc.load() if c.id == "p5-ar-scale")
same = 0
for nodes, nbytes, _ in curve.points:
    if nodes <= 2:
        continue
    ours, theirs = tu.choose("all_reduce", nbytes, curve.fabric(nodes)), ofi_pick(nbytes, 8 * nodes)
    same += ours == theirs
    print(f"{nodes:2d} nodes {nbytes >> 20:5d} MiB  model {ours}  plugin's test {theirs}" + ("" if ours == theirs else "  DIFFERENT"))
print(f"{same} of {sum(n > 2 for n, _, _ in curve.points)} points: the same pick")
