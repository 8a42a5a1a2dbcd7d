import json, sys
def strip(d):
    if isinstance(d, dict):
        return {k: strip(v) for k, v in d.items() if k not in ("wall_s", "host", "cpu_s", "elapsed_s")}
    if isinstance(d, list): return [strip(x) for x in d]
    return d
a, b = (strip(json.load(open(f))) for f in sys.argv[1:3])
def diff(x, y, path=""):
    if type(x) != type(y): print("type", path, x, y); return
    if isinstance(x, dict):
        for k in set(x) | set(y):
            if k not in x or k not in y: print("key", path + "/" + k); continue
            diff(x[k], y[k], path + "/" + k)
    elif isinstance(x, list):
        if len(x) != len(y): print("len", path); return
        for i, (p, q) in enumerate(zip(x, y)): diff(p, q, f"{path}[{i}]")
    elif x != y: print("diff", path, x, y)
diff(a, b); print("compared", sys.argv[1], sys.argv[2])
