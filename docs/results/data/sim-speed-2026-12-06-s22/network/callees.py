"""Per compiled function of the given modules: the calls it makes (callgrind_annotate --auto=yes on
__native_core.c), summed by callee, largest first: where a function spends its instructions outside
its own C. usage: callees.py ANNOT.txt [module ...] (default network proxy environment)"""
import re
import sys
from collections import defaultdict

path, mods = sys.argv[1], sys.argv[2:] or ["network", "proxy", "environment"]
fn = None
out: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))
start = re.compile(r"^\s*[\d,.]+\s+\S.*\bCPyDef_(\w+)\(.*\{\s*$|^\s*\.\s+\S.*\bCPyDef_(\w+)\(.*\{\s*$")
call = re.compile(r"^\s*([\d,]+)\s+=>\s+(\S+?)(?::(\S+))?\s+\(([\d,]+)x\)")
for line in open(path):
    m = start.match(line)
    if m:
        name = m.group(1) or m.group(2)
        fn = name if any(name.startswith(f"{mod}___") for mod in mods) else None
        continue
    if fn is None:
        continue
    c = call.match(line)
    if c:
        cost, file, callee, n = int(c.group(1).replace(",", "")), c.group(2), c.group(3) or c.group(2), int(c.group(4).replace(",", ""))
        callee = callee.split("'")[0]
        out[fn][callee][0] += cost
        out[fn][callee][1] += n
for f, calls in sorted(out.items(), key=lambda kv: -sum(v[0] for v in kv[1].values())):
    total = sum(v[0] for v in calls.values())
    print(f"{total:>14,}  {f}")
    for callee, (cost, n) in sorted(calls.items(), key=lambda kv: -kv[1][0])[:14]:
        print(f"    {cost:>14,}  {n:>9,}x  {callee}")
