"""Exclusive Ir by function of two callgrind outputs (callgrind_annotate --auto=no, run from /tmp), their
difference sorted: the 25 largest falls, then the 15 largest rises. usage: excl_diff.py A.out B.out"""
import re, subprocess, sys
def load(f):
    out = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", f], capture_output=True, text=True, cwd="/tmp").stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)\s*(\[.*\])?\s*$", line)
        if m and "PROGRAM TOTALS" not in line:
            d[m.group(2)] = d.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
rows = sorted(((b.get(k, 0) - a.get(k, 0), a.get(k, 0), b.get(k, 0), k) for k in set(a) | set(b)))
for r in rows[:25] + [None] + rows[-15:]:
    print("----" if r is None else f"{r[1]:>14,} {r[2]:>14,} {r[0]:>+14,}  {r[3][-110:]}")
